import Foundation
import RingsideTestSupport
import Testing

@Suite("signed values: negative buckets from a bot to a real Prometheus's histogram_quantile")
struct SignedPrometheusTests {
    /// 100,000 slippages in basis points to a hundredth (a lognormal mixture, mean about -2 bps,
    /// tails on both sides), written by ringside-emit as a script would; the collector exports
    /// native histograms (schema 8) with negative buckets, Prometheus 2.42 scrapes them in
    /// protobuf, and `histogram_quantile` must give p1, p50 and p99 within 1 % of the exact ones.
    @Test("histogram_quantile on native histograms with negative buckets: p1, p50, p99 within 1 %", .timeLimit(.minutes(3)))
    func nativeNegativeBuckets() throws {
        guard let prometheusPath = try requiredSystemTool("prometheus") else { return }
        try withRingDirectory { directory in
            var random = SplitMix64(seed: 4242)
            var steps: [Int64] = []
            for _ in 0..<100_000 {
                let u1 = max(Double(random.next() >> 11) / Double(1 << 53), 1e-300), u2 = Double(random.next() >> 11) / Double(1 << 53)
                let magnitude = exp(1 + (-2 * log(u1)).squareRoot() * cos(2 * .pi * u2))
                let negative = Double(random.next() >> 11) / Double(1 << 53) < 0.723
                steps.append(Int64(((negative ? -magnitude : magnitude) * 100).rounded()))
            }
            // The collector first: it makes room in the lane as emit fills it.
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms", "--native-histograms", "8"])
            defer { collector.kill() }
            let lines = steps.map { String(format: "%.2f", Double($0) / 100) }.joined(separator: "\n")
            let emit = try runProcess(
                "ringside-emit", ["--dir", directory.path, "--ring", "desk", "slippage_bps", "--resolution", "0.01", "--signed"],
                stdin: lines + "\n")
            try #require(emit.status == 0 && emit.output == "wrote 100000 values to desk/slippage_bps\n", "\(emit.output) \(emit.errors)")

            let prometheus = try PrometheusServer(
                executable: prometheusPath, config: kitPrometheusConfig([("127.0.0.1:\(port)", [:])]),
                arguments: ["--enable-feature=native-histograms"])
            defer { prometheus.stop() }

            let sorted = steps.sorted()
            for q in [0.01, 0.5, 0.99] {
                let exact = Double(sorted[Int((q * Double(sorted.count)).rounded(.up)) - 1]) / 100
                let estimate = try #require(
                    try eventually(seconds: 30) { try prometheus.scalar("histogram_quantile(\(q), slippage_bps)") },
                    "Prometheus never had a native histogram of slippage_bps")
                #expect(abs(estimate - exact) <= abs(exact) * 0.01, "q \(q): Prometheus \(estimate), exact \(exact)")
            }
            // The count and the sum, exactly as recorded.
            #expect(try prometheus.scalarOnceScraped("histogram_count(slippage_bps)") == 100_000)
            let sum = try #require(try prometheus.scalarOnceScraped("histogram_sum(slippage_bps)"))
            #expect(abs(sum - Double(steps.reduce(0, +)) / 100) < 1e-6 * abs(sum))
        }
    }
}
