import Foundation
import Ringside
import RingsideTestSupport
import Testing

/// The raw text of field `field` of series `metric` in a `/latest` body: exact decimals are
/// compared as written, not as a JSON parser rounds them.
private func rawField(_ body: String, metric: String, _ field: String) -> String? {
    guard let start = body.range(of: "\"metric\":\"\(metric)\"") else { return nil }
    let rest = body[start.upperBound...]
    guard let key = rest.range(of: "\"\(field)\":") else { return nil }
    return String(rest[key.upperBound...].prefix { "-0123456789.e+".contains($0) })
}

/// A value of a signed lognormal mixture, in hundredths of a basis point: magnitudes
/// exp(N(1, 1)) bps, 72.3 % of them negative, so the mean is about -2 bps with tails on both sides.
private func slippageSteps(_ random: inout SplitMix64) -> Int64 {
    let u1 = max(Double(random.next() >> 11) / Double(1 << 53), 1e-300), u2 = Double(random.next() >> 11) / Double(1 << 53)
    let normal = (-2 * log(u1)).squareRoot() * cos(2 * .pi * u2)
    let magnitude = exp(1 + normal)
    let negative = Double(random.next() >> 11) / Double(1 << 53) < 0.723
    return Int64(((negative ? -magnitude : magnitude) * 100).rounded())
}

@Suite("Signed and fractional values through the real collector (format 4)")
struct SignedValuesTests {
    @Test("100,000 signed values (mean -2 bps): count, sum, min and max exact, p1/p50/p99 within 0.1 %, buckets at negative bounds")
    func signedHistogramThroughTheCollector() throws {
        try withRingDirectory { directory in
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "10ms", "--quantiles", "0.01,0.5,0.99"])
            defer { collector.kill() }
            // A lane larger than the burst: every value is written as a record (no sampling).
            let bot = try Bot.attach("signed", directory: directory.path, options: .init(laneCapacity: 1 << 17))
            let slippage = try bot.histogram("slippage_bps", resolution: 0.01, signed: true)
            var random = SplitMix64(seed: 41)
            var steps: [Int64] = []
            for _ in 0..<100_000 {
                let value = slippageSteps(&random)
                steps.append(value)
                slippage.record(Double(value) / 100)
            }
            let sorted = steps.sorted()
            let sum = steps.reduce(0, +)
            #expect(Double(sum) / Double(steps.count) / 100 < -1 && Double(sum) / Double(steps.count) / 100 > -3, "a mean near -2 bps")

            let body = try #require(
                try eventually(seconds: 20) { () -> String? in
                    let body = try httpGet(port: port, path: "/latest").body
                    return rawField(body, metric: "slippage_bps", "total_count") == "100000" ? body : nil
                }, "the collector never counted the 100,000 values")
            func decimal(_ steps: Int64) -> String {
                let text = String(format: "%.2f", Double(steps) / 100)
                var trimmed = text
                while trimmed.hasSuffix("0") { trimmed.removeLast() }
                if trimmed.hasSuffix(".") { trimmed.removeLast() }
                return trimmed == "-0" ? "0" : trimmed
            }
            #expect(rawField(body, metric: "slippage_bps", "total_sum") == decimal(sum))
            #expect(rawField(body, metric: "slippage_bps", "total_max") == decimal(sorted.last!))
            #expect(rawField(body, metric: "slippage_bps", "resolution") == "0.01")
            #expect(rawField(body, metric: "slippage_bps", "min") == decimal(sorted.first!), "the 1 s window's minimum, or a later one's")
            for (key, q) in [("p01", 0.01), ("p50", 0.5), ("p99", 0.99)] {
                let rank = Int((q * Double(sorted.count)).rounded(.up))
                let exact = Double(sorted[rank - 1]) / 100
                let reported = try #require(rawField(body, metric: "slippage_bps", key).flatMap(Double.init), "\(key)")
                #expect(abs(reported - exact) <= abs(exact) * 0.001, "\(key): \(reported) against \(exact)")
            }

            let metrics = try httpGet(port: port, path: "/metrics").body
            let atZero = sorted.count { $0 <= 0 }
            let belowOneBp = sorted.count { $0 <= -100 }
            #expect(metrics.contains("slippage_bps_bucket{ring=\"signed\",le=\"0\"} \(atZero)\n"))
            #expect(metrics.contains("slippage_bps_bucket{ring=\"signed\",le=\"-1\"} \(belowOneBp)\n"))
            #expect(metrics.contains("slippage_bps_sum{ring=\"signed\"} \(decimal(sum))\n"))
            #expect(metrics.contains("slippage_bps_count{ring=\"signed\"} 100000\n"))
        }
    }

    @Test("1,000,000 increments of 0.01 to a counter of hundredths: exactly 10000, in /latest and /metrics")
    func fractionalCounterIsExact() throws {
        try withRingDirectory { directory in
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "10ms"])
            defer { collector.kill() }
            let bot = try Bot.attach("cents", directory: directory.path)
            let commission = try bot.counter("commission_total_usd", resolution: 0.01)
            for _ in 0..<1_000_000 { commission.increment(by: 0.01) }
            let body = try #require(
                try eventually(seconds: 20) { () -> String? in
                    let body = try httpGet(port: port, path: "/latest").body
                    return rawField(body, metric: "commission_total_usd", "total") == "10000" ? body : nil
                }, "the collector never read a total of 10000")
            #expect(rawField(body, metric: "commission_total_usd", "resolution") == "0.01")
            let metrics = try httpGet(port: port, path: "/metrics").body
            #expect(metrics.contains("commission_total_usd_total{ring=\"cents\"} 10000\n"))
        }
    }
}
