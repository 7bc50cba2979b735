import Foundation
import RingsideTestSupport
import Testing

@Suite("the Grafana dashboard against a real Prometheus")
struct DashboardForRealTests {
    @Test(
        "every panel query, its variables substituted, returns data from a real Prometheus scraping the demo, an SLO and a skipped ring",
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
            let (collector, port) = try startCollector([
                "--dir", directory.path, "--demo", "--native-histograms", "5",
                "--slo", "order_fill_latency:p99<100us@1m",
                // An availability SLO over the demo's counters, for the availability panels.
                "--slo", #"orders{side="sell"}/orders<99%@30d severity=P2"#,
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

            let data = try Data(contentsOf: URL(fileURLWithPath: kitFile("tools/grafana/ringside-dashboard.json")))
            let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            let panels = try #require(dashboard["panels"] as? [[String: Any]]).filter { $0["type"] as? String != "row" }
            var queries: [(panel: String, expression: String, native: Bool)] = []
            for panel in panels {
                let title = panel["title"] as? String ?? "?"
                for target in panel["targets"] as? [[String: Any]] ?? [] {
                    guard let expression = target["expr"] as? String else { continue }
                    queries.append((title, GrafanaDashboardTests.substituteVariables(expression), title.contains("native")))
                }
            }
            #expect(queries.count >= 27)

            // Rates need a few scrapes: wait until every query answers (or 60 s pass), then report.
            // A panel of events that an honest setup never has (a refusal) must only be a valid query.
            let eventsOnly = ["ringside_thread_health_refused_total"]
            var empty: [String] = []
            _ = try eventually(seconds: 60) { () -> Bool? in
                empty = try queries.filter { query in
                    let result = try (query.native ? native : classic).query(query.expression)
                    return result.isEmpty && !eventsOnly.contains { query.expression.hasPrefix($0) }
                }
                .map { "\($0.panel): \($0.expression)" }
                return empty.isEmpty ? true : nil
            }
            print("dashboard for real: \(queries.count) queries over \(panels.count) panels, \(queries.count - empty.count) with data")
            #expect(empty.isEmpty, "panels without data:\n\(empty.joined(separator: "\n"))")
        }
    }
}
