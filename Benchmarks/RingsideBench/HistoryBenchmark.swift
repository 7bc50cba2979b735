import CRingside
import CRingsideBench
import Ringside
import RingsideCollector
import RingsideSnapshot

/// `ringside-bench collector --row history`: what the per-second history (`HistoryStore`, at
/// its defaults: an hour, 2,000 series) costs the daemon's loop, and its memory. Snapshots are
/// made here, not by a collector: 60 % histograms, 30 % counters, 10 % gauges.
///
/// - `history.record.*`: the time of one `record` of a snapshot of 1,000,000 series (the store
///   full: every series it keeps in the snapshot, the rest refused), of the first such snapshot
///   into an empty store, of snapshots whose series move (every other one lacks its first
///   series, so every series' place shifts by one), and of 2,000 series, all kept;
/// - `history.memory.*`: what 2,000 series hold after an hour and a minute of snapshots, a
///   second apart: idle (empty windows, totals and values that stay), busy (every column
///   changes every second by what a busy series' does), random (every number random, every
///   second: the bound); by the store's own count and by the allocator's (mallinfo2's bytes in use).
enum HistoryBenchmark {
    static let seriesCap = 2_000
    static let retention = 3_600
    static let wide = 1_000_000

    static let method =
        "History: HistoryStore at its defaults (1h, 2,000 series) fed snapshots made here a second apart (60 % histograms, "
        + "30 % counters, 10 % gauges, windows empty unless said); history.record.* = the wall time of one record() (median "
        + "and largest of the rounds), history.memory.* = what 2,000 series hold after 3,660 snapshots, by the store's count "
        + "and by mallinfo2's bytes in use (small blocks and mapped ones) less those before the store was made. "

    static func run(_ settings: BenchSettings, progress: (String) -> Void) -> [CollectorReport.History] {
        // The memory rows first, while nothing else is allocated that might be freed during them.
        var rows: [CollectorReport.History] = []
        for kind in [Activity.idle, .busy, .random] {
            progress("history: an hour of 2,000 \(kind) series")
            rows.append(memory(kind))
        }
        return rows + recordRows(settings, progress: progress)
    }

    private static func recordRows(_ settings: BenchSettings, progress: (String) -> Void) -> [CollectorReport.History] {
        var rows: [CollectorReport.History] = []
        let rounds = max(10, Int(settings.seconds * 10))
        progress("history: record() of \(wide) series")
        let windows = [WindowStats()]  // one array for all: the store only reads them
        let series = (0..<wide).map { idleSeries(id: UInt64($0 + 1), windows: windows) }
        let shifted = Array(series.dropFirst())
        var store = HistoryStore(retentionSeconds: retention, maxSeries: seriesCap)
        var maker = SnapshotMaker()
        store.record(maker.make(series))
        rows.append(
            timed("history.record.1m", rounds: rounds, "1,000,000 series, 2,000 kept, the rest refused") { _ in
                let snapshot = maker.make(series)
                return { store.record(snapshot) }
            })
        rows.append(
            timed("history.record.1m.first", rounds: max(3, rounds / 4), "1,000,000 series into an empty store") { _ in
                store = HistoryStore(retentionSeconds: retention, maxSeries: seriesCap)
                let snapshot = maker.make(series)
                return { store.record(snapshot) }
            })
        rows.append(
            timed("history.record.1m.shifting", rounds: rounds, "1,000,000 series, every other snapshot without its first") { round in
                let snapshot = maker.make(round % 2 == 0 ? shifted : series)
                return { store.record(snapshot) }
            })
        let few = Array(series.prefix(seriesCap))
        store = HistoryStore(retentionSeconds: retention, maxSeries: seriesCap)
        rows.append(
            timed("history.record.2k", rounds: rounds * 10, "2,000 series, all kept") { _ in
                let snapshot = maker.make(few)
                return { store.record(snapshot) }
            })
        return rows
    }

    /// Times what `prepare` returns (a `record`), over `rounds` rounds; the preparation untimed.
    private static func timed(
        _ name: String, rounds: Int, _ detail: String, prepare: (Int) -> (() -> Void)
    ) -> CollectorReport.History {
        var millis: [Double] = []
        for round in 0..<rounds {
            let work = prepare(round)
            let start = rs_clock_precise_ns()
            work()
            millis.append(Double(rs_clock_precise_ns() &- start) / 1e6)
        }
        return CollectorReport.History(name: name, millis: millis, detail: detail)
    }

    enum Activity: String { case idle, busy, random }

    /// An hour and a minute of snapshots of 2,000 series doing `activity`, then what the store holds.
    private static func memory(_ activity: Activity) -> CollectorReport.History {
        var random = Xorshift(seed: 0x9E37_79B9_7F4A_7C15)
        let template = (0..<seriesCap).map { idleSeries(id: UInt64($0 + 1)) }  // their strings made before the count
        var maker = SnapshotMaker()
        let before = allocatedBytes()
        let store = HistoryStore(retentionSeconds: retention, maxSeries: seriesCap)
        var totals = [UInt64](repeating: 0, count: seriesCap)
        for _ in 0..<(retention + 60) {
            var series = template
            if activity != .idle {
                for index in series.indices {
                    vary(&series[index], total: &totals[index], random: &random, wild: activity == .random)
                }
            }
            store.record(maker.make(series))
        }
        let held = withExtendedLifetime(template) { allocatedBytes() - before }  // the template not freed before the count
        let perSeries = Double(held) / Double(seriesCap)
        return CollectorReport.History(
            name: "history.memory.\(activity)", millis: [], detail: "2,000 series, an hour and a minute of snapshots a second apart",
            storeBytesPerSeries: Double(store.bytes) / Double(seriesCap), allocatedBytesPerSeries: perSeries)
    }

    /// A series of the mix (60 % histograms, 30 % counters, 10 % gauges) with nothing in its windows.
    static func idleSeries(id: UInt64, windows: [WindowStats] = [WindowStats()]) -> SeriesSnapshot {
        let kind: MetricKind = id % 10 < 6 ? .histogram : id % 10 < 9 ? .counter : .gauge
        var series = SeriesSnapshot(ring: "bench", metric: metrics[kind]!, id: id, windows: windows)
        if kind == .gauge { series.lastValue = 1_353_991 }
        if kind == .counter { series.cumulativeExactSum = 1_000_000 }
        if kind == .histogram { series.cumulativeCount = 1_000_000 }
        return series
    }

    static let metrics: [MetricKind: MetricDescriptor] = [
        .histogram: MetricDescriptor(
            index: 0, name: "order_fill_latency", kind: .histogram, unit: .nanoseconds, encodedLabels: "symbol=AAPL", help: "",
            sampleEvery: 1),
        .counter: MetricDescriptor(
            index: 1, name: "orders", kind: .counter, unit: .none, encodedLabels: "side=buy", help: "", sampleEvery: 1),
        .gauge: MetricDescriptor(index: 2, name: "gross_exposure", kind: .gauge, unit: .none, encodedLabels: "", help: "", sampleEvery: 1),
    ]

    /// A second of a busy series: a histogram's 4,500 or so records a second and its quantiles,
    /// a counter's 11,000 or so increments, a gauge's value moving by some thousands; `wild`:
    /// every number random.
    static func vary(_ series: inout SeriesSnapshot, total: inout UInt64, random: inout Xorshift, wild: Bool) {
        func around(_ value: UInt64, _ percent: UInt64) -> UInt64 {
            wild ? random.next() : value - value * percent / 100 + random.next() % (2 * value * percent / 100 + 1)
        }
        var window = WindowStats()
        switch series.metric.kind {
        case .histogram:
            total &+= around(4_500, 10)
            series.cumulativeCount = total
            window.count = 4_500
            window.quantileValues = [around(40_000, 5), around(60_000, 5), around(165_000, 10), around(260_000, 15)].map { Int128($0) }
            window.max = Int128(around(475_000, 20))
        case .counter:
            total &+= around(11_000, 10)
            series.cumulativeExactSum = UInt128(total)
        case .gauge:
            let value = wild ? Double(bitPattern: random.next()) : Double(around(1_353_991, 1))
            series.lastValue = value
            window.gaugeMin = wild ? Double(bitPattern: random.next()) : value - Double(around(1_000, 50))
            window.gaugeMax = wild ? Double(bitPattern: random.next()) : value + Double(around(1_000, 50))
        }
        series.windows = [window]
    }

    /// The heap's bytes in use (glibc's `mallinfo2`: small blocks and mapped ones).
    static func allocatedBytes() -> Int { Int(rsb_heap_bytes_in_use()) }
}

/// Snapshots a second apart, each a new generation.
private struct SnapshotMaker {
    var generation: UInt64 = 0
    static let start: UInt64 = 1_800_000_000

    mutating func make(_ series: [SeriesSnapshot]) -> Snapshot {
        generation += 1
        var snapshot = Snapshot()
        snapshot.generation = generation
        snapshot.generatedRealtimeNanos = (Self.start + generation) * 1_000_000_000
        snapshot.windowNanos = [1_000_000_000]
        snapshot.quantiles = [0.5, 0.9, 0.99, 0.999]
        snapshot.series = SeriesList(series)
        return snapshot
    }
}

/// xorshift64: cheap numbers, the same every run.
struct Xorshift {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}
