import Foundation
import Ringside
@testable import RingsideCollector
import RingsideSnapshot
import Testing

/// Hand-built snapshots for the history, recorded into `store`: one builder keeps the generation.
private struct SnapshotBuilder {
    let store: HistoryStore
    var generation: UInt64 = 0
    static let quantiles = [0.5, 0.9, 0.99, 0.999]

    init(recordingInto store: HistoryStore) { self.store = store }

    static func metric(_ name: String, _ kind: MetricKind, labels: String = "") -> MetricDescriptor {
        MetricDescriptor(index: 0, name: name, kind: kind, unit: .nanoseconds, encodedLabels: labels, help: "", sampleEvery: 1)
    }

    /// A histogram series with this all-time count, and a 1 s window of `windowCount` values up to `max`.
    static func histogram(
        id: UInt64, ring: String = "bot", name: String = "latency", labels: String = "",
        total: UInt64, windowCount: UInt64 = 1, quantiles: [UInt64] = [10, 20, 30, 40], max: UInt64 = 50
    ) -> SeriesSnapshot {
        var window = WindowStats()
        window.count = windowCount
        window.quantileValues = quantiles.map { Int128($0) }
        window.max = Int128(max)
        var series = SeriesSnapshot(ring: ring, metric: metric(name, .histogram, labels: labels), id: id, windows: [window, WindowStats()])
        series.cumulativeCount = total
        return series
    }

    static func counter(id: UInt64, total: UInt128) -> SeriesSnapshot {
        var series = SeriesSnapshot(ring: "bot", metric: metric("orders", .counter), id: id, windows: [WindowStats(), WindowStats()])
        series.cumulativeExactSum = total
        return series
    }

    static func gauge(id: UInt64, value: Double?, low: Double? = nil, high: Double? = nil) -> SeriesSnapshot {
        var window = WindowStats()
        window.gaugeMin = low
        window.gaugeMax = high
        var series = SeriesSnapshot(ring: "bot", metric: metric("level", .gauge), id: id, windows: [window, WindowStats()])
        series.lastValue = value
        return series
    }

    /// A snapshot made at `seconds` (Unix, plus `fraction` of a second) holding `series`.
    mutating func make(at seconds: UInt64, fraction: Double = 0.25, _ series: [SeriesSnapshot]) -> Snapshot {
        generation += 1
        var snapshot = Snapshot()
        snapshot.generation = generation
        snapshot.generatedRealtimeNanos = seconds * 1_000_000_000 + UInt64(fraction * 1e9)
        snapshot.windowNanos = [1_000_000_000, 60_000_000_000]
        snapshot.quantiles = Self.quantiles
        snapshot.series = SeriesList(series)
        return snapshot
    }

    /// Records into the store the snapshot `make` makes.
    mutating func record(at seconds: UInt64, fraction: Double = 0.25, _ series: [SeriesSnapshot]) {
        store.record(make(at: seconds, fraction: fraction, series))
    }
}

private let t0: UInt64 = 1_800_000_000

/// The rows of one series, as arrays.
private func rows(_ series: HistoryAnswer.Series) -> [[UInt64]] {
    let width = HistoryAnswer.columns(series.metric.kind).count
    return stride(from: 0, to: series.points.count, by: width).map { Array(series.points[$0..<($0 + width)]) }
}

private func everything(from: UInt64 = t0 - 10, to: UInt64 = t0 + 100_000, step: Int = 1) -> HistoryQuery {
    var query = HistoryQuery(from: Int64(from), to: Int64(to))
    query.step = step
    return query
}

@Suite("HistoryStore: per-second history in bounded memory")
struct HistoryStoreTests {
    @Test("points land on whole seconds; counts are increases of the all-time count; several snapshots in a second add up")
    func pointsAndCounts() throws {
        let store = HistoryStore(retentionSeconds: 60, maxSeries: 10)
        var builder = SnapshotBuilder(recordingInto: store)
        builder.record(at: t0, fraction: 0.1, [SnapshotBuilder.histogram(id: 1, total: 100, max: 70)])
        builder.record(at: t0, fraction: 0.9, [SnapshotBuilder.histogram(id: 1, total: 130, quantiles: [11, 21, 31, 41], max: 60)])
        builder.record(at: t0 + 1, [SnapshotBuilder.histogram(id: 1, total: 200)])
        let answer = store.query(everything())
        #expect(answer.series.count == 1)
        let points = rows(try #require(answer.series.first))
        // t, count, p50, p99, p999 (0.5, 0.99, 0.999 of the quantiles), max (the largest of the second).
        #expect(points == [[t0, 130, 11, 31, 41, 70], [t0 + 1, 70, 10, 30, 40, 50]])
        #expect(points.map { $0[1] }.reduce(0, +) == 200)
        // The same generation again changes nothing.
        var repeated = builder.make(at: t0 + 1, [SnapshotBuilder.histogram(id: 1, total: 500)])
        repeated.generation = builder.generation - 1
        store.record(repeated)
        #expect(rows(store.query(everything()).series[0]).map { $0[1] }.reduce(0, +) == 200)
    }

    @Test("a second with no snapshot is a gap, not a repeated value; an empty window gives null quantiles")
    func gaps() throws {
        let store = HistoryStore(retentionSeconds: 60, maxSeries: 10)
        var builder = SnapshotBuilder(recordingInto: store)
        builder.record(at: t0, [SnapshotBuilder.histogram(id: 1, total: 5)])
        builder.record(at: t0 + 3, [SnapshotBuilder.histogram(id: 1, total: 9, windowCount: 0)])
        let series = try #require(store.query(everything()).series.first)
        #expect(rows(series) == [[t0, 5, 10, 30, 40, 50], [t0 + 3, 4, .max, .max, .max, .max]])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(store.query(everything()).json)) as? [String: Any])
        let points = try #require((json["series"] as? [[String: Any]])?.first?["points"] as? [[Any]])
        #expect(points.count == 2)
        #expect(points[1][2] is NSNull)
    }

    @Test("the buffer wraps at the retention: older seconds are gone, the newest stay")
    func wraps() throws {
        let store = HistoryStore(retentionSeconds: 10, maxSeries: 10)
        #expect(store.maxBytesPerSeries >= 10 * HistoryBlock.maxPointBytes(.histogram))
        var builder = SnapshotBuilder(recordingInto: store)
        for second in 0..<25 {
            builder.record(at: t0 + UInt64(second), [SnapshotBuilder.histogram(id: 1, total: UInt64(second + 1) * 10)])
        }
        let points = rows(try #require(store.query(everything()).series.first))
        #expect(points.map { $0[0] } == (15..<25).map { t0 + UInt64($0) })
        #expect(points.allSatisfy { $0[1] == 10 })
        // A range before the buffer holds nothing.
        #expect(store.query(everything(from: t0, to: t0 + 14)).series.isEmpty)
    }

    @Test("counters keep the increase and the total; gauges the last value and the extremes")
    func countersAndGauges() throws {
        let store = HistoryStore(retentionSeconds: 60, maxSeries: 10)
        var builder = SnapshotBuilder(recordingInto: store)
        builder.record(
            at: t0, fraction: 0.1,
            [
                SnapshotBuilder.counter(id: 1, total: 7),
                SnapshotBuilder.gauge(id: 2, value: 3.5, low: 1, high: 4),
            ])
        builder.record(
            at: t0, fraction: 0.6,
            [
                SnapshotBuilder.counter(id: 1, total: 10),
                SnapshotBuilder.gauge(id: 2, value: -2, low: -2, high: 3),
            ])
        builder.record(at: t0 + 1, [SnapshotBuilder.counter(id: 1, total: 25), SnapshotBuilder.gauge(id: 2, value: nil)])
        let answer = store.query(everything())
        let counter = try #require(answer.series.first { $0.id == 1 })
        #expect(rows(counter) == [[t0, 10, 10], [t0 + 1, 15, 25]])
        let gauge = try #require(answer.series.first { $0.id == 2 })
        let values = rows(gauge).map { $0.dropFirst().map { Double(bitPattern: $0) } }
        #expect(values[0] == [-2, -2, 4])
        #expect(values[1].allSatisfy { $0.isNaN })
    }

    @Test("the cap refuses and counts new series; a series gone from the snapshots gives its slot up")
    func cap() throws {
        let store = HistoryStore(retentionSeconds: 60, maxSeries: 2)
        var builder = SnapshotBuilder(recordingInto: store)
        let three = (1...3).map { SnapshotBuilder.histogram(id: $0, total: 1) }
        builder.record(at: t0, three)
        #expect(store.counts == (series: 2, refused: 1))
        var answer = store.query(everything())
        #expect(answer.series.map(\.id) == [1, 2])
        #expect(answer.seriesRefused == 1 && answer.seriesTotal == 2 && answer.seriesCap == 2)
        // Series 2 disappears: series 3 takes its slot.
        builder.record(at: t0 + 1, [SnapshotBuilder.histogram(id: 1, total: 2), SnapshotBuilder.histogram(id: 3, total: 4)])
        #expect(store.counts == (series: 2, refused: 0))
        answer = store.query(everything())
        #expect(answer.series.map(\.id) == [1, 3])
        // The newcomer's first point counts everything it recorded: its counts add up to its total.
        #expect(rows(answer.series[1]) == [[t0 + 1, 4, 10, 30, 40, 50]])
    }

    @Test("a full store takes in a large snapshot alike whether its series stay in place, move, or leave")
    func keptSeriesFoundWhereTheyAre() throws {
        let store = HistoryStore(retentionSeconds: 60, maxSeries: 3)
        var builder = SnapshotBuilder(recordingInto: store)
        let many = (1...1000).map { SnapshotBuilder.histogram(id: UInt64($0), total: 1) }
        builder.record(at: t0, many)
        #expect(store.counts == (series: 3, refused: 997))
        builder.record(at: t0 + 1, many)  // in place: the 997 others refused without being looked up
        #expect(store.counts == (series: 3, refused: 997))
        builder.record(at: t0 + 2, many.reversed())  // moved: looked up
        #expect(store.counts == (series: 3, refused: 997))
        builder.record(at: t0 + 3, Array(many.dropFirst()))  // series 1 left: the first new one in the snapshot takes its slot
        #expect(store.counts == (series: 3, refused: 996))
        let answer = store.query(everything())
        #expect(answer.series.map(\.id) == [2, 3, 4])
        #expect(answer.series.map { rows($0).count } == [4, 4, 1])
        // The kept series, found where they were, moved or not, counted every second.
        builder.record(at: t0 + 4, [many[999], many[3], many[1], many[2]])
        #expect(store.counts == (series: 3, refused: 1))
        #expect(store.query(everything()).series.map { rows($0).count } == [5, 5, 2])
        // With room: the kept series in place, the new ones after them take it.
        let roomy = HistoryStore(retentionSeconds: 60, maxSeries: 5)
        var second = SnapshotBuilder(recordingInto: roomy)
        second.record(at: t0, Array(many[0..<3]))
        second.record(at: t0 + 1, Array(many[0..<6]))
        #expect(roomy.counts == (series: 5, refused: 1))
        #expect(roomy.query(everything()).series.map(\.id) == [1, 2, 3, 4, 5])
    }

    @Test("a series gone from the snapshots is kept until its points age out")
    func agesOut() throws {
        let store = HistoryStore(retentionSeconds: 10, maxSeries: 5)
        var builder = SnapshotBuilder(recordingInto: store)
        builder.record(at: t0, [SnapshotBuilder.histogram(id: 1, total: 1), SnapshotBuilder.histogram(id: 2, total: 1)])
        builder.record(at: t0 + 5, [SnapshotBuilder.histogram(id: 1, total: 2)])
        #expect(store.counts.series == 2)
        #expect(store.query(everything()).series.map(\.id) == [1, 2])
        builder.record(at: t0 + 30, [SnapshotBuilder.histogram(id: 1, total: 3)])
        #expect(store.counts.series == 1)
    }

    @Test("coarser steps: counts summed, quantiles and max the largest, a counter's total the last")
    func steps() throws {
        let store = HistoryStore(retentionSeconds: 60, maxSeries: 10)
        var builder = SnapshotBuilder(recordingInto: store)
        let quantiles: [[UInt64]] = [[1, 2, 3, 4], [9, 9, 1, 1], [5, 5, 5, 5], [2, 2, 2, 2]]
        for second in 0..<4 {
            builder.record(
                at: t0 + UInt64(second),
                [
                    SnapshotBuilder.histogram(
                        id: 1, total: UInt64(second + 1) * 3, quantiles: quantiles[second], max: UInt64(10 * second)),
                    SnapshotBuilder.counter(id: 2, total: UInt128(second + 1) * 100),
                ])
        }
        let answer = store.query(everything(step: 2))
        // t0 is even: the steps are [t0, t0+1] and [t0+2, t0+3].
        #expect(t0 % 2 == 0)
        #expect(rows(answer.series[0]) == [[t0, 6, 9, 3, 4, 10], [t0 + 2, 6, 5, 5, 5, 30]])
        #expect(rows(answer.series[1]) == [[t0, 200, 200], [t0 + 2, 200, 400]])
    }

    @Test("filters: series id, ring, metric and labels")
    func filters() throws {
        let store = HistoryStore(retentionSeconds: 60, maxSeries: 10)
        var builder = SnapshotBuilder(recordingInto: store)
        builder.record(
            at: t0,
            [
                SnapshotBuilder.histogram(id: 1, ring: "a", labels: "side=buy\nsymbol=AAPL", total: 1),
                SnapshotBuilder.histogram(id: 2, ring: "a", labels: "side=sell\nsymbol=AAPL", total: 1),
                SnapshotBuilder.histogram(id: 3, ring: "b", name: "other", total: 1),
            ])
        func ids(_ text: String) throws -> [UInt64] {
            let query = try HistoryQuery(parsing: text, nowSeconds: Int64(t0) + 10)
            return store.query(query).series.map(\.id)
        }
        try #expect(ids("") == [1, 2, 3])
        try #expect(ids("series=2&series=3") == [2, 3])
        try #expect(ids("ring=a") == [1, 2])
        try #expect(ids("metric=other") == [3])
        try #expect(ids("label=side:sell&label=symbol:AAPL") == [2])
        try #expect(ids("label=side%3Abuy") == [1])
        try #expect(ids("from=-5") == [])
        try #expect(ids("from=\(t0)&to=\(t0)") == [1, 2, 3])
    }

    @Test("format=csv: RFC 4180, a row per point, a column per label key, labels with commas and quotes quoted, null empty")
    func csv() throws {
        let store = HistoryStore(retentionSeconds: 60, maxSeries: 10)
        var builder = SnapshotBuilder(recordingInto: store)
        var level = SnapshotBuilder.gauge(id: 3, value: .nan, low: -1.5, high: 2)
        level.metric = SnapshotBuilder.metric("level", .gauge, labels: "desk=fx\nnote=line one\rtwo")
        builder.record(
            at: t0,
            [
                SnapshotBuilder.histogram(id: 1, labels: "symbol=A,\"B\"", total: 5),
                SnapshotBuilder.counter(id: 2, total: 7), level,
            ])
        builder.record(at: t0 + 1, [SnapshotBuilder.histogram(id: 1, labels: "symbol=A,\"B\"", total: 6, windowCount: 0)])
        let answer = store.query(everything())
        let text = String(decoding: answer.csv, as: UTF8.self)  // the series in the JSON answer's order
        #expect(
            text
                == [
                    "id,ring,metric,kind,unit,label_desk,label_note,label_symbol,t,count,p50,p99,p999,max,increase,total,value,min",
                    "1,bot,latency,histogram,ns,,,\"A,\"\"B\"\"\",\(t0),5,10,30,40,50,,,,",
                    "1,bot,latency,histogram,ns,,,\"A,\"\"B\"\"\",\(t0 + 1),1,,,,,,,,",
                    "3,bot,level,gauge,ns,fx,\"line one\rtwo\",,\(t0),,,,,2,,,,-1.5",
                    "2,bot,orders,counter,ns,,,,\(t0),,,,,,7,7,,",
                ].map { $0 + "\r\n" }.joined())
        #expect(answer.csvHeaders.first { $0.name == "X-Ringside-Truncated" }?.value == "false")
        let empty = String(decoding: store.query(everything(from: t0 + 50, to: t0 + 60)).csv, as: UTF8.self)
        #expect(empty == "id,ring,metric,kind,unit,t,count,p50,p99,p999,max,increase,total,value,min\r\n")
    }

    @Test("query strings: defaults, relative times, and one-line reasons for bad ones")
    func parsing() throws {
        let now: Int64 = 1_800_000_000
        let plain = try HistoryQuery(parsing: nil, nowSeconds: now)
        #expect(plain.from == now - 300 && plain.to == now && plain.step == 1)
        let relative = try HistoryQuery(parsing: "from=-60&to=-10&step=5", nowSeconds: now)
        #expect(relative.from == now - 60 && relative.to == now - 10 && relative.step == 5)
        #expect(plain.format == .json)
        #expect(try HistoryQuery(parsing: "format=csv", nowSeconds: now).format == .csv)
        #expect(try HistoryQuery(parsing: "format=json&step=2", nowSeconds: now).format == .json)
        #expect(throws: HistoryQueryError("format=xml: not json or csv")) { try HistoryQuery(parsing: "format=xml", nowSeconds: now) }
        for bad in [
            "step=0", "step=x", "step=3601", "from=abc", "series=-1", "label=nocolon", "label=:x", "color=red",
            "from=-10&to=-20", "ring", "ring=%zz", "format=xml", "format=CSV", "format=",
        ] {
            #expect(throws: HistoryQueryError.self, "\(bad)") { try HistoryQuery(parsing: bad, nowSeconds: now) }
        }
    }

    /// An hour of idle series holds tens of bytes a minute, of busy ones a fraction of the
    /// 158,400 bytes each took before, of random ones no more than the bound.
    @Test("memory follows what changes, within a bound", arguments: ["idle", "busy", "random"])
    func memory(activity: String) throws {
        let count = 24  // an hour of each in one answer: 86,400 points
        let store = HistoryStore(retentionSeconds: 3600, maxSeries: count)
        var builder = SnapshotBuilder(recordingInto: store)
        var random = TestRandom(seed: 44)
        var totals = [UInt64](repeating: 1_000_000, count: count + 1)
        func around(_ value: UInt64, _ percent: UInt64) -> UInt64 {
            activity == "random" ? random.next() : value - value * percent / 100 + random.next() % (2 * value * percent / 100 + 1)
        }
        for second in 0..<3660 {
            let series = (1...UInt64(count)).map { id -> SeriesSnapshot in
                let idle = activity == "idle"
                if !idle { totals[Int(id)] &+= around(5_000, 10) }
                switch id % 3 {
                case 0:
                    return SnapshotBuilder.histogram(
                        id: id, total: totals[Int(id)], windowCount: idle ? 0 : 4_500,
                        quantiles: [around(40_000, 5), around(60_000, 5), around(165_000, 10), around(260_000, 15)],
                        max: around(475_000, 20))
                case 1: return SnapshotBuilder.counter(id: id, total: UInt128(totals[Int(id)]))
                default:
                    let value = activity == "random" ? Double(bitPattern: random.next()) : Double(around(1_353_991, idle ? 0 : 1))
                    return SnapshotBuilder.gauge(
                        id: id, value: value, low: idle ? nil : value - Double(around(1_000, 50)),
                        high: idle ? nil : value + Double(around(1_000, 50)))
                }
            }
            builder.record(at: t0 + UInt64(second), series)
        }
        let perSeries = store.bytes / count
        switch activity {
        case "idle": #expect(perSeries < 60 * 50, "\(perSeries) bytes a series: under 50 a minute")
        case "busy": #expect(perSeries < 158_400 / 3, "\(perSeries) bytes a series")
        default: #expect(perSeries <= store.maxBytesPerSeries && perSeries > 3600 * 20, "\(perSeries) bytes a series")
        }
        #expect(store.maxBytesPerSeries < 166_000, "about 44 bytes a second, as before")
        // And what it held answers as it should: the last hour, every second.
        let answer = store.query(everything(from: t0 + 3660 - 3600, to: t0 + 3660))
        #expect(answer.series.count == count && answer.series.allSatisfy { rows($0).count == 3600 })
    }

    @Test("an answer holds at most maxPointsPerAnswer points, and says it was truncated")
    func bounded() throws {
        let store = HistoryStore(retentionSeconds: 1000, maxSeries: 200)
        var builder = SnapshotBuilder(recordingInto: store)
        for second in 0..<600 {
            builder.record(at: t0 + UInt64(second), (1...200).map { SnapshotBuilder.histogram(id: $0, total: UInt64(second)) })
        }
        let answer = store.query(everything())
        let points = answer.series.map { rows($0).count }.reduce(0, +)
        #expect(points == HistoryStore.maxPointsPerAnswer)
        #expect(answer.truncated)
        #expect(!store.query(everything(step: 2)).truncated)
    }
}
