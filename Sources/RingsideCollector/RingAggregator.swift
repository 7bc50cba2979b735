import RingsideSnapshot
import Ringside
import RingsideAggregation

/// The series of one bot (one per registered metric, its lanes merged): it drains the bot's
/// lanes into them, samples the bot's cells, slides their windows, produces their snapshots and
/// answers the SLOs' queries. It alone sees the series.
///
/// Series live in one array per kind, mutated in place, so the drain loop's per-record work is
/// an index, two checks and one windowed update, with no reference counting. Every record is
/// untrusted: a metric index, kind or sequence that does not fit is counted as rejected. Counters
/// write no records: their windows are fed by the growth of their exact totals between samples.
///
/// A value type, owned by the drain thread.
struct RingAggregator {
    /// Where a registered metric's series lives.
    private struct Route {
        var kind: UInt8
        var slot: Int
        /// Histogram counts per record: the metric's "1 in N" sampling.
        var weight: UInt64
    }

    private struct Series<Windows> {
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
        /// Histograms: the bytes their counts held when last measured.
        var countsBytes = 0

        /// Keeps `sampled`, the cells as just read; marks the series touched when they changed.
        /// - Returns: whether they changed.
        mutating func takeCells(_ sampled: MetricCells) -> Bool {
            let changed = sampled != cells
            cells = sampled
            if changed { touched = true }
            return changed
        }
    }

    /// The series a ring holds and the memory they are charged (see `SeriesCost`); also what
    /// the caps leave it room for.
    struct Usage {
        var series = 0
        var bytes = 0
    }

    let ring: String
    let layout: WindowLayout
    private let cost: SeriesCost
    private var routes: [Route] = []
    private var histograms: [Series<WindowedHistogram>] = []
    private var counters: [Series<WindowedCounter>] = []
    private var gauges: [Series<WindowedGauge>] = []
    /// Records refused: unknown metric, wrong kind, or a sequence that disagrees with its cursor.
    private(set) var rejected: UInt64 = 0
    /// Metrics given no series because a series cap was reached, and their records since (valid,
    /// but not aggregated).
    private(set) var refusedSeries = 0
    private(set) var refusedRecords: UInt64 = 0
    /// The first metric refused, for the log, and whether the memory budget refused it (else a count).
    private(set) var firstRefused: MetricDescriptor?
    private(set) var firstRefusedForBytes = false
    /// What the series admitted were charged, and what histograms' counts hold (measured as
    /// they grow, when a snapshot is taken).
    private var chargedBytes = 0
    private var countsBytes = 0
    /// What the descriptors of refused metrics still hold (their strings let go).
    private var refusedBytes = 0
    /// The slot of a refused metric's route.
    private static let refusedSlot = -1
    /// The timestamp of the oldest record of the last batch: how far behind the drain runs.
    private(set) var oldestInLastBatchNanos: UInt64 = 0

    init(ring: String, layout: WindowLayout, quantiles: Int) {
        self.ring = ring
        self.layout = layout
        cost = SeriesCost(ring: ring, layout: layout, quantiles: quantiles)
    }

    var metricCount: Int { routes.count }
    /// Series it holds (metrics admitted).
    var seriesCount: Int { routes.count - refusedSeries }
    /// Its series, and the memory they take.
    var usage: Usage { Usage(series: seriesCount, bytes: chargedBytes + countsBytes + refusedBytes) }

    /// Adds series for `consumer`'s metrics not known yet (they arrive in index order), as many
    /// as `allowance` (given what is held) leaves room for, in series and in bytes; the rest are
    /// refused (routed nowhere, their records counted, their descriptors' strings let go).
    /// - Returns: how many were admitted.
    @discardableResult
    mutating func addMetrics(of consumer: RingConsumer, admitting allowance: (_ held: Usage) -> Usage) -> Int {
        let room = allowance(usage)
        var admitted = 0
        var charged = 0
        for metric in consumer.metrics[routes.count...] where Int(metric.index) == routes.count {
            let bytes = cost.bytes(of: metric)
            guard admitted < room.series, charged + bytes <= room.bytes else {
                routes.append(Route(kind: metric.kind.rawValue, slot: Self.refusedSlot, weight: 0))
                refusedSeries += 1
                refusedBytes += MemoryLayout<MetricDescriptor>.stride
                if firstRefused == nil {
                    firstRefused = metric
                    firstRefusedForBytes = admitted < room.series
                }
                consumer.forgetStrings(ofMetric: Int(metric.index))
                continue
            }
            admitted += 1
            charged += bytes
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
        chargedBytes += charged
        return admitted
    }

    /// Reads the registry again and adds series for the metrics registered since (see `addMetrics`).
    /// - Returns: how many metrics the registry had that were not known.
    @discardableResult
    mutating func refreshMetrics(of consumer: RingConsumer, admitting allowance: (_ held: Usage) -> Usage) -> Int {
        let added = (try? consumer.refreshMetrics()) ?? 0
        if added > 0 { addMetrics(of: consumer, admitting: allowance) }
        return added
    }

    // MARK: - Draining

    /// Drains `consumer`'s lanes (at most `limitPerLane` records each) into the series; a record
    /// naming a metric registered since the last look has the registry read again.
    /// - Parameters:
    ///   - allowance: how many more series may be added, given the series held (the caps).
    ///   - counted: told the records taken from each lane, for the fill rate.
    /// - Returns: the records drained.
    /// - Throws: the consumer's error when the ring's cursors turn out corrupt.
    mutating func drain(
        _ consumer: RingConsumer, limitPerLane: Int, nowNanos now: UInt64,
        admitting allowance: (_ held: Usage) -> Usage,
        counted: (_ records: Int, _ lane: Int) -> Void
    ) throws(RingError) -> Int {
        try consumer.drain(limitPerLane: limitPerLane) { records, first, lane in
            counted(records.count, lane)
            var offset = 0
            while offset < records.count {
                let rest = UnsafeBufferPointer(rebasing: records[offset...])
                offset += consume(rest, firstCursor: first + UInt64(offset), nowNanos: now)
                guard offset < records.count else { break }
                // A metric registered after the last look: read the registry again.
                if refreshMetrics(of: consumer, admitting: allowance) == 0 {
                    rejected += 1  // the registry has no such metric
                    offset += 1
                }
            }
        }
    }

    /// Aggregates records read at cursors `firstCursor...`; stops before a record that names a
    /// metric not known yet and returns how many it took, so `drain` can read the registry again.
    private mutating func consume(_ records: UnsafeBufferPointer<RingRecord>, firstCursor: UInt64, nowNanos now: UInt64) -> Int {
        // A timestamp from the future would hold the windows hostage: clamp it to now.
        let latest = now
        if let first = records.first { oldestInLastBatchNanos = min(first.timestamp_ns, now) }
        for index in records.indices {
            let record = records[index]
            let metric = Int(record.metric)
            guard metric < routes.count else { return index }
            let route = routes[metric]
            if route.slot == Self.refusedSlot, record.kind == route.kind, route.kind != MetricKind.counter.rawValue,
                record.sequence == firstCursor &+ UInt64(index)
            {
                refusedRecords += 1  // a valid record of a series refused at the cap
                continue
            }
            // Counters live in cells and write no records: one that claims to be a counter's is invalid.
            guard record.kind == route.kind, route.kind != MetricKind.counter.rawValue,
                record.sequence == firstCursor &+ UInt64(index)
            else {
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
    mutating func sampleCells(of consumer: RingConsumer, nowNanos now: UInt64, isBaseline: Bool = false) -> Bool {
        let read = consumer.cells(of:)
        var changed = false
        for index in counters.indices {
            let cells = read(counters[index].metric)
            let before = counters[index].cells.total
            if !isBaseline, cells.total > before {
                counters[index].windows.add(cells.total - before, atNanos: now)
            }
            if counters[index].takeCells(cells) { changed = true }
        }
        for index in histograms.indices {
            if histograms[index].takeCells(read(histograms[index].metric)) { changed = true }
        }
        for index in gauges.indices {
            if gauges[index].takeCells(read(gauges[index].metric)) { changed = true }
        }
        return changed
    }

    /// Moves every series' current tick into its windows once `now` has passed it.
    private mutating func advance(toNanos now: UInt64) {
        for index in histograms.indices { histograms[index].windows.advance(toNanos: now) }
        for index in counters.indices { counters[index].windows.advance(toNanos: now) }
        for index in gauges.indices { gauges[index].windows.advance(toNanos: now) }
    }

    // MARK: - Snapshots

    /// Slides every series' windows to `now` and returns their snapshots. A window's statistics
    /// are recomputed only when records arrived or the window slid (its slice rotated); otherwise
    /// the last ones are reused, so thousands of quiet series cost little to publish.
    mutating func snapshots(nowNanos now: UInt64, quantiles: [Double], versions: inout VersionCounter) -> [SeriesSnapshot] {
        advance(toNanos: now)
        var result: [SeriesSnapshot] = []
        result.reserveCapacity(metricCount)
        for index in histograms.indices {
            if histograms[index].touched {
                // Counts grow with what is recorded: measured here, where a busy series is touched anyway.
                let bytes = histograms[index].windows.allocatedBytes
                countsBytes += bytes - histograms[index].countsBytes
                histograms[index].countsBytes = bytes
            }
            result.append(
                Self.refresh(
                    &histograms[index], ring: ring, layout: layout, now: now, versions: &versions,
                    window: { series, window, stats in
                        let histogram = series.windows.snapshot(window: window, nowNanos: now)
                        stats.count = histogram.count
                        stats.sum = histogram.sum
                        stats.min = histogram.min
                        stats.max = histogram.max
                        stats.mean = histogram.mean
                        stats.quantileValues = histogram.isEmpty ? quantiles.map { _ in 0 } : histogram.values(atQuantiles: quantiles)
                        // Over the span covered, as a counter's rate is, so both read alike.
                        let covered = max(series.windows.coveredNanos(window: window, nowNanos: now), layout.tickNanos)
                        stats.rate = Double(histogram.count) * 1e9 / Double(covered)
                    },
                    whole: { series, snapshot in
                        // Shared, not copied: the exporters compute their buckets from it when they render.
                        let cumulative = series.windows.cumulative
                        snapshot.cumulative = cumulative
                        snapshot.cumulativeCount = cumulative.count
                        snapshot.cumulativeSum = cumulative.sum
                        snapshot.cumulativeExactSum = cumulative.exactSum
                        snapshot.droppedRecords = series.cells.dropped
                    }))
        }
        for index in counters.indices {
            result.append(
                Self.refresh(
                    &counters[index], ring: ring, layout: layout, now: now, versions: &versions,
                    window: { series, window, stats in
                        stats.increase = series.windows.sum(window: window, nowNanos: now)
                        stats.rate = series.windows.rate(window: window, nowNanos: now)
                    },
                    whole: { series, snapshot in
                        snapshot.cumulativeSum = Double(series.cells.total)
                        snapshot.cumulativeExactSum = UInt128(series.cells.total)
                    }))
        }
        for index in gauges.indices {
            result.append(
                Self.refresh(
                    &gauges[index], ring: ring, layout: layout, now: now, versions: &versions,
                    window: { series, window, stats in
                        if let range = series.windows.range(window: window, nowNanos: now) {
                            stats.gaugeMin = range.min
                            stats.gaugeMax = range.max
                        }
                    },
                    whole: { series, snapshot in
                        // The cell holds the last value set by any thread, exact even when records dropped.
                        snapshot.lastValue = series.cells.lastValue ?? series.windows.last
                        snapshot.droppedRecords = series.cells.dropped
                    }))
        }
        return result
    }

    /// The series' snapshot, recomputing only the windows that may have changed (all of them,
    /// and the whole-series figures, when records arrived): `window` fills in the statistics of
    /// a window (an index into the layout's), starting from empty ones; `whole` sets the
    /// whole-series figures.
    private static func refresh<Windows>(
        _ series: inout Series<Windows>, ring: String, layout: WindowLayout, now: UInt64,
        versions: inout VersionCounter,
        window: (Series<Windows>, Int, inout WindowStats) -> Void,
        whole: (Series<Windows>, inout SeriesSnapshot) -> Void
    ) -> SeriesSnapshot {
        var snapshot = series.cached ?? SeriesSnapshot(ring: ring, metric: series.metric, id: versions.next(), windows: [])
        if series.computedSlices.count != layout.windowNanos.count {
            series.computedSlices = Array(repeating: .max, count: layout.windowNanos.count)
            snapshot.windows = Array(repeating: WindowStats(), count: layout.windowNanos.count)
        }
        var windowsChanged = series.touched || series.cached == nil
        for index in layout.windowNanos.indices {
            let slice = now / layout.sliceNanos[index]
            guard series.touched || slice != series.computedSlices[index] else { continue }
            series.computedSlices[index] = slice
            var stats = WindowStats()
            window(series, index, &stats)
            // An empty window that stays empty changes nothing.
            if stats.isEmpty && snapshot.windows[index].isEmpty && !series.touched { continue }
            snapshot.windows[index] = stats
            windowsChanged = true
        }
        if series.touched || series.cached == nil {
            whole(series, &snapshot)
            snapshot.wholeVersion = versions.next()
        }
        if windowsChanged { snapshot.version = versions.next() }
        series.cached = snapshot
        series.touched = false
        return snapshot
    }

    // MARK: - Queries

    /// Merges window `window` (an index into the layout's windows) of every histogram series
    /// `include` accepts, in registration order, into `merged`, for the SLOs.
    /// - Returns: how many series it merged.
    func mergeHistograms(
        window: Int, nowNanos now: UInt64, into merged: inout Histogram,
        where include: (MetricDescriptor) -> Bool
    ) -> Int {
        var count = 0
        for series in histograms where include(series.metric) {
            merged.merge(series.windows.snapshot(window: window, nowNanos: now))
            count += 1
        }
        return count
    }
}

/// Hands out series ids and versions: increasing across the whole collector.
struct VersionCounter {
    private(set) var last: UInt64 = 0
    mutating func next() -> UInt64 {
        last += 1
        return last
    }
}

extension WindowStats {
    /// Nothing fell in the window.
    var isEmpty: Bool { count == 0 && increase == 0 && gaugeMin == nil }
}
