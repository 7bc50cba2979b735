import CRingside
import Foundation
import Ringside
@testable import RingsideCollector
@testable import RingsideExport
import RingsideSnapshot
import RingsideHTTP
import RingsideTestSupport
import Testing

/// A snapshot with one series of each kind, labels that need escaping, an SLO and a skipped ring.
private func richSnapshot(_ directory: RingDirectory) throws -> (Snapshot, Collector) {
    let bot = try Bot.attach("bot-a", directory: directory.path, options: .init(laneCapacity: 4096))
    let fill = try bot.histogram(
        "order_fill_latency", unit: .nanoseconds, labels: ["symbol": #"A"P\L"#, "ring": "inner"],
        help: "Fill latency\nwith a second line and a \\ backslash")
    let sizes = try bot.histogram("order_size", unit: .bytes)
    let orders = try bot.counter("orders_total", labels: ["side": "buy"])
    let exposure = try bot.gauge("gross_exposure")
    let age = try bot.gauge("quote_age", unit: .microseconds)
    for value in stride(from: 1_000, to: 2_000_000, by: 997) { fill.record(UInt64(value)) }
    for value in 1...100 { sizes.record(UInt64(value * 100)) }
    orders.increment(by: 7)
    exposure.set(1.25e6)
    age.set(150)
    _ = try Bot.attach("bot-b", directory: directory.path, options: .init(laneCapacity: 16))
    let collector = try makeCollector(directory, slo: [#"order_fill_latency:p99<100us@1m"#], captured: CapturedLog())
    return (pass(collector), collector)
}

@Suite("Exporters: Prometheus text, /latest JSON, /health")
struct ExporterTests {
    @Test("promtool check metrics reports nothing on real output")
    func promtoolAcceptsMetrics() throws {
        try withRingDirectory { directory in
            let (snapshot, _) = try richSnapshot(directory)
            guard let check = try promtoolCheckMetrics(String(decoding: PrometheusExporter.render(snapshot), as: UTF8.self)) else { return }
            #expect(check.status == 0, "promtool: \(check.report)")
            #expect(check.report.isEmpty, "promtool: \(check.report)")
        }
    }

    @Test("Prometheus names use base units, counters end in _total, labels and help are escaped")
    func prometheusConventions() throws {
        try withRingDirectory { directory in
            let text = String(decoding: PrometheusExporter.render(try richSnapshot(directory).0), as: UTF8.self)
            #expect(text.contains("# TYPE order_fill_latency_seconds histogram"))
            #expect(text.contains("# TYPE order_fill_latency_windowed_seconds summary"))
            #expect(text.contains(#"order_fill_latency_seconds_bucket{ring="bot-a",exported_ring="inner",symbol="A\"P\\L",le="0.0001"}"#))
            #expect(
                text.contains(
                    #"order_fill_latency_windowed_seconds{ring="bot-a",exported_ring="inner",symbol="A\"P\\L",window="1m",quantile="0.99"}"#
                ))
            #expect(text.contains("# HELP order_fill_latency_seconds Fill latency\\nwith a second line and a \\\\ backslash"))
            #expect(text.contains("# TYPE order_size_bytes histogram"))
            #expect(text.contains(#"orders_total{ring="bot-a",side="buy"} 7"#))
            #expect(!text.contains("orders_total_total"))
            #expect(text.contains(#"gross_exposure{ring="bot-a"} 1250000"#))
            #expect(text.contains(#"quote_age_seconds{ring="bot-a"} 0.00015"#))
            #expect(text.contains(#"ringside_ring_producer_alive{ring="bot-a"} 1"#))
            // Every family has HELP and TYPE.
            let helps = text.split(separator: "\n").filter { $0.hasPrefix("# HELP") }.count
            let types = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE") }.count
            #expect(helps == types && types > 20)
        }
    }

    @Test("/latest has the documented shape")
    func latestShape() throws {
        try withRingDirectory { directory in
            let json = try JSONSerialization.jsonObject(with: Data(JSONExporter.latest(try richSnapshot(directory).0)))
            let document = try #require(json as? [String: Any])
            let series = try #require(document["series"] as? [[String: Any]])
            let fill = try #require(series.first { $0["metric"] as? String == "order_fill_latency" })
            #expect(fill["ring"] as? String == "bot-a" && fill["kind"] as? String == "histogram" && fill["unit"] as? String == "ns")
            #expect((fill["labels"] as? [String: String])?["symbol"] == #"A"P\L"#)
            let windows = try #require(fill["windows"] as? [String: [String: Any]])
            #expect(Set(windows.keys) == ["1s", "5s", "1m"])
            #expect(Set(windows["1s"]!.keys) == ["count", "sum", "min", "max", "mean", "p50", "p90", "p95", "p99", "p999"])
            #expect(windows["1m"]!["count"] as? Int == 2006)
            let counter = try #require(series.first { $0["metric"] as? String == "orders_total" })
            let counterWindow = try #require((counter["windows"] as? [String: [String: Any]])?["1s"])
            #expect(counterWindow["total"] as? Int == 7 && counterWindow["rate"] != nil)
            let gauge = try #require(series.first { $0["metric"] as? String == "gross_exposure" })
            let gaugeWindow = try #require((gauge["windows"] as? [String: [String: Any]])?["5s"])
            #expect(gaugeWindow["value"] as? Int == 1_250_000 && gaugeWindow["min"] != nil && gaugeWindow["max"] != nil)
            let rings = try #require(document["rings"] as? [[String: Any]])
            let ring = try #require(rings.first { $0["name"] as? String == "bot-a" })
            for key in [
                "producer_pid", "alive", "capacity", "backlog", "records_total", "dropped_total", "rejected_total",
                "series_refused", "records_refused_total", "quarantined", "quarantines_total", "state", "lanes",
            ] {
                #expect(ring[key] != nil, "rings[].\(key)")
            }
            #expect(ring["quarantined"] as? Bool == false && ring["series_refused"] as? Int == 0)
            // /health: each ring once, each key once (a repeated key would be silently merged by a parser).
            let snapshot = try richSnapshot(directory).0
            let health = String(
                decoding: JSONExporter.health(snapshot, isHealthy: true, lastPassAgeSeconds: 0, snapshotAgeSeconds: 0), as: UTF8.self)
            for key in ["\"name\"", "\"state\"", "\"problem\"", "\"quarantined\""] {
                #expect(health.components(separatedBy: key).count - 1 == snapshot.rings.count, "\(key) once per ring in \(health)")
            }
            #expect(ring["alive"] as? Bool == true && ring["capacity"] as? Int == 4096)
            #expect((document["slos"] as? [[String: Any]])?.count == 1)
        }
    }

    @Test("/health is 503 before the drain loop has run and 200 once it makes progress; unknown paths are 404")
    func healthAndRoutes() throws {
        try withRingDirectory { directory in
            let collector = try makeCollector(directory, captured: CapturedLog())
            let endpoints = CollectorEndpoints(collector: collector)
            func get(_ path: String) -> HTTPResponse {
                endpoints.handle(HTTPRequest(method: "GET", target: path, path: path, query: nil, minorVersion: 1, headers: []))
            }
            #expect(get("/health").status == 503)
            pass(collector)
            let health = get("/health")
            #expect(health.status == 200)
            #expect(String(decoding: health.body, as: UTF8.self).contains(#""status":"ok""#))
            #expect(get("/").status == 200 && get("/metrics").status == 200 && get("/latest").status == 200)
            #expect(get("/nope").status == 404)
        }
    }

    /// Publishing is spaced to ten times its cost, so with many busy series snapshots can be
    /// seconds apart while the drain loop runs pass after pass: `/health` follows the passes.
    @Test("/health follows the drain loop's passes, not the last snapshot, which may be seconds old")
    func healthFollowsPasses() throws {
        try withRingDirectory { directory in
            let collector = try makeCollector(directory, captured: CapturedLog())
            let endpoints = CollectorEndpoints(collector: collector)
            let health = {
                endpoints.handle(
                    HTTPRequest(
                        method: "GET", target: "/health", path: "/health", query: nil,
                        minorVersion: 1, headers: []))
            }
            let start = rs_clock_precise_ns()
            collector.runPass(nowNanos: start, forcePublish: true)
            usleep(2_300_000)  // longer than the 2 s stall bound
            // A pass at the same (stepped) time: nothing is due, so nothing is published.
            let generation = collector.snapshot.generation
            collector.runPass(nowNanos: start)
            #expect(collector.snapshot.generation == generation, "no snapshot was published")
            #expect(health().status == 200, "the loop just made a pass")
            let body = String(decoding: health().body, as: UTF8.self)
            #expect(body.contains(#""status":"ok""#), "\(body)")
        }
    }
}
