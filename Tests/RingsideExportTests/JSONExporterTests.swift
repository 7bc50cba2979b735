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
        let metric = MetricDescriptor(index: 0, name: "latency", kind: .histogram, unit: .nanoseconds, encodedLabels: "",
                                      help: "", sampleEvery: 1)
        var stats = WindowStats()
        stats.count = Self.pastDouble
        stats.max = Self.pastDouble + 2
        stats.quantileValues = [Self.pastDouble + 4]
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
        for (key, value) in [("count", 0), ("max", 2), ("p50", 4), ("total_count", 8), ("dropped_records", 10),
                             ("records_total", 12), ("dropped_total", 14), ("records_drained", 16)] {
            #expect(latest.contains("\"\(key)\":\(Self.pastDouble + UInt64(value))"), "\(key) in \(latest)")
        }
        #expect(!latest.contains("9007199254740992"))
        #expect(try JSONSerialization.jsonObject(with: Data(latest.utf8)) is [String: Any])

        let health = String(decoding: JSONExporter.health(snapshot, isHealthy: true, lastPassAgeSeconds: 0.5), as: UTF8.self)
        #expect(health.contains("\"dropped_total\":\(Self.pastDouble + 14)"))
    }

    @Test("label values with quotes, backslashes and control bytes read back as written, in /latest and the tools' JSON")
    func stringsAreEscaped() throws {
        // (A label value holds no newline: the registry separates labels with them.)
        let awkward = "a\"b\\c\td\u{1}e\rf é"
        var snapshot = Snapshot()
        snapshot.windowNanos = [1_000_000_000]
        let metric = MetricDescriptor(index: 0, name: "orders", kind: .counter, unit: .none, encodedLabels: "venue=\(awkward)", help: "",
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
}
