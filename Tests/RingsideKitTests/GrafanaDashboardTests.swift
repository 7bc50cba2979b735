import Foundation
import RingsideTestSupport
import Testing

@Suite("the Grafana dashboard and the rules query only what the collector exports")
struct GrafanaDashboardTests {
    /// Every sample name a real collector exports: a bot with a histogram, a counter and a gauge,
    /// an SLO, and a corrupt ring beside it (for `ringside_ring_skipped`).
    static func exportedNames() throws -> Set<String> {
        try withRingDirectory { directory in
            let bot = try ChildProcess(
                testProducer: "kit", ring: "bot", in: directory,
                ["--count", "1000", "--start", "1000", "--step", "1000", "--per-second", "100"])
            defer { bot.kill() }
            #expect(bot.readLine()?.hasPrefix("ready ") == true)
            // Every kind of metric, named as prometheus_client users name them, and the desk alerts' metrics.
            let kinds = try EveryKindBot(directory)
            defer { kinds.stop() }
            var junk = [UInt8](repeating: 0x5A, count: 8192)
            junk.replaceSubrange(8..<12, with: [1, 0, 0, 0])  // a version, so the file is not "being created"
            _ = FileManager.default.createFile(
                atPath: directory.path + "/ringside.broken", contents: Data(junk),
                attributes: [.posixPermissions: 0o600])
            let (collector, port) = try startCollector([
                "--dir", directory.path, "--poll", "20ms",
                "--slo", "order_fill_latency:p99<100us@1m",
                // An availability SLO, for its families (the kit bot has one counter: a ratio of it to itself).
                "--slo", #"orders{side="buy"}/orders<99%@1h"#,
            ])
            defer { collector.kill() }
            let page = try eventually(seconds: 10) { () -> String? in
                let body = try httpGet(port: port, path: "/metrics").body
                // The thread sampler's families come with its first round (a second at most).
                return body.contains("orders_rate{") && body.contains("order_fill_latency_windowed_seconds{")
                    && body.contains("slippage_bps_bucket{") && body.contains("orders_sent_total{")
                    && body.contains("ringside_slo_violated{") && body.contains("ringside_thread_context_switches_total{")
                    && body.contains("ringside_slo_bad_events_total{") ? body : nil
            }
            let text = try #require(page, "the collector did not export the bot's metrics")
            // A histogram family's own name is a series under native histograms (its buckets in one sample).
            let histograms = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") && $0.hasSuffix(" histogram") }
                .map { String($0.split(separator: " ")[2]) }
            // A counter family declared with no series yet (its first event makes one: a refusal, say).
            let counters = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") && $0.hasSuffix(" counter") }
                .map { String($0.split(separator: " ")[2]) }
            return sampleNames(inMetricsPage: text).union(histograms).union(counters)
        }
    }

    /// Values for the dashboard's variables, as Grafana would substitute them.
    static func substituteVariables(_ expression: String) -> String {
        var text = expression
        for (variable, value) in [
            ("${metric:regex}", "order_fill_latency"), ("${metric}", "order_fill_latency"),
            ("$metric", "order_fill_latency"), ("${gauge}", "gross_exposure"), ("$gauge", "gross_exposure"),
            ("${size}", "message_size"), ("$size", "message_size"), ("${value}", "slippage_bps"), ("$value", "slippage_bps"),
            ("$instance", ".*"),
            ("$ring", ".*"),
            ("$window", "1m"), ("$__rate_interval", "1m"), ("$__range", "1h"),
        ] {
            text = text.replacingOccurrences(of: variable, with: value)
        }
        return text
    }

    @Test("the dashboard is valid JSON with the Prometheus data source as a variable, and every query selects exported metrics")
    func dashboardQueriesExportedMetrics() throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: kitFile("tools/grafana/ringside-dashboard.json")))
        let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(dashboard["title"] as? String == "Ringside")
        let variables = try #require((dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]])
        let datasource = try #require(variables.first { $0["type"] as? String == "datasource" })
        #expect(datasource["name"] as? String == "DS_PROMETHEUS" && datasource["query"] as? String == "prometheus")
        for variable in ["instance", "ring", "metric", "size", "value", "gauge", "window"] {
            #expect(variables.contains { $0["name"] as? String == variable }, "variable \(variable) missing")
        }

        let panels = try #require(dashboard["panels"] as? [[String: Any]]).filter { $0["type"] as? String != "row" }
        var titles: [String] = []
        var expressions: [String] = []
        for panel in panels {
            titles.append(panel["title"] as? String ?? "")
            #expect(
                (panel["datasource"] as? [String: Any])?["uid"] as? String == "${DS_PROMETHEUS}",
                "panel \(panel["title"] ?? "?") does not use the data source variable")
            let targets = try #require(panel["targets"] as? [[String: Any]], "panel \(panel["title"] ?? "?") has no targets")
            for target in targets {
                expressions.append(try #require(target["expr"] as? String))
                #expect((target["datasource"] as? [String: Any])?["uid"] as? String == "${DS_PROMETHEUS}")
            }
        }
        // A stat panel per gauge picked, and SLOs and captures as annotations.
        #expect(panels.contains { $0["type"] as? String == "stat" && $0["repeat"] as? String == "gauge" })
        let annotations = try #require((dashboard["annotations"] as? [String: Any])?["list"] as? [[String: Any]])
        let annotationQueries = annotations.compactMap { $0["expr"] as? String }.joined(separator: "\n")
        for needed in ["ringside_slo_violated", "ringside_slo_violations_total", "ringside_captures_total"] {
            #expect(annotationQueries.contains(needed), "no annotation reads \(needed)")
        }
        // The views users asked for.
        let joined = expressions.joined(separator: "\n")
        for needed in [
            #"quantile="0.5""#, #"quantile="0.99""#, #"quantile="0.999""#, "_rate", "ringside_ring_records_dropped_total",
            "ringside_lane_backlog_records", "ringside_ring_producer_alive", "ringside_slo_violated",
            // Availability, gauges, workers and thread health (issue 40).
            "ringside:slo_availability:ratio30d", "${gauge}_window_min", #"worker!="""#, "ringside_thread_cpu_seconds_total",
            "ringside_thread_runqueue_wait_seconds_total", "ringside_bot_process_resident_memory_bytes",
            // Every histogram kind, gauges' units (issue 67).
            "${size}_windowed_bytes", "${size}_bytes_bucket", "${value}_windowed", "${value}_bucket",
            #"${gauge}_window_min(_seconds|_bytes)?"#,
        ] {
            #expect(joined.contains(needed), "no panel queries \(needed)")
        }

        let exported = try Self.exportedNames()
        let rulesText = try String(contentsOfFile: kitFile("tools/prometheus/ringside-rules.yml"), encoding: .utf8)
        let allowed = exported.union(recordingRuleNames(inRulesFile: rulesText)).union(["up"])
        for expression in expressions {
            let concrete = Self.substituteVariables(expression)
            let (names, patterns) = selectedMetricNames(in: concrete)
            #expect(!names.isEmpty || !patterns.isEmpty, "no metric found in \(expression)")
            for name in names {
                #expect(allowed.contains(name), "\(name) is not exported (in \(expression))")
            }
            for pattern in patterns {
                let regex = try NSRegularExpression(pattern: "^(?:\(pattern))$")
                let matches = allowed.filter { regex.firstMatch(in: $0, range: NSRange($0.startIndex..., in: $0)) != nil }
                #expect(!matches.isEmpty, "__name__ pattern \(pattern) matches nothing exported (in \(expression))")
            }
        }
    }

    @Test("every metric the rules query is one the collector exports (or a recording rule)")
    func rulesQueryExportedMetrics() throws {
        let text = try String(contentsOfFile: kitFile("tools/prometheus/ringside-rules.yml"), encoding: .utf8)
        let allowed = try Self.exportedNames().union(recordingRuleNames(inRulesFile: text)).union(["up"])
        let expressions = ruleExpressions(inRulesFile: text)
        #expect(expressions.count >= 14)
        for expression in expressions {
            let (names, _) = selectedMetricNames(in: expression)
            #expect(!names.isEmpty, "no metric found in \(expression)")
            for name in names { #expect(allowed.contains(name), "\(name) is not exported (in \(expression))") }
        }
    }

    /// Grafana is not packaged by Debian nor PyPI, so the provisioning files are read here as
    /// Grafana reads them: their keys, and the paths they name, agreeing with each other.
    @Test("the provisioning files give a default Prometheus data source and a file provider of the folder the dashboard is installed in")
    func provisioningFiles() throws {
        func settings(_ path: String) throws -> [String: String] {
            let text = try String(contentsOfFile: kitFile(path), encoding: .utf8)
            var found: [String: String] = [:]
            for line in text.split(separator: "\n") where !line.trimmingCharacters(in: .whitespaces).hasPrefix("#") {
                let parts = line.trimmingCharacters(in: .whitespaces).drop { $0 == "-" || $0 == " " }.split(separator: ":", maxSplits: 1)
                // The first of a key: the data source's own, before its exemplar destinations' `name` and `url`.
                if parts.count == 2, found[String(parts[0])] == nil {
                    found[String(parts[0])] = parts[1].trimmingCharacters(in: .whitespaces)
                }
            }
            return found
        }
        let source = try settings("tools/grafana/provisioning/datasources/ringside.yml")
        #expect(source["apiVersion"] == "1" && source["type"] == "prometheus" && source["isDefault"] == "true")
        #expect(source["url"] == "http://127.0.0.1:9090" && source["timeInterval"] == "5s")
        // Exemplars link to the trace UI of RINGSIDE_TRACE_URL (grafana-server's environment), `$$` a literal `$`.
        let sourceText = try String(contentsOfFile: kitFile("tools/grafana/provisioning/datasources/ringside.yml"), encoding: .utf8)
        #expect(
            sourceText.contains(
                "exemplarTraceIdDestinations:\n        - name: order_id\n          url: ${RINGSIDE_TRACE_URL}$${__value.raw}\n"))
        let provider = try settings("tools/grafana/provisioning/dashboards/ringside.yml")
        #expect(provider["apiVersion"] == "1" && provider["type"] == "file")
        let folder = try #require(provider["path"])
        // Where the install line puts the dashboard is the folder the provider watches.
        let text = try String(contentsOfFile: kitFile("tools/grafana/provisioning/datasources/ringside.yml"), encoding: .utf8)
        #expect(text.contains("tools/grafana/ringside-dashboard.json \(folder)/ringside-dashboard.json"))
        // The dashboard's data source variable has no fixed choice: Grafana takes the default one.
        let data = try Data(contentsOf: URL(fileURLWithPath: kitFile("tools/grafana/ringside-dashboard.json")))
        let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let variables = try #require((dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]])
        let datasource = try #require(variables.first { $0["type"] as? String == "datasource" })
        #expect(datasource["current"] == nil || (datasource["current"] as? [String: Any])?.isEmpty == true)
    }

    @Test("the metric-name scanner finds names and skips functions, labels, ranges and groupings")
    func scannerFindsNames() {
        let (names, patterns) = selectedMetricNames(
            in:
                #"histogram_quantile(0.99, sum by (le, ring) (rate(a_seconds_bucket{ring=~"x|y"}[5m]))) / on (ring) b_total > 1e-4"#)
        #expect(names == ["a_seconds_bucket", "b_total"])
        #expect(patterns.isEmpty)
        let named = selectedMetricNames(in: #"{__name__=~".+_rate", window="1m"} + {__name__="c_d"}"#)
        #expect(named.names.isEmpty && named.patterns == [".+_rate", "c_d"])
    }
}
