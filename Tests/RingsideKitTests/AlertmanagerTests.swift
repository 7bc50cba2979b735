import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RingsideTestSupport
import Testing

/// An Alertmanager of the test's own (Debian's `prometheus-alertmanager`): loopback, clustering
/// off, a temporary data directory, killed and removed by `stop()`.
private final class AlertmanagerServer {
    private let peer: KitPeer
    var port: Int { peer.port }

    /// Starts it with `config` (YAML text), retrying on another port if the one picked is taken meanwhile.
    init(executable: String, config: String) throws {
        peer = try KitPeer("alertmanager") { directory, port in
            let configPath = directory + "/alertmanager.yml", dataPath = directory + "/data"
            try config.write(toFile: configPath, atomically: true, encoding: .utf8)
            return try ChildProcess(
                executable,
                [
                    "--config.file=\(configPath)", "--storage.path=\(dataPath)",
                    "--web.listen-address=127.0.0.1:\(port)", "--cluster.listen-address=", "--log.level=warn",
                ])
        }
    }

    func stop() { peer.stop() }
}

/// An alert the test makes fire, and where the shipped alertmanager.yml must deliver it.
private struct ExpectedAlert: CustomStringConvertible {
    let alertname: String
    let severity: String
    /// The label that names what broke, and its value (`ring` for a bot).
    let label: (name: String, value: String)
    let receiver: String

    var description: String { "\(alertname){\(label.name)=\"\(label.value)\"} \(severity) to \(receiver)" }
}

@Suite("Alertmanager: the shipped rules fire for real and alertmanager.yml routes them by severity, grouped by bot")
struct AlertmanagerTests {
    @Test("amtool accepts tools/prometheus/alertmanager.yml")
    func amtoolChecks() throws {
        guard let amtool = try requiredSystemTool("amtool") else { return }
        let check = try runProcess(amtool, ["check-config", kitFile("tools/prometheus/alertmanager.yml")], mergingErrors: true)
        #expect(check.status == 0 && check.output.contains("SUCCESS"), "\(check.output)")
    }

    /// A collector drains four rings: a bot the test kills (SIGKILL), a bot it stops (SIGSTOP),
    /// a bot whose values break the collector's SLO, and a corrupt file. A Prometheus with the
    /// shipped prometheus.yml and rules scrapes it and sends its alerts to Debian's Alertmanager
    /// with the shipped alertmanager.yml, whose webhooks point at a receiver in this test. Each
    /// alert must arrive, firing, at its severity's receiver, with its labels, in a group of its
    /// own alert and bot.
    ///
    /// The rules' `for:` (30 s to 5 m) would take minutes: Prometheus loads a copy whose every
    /// `for:` is 5 s. Everything else is as shipped: the rules' expressions, labels, scrape and
    /// evaluation intervals, and Alertmanager's routes, grouping and waits.
    @Test("a dead bot and a stopped bot page P0, a broken SLO P1, an unreadable ring P2, each with its labels", .timeLimit(.minutes(4)))
    func alertsRoutedBySeverity() throws {
        guard let prometheusPath = try requiredSystemTool("prometheus"),
            let alertmanagerPath = try requiredSystemTool("prometheus-alertmanager")
        else { return }
        let rulesDirectory = try TemporaryDirectory("ringside-rules")
        defer { rulesDirectory.remove() }
        let shippedRules = try String(contentsOfFile: kitFile("tools/prometheus/ringside-rules.yml"), encoding: .utf8)
        let shortRules = shippedRules.replacingOccurrences(of: #"(?m)^(\s+)for: \d+[smh]$"#, with: "$1for: 5s", options: .regularExpression)
        try #require(shortRules != shippedRules, "no `for:` found in ringside-rules.yml to shorten")
        let rulesPath = rulesDirectory.path + "/ringside-rules.yml"
        try shortRules.write(toFile: rulesPath, atomically: true, encoding: .utf8)

        try withRingDirectory { directory in
            // Bots that record all the time (a gauge every 10 ms), so that a stop shows within a second.
            func kit(_ ring: String) throws -> ChildProcess {
                let bot = try ChildProcess(
                    testProducer: "kit", ring: ring, in: directory,
                    ["--count", "100", "--start", "1000", "--step", "10", "--per-second", "100"])
                try #require(bot.readLine()?.hasPrefix("ready ") == true, "bot \(ring) did not start")
                return bot
            }
            let dead = try kit("bot-dead")
            defer { dead.kill() }
            let stopped = try kit("bot-stopped")
            defer { stopped.kill() }
            // Values 1, 2, 3 ... 200 a second: p99 over 5 s is past 100 within a second, for good.
            let slow = try ChildProcess(testProducer: "blast", ring: "bot-slow", in: directory, ["--seconds", "600", "--rate", "200"])
            defer { slow.kill() }
            try #require(slow.readLine()?.hasPrefix("attached ") == true, "bot-slow did not start")
            // A file the collector cannot read (a bad magic), as GrafanaDashboardTests makes one.
            var junk = [UInt8](repeating: 0x5A, count: 8192)
            junk.replaceSubrange(8..<12, with: [1, 0, 0, 0])
            try #require(
                FileManager.default.createFile(
                    atPath: directory.path + "/ringside.broken", contents: Data(junk), attributes: [.posixPermissions: 0o600]))

            let slo = "blast:p99<100@5s"
            let (collector, collectorPort) = try startCollector(["--dir", directory.path, "--poll", "20ms", "--slo", slo])
            defer { collector.kill() }

            let webhook = try WebhookReceiver()
            defer { webhook.stop() }
            let alertmanagerConfig = try shippedFile(
                "tools/prometheus/alertmanager.yml",
                replacing: ["p0", "p1", "p2"].map {
                    ("http://127.0.0.1:5001/ringside/\($0)", "http://127.0.0.1:\(webhook.port)/ringside/\($0)")
                })
            let alertmanager = try AlertmanagerServer(executable: alertmanagerPath, config: alertmanagerConfig)
            defer { alertmanager.stop() }
            let prometheusConfig = try shippedFile(
                "tools/prometheus/prometheus.yml",
                replacing: [
                    ("  - ringside-rules.yml", "  - \(rulesPath)"),
                    (#"targets: ["127.0.0.1:9093"]"#, #"targets: ["127.0.0.1:\#(alertmanager.port)"]"#),
                    (#"- targets: ["127.0.0.1:9464"]"#, #"- targets: ["127.0.0.1:\#(collectorPort)"]"#),
                ])
            let prometheus = try PrometheusServer(executable: prometheusPath, config: prometheusConfig)
            defer { prometheus.stop() }

            // Both bots live as Prometheus sees them before the test breaks them.
            let live = try eventually(seconds: 60) {
                try prometheus.query(#"ringside_ring_producer_alive{ring=~"bot-dead|bot-stopped"} == 1"#).count == 2
            }
            try #require(live, "Prometheus did not see bot-dead and bot-stopped alive within 60 s")
            dead.kill()
            stopped.send(SIGSTOP)

            let expected = [
                ExpectedAlert(alertname: "RingsideProducerDead", severity: "P0", label: ("ring", "bot-dead"), receiver: "ringside-p0"),
                ExpectedAlert(
                    alertname: "RingsideProducerStopped", severity: "P0", label: ("ring", "bot-stopped"), receiver: "ringside-p0"),
                ExpectedAlert(alertname: "RingsideSLOViolated", severity: "P1", label: ("slo", slo), receiver: "ringside-p1"),
                ExpectedAlert(alertname: "RingsideRingSkipped", severity: "P2", label: ("ring", "broken"), receiver: "ringside-p2"),
            ]
            /// The delivery of a firing alert matching `alert`, and that alert.
            func delivery(of alert: ExpectedAlert) -> (WebhookReceiver.Delivery, [String: String])? {
                for delivery in webhook.received {
                    for entry in delivery.document?["alerts"] as? [[String: Any]] ?? [] {
                        let labels = entry["labels"] as? [String: String] ?? [:]
                        if entry["status"] as? String == "firing" && labels["alertname"] == alert.alertname
                            && labels[alert.label.name] == alert.label.value
                        {
                            return (delivery, labels)
                        }
                    }
                }
                return nil
            }
            // P0 waits 10 s in Alertmanager, P1 and P2 30 s, after 5 s pending in Prometheus.
            let all = eventually(seconds: 150) { expected.allSatisfy { delivery(of: $0) != nil } }
            let missing = expected.filter { delivery(of: $0) == nil }
            #expect(all, "not delivered within 150 s: \(missing); Prometheus's alerts: \((try? prometheus.alerts()) ?? [])")

            for alert in expected {
                guard let (received, labels) = delivery(of: alert) else { continue }
                let document = received.document ?? [:]
                #expect(document["receiver"] as? String == alert.receiver, "\(alert): delivered to \(document["receiver"] ?? "?")")
                #expect(received.path == "/ringside/" + alert.severity.lowercased(), "\(alert): delivered to \(received.path)")
                #expect(labels["severity"] == alert.severity, "\(alert): \(labels)")
                #expect(labels["job"] == "ringside" && labels["host"] == "trading-1", "\(alert): \(labels)")
                // Grouped by alert and bot (`ring`; an SLO's alert has none).
                let grouping = labels.filter { ["alertname", "ring"].contains($0.key) }
                #expect(document["groupLabels"] as? [String: String] == grouping, "\(alert): \(document["groupLabels"] ?? "?")")
            }
            // Every alert delivered, these or any other, went to its severity's receiver, in a
            // notification of one alert name and one bot.
            for received in webhook.received {
                let document = received.document ?? [:]
                let alerts = (document["alerts"] as? [[String: Any]] ?? []).map { $0["labels"] as? [String: String] ?? [:] }
                #expect(!alerts.isEmpty, "a delivery without alerts to \(received.path)")
                for labels in alerts {
                    let receiver = "ringside-" + (labels["severity"] ?? "p1").lowercased()
                    #expect(document["receiver"] as? String == receiver, "\(labels) delivered to \(document["receiver"] ?? "?")")
                }
                #expect(Set(alerts.map { [$0["alertname"] ?? "", $0["ring"] ?? ""] }).count == 1, "one group, several bots: \(alerts)")
            }

            // SIGCONT: the bot runs again, and the collector says so.
            stopped.send(SIGCONT)
            let resumed = try eventually(seconds: 30) {
                try httpGet(port: collectorPort, path: "/metrics").body.contains(#"ringside_ring_producer_stopped{ring="bot-stopped"} 0"#)
            }
            #expect(resumed, "the collector did not see bot-stopped run again within 30 s")
        }
    }
}

extension PrometheusServer {
    /// The alerts Prometheus holds (`/api/v1/alerts`): each one's labels and state.
    fileprivate func alerts() throws -> [String] {
        let response = try httpGet(port: port, path: "/api/v1/alerts")
        let alerts = ((try jsonObject(response.body)["data"] as? [String: Any])?["alerts"] as? [[String: Any]]) ?? []
        return alerts.map { "\($0["labels"] ?? [:]) \($0["state"] ?? "?")" }
    }
}
