import Foundation
import Ringside
import RingsideTestSupport
import Testing

/// The SLO rules through the real `ringside-collector`: refused at start and at reload when they
/// name a series they cannot judge, and the documentation's example rules accepted and judged.
@Suite("SLO rules and the real collector: start, reload, the documented example")
struct SLOProcessTests {
    @Test("a rule naming a series it cannot judge stops the start: exit status 2 and one line naming the rule and why")
    func refusedAtStart() throws {
        try withBot("risk") { directory, bot in
            try bot.gauge("kill_switch_active").set(0)
            let run = try runProcess(
                "ringside-collector",
                ["--dir", directory.path, "--listen", "127.0.0.1:0", "--slo", "kill_switch_active:p99<1@1m severity=P0"],
                timeoutSeconds: 30)
            #expect(run.status == 2, "\(run.status.map(String.init) ?? "no exit"): \(run.errorLines.suffix(5))")
            let refusals = run.errorLines.filter { $0.contains("not starting") }
            #expect(
                refusals.count == 1
                    && refusals[0].contains(
                        "--slo 'kill_switch_active:p99<1@1m': kill_switch_active of bot risk is a gauge: p99 judges histograms; "
                            + "a gauge takes max or min; not starting"),
                "\(run.errorLines)")
            #expect(!run.errorLines.contains { $0.hasSuffix("stopped") })
        }
    }

    @Test("SIGHUP with a rule naming a series it cannot judge is refused; the running rules stay")
    func refusedAtReload() throws {
        try withBot("risk") { directory, bot in
            try bot.gauge("kill_switch_active").set(1)
            let config = try TemporaryDirectory("ringside-slo-config")
            defer { config.remove() }
            let path = config.path + "/collector.yml"
            try "slo:\n  - kill_switch_active:max<1@1m severity=P0\n".write(toFile: path, atomically: true, encoding: .utf8)
            let (collector, port) = try startCollector(["--config", path, "--dir", directory.path, "--poll", "20ms"])
            defer { collector.kill() }
            let violated = try eventually(seconds: 20) { () -> Bool? in
                let slos = try jsonObject(httpGet(port: port, path: "/latest").body)["slos"] as? [[String: Any]]
                return slos?.first?["violated"] as? Bool == true && slos?.first?["matching_series"] as? Int == 1 ? true : nil
            }
            #expect(violated == true, "the kill switch's SLO never fired")

            try "slo:\n  - kill_switch_active:p99<1@1m severity=P0\n".write(toFile: path, atomically: true, encoding: .utf8)
            collector.send(SIGHUP)
            // The reload's outcome, refused or applied (a wait for "refused" alone would hang when it applied).
            var line: String?
            while let next = collector.readErrorLine() {
                if next.contains("reload refused") || next.contains("reloaded ") {
                    line = next
                    break
                }
            }
            #expect(
                line?.contains(
                    "reload refused: --slo 'kill_switch_active:p99<1@1m': kill_switch_active of bot risk is a gauge: p99 judges histograms; "
                        + "a gauge takes max or min; the running configuration stays") == true, "\(line ?? "the collector exited")")
            let slos = try jsonObject(httpGet(port: port, path: "/latest").body)["slos"] as? [[String: Any]]
            #expect(slos?.compactMap { $0["rule"] as? String } == ["kill_switch_active:max<1@1m"], "the running rule stays")
            #expect(
                try httpGet(port: port, path: "/metrics").body.contains(
                    #"ringside_slo_violated{slo="kill_switch_active:max<1@1m",severity="P0"} 1"#))
        }
    }

    @Test("the example configuration's SLOs (docs/collector.md) are accepted by the real collector and judge a desk's bot")
    func documentedExample() throws {
        let rules = try Self.documentedRules()
        for needed in [
            "kill_switch_active:max<1@1m", "daily_pnl:min>-50000@1d", "slippage_bps:p95<50@1m", "orders_filled/orders_sent>=90%@1h",
        ] {
            #expect(rules.contains { $0.hasPrefix(needed) }, "docs/collector.md's example lacks \(needed)")
        }
        #expect(rules.contains { $0.hasPrefix("orders_sent:rate>1@5m") })
        try withBot("desk", options: .init(laneCapacity: 4096)) { directory, bot in
            try bot.gauge("kill_switch_active").set(0)
            try bot.gauge("daily_pnl").set(-1_250.5)
            let slippage = try bot.histogram("slippage_bps", resolution: 0.01, signed: true)
            for value in [-3.5, 1.25, 12, -40, 7] { slippage.record(value) }
            try bot.counter("orders_sent").increment(by: 100)
            try bot.counter("orders_filled").increment(by: 97)
            try bot.counter("orders_rejected").increment(by: 0)
            try bot.counter("orders_total").increment(by: 100)
            try bot.histogram("order_fill_latency", unit: .nanoseconds).record(40_000)
            try bot.histogram("market_data_latency", unit: .nanoseconds).record(4_000)
            let config = try TemporaryDirectory("ringside-slo-config")
            defer { config.remove() }
            let path = config.path + "/collector.yml"
            let text = "windows: [1s, 5s, 1m]\nslo:\n" + rules.map { "  - \($0)\n" }.joined()
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            let (collector, port) = try startCollector(["--config", path, "--dir", directory.path, "--poll", "20ms"])
            defer { collector.kill() }
            let slos = try eventually(seconds: 20) { () -> [[String: Any]]? in
                let slos = try jsonObject(httpGet(port: port, path: "/latest").body)["slos"] as? [[String: Any]] ?? []
                return slos.count == rules.count && slos.allSatisfy({ ($0["matching_series"] as? Int ?? 0) > 0 }) ? slos : nil
            }
            let judged = try #require(slos, "not every documented SLO matched the desk bot's series")
            for slo in judged {
                // Met, or no data yet (a rate's period not yet seen whole, a ratio's counters not yet
                // increased since the collector started): never violated.
                let met = slo["violated"] as? Bool == false
                let noDataYet = ["rate", "ratio"].contains(slo["statistic"] as? String ?? "") && slo["violated"] is NSNull
                #expect(slo["unjudged_series"] as? Int == 0 && (met || noDataYet), "\(slo)")
            }
            #expect(judged.first { $0["statistic"] as? String == "min" }?["observed"] as? Double == -1_250.5)
        }
    }

    /// The `slo:` list of the example configuration in docs/collector.md.
    static func documentedRules() throws -> [String] {
        let text = try String(contentsOfFile: packageRoot + "/docs/collector.md", encoding: .utf8)
        let block = try #require(
            text.components(separatedBy: "# /etc/ringside/collector.yml\n").dropFirst().first?.components(separatedBy: "```").first)
        var rules: [String] = []
        var inList = false
        for line in block.split(separator: "\n") {
            if line == "slo:" {
                inList = true
            } else if inList, line.hasPrefix("  - ") {
                rules.append(String(line.dropFirst(4)))
            } else {
                inList = false
            }
        }
        return rules
    }
}
