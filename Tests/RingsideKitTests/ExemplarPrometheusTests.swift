import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RingsideTestSupport
import Testing

extension PrometheusServer {
    /// `/api/v1/query_exemplars` over [start, end] (Unix seconds): each series' labels and exemplars.
    func exemplars(_ promql: String, start: Double, end: Double) throws -> [(series: [String: String], exemplars: [[String: Any]])] {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let encoded = promql.addingPercentEncoding(withAllowedCharacters: allowed)!
        let response = try httpGet(port: port, path: "/api/v1/query_exemplars?query=\(encoded)&start=\(start)&end=\(end)")
        let document = try jsonObject(response.body)
        guard response.status == 200, document["status"] as? String == "success", let data = document["data"] as? [[String: Any]] else {
            throw TestSupportError("query_exemplars \(promql): HTTP \(response.status): \(response.body.prefix(500))")
        }
        return data.map { (($0["seriesLabels"] as? [String: String]) ?? [:], ($0["exemplars"] as? [[String: Any]]) ?? []) }
    }
}

/// How Prometheus 2.42 is run against the collector, and where it then keeps exemplars.
struct ExemplarSetup: Sendable, CustomTestStringConvertible {
    let name: String
    let collectorArguments: [String]
    let features: String
    /// With native histograms Prometheus keeps the family's native form, and its exemplars on it.
    let native: Bool

    var testDescription: String { name }

    static let all = [
        ExemplarSetup(
            name: "OpenMetrics (--enable-feature=exemplar-storage; the kit's configuration)", collectorArguments: [],
            features: "exemplar-storage", native: false),
        ExemplarSetup(
            name: "protobuf, native histograms (--native-histograms 5; exemplar-storage,native-histograms)",
            collectorArguments: ["--native-histograms", "5"], features: "exemplar-storage,native-histograms", native: true),
        ExemplarSetup(
            name: "protobuf, classic buckets (exemplar-storage,native-histograms; a collector without --native-histograms)",
            collectorArguments: [], features: "exemplar-storage,native-histograms", native: false),
    ]
}

@Suite("exemplars: a slow value's order id, from a bot to a real Prometheus's query_exemplars")
struct ExemplarPrometheusTests {
    /// A bot (ringside-emit) writes 1,000 fills of 10 us to 10 ms, then one of 250 ms with an
    /// order id no other run uses; the collector drains them and Prometheus 2.42 scrapes it every
    /// second. `query_exemplars` must give that order id, with the value in seconds and the time
    /// it was recorded.
    @Test("query_exemplars returns the slow value's order id and value", .timeLimit(.minutes(3)), arguments: ExemplarSetup.all)
    func slowValueReachesPrometheus(_ setup: ExemplarSetup) throws {
        guard let prometheusPath = try requiredSystemTool("prometheus") else { return }
        try withRingDirectory { directory in
            let orderID = "T\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            let emit = ["--dir", directory.path, "--ring", "bot", "order_fill_latency", "--unit", "ns", "--label", "symbol=AAPL"]
            let fast = try runProcess("ringside-emit", emit + (1...1_000).map { String($0 * 10_000) })
            try #require(fast.status == 0, "\(fast.errors)")
            let before = Date().timeIntervalSince1970
            let slow = try runProcess("ringside-emit", emit + ["--exemplar", "order_id=\(orderID)", "250000000"])
            let after = Date().timeIntervalSince1970
            try #require(slow.status == 0, "\(slow.errors)")

            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms"] + setup.collectorArguments)
            defer { collector.kill() }
            let prometheus = try PrometheusServer(
                executable: prometheusPath, config: kitPrometheusConfig([("127.0.0.1:\(port)", [:])]),
                arguments: ["--enable-feature=" + setup.features])
            defer { prometheus.stop() }

            // Exemplars live on the bucket series; a native histogram's on the histogram itself.
            let query = setup.native ? "order_fill_latency_seconds" : "order_fill_latency_seconds_bucket"
            let found = try eventually(seconds: 30) { () -> (series: [String: String], exemplar: [String: Any])? in
                for entry in try prometheus.exemplars(query, start: before - 60, end: after + 600) {
                    if let exemplar = entry.exemplars.first(where: { ($0["labels"] as? [String: String])?["order_id"] == orderID }) {
                        return (entry.series, exemplar)
                    }
                }
                return nil
            }
            let (series, exemplar) = try #require(found, "no exemplar with order_id=\(orderID) in query_exemplars(\(query)) within 30 s")
            #expect(exemplar["labels"] as? [String: String] == ["order_id": orderID])
            #expect((exemplar["value"] as? String).flatMap(Double.init) == 0.25, "250 ms, in seconds: \(exemplar)")
            // Its time is when the bot recorded it (Prometheus keeps milliseconds).
            let time = try #require(exemplar["timestamp"] as? Double)
            #expect(time >= (before * 1000).rounded(.down) / 1000 && time <= after, "recorded in [\(before), \(after)], stamped \(time)")
            #expect(series["ring"] == "bot" && series["symbol"] == "AAPL" && series["job"] == "ringside", "\(series)")
            #expect(series["le"] == (setup.native ? nil : "0.5"), "the bucket holding 0.25 s: \(series)")

            // The form Prometheus kept tells which format it scraped: native buckets only come in protobuf.
            let countQuery = setup.native ? "histogram_count(order_fill_latency_seconds)" : #"order_fill_latency_seconds_bucket{le="0.5"}"#
            let count = try prometheus.scalarOnceScraped(countQuery)
            let up = try prometheus.scalar("up")
            #expect(count == 1_001, "\(countQuery) within 30 s: \(String(describing: count)); up: \(String(describing: up))")
            if setup.native {
                #expect(try prometheus.query("order_fill_latency_seconds_bucket").isEmpty)
            }
        }
    }
}
