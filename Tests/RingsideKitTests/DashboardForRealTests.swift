import Foundation
import Ringside
import RingsideTestSupport
import Synchronization
import Testing

/// A bot in this process recording every kind of metric until stopped, so that Prometheus's rates
/// have values across scrapes: histograms named as prometheus_client users name them (with their
/// unit, `_seconds`, `_us`), plain, unitless, in bytes and signed; gauges; counters (the desk
/// alerts' among them, tools/prometheus/ringside-rules.yml).
final class EveryKindBot: Sendable {
    private let stopped = Atomic<Bool>(false)
    private let incident = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)

    init(_ directory: RingDirectory) throws {
        let bot = try Bot.attach("kinds", directory: directory.path, options: .init(laneCapacity: 8192))
        let times = [
            (try bot.histogram("data_freshness_seconds", unit: .seconds), UInt64(2)),
            (try bot.histogram("order_submission_latency_us", unit: .microseconds), 150),
            (try bot.histogram("order_fill_latency", unit: .nanoseconds), 90_000),
        ]
        let sizes = [try bot.histogram("message_size_bytes", unit: .bytes), try bot.histogram("batch", unit: .bytes)]
        let depth = try bot.histogram("book_depth")
        let slippage = try bot.histogram("slippage_bps", resolution: 0.01, signed: true)
        let pnl = try bot.gauge("daily_pnl")
        let killSwitch = try bot.gauge("kill_switch_active")
        let quoteAge = try bot.gauge("quote_age_us", unit: .microseconds)
        let orders = try bot.counter("orders_total")
        let fills = try bot.counter("fills")
        // Recorded from `beginIncident()` on: an SLO's violation, and its capture, at a time of the test's choosing.
        let incidentLatency = try bot.histogram("incident_latency_us", unit: .microseconds)
        let sent = try bot.counter("orders_sent")
        let filled = try bot.counter("orders_filled_total")
        Thread { [self] in
            var tick: UInt64 = 0
            while !stopped.load(ordering: .relaxed) {
                tick += 1
                for (histogram, scale) in times { histogram.record(scale + tick % 7 * scale / 4) }
                for histogram in sizes { histogram.record(512 + tick % 11 * 64) }
                depth.record(3 + tick % 5)
                slippage.record(Double(Int(tick % 41) - 20) * 0.75)
                pnl.set(-1250.5 + Double(tick % 13))
                killSwitch.set(0)
                quoteAge.set(Int(tick % 300))
                orders.increment()
                sent.increment()
                if incident.load(ordering: .relaxed) { incidentLatency.record(150) }
                if tick.isMultiple(of: 2) {
                    fills.increment()
                    filled.increment()
                }
                Thread.sleep(forTimeInterval: 0.005)
            }
            finished.store(true, ordering: .releasing)
        }
        .start()
    }

    /// From now on `incident_latency_us` records 150 us a tick.
    func beginIncident() { incident.store(true, ordering: .relaxed) }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        _ = eventually(seconds: 5) { finished.load(ordering: .acquiring) }
    }
}

@Suite("the Grafana dashboard against a real Prometheus")
struct DashboardForRealTests {
    /// The dashboard's variables that stand for one metric each, and the base names of the bots'
    /// metrics each must offer: Grafana derives them with the variable's `metrics(...)` query and
    /// regex, emulated here over the names Prometheus holds.
    static let metricVariables: [(name: String, expected: Set<String>)] = [
        ("metric", ["data_freshness", "order_submission_latency", "order_fill_latency"]),
        ("size", ["message_size", "batch"]),
        ("value", ["book_depth", "slippage_bps"]),
        ("gauge", ["daily_pnl", "kill_switch_active", "quote_age"]),
    ]

    /// The values of a `metrics(PATTERN)` variable whose regex is `/^(...)$/`, over `names`.
    static func values(of variable: [String: Any], among names: [String]) throws -> Set<String> {
        let definition = try #require(variable["definition"] as? String)
        let pattern = String(definition.dropFirst("metrics(".count).dropLast())
        let regex = try #require(variable["regex"] as? String)
        let search = try NSRegularExpression(pattern: pattern)
        let extract = try NSRegularExpression(pattern: String(regex.dropFirst().dropLast()))
        var found: Set<String> = []
        for name in names where search.firstMatch(in: name, range: NSRange(name.startIndex..., in: name)) != nil {
            guard let match = extract.firstMatch(in: name, range: NSRange(name.startIndex..., in: name)),
                let range = Range(match.range(at: 1), in: name)
            else { continue }
            found.insert(String(name[range]))
        }
        return found
    }

    /// Every expression with each metric variable substituted by each of its values (the others as
    /// `GrafanaDashboardTests.substituteVariables` does).
    static func expand(_ expression: String, _ values: [String: Set<String>]) -> [String] {
        var expanded = [expression]
        for (name, names) in values.sorted(by: { $0.key < $1.key })
        where expression.contains("$\(name)") || expression.contains("${\(name)") {
            expanded = expanded.flatMap { text in
                names.sorted().map {
                    text.replacingOccurrences(of: "${\(name)}", with: $0).replacingOccurrences(of: "$\(name)", with: $0)
                }
            }
        }
        return expanded.map(GrafanaDashboardTests.substituteVariables)
    }

    @Test(
        "every panel and annotation query, for every metric its variables offer, returns data from a real Prometheus scraping the demo, a bot of every kind of name, SLOs, an incident with its capture and a skipped ring",
        .timeLimit(.minutes(5)))
    func everyPanelHasData() throws {
        guard let prometheusPath = try requiredSystemTool("prometheus") else { return }
        try withRingDirectory { directory in
            // A ring the collector cannot read, so the skipped-ring panels have something to show.
            var junk = [UInt8](repeating: 0x5A, count: 8192)
            junk.replaceSubrange(8..<12, with: [1, 0, 0, 0])
            _ = FileManager.default.createFile(
                atPath: directory.path + "/ringside.broken", contents: Data(junk),
                attributes: [.posixPermissions: 0o600])
            // A bot of two forked workers that hold their files, for the workers' panels.
            let workers = try ChildProcess(
                testProducer: "gauge-workers", ring: "pool", in: directory, ["--children", "2"], withInput: true)
            defer { workers.kill() }
            #expect(workers.readLine()?.hasPrefix("children ") == true)
            let bot = try EveryKindBot(directory)
            defer { bot.stop() }
            let captures = FileManager.default.temporaryDirectory.appendingPathComponent("ringside-captures-\(UUID())").path
            defer { try? FileManager.default.removeItem(atPath: captures) }
            let (collector, port) = try startCollector([
                "--dir", directory.path, "--demo", "--native-histograms", "5",
                "--slo", "order_fill_latency:p99<100us@1m",
                // An availability SLO over the demo's counters, for the availability panels.
                "--slo", #"orders{side="sell"}/orders<99%@30d severity=P2"#,
                // Violated once the incident begins, with a capture: the annotations' events.
                "--slo", "incident_latency_us:p99<1us@1s capture",
                "--capture-dir", captures, "--recorder-seconds", "2s", "--capture-after", "0",
            ])
            defer { collector.kill() }
            let config = kitPrometheusConfig([("127.0.0.1:\(port)", [:])])
            // Native histograms need the feature, which drops the classic buckets: a server each.
            let classic = try PrometheusServer(executable: prometheusPath, config: config)
            defer { classic.stop() }
            let native = try PrometheusServer(
                executable: prometheusPath, config: config,
                arguments: ["--enable-feature=native-histograms"])
            defer { native.stop() }
            // The incident begins once Prometheus holds the violations' and captures' counters at 0,
            // so that their rise is an increase (a counter's first sample is none).
            let counters = #"ringside_slo_violations_total{slo=~"incident.*"} == 0 or ringside_captures_total{trigger="slo"} == 0"#
            _ = try classic.queryOnceScraped(counters, count: 2)
            bot.beginIncident()

            let data = try Data(contentsOf: URL(fileURLWithPath: kitFile("tools/grafana/ringside-dashboard.json")))
            let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            let panels = try #require(dashboard["panels"] as? [[String: Any]]).filter { $0["type"] as? String != "row" }
            var queries: [(panel: String, expression: String, native: Bool)] = []
            for panel in panels {
                let title = panel["title"] as? String ?? "?"
                for target in panel["targets"] as? [[String: Any]] ?? [] {
                    guard let expression = target["expr"] as? String else { continue }
                    queries.append((title, expression, title.contains("native")))
                }
            }
            let annotations = try #require((dashboard["annotations"] as? [String: Any])?["list"] as? [[String: Any]])
            for annotation in annotations {
                queries.append(("annotation " + (annotation["name"] as? String ?? "?"), try #require(annotation["expr"] as? String), false))
            }
            #expect(queries.count >= 40 && annotations.count >= 3)
            let variables = try #require((dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]])

            // Rates need a few scrapes: wait until every query answers (or 90 s pass), then report.
            // A panel of events that an honest setup never has (a refusal) must only be a valid query.
            let eventsOnly = ["ringside_thread_health_refused_total"]
            var empty: [String] = []
            var runs = 0
            _ = try eventually(seconds: 90, every: 0.5) { () -> Bool? in
                let names = try classic.query(#"count by (__name__) ({__name__=~".+"})"#).compactMap { $0.labels["__name__"] }
                var values: [String: Set<String>] = [:]
                empty = []
                for (name, expected) in Self.metricVariables {
                    let variable = try #require(variables.first { $0["name"] as? String == name })
                    values[name] = try Self.values(of: variable, among: names)
                    let missing = expected.subtracting(values[name] ?? [])
                    if !missing.isEmpty { empty.append("variable \(name) lacks \(missing.sorted())") }
                }
                runs = 0
                for query in queries {
                    for expression in Self.expand(query.expression, values) {
                        runs += 1
                        let result = try (query.native ? native : classic).query(expression)
                        if result.isEmpty && !eventsOnly.contains(where: { expression.hasPrefix($0) }) {
                            empty.append("\(query.panel): \(expression)")
                        }
                    }
                }
                return empty.isEmpty ? true : nil
            }
            print(
                "dashboard for real: \(runs) queries (\(queries.count) in the dashboard) over \(panels.count) panels, \(runs - empty.count) with data"
            )
            #expect(empty.isEmpty, "panels without data:\n\(empty.joined(separator: "\n"))")
        }
    }
}
