import Foundation
import Ringside
import RingsideExport
import RingsideJSON
import RingsideSnapshot
import Testing

@Suite("The collector's JSON: counts, nanoseconds and ids exactly")
struct JSONExporterTests {
    /// 2^53 + 1: the first whole number a Double cannot hold (it rounds to 2^53).
    static let pastDouble: UInt64 = 9_007_199_254_740_993

    @Test("/latest and /health write a UInt64 above 2^53 with all its digits, where a Double would round it")
    func integersPastDoubleStayExact() throws {
        var snapshot = Snapshot()
        snapshot.windowNanos = [1_000_000_000]
        snapshot.quantiles = [0.5]
        let metric = MetricDescriptor(
            index: 0, name: "latency", kind: .histogram, unit: .nanoseconds, encodedLabels: "",
            help: "", sampleEvery: 1)
        var stats = WindowStats()
        stats.count = Self.pastDouble
        stats.max = Int128(Self.pastDouble + 2)
        stats.quantileValues = [Int128(Self.pastDouble + 4)]
        var series = SeriesSnapshot(ring: "bot", metric: metric, id: Self.pastDouble + 6, windows: [stats])
        series.cumulativeCount = Self.pastDouble + 8
        series.droppedRecords = Self.pastDouble + 10
        snapshot.series = [series]
        var ring = RingSnapshot(name: "bot", state: .live)
        ring.recordsTotal = Self.pastDouble + 12
        ring.droppedTotal = Self.pastDouble + 14
        snapshot.rings = [ring]
        snapshot.collector.recordsDrained = Self.pastDouble + 16

        let latest = String(decoding: JSONExporter.latest(snapshot), as: UTF8.self)
        for (key, value) in [
            ("count", 0), ("max", 2), ("p50", 4), ("total_count", 8), ("dropped_records", 10),
            ("records_total", 12), ("dropped_total", 14), ("records_drained", 16),
        ] {
            #expect(latest.contains("\"\(key)\":\(Self.pastDouble + UInt64(value))"), "\(key) in \(latest)")
        }
        #expect(!latest.contains("9007199254740992"))
        #expect(try JSONSerialization.jsonObject(with: Data(latest.utf8)) is [String: Any])

        let health = String(
            decoding: JSONExporter.health(snapshot, isHealthy: true, lastPassAgeSeconds: 0.5, snapshotAgeSeconds: 1.25), as: UTF8.self)
        #expect(health.contains("\"dropped_total\":\(Self.pastDouble + 14)"))
        #expect(health.contains("\"snapshot_age_seconds\":1.25"))
    }

    @Test("label values with quotes, backslashes and control bytes read back as written, in /latest and the tools' JSON")
    func stringsAreEscaped() throws {
        // (A label value holds no newline: the registry separates labels with them.)
        let awkward = "a\"b\\c\td\u{1}e\rf é"
        var snapshot = Snapshot()
        snapshot.windowNanos = [1_000_000_000]
        let metric = MetricDescriptor(
            index: 0, name: "orders", kind: .counter, unit: .none, encodedLabels: "venue=\(awkward)", help: "",
            sampleEvery: 1)
        snapshot.series = [SeriesSnapshot(ring: "bot", metric: metric, id: 1, windows: [WindowStats()])]
        let bytes = JSONExporter.latest(snapshot)
        let escaped = #""a\"b\\c\td\u0001e\rf é""#
        #expect(String(decoding: bytes, as: UTF8.self).contains(#""venue":"# + escaped))
        let document = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        let series = try #require((document["series"] as? [[String: Any]])?.first)
        #expect((series["labels"] as? [String: String])?["venue"] == awkward)
        #expect(JSON.object([("venue", .string(awkward))]).text == #"{"venue":"# + escaped + "}")
    }

    @Test("/latest writes a gauge set to NaN or an infinity as Prometheus' HTTP API does (\"NaN\", \"+Inf\", \"-Inf\"), never set as null")
    func nonFiniteGauges() throws {
        var snapshot = Snapshot()
        snapshot.windowNanos = [1_000_000_000]
        func gauge(_ name: String, id: UInt64, value: Double?, low: Double?, high: Double?) -> SeriesSnapshot {
            let metric = MetricDescriptor(index: 0, name: name, kind: .gauge, unit: .none, encodedLabels: "", help: "", sampleEvery: 1)
            var window = WindowStats()
            window.gaugeMin = low
            window.gaugeMax = high
            var series = SeriesSnapshot(ring: "bot", metric: metric, id: id, windows: [window])
            series.lastValue = value
            return series
        }
        snapshot.series = [
            gauge("not_a_number", id: 1, value: .nan, low: nil, high: nil),
            gauge("unbounded", id: 2, value: .infinity, low: -.infinity, high: .infinity),
            gauge("never_set", id: 3, value: nil, low: nil, high: nil),
            gauge("plain", id: 4, value: 2.5, low: -1, high: 3),
        ]
        let text = String(decoding: JSONExporter.latest(snapshot), as: UTF8.self)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let series = try #require(document["series"] as? [[String: Any]])
        /// The gauge's value, and its window's value, min and max: a string as it is, a number as a Double, null as "null".
        func figures(_ name: String) throws -> [String] {
            let entry = try #require(series.first { $0["metric"] as? String == name })
            let window = try #require((entry["windows"] as? [String: [String: Any]])?["1s"])
            return [entry["value"], window["value"], window["min"], window["max"]].map { value in
                switch value {
                case let text as String: text
                case let number as NSNumber: "\(number.doubleValue)"
                case is NSNull: "null"
                default: "missing"
                }
            }
        }
        #expect(try figures("not_a_number") == ["NaN", "NaN", "null", "null"])
        #expect(try figures("unbounded") == ["+Inf", "+Inf", "-Inf", "+Inf"])
        #expect(try figures("never_set") == ["null", "null", "null", "null"])
        #expect(try figures("plain") == ["2.5", "2.5", "-1.0", "3.0"])
        #expect(
            text.contains(#""metric":"unbounded","kind":"gauge","unit":"none","labels":{},"sample_every":1,"enabled":true,"value":"+Inf""#))
        #expect(text.contains(#""1s":{"value":"+Inf","min":"-Inf","max":"+Inf"}"#))
    }
}
