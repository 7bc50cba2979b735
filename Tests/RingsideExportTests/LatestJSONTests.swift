import Foundation
import Ringside
import RingsideJSON
@testable import RingsideExport
import Testing

@Suite("/latest's JSON: integers exact, strings escaped by the one JSON escaper")
struct LatestJSONTests {
    /// 2^53 + 1: the first integer a `Double` cannot hold (it would print 9007199254740992).
    static let pastDouble: UInt64 = 9_007_199_254_740_993

    @Test("counts past 2^53 keep every digit: ring totals, lane totals, window counts and maxima")
    func integersAreExact() {
        var snapshot = Snapshot()
        snapshot.windowNanos = [1_000_000_000]
        snapshot.quantiles = [0.5]
        var ring = RingSnapshot(name: "bot", state: .live)
        ring.recordsTotal = Self.pastDouble
        ring.lanes = [LaneSnapshot(index: 0, state: .active, threadID: 7, backlog: 0, recordsTotal: Self.pastDouble + 2,
                                   consumedTotal: Self.pastDouble, droppedTotal: 0, heartbeatAgeSeconds: 0)]
        snapshot.rings = [ring]
        let metric = MetricDescriptor(index: 0, name: "latency", kind: .histogram, unit: .nanoseconds, encodedLabels: "", help: "",
                                      sampleEvery: 1)
        var stats = WindowStats()
        stats.count = Self.pastDouble + 4
        stats.max = UInt64.max
        stats.quantileValues = [Self.pastDouble + 6]
        snapshot.series = [SeriesSnapshot(ring: "bot", metric: metric, id: 1, windows: [stats])]

        let text = String(decoding: JSONExporter.latest(snapshot), as: UTF8.self)
        for expected in ["\"records_total\":9007199254740993", "\"records_total\":9007199254740995",
                         "\"consumed_total\":9007199254740993", "\"count\":9007199254740997",
                         "\"max\":18446744073709551615", "\"p50\":9007199254740999"] {
            #expect(text.contains(expected), "\(expected) not in \(text)")
        }
    }

    @Test("label values and names with quotes, backslashes and control bytes read back as written")
    func stringsAreEscaped() throws {
        // (A label value holds no newline: the registry separates labels with them.)
        let awkward = "a\"b\\c\td\u{1}e\rf é"
        var snapshot = Snapshot()
        snapshot.windowNanos = [1_000_000_000]
        let metric = MetricDescriptor(index: 0, name: "orders", kind: .counter, unit: .none, encodedLabels: "venue=\(awkward)", help: "",
                                      sampleEvery: 1)
        snapshot.series = [SeriesSnapshot(ring: "bot", metric: metric, id: 1, windows: [WindowStats()])]
        let bytes = JSONExporter.latest(snapshot)
        #expect(String(decoding: bytes, as: UTF8.self).contains(#""venue":"a\"b\\c\td\u0001e\rf é""#))
        let document = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        let series = try #require((document["series"] as? [[String: Any]])?.first)
        #expect((series["labels"] as? [String: String])?["venue"] == awkward)
        // The tools' JSON writes the same string the same way.
        #expect(JSON.object([("venue", .string(awkward))]).text.contains(#""a\"b\\c\td\u0001e\rf é""#))
    }
}
