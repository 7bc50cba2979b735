import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RingsideTestSupport
import Testing

/// A Prometheus server of the test's own: loopback, a temporary data directory, killed and
/// removed by `stop()`.
final class PrometheusServer {
    private let peer: KitPeer
    var port: Int { peer.port }

    /// Starts `prometheus` with `config` (YAML text) and any further `arguments` (feature flags),
    /// retrying on another port if the one picked is taken meanwhile.
    convenience init(executable: String, config: String, arguments: [String] = []) throws {
        try self.init(executable: executable, arguments: arguments) { _ in config }
    }

    /// Starts `prometheus` with the configuration `config` gives for its port (a config that
    /// scrapes the server itself), and `arguments`; in agent mode (`agent`, with
    /// `--enable-feature=agent` among `arguments`) it keeps a write-ahead log, not a database.
    init(executable: String, agent: Bool = false, arguments: [String] = [], config: (_ port: Int) -> String) throws {
        peer = try KitPeer("prometheus") { directory, port in
            // Agent mode refuses the database's flags.
            let storage =
                agent
                ? ["--storage.agent.path=\(directory)/data"]
                : ["--storage.tsdb.path=\(directory)/data"]
                    + (arguments.contains { $0.hasPrefix("--storage.tsdb.retention") } ? [] : ["--storage.tsdb.retention.time=1h"])
            let configPath = directory + "/prometheus.yml"
            try config(port).write(toFile: configPath, atomically: true, encoding: .utf8)
            return try ChildProcess(
                executable,
                ["--config.file=\(configPath)", "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn"] + storage
                    + arguments)
        }
    }

    /// Kills the server and removes its data.
    func stop() { peer.stop() }

    /// Runs an instant query, now or at `time` (Unix seconds); returns the result vector as
    /// (labels, value) pairs.
    func query(_ promql: String, at time: Double? = nil) throws -> [(labels: [String: String], value: Double)] {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let encoded = promql.addingPercentEncoding(withAllowedCharacters: allowed)!
        let response = try httpGet(port: port, path: "/api/v1/query?query=\(encoded)" + (time.map { "&time=\($0)" } ?? ""))
        let document = try jsonObject(response.body)
        guard response.status == 200, document["status"] as? String == "success",
            let data = document["data"] as? [String: Any], let result = data["result"] as? [[String: Any]]
        else {
            throw TestSupportError("query \(promql): HTTP \(response.status): \(response.body.prefix(500))")
        }
        return result.compactMap { sample in
            guard let labels = sample["metric"] as? [String: String], let pair = sample["value"] as? [Any],
                pair.count == 2, let text = pair[1] as? String, let value = Double(text)
            else { return nil }
            return (labels, value)
        }
    }

    /// The value of a query that returns one sample, or nil.
    func scalar(_ promql: String, at time: Double? = nil) throws -> Double? {
        let result = try query(promql, at: time)
        return result.count == 1 ? result[0].value : nil
    }

    /// `scalar`, waiting out moments with no value: a scrape that times out on a loaded machine
    /// marks the target's series stale until the next one succeeds.
    func scalarOnceScraped(_ promql: String, seconds: Double = 30) throws -> Double? {
        try eventually(seconds: seconds, every: 0.5) { try scalar(promql) }
    }

    /// A moment (Unix seconds) at which `promql` (a filter: every target's figures whole) gave
    /// `count` samples, waited for up to `seconds`: figures over several targets, queried at it,
    /// are of one state that stays. It lies 2 s back, past the 1 s scrape timeout: a failed
    /// scrape's staleness markers bear its start time and cannot land after it.
    func settledMoment(where promql: String, count: Int, seconds: Double = 30) throws -> Double? {
        try eventually(seconds: seconds, every: 0.5) { () -> Double? in
            let moment = Date().timeIntervalSince1970 - 2
            return try query(promql, at: moment).count == count ? moment : nil
        }
    }

    /// `query`, waiting (as `scalarOnceScraped`) until it returns `count` samples; the last result.
    func queryOnceScraped(_ promql: String, count: Int, seconds: Double = 30) throws -> [(labels: [String: String], value: Double)] {
        var result: [(labels: [String: String], value: Double)] = []
        _ = try eventually(seconds: seconds, every: 0.5) { () -> Bool? in
            result = try query(promql)
            return result.count == count ? true : nil
        }
        return result
    }

    /// The rule groups' rules as /api/v1/rules reports them.
    func rules() throws -> [[String: Any]] {
        let response = try httpGet(port: port, path: "/api/v1/rules")
        let data = try jsonObject(response.body)["data"] as? [String: Any]
        let groups = data?["groups"] as? [[String: Any]] ?? []
        return groups.flatMap { $0["rules"] as? [[String: Any]] ?? [] }
    }
}

@Suite("Prometheus: the config, the rules, and a real server scraping real collectors")
struct PrometheusTests {
    @Test("promtool accepts tools/prometheus/prometheus.yml and ringside-rules.yml, and the rules' unit tests pass")
    func promtoolChecks() throws {
        guard let promtool = try requiredSystemTool("promtool") else { return }
        let config = try runProcess(promtool, ["check", "config", kitFile("tools/prometheus/prometheus.yml")], mergingErrors: true)
        #expect(config.status == 0 && config.output.contains("SUCCESS"), "\(config.output)")
        let rules = try runProcess(promtool, ["check", "rules", kitFile("tools/prometheus/ringside-rules.yml")], mergingErrors: true)
        #expect(rules.status == 0 && rules.output.contains("SUCCESS"), "\(rules.output)")
        let tests = try runProcess(promtool, ["test", "rules", kitFile("tools/prometheus/ringside-rules.test.yml")], mergingErrors: true)
        #expect(tests.status == 0 && tests.output.contains("SUCCESS"), "\(tests.output)")
    }

    @Test("the rules give every alert a severity of P0, P1 or P2 (an SLO's alerts, the SLO's own), and cover what operators need")
    func alertsHaveSeverities() throws {
        let text = try String(contentsOfFile: kitFile("tools/prometheus/ringside-rules.yml"), encoding: .utf8)
        let alerts = text.split(separator: "\n").filter { $0.trimmingCharacters(in: .whitespaces).hasPrefix("- alert:") }
        let severities = text.split(separator: "\n").filter { $0.trimmingCharacters(in: .whitespaces).hasPrefix("severity:") }
        // The SLOs' alerts set none: they keep the severity label of the SLO's series (--slo '... severity=P2').
        let fromTheSLO = ["RingsideSLOViolated", "RingsideSLOErrorBudgetBurn", "RingsideSLOMatchesNothing", "RingsideSLOUnjudgedSeries"]
        #expect(alerts.count == severities.count + fromTheSLO.count)
        for alert in fromTheSLO {
            let rule = text.components(separatedBy: "- alert: \(alert)\n").last?.components(separatedBy: "- alert:").first ?? ""
            #expect(!rule.contains("severity:") && rule.contains("ringside_slo_"), "\(alert) must take the SLO's severity")
        }
        #expect(severities.allSatisfy { ["P0", "P1", "P2"].contains($0.split(separator: ":").last!.trimmingCharacters(in: .whitespaces)) })
        for needed in [
            "RingsideCollectorDown", "RingsideProducerDead", "RingsideSLOViolated", "RingsideOrderFillP99OverSLO",
            "RingsideRecordsDropped", "RingsideBacklogHigh", "RingsideThreadPreempted", "RingsideSLOErrorBudgetBurn",
            "RingsideBotMemoryGrowing", "RingsideBotCPUHigh", "RingsideThroughputLow", "RingsideStateNotSaved", "RingsideStateUnread",
            "RingsideSnapshotStale", "RingsideKillSwitchActive", "RingsideDailyLossLimit", "RingsideSlippageP95High",
            "RingsideFillRateLow", "RingsideThroughputFloor",
        ] {
            #expect(text.contains("- alert: \(needed)\n"), "missing \(needed)")
        }
    }

    @Test("Prometheus started with the shipped Debian defaults and prometheus.yml keeps 30 days and exemplars")
    func shippedDefaultsKeep30Days() throws {
        guard let prometheusPath = try requiredSystemTool("prometheus") else { return }
        let defaults = try String(contentsOfFile: kitFile("tools/prometheus/prometheus.default"), encoding: .utf8)
        let line = try #require(defaults.split(separator: "\n").first { $0.hasPrefix("ARGS=") }, "no ARGS= line")
        let arguments = line.dropFirst("ARGS=".count).trimmingCharacters(in: CharacterSet(charactersIn: "\"")).split(separator: " ")
            .map(String.init)
        // The shipped prometheus.yml, as /etc/prometheus holds it beside the rules.
        let shipped = try String(contentsOfFile: kitFile("tools/prometheus/prometheus.yml"), encoding: .utf8)
            .replacingOccurrences(of: "  - ringside-rules.yml", with: "  - \(kitFile("tools/prometheus/ringside-rules.yml"))")
        let prometheus = try PrometheusServer(executable: prometheusPath, config: shipped, arguments: arguments)
        defer { prometheus.stop() }
        let runtime = try jsonObject(httpGet(port: prometheus.port, path: "/api/v1/status/runtimeinfo").body)
        #expect((runtime["data"] as? [String: Any])?["storageRetention"] as? String == "30d", "\(runtime)")
        let flags = try jsonObject(httpGet(port: prometheus.port, path: "/api/v1/status/flags").body)
        #expect((flags["data"] as? [String: Any])?["enable-feature"] as? String == "exemplar-storage", "\(flags)")
    }

    /// Two hosts' worth: each collector drains one bot whose histogram holds 10,000 known values
    /// (host a: 1 us to 10 ms, host b: 10.001 ms to 20 ms, 1 us apart) and whose counter rises
    /// 1,000 a second; Prometheus scrapes both every second.
    ///
    /// The bound for `histogram_quantile`: it finds the bucket holding the wanted rank and
    /// interpolates linearly inside it, so for any data the estimate lies in the same 1-2-5
    /// bucket as the exact quantile (an error up to the bucket's width, 150 % of its lower bound
    /// for a 2-to-5 bucket). Our values are uniform within every bucket, where linear
    /// interpolation is exact up to one value's step, except that the collector's own buckets
    /// (1/1024 relative error) may count a value within 0.1 % of a bound on its other side. We
    /// assert both: the exact quantile's bucket, and 1 us + 0.2 % of the exact value.
    @Test(
        "a real Prometheus scraping two collectors agrees with them: windowed quantile, counter rate, merged histogram_quantile",
        // A bound on a hang, not on speed: beside the fleet's and Alertmanager's real servers a
        // loaded 2-core run took over a minute (CI, 2026-11-24).
        .timeLimit(.minutes(4)))
    func realPrometheusAgrees() throws {
        guard let prometheusPath = try requiredSystemTool("prometheus") else { return }
        let hostA = try TemporaryRingDirectory(), hostB = try TemporaryRingDirectory()
        defer {
            hostA.remove()
            hostB.remove()
        }

        let count = 10_000, perSecond = 1_000
        func bot(_ directory: TemporaryRingDirectory, start: Int) throws -> ChildProcess {
            let producer = try ChildProcess(
                testProducer: "kit", ring: "bot", in: directory.ringDirectory,
                ["--count", String(count), "--start", String(start), "--step", "1000", "--per-second", String(perSecond)])
            #expect(producer.readLine()?.hasPrefix("ready ") == true)
            return producer
        }
        let botA = try bot(hostA, start: 1_000)
        defer { botA.kill() }
        let botB = try bot(hostB, start: 10_001_000)
        defer { botB.kill() }
        let (collectorA, portA) = try startCollector(["--dir", hostA.path, "--poll", "20ms"])
        defer { collectorA.kill() }
        let (collectorB, portB) = try startCollector(["--dir", hostB.path, "--poll", "20ms"])
        defer { collectorB.kill() }

        let config = kitPrometheusConfig([("127.0.0.1:\(portA)", ["host": "a"]), ("127.0.0.1:\(portB)", ["host": "b"])])
        let prometheus = try PrometheusServer(executable: prometheusPath, config: config)
        defer { prometheus.stop() }

        // 21 scrapes of each collector with the histogram in them: enough for rate() over 20 s.
        let scraped = try eventually(seconds: 120) { () -> Bool? in
            let samples = try prometheus.query("count_over_time(order_fill_latency_seconds_count[1m])")
            return samples.count == 2 && samples.allSatisfy { $0.value >= 21 } ? true : nil
        }
        try #require(scraped == true, "Prometheus did not scrape both collectors 21 times within 120 s")

        // 1. A windowed quantile, as scraped, equals the collector's own /latest figure (ns -> s).
        for (host, port) in [("a", portA), ("b", portB)] {
            let latest = try jsonObject(httpGet(port: port, path: "/latest").body)
            let series = try #require((latest["series"] as? [[String: Any]])?.first { $0["metric"] as? String == "order_fill_latency" })
            let window = try #require((series["windows"] as? [String: [String: Any]])?["1m"])
            for (key, quantile) in [("p50", "0.5"), ("p99", "0.99"), ("p999", "0.999")] {
                let collectorNanos = try #require(window[key] as? Double)
                let scrapedSeconds = try #require(
                    try prometheus.scalarOnceScraped(
                        #"order_fill_latency_windowed_seconds{host="\#(host)",window="1m",quantile="\#(quantile)"}"#))
                if key == "p99" {
                    print("prometheus agreement: host \(host) 1m p99: Prometheus \(scrapedSeconds) s, /latest \(collectorNanos) ns")
                }
                #expect(
                    abs(scrapedSeconds * 1e9 - collectorNanos) <= 1e-6 * collectorNanos,
                    "host \(host) \(key): Prometheus \(scrapedSeconds) s, collector \(collectorNanos) ns")
            }
        }
        let p99A = try #require(
            try prometheus.scalarOnceScraped(#"order_fill_latency_windowed_seconds{host="a",window="1m",quantile="0.99"}"#))
        #expect(abs(p99A - 0.0099) <= 0.0099 / 1024, "p99 of 1 us ... 10 ms is 9.9 ms within 1/1024: \(p99A)")

        // 2. A counter's rate: the bots count 1,000 a second each. Over 20 s, not 5: a sample is
        //    stamped when its scrape began and holds what the collector had published when it
        //    answered; on a loaded machine the two differ by a varying fraction of a second, which
        //    over 5 s moved rate() 25 % (three busy loops beside the test).
        for host in ["a", "b"] {
            let rate = try #require(try prometheus.scalarOnceScraped(#"rate(orders_total{host="\#(host)"}[20s])"#))
            let collectorRate = try #require(try prometheus.scalarOnceScraped(#"orders_rate{host="\#(host)",window="5s"}"#))
            print("prometheus agreement: host \(host): rate(orders_total[20s]) \(rate)/s, orders_rate{window=5s} \(collectorRate)/s")
            #expect(abs(rate - Double(perSecond)) <= 0.25 * Double(perSecond), "host \(host): rate() \(rate)/s")
            #expect(abs(collectorRate - Double(perSecond)) <= 0.25 * Double(perSecond), "host \(host): orders_rate \(collectorRate)/s")
        }

        // 3. histogram_quantile over both collectors' buckets: the merged distribution is the
        //    20,000 values 1 us, 2 us, ... 20 ms; the exact quantile q is ceil(q * 20000) us.
        let bothScraped = try #require(
            try prometheus.settledMoment(where: "order_fill_latency_seconds_count == \(count)", count: 2),
            "both hosts' histograms, within 30 s")
        let merged = try #require(try prometheus.scalar("sum(order_fill_latency_seconds_count)", at: bothScraped))
        #expect(merged == Double(2 * count))
        let bounds = [
            0.0, 1e-7, 2e-7, 5e-7, 1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3,
            1e-2, 2e-2, 5e-2, 0.1,
        ]
        var report: [String] = []
        for q in [0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999] {
            let estimate = try #require(
                try prometheus.scalar("histogram_quantile(\(q), sum by (le) (order_fill_latency_seconds_bucket))", at: bothScraped))
            let exact = (q * Double(2 * count)).rounded(.up) * 1e-6
            let upper = try #require(bounds.first { $0 >= exact - 1e-12 })
            let lower = bounds[bounds.firstIndex(of: upper)! - 1]
            let tolerance = 1e-6 + 2e-3 * exact
            #expect(
                estimate >= lower - tolerance && estimate <= upper + tolerance,
                "q \(q): \(estimate) s is outside the bucket (\(lower), \(upper)] of the exact \(exact) s")
            #expect(abs(estimate - exact) <= tolerance, "q \(q): histogram_quantile \(estimate) s, exact \(exact) s")
            report.append("q\(q) exact \(exact) est \(estimate)")
        }
        print("prometheus agreement: " + report.joined(separator: "; "))

        // 4. The rules file loads into a real server and every rule evaluates without error:
        // every one of the file's (docs/prometheus.md gives no count, this does).
        let ruleLines = try String(contentsOfFile: kitFile("tools/prometheus/ringside-rules.yml"), encoding: .utf8)
            .components(separatedBy: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let shipped = ruleLines.filter { $0.hasPrefix("- record:") || $0.hasPrefix("- alert:") }.count
        let evaluated = try eventually(seconds: 10) { () -> [[String: Any]]? in
            let rules = try prometheus.rules()
            return rules.count >= shipped && rules.allSatisfy({ ($0["lastEvaluation"] as? String)?.hasPrefix("0001") == false })
                ? rules : nil
        }
        let rules = try #require(evaluated, "the \(shipped) rules were not all evaluated within 10 s")
        #expect(rules.count == shipped, "Prometheus loaded \(rules.count) rules; ringside-rules.yml has \(shipped)")
        for rule in rules {
            #expect(rule["health"] as? String == "ok", "rule \(rule["name"] ?? "?"): \(rule["lastError"] ?? "")")
        }
        let fill = try prometheus.queryOnceScraped(#"ringside:ring_fill:ratio{job="ringside"}"#, count: 2)
        #expect(fill.count == 2 && fill.allSatisfy { $0.value >= 0 && $0.value < 0.5 })
    }
}
