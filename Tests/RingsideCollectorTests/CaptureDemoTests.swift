import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

@Suite("An SLO breach of the demo's fills, slowed by the demo's switch (SIGUSR1), captured by the real collector")
struct CaptureDemoTests {
    /// A slowed fill of each symbol: exactly 100 times its median (docs/collector.md, the demo).
    static let slowNanos = ["AAPL": 4_000_000, "MSFT": 3_500_000, "NVDA": 6_000_000, "TSLA": 8_000_000]
    /// The rule as /latest and the capture name it; given with the option `capture`.
    static let rule = "order_fill_latency:p99<3ms@1s"

    /// The rule's state in /latest: whether it is violated, once it is judged on events.
    func violated(port: Int) throws -> Bool? {
        let slos = try jsonObject(httpGet(port: port, path: "/latest").body)["slos"] as? [[String: Any]] ?? []
        guard let slo = slos.first(where: { $0["rule"] as? String == Self.rule }), (slo["events"] as? Int ?? 0) > 0 else { return nil }
        return slo["violated"] as? Bool
    }

    @Test(
        "the demo's fills slowed: the SLO marked capture makes exactly one capture, holding the slow fills as slices of their exact durations, each with its order's exemplar, on named threads; a second breach within --capture-min-interval is counted, not captured"
    )
    func sloBreachCaptured() throws {
        let captures = try TemporaryDirectory("ringside-captures")
        defer { captures.remove() }
        try withRingDirectory { directory in
            let (collector, port) = try startCollector([
                "--demo", "--dir", directory.path, "--slo", Self.rule + " capture", "--capture-dir", captures.path, "--recorder-seconds",
                "2s",
                "--capture-after", "1s", "--capture-max-records", "50000", "--capture-min-interval", "1h",
            ])
            defer { collector.kill() }
            let started = try #require(collector.waitForErrorLine(containing: "demo: started the synthetic bot (pid "))
            let bot = try #require(Int32(started.components(separatedBy: "(pid ").last?.prefix { $0.isNumber } ?? ""), "\(started)")
            #expect(started.contains("kill -USR1 \(bot) slows its fills"), "the log says how: \(started)")
            // Its fills are judged, and hold: the slowest natural ones (TSLA's bursts) stay under 2 ms.
            try #require(try eventually(seconds: 60) { try violated(port: port) == false }, "the SLO was never judged holding")
            #expect(try CaptureProbe.captures(port: port).isEmpty)

            kill(bot, SIGUSR1)
            let capture = try #require(try CaptureProbe.finished(port: port, trigger: "slo"), "no SLO capture was written")
            kill(bot, SIGUSR2)
            #expect(capture["status"] as? String == "written", "\(capture)")
            #expect(capture["detail"] as? String == Self.rule && capture["bots"] as? [String] == ["demo-bot"], "\(capture)")

            let trace = try CapturedTrace(capture, in: captures.path)
            var slowBySymbol: [String: Int] = [:]
            var wrong: [String] = []
            for slice in trace.slices where slice.name.hasPrefix("order_fill_latency{symbol=\"") {
                let symbol = String(slice.name.dropFirst("order_fill_latency{symbol=\"".count).prefix { $0 != "\"" })
                guard slice.nanos == Self.slowNanos[symbol] else { continue }
                slowBySymbol[symbol, default: 0] += 1
                // Its order's exemplar, "TICK-SYMBOL", its value, and the thread that recorded it.
                let order = slice.args["exemplar.order_id"] ?? ""
                if !order.hasSuffix("-" + symbol) || Int(order.dropLast(symbol.count + 1)) == nil
                    || slice.args["value"] != "\(slice.nanos) ns"
                    || trace.thread(of: slice)?.isEmpty != false
                {
                    wrong.append(
                        "\(slice.name) on pid \(slice.pid) tid \(slice.tid) (\(trace.thread(of: slice) ?? "no thread")): \(slice.args)")
                }
            }
            #expect(wrong.isEmpty, "\(wrong.count) slow fills without their exemplar, value or thread, such as \(wrong.prefix(3))")
            #expect(Set(slowBySymbol.keys) == Set(Self.slowNanos.keys), "slow fills of every symbol: \(slowBySymbol)")
            let threads = Set(trace.threadNames.values)
            #expect(threads.isSuperset(of: ["market-data", "strategy"]), "\(threads)")
            print(
                "demo SLO capture: \(capture["records"] ?? "?") records (\(capture["records_left_out"] ?? "?") left out), "
                    + "slow fills \(slowBySymbol), threads \(threads.sorted())")

            // Back under the bound, then slowed again: the rule is violated again, its capture suppressed.
            try #require(try eventually(seconds: 60) { try violated(port: port) == false }, "the SLO did not recover")
            kill(bot, SIGUSR1)
            defer { kill(bot, SIGUSR2) }
            #expect(try eventually(seconds: 60) { try CaptureProbe.count(port: port, "suppressed", trigger: "slo") >= 1 })
            #expect(try CaptureProbe.count(port: port, "written", trigger: "slo") == 1)
            let all = try CaptureProbe.captures(port: port)
            #expect(all.count == 1, "\(all)")
        }
    }
}
