import RingsideExport
import Ringside
import RingsideAggregation

/// The series of one bot (one per registered metric, its lanes merged), fed by the records
/// drained from every lane and by samples of the cells.
///
/// Series live in one array per kind, mutated in place, so the drain loop's per-record work is
/// an index, two checks and one windowed update, with no reference counting. Every record is
/// untrusted: a metric index, kind or sequence that does not fit is counted as rejected. Counters
/// write no records: their windows are fed by the growth of their exact totals between samples.
struct RingAggregator {
    /// Where a registered metric's series lives.
    struct Route {
        var kind: UInt8
        var slot: Int
        /// Histogram counts per record: the metric's "1 in N" sampling.
        var weight: UInt64
    }

    struct Series<Windows> {
        let metric: MetricDescriptor
        var windows: Windows
        /// Records arrived since the last snapshot of this series.
        var touched = true
        /// The last snapshot; a window of it is reused until records arrive or its slice rotates.
        var cached: SeriesSnapshot?
        /// Per window, the slice (`now / sliceNanos`) its cached statistics were computed in.
        var computedSlices: [UInt64] = []
        /// The cells as last sampled: a counter's exact total, a gauge's last value, drops.
        var cells = MetricCells(total: 0, dropped: 0, lastValue: nil)
        /// Histograms, with `--hlog`: the all-time count at the last capture.
        var capturedCount: UInt64 = 0
    }

    let ring: String
    let layout: WindowLayout
    private(set) var routes: [Route] = []
    var histograms: [Series<WindowedHistogram>] = []
    var counters: [Series<WindowedCounter>] = []
    var gauges: [Series<WindowedGauge>] = []
    /// Records refused: unknown metric, wrong kind, or a sequence that disagrees with its cursor.
    private(set) var rejected: UInt64 = 0
    /// Metrics given no series because a series cap was reached, and their records since (valid,
    /// but not aggregated).
    private(set) var refusedSeries = 0
    private(set) var refusedRecords: UInt64 = 0
    /// The first metric refused, for the log.
    private(set) var firstRefused: MetricDescriptor?
    /// The slot of a refused metric's route.
    static let refusedSlot = -1
    /// The timestamp of the oldest record of the last batch: how far behind the drain runs.
    private(set) var oldestInLastBatchNanos: UInt64 = 0

    init(ring: String, layout: WindowLayout) {
        self.ring = ring
        self.layout = layout
    }

    var metricCount: Int { routes.count }
    /// Series it holds (metrics admitted).
    var seriesCount: Int { routes.count - refusedSeries }

    /// Adds series for metrics registered since the last call (they arrive in index order), as
    /// many as `admitting` allows; the rest are refused (routed nowhere, their records counted).
    /// - Returns: how many were admitted.
    @discardableResult
    mutating func add(_ metrics: [MetricDescriptor], admitting allowed: Int = .max) -> Int {
        var admitted = 0
        for metric in metrics where Int(metric.index) == routes.count {
            guard admitted < allowed else {
                routes.append(Route(kind: metric.kind.rawValue, slot: Self.refusedSlot, weight: 0))
                refusedSeries += 1
                if firstRefused == nil { firstRefused = metric }
                continue
            }
            admitted += 1
            switch metric.kind {
            case .histogram:
                routes.append(Route(kind: metric.kind.rawValue, slot: histograms.count, weight: UInt64(metric.sampleEvery)))
                histograms.append(Series(metric: metric, windows: WindowedHistogram(layout: layout)))
            case .counter:
                routes.append(Route(kind: metric.kind.rawValue, slot: counters.count, weight: 1))
                counters.append(Series(metric: metric, windows: WindowedCounter(layout: layout)))
            case .gauge:
                routes.append(Route(kind: metric.kind.rawValue, slot: gauges.count, weight: 1))
                gauges.append(Series(metric: metric, windows: WindowedGauge(layout: layout)))
            }
        }
        return admitted
    }

    /// Aggregates records read at cursors `firstCursor...`; stops before a record that names a
    /// metric not known yet and returns how many it took, so the caller can read the registry
    /// again and call `consume` with the rest (or `reject` it if the registry has no such metric).
    mutating func consume(_ records: UnsafeBufferPointer<RingRecord>, firstCursor: UInt64, nowNanos now: UInt64) -> Int {
        // A timestamp from the future would hold the windows hostage: clamp it to now.
        let latest = now
        if let first = records.first { oldestInLastBatchNanos = min(first.timestamp_ns, now) }
        for index in records.indices {
            let record = records[index]
            let metric = Int(record.metric)
            guard metric < routes.count else { return index }
            let route = routes[metric]
            if route.slot == Self.refusedSlot, record.kind == route.kind, route.kind != MetricKind.counter.rawValue,
               record.sequence == firstCursor &+ UInt64(index) {
                refusedRecords += 1 // a valid record of a series refused at the cap
                continue
            }
            // Counters live in cells and write no records: one that claims to be a counter's is invalid.
            guard record.kind == route.kind, route.kind != MetricKind.counter.rawValue,
                  record.sequence == firstCursor &+ UInt64(index) else {
                rejected += 1
                continue
            }
            let time = min(record.timestamp_ns, latest)
            switch route.kind {
            case MetricKind.histogram.rawValue:
                histograms[route.slot].windows.record(record.value, count: route.weight, atNanos: time)
                histograms[route.slot].touched = true
            default:
                gauges[route.slot].windows.set(Double(bitPattern: record.value), atNanos: time)
                gauges[route.slot].touched = true
            }
        }
        return records.count
    }

    /// Takes in the cells' figures. A counter's growth since the last sample is added to its
    /// windows at `now` (its rate's resolution is the sampling interval); the first sample of a
    /// series is its baseline, not an increase. A total that shrank (a file recreated under the
    /// same metric) starts a new baseline.
    /// - Returns: whether any cell changed.
    @discardableResult
    mutating func sample(_ read: (MetricDescriptor) -> MetricCells, nowNanos now: UInt64, isBaseline: Bool = false) -> Bool {
        var changed = false
        for index in counters.indices {
            let cells = read(counters[index].metric)
            let before = counters[index].cells.total
            if !isBaseline, cells.total > before {
                counters[index].windows.add(cells.total - before, atNanos: now)
            }
            if cells != counters[index].cells { counters[index].touched = true; changed = true }
            counters[index].cells = cells
        }
        for index in histograms.indices {
            let cells = read(histograms[index].metric)
            if cells != histograms[index].cells { histograms[index].touched = true; changed = true }
            histograms[index].cells = cells
        }
        for index in gauges.indices {
            let cells = read(gauges[index].metric)
            if cells != gauges[index].cells { gauges[index].touched = true; changed = true }
            gauges[index].cells = cells
        }
        return changed
    }

    /// Counts a record that names a metric the registry does not have.
    mutating func reject() { rejected += 1 }

    /// Moves every series' current tick into its windows once `now` has passed it.
    mutating func advance(toNanos now: UInt64) {
        for index in histograms.indices { histograms[index].windows.advance(toNanos: now) }
        for index in counters.indices { counters[index].windows.advance(toNanos: now) }
        for index in gauges.indices { gauges[index].windows.advance(toNanos: now) }
    }
}
