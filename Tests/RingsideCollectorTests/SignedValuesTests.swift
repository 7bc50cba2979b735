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
            // One window of a minute: the quantiles below are of every value, however long the
            // writing and the drain take (with 1 s first, a loaded machine split them across windows).
            let (collector, port) = try startCollector([
                "--dir", directory.path, "--poll", "10ms", "--quantiles", "0.01,0.5,0.99", "--windows", "1m",
            ])
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
            #expect(rawField(body, metric: "slippage_bps", "min") == decimal(sorted.first!), "the minute's minimum")
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

    @Test("values a metric cannot hold are clamped and counted, never wrapped: NaN not recorded, infinities at the ends")
    func clampedValuesAreCounted() throws {
        try withRingDirectory { directory in
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "10ms"])
            defer { collector.kill() }
            let bot = try Bot.attach("clamps", directory: directory.path)
            let pnl = try bot.histogram("pnl_usd", resolution: 0.01, signed: true)
            let fees = try bot.counter("fees_usd", resolution: 1e-6)
            pnl.record(1.25)
            pnl.record(Double.nan)  // counted, not recorded
            pnl.record(-Double.infinity)  // clamped to -(2^63 - 1) hundredths
            pnl.record(1e300)  // clamped to 2^63 - 1 hundredths
            fees.increment(by: 0.37)
            fees.increment(by: -1)  // a counter never goes back: counted, nothing added
            let body = try #require(
                try eventually(seconds: 20) { () -> String? in
                    let body = try httpGet(port: port, path: "/latest").body
                    return rawField(body, metric: "pnl_usd", "total_count") == "3"
                        && rawField(body, metric: "fees_usd", "clamped_values") == "1" ? body : nil
                }, "the collector never counted 3 values and a clamped increment: \((try? httpGet(port: port, path: "/latest").body) ?? "")"
            )
            #expect(rawField(body, metric: "pnl_usd", "clamped_values") == "3")
            #expect(rawField(body, metric: "pnl_usd", "total_max") == "92233720368547758.07", "2^63 - 1 hundredths")
            #expect(rawField(body, metric: "pnl_usd", "min") == "-92233720368547758.07")
            #expect(rawField(body, metric: "fees_usd", "total") == "0.37")
            let metrics = try httpGet(port: port, path: "/metrics").body
            #expect(metrics.contains(#"ringside_metric_clamped_total{ring="clamps",metric="pnl_usd",labels=""} 3"#))
            #expect(metrics.contains(#"ringside_metric_clamped_total{ring="clamps",metric="fees_usd",labels=""} 1"#))
            #expect(metrics.contains("fees_usd_total{ring=\"clamps\"} 0.37\n"))
        }
    }

    @Test(
        "a bot with workers: a signed series' all-time figures survive a collector's restart (count, exact sum, extremes, below zero too)")
    func signedAllTimeSurvivesRestart() throws {
        try withRingDirectory { directory in
            // A bot with workers keeps its all-time histograms across restarts (docs/collector.md): this
            // process is the bot and, in a file of its own, one of its workers.
            let bot = try Bot.attach("kept-signed", directory: directory.path)
            _ = try bot.histogram("pnl_usd", resolution: 0.01, signed: true)
            let worker = try Bot.attach("kept-signed", directory: directory.path, options: .init(worker: true))
            let pnl = try worker.histogram("pnl_usd", resolution: 0.01, signed: true)
            for value in [-12.5, -0.01, 0, 3.25, 7.5] { pnl.record(value) }
            func figures(_ port: Int) throws -> [String?] {
                let body = try httpGet(port: port, path: "/latest").body
                return ["total_count", "total_sum", "total_max"].map { rawField(body, metric: "pnl_usd", $0) }
            }
            let expected: [String?] = ["5", "-1.76", "7.5"]
            let (first, port) = try startCollector(["--dir", directory.path, "--poll", "10ms"])
            defer { first.kill() }
            #expect(try eventually(seconds: 20) { try figures(port) == expected }, "\((try? figures(port)) ?? [])")
            first.send(SIGTERM)
            #expect(first.waitForExit().status == 0)
            // The values were drained: the next collector has them from the state its predecessor saved.
            let (second, secondPort) = try startCollector(["--dir", directory.path, "--poll", "10ms"])
            defer { second.kill() }
            #expect(try eventually(seconds: 20) { try figures(secondPort) == expected }, "\((try? figures(secondPort)) ?? [])")
            pnl.record(-20)
            #expect(
                try eventually(seconds: 20) { try figures(secondPort) == ["6", "-21.76", "7.5"] }, "\((try? figures(secondPort)) ?? [])")
            let metrics = try httpGet(port: secondPort, path: "/metrics").body
            #expect(metrics.contains("pnl_usd_bucket{ring=\"kept-signed\",le=\"-20\"} 1\n"), "the negative side kept and added to")
            #expect(metrics.contains("pnl_usd_bucket{ring=\"kept-signed\",le=\"-0.01\"} 3\n"))
        }
    }
}
