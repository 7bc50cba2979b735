import CRingside
import RingsideSnapshot
import Ringside
import RingsideAggregation

extension BotAggregator {

    /// Moves every series' current tick into its windows once `now` has passed it, and counts
    /// the series whose slices it let go, every window empty (a histogram's counts are measured
    /// again then).
    private mutating func advance(toNanos now: UInt64) {
        var letGo = 0
        for index in tables.histograms.indices {
            if tables.histograms[index].windows.advance(toNanos: now) {
                memory.counts += tables.histograms[index].measureCounts { $0.allocatedBytes }
                letGo += 1
            }
            tables.histograms[index].exemplars?.value.advance(toNanos: now)
        }
        for index in tables.signedHistograms.indices where tables.signedHistograms[index].windows.advance(toNanos: now) {
            memory.counts += tables.signedHistograms[index].measureCounts { $0.allocatedBytes }
            letGo += 1
        }
        for index in tables.counters.indices where tables.counters[index].windows.advance(toNanos: now) { letGo += 1 }
        for index in tables.gauges.indices where tables.gauges[index].windows.advance(toNanos: now) { letGo += 1 }
        snapshotPass.windowsLetGo += letGo
    }

    /// The series whose windows' slices were let go since the last call.
    mutating func takeWindowsLetGo() -> Int {
        defer { snapshotPass.windowsLetGo = 0 }
        return snapshotPass.windowsLetGo
    }

    /// The series the last snapshot pass left out: new ones, whose first figures wait for the next.
    var seriesAwaitingFigures: Int { snapshotPass.awaitingFigures }
    /// The series the last snapshot pass showed for the first time.
    var seriesShownFirst: Int { snapshotPass.shownFirst }
    /// Until when the series of the last snapshot pass show what they showed, if nothing is
    /// recorded: the earliest time one of their figures moves (see `refresh`; `.max` if every
    /// window is empty).
    var seriesUnchangedUntilNanos: UInt64 { snapshotPass.unchangedUntilNanos }

    // MARK: - Snapshots

    /// Slides every series' windows to `now` and returns their snapshots. A window's statistics
    /// are recomputed only when records arrived or the window slid (its slice rotated); otherwise
    /// the last ones are reused, so thousands of quiet series cost little to publish. With
    /// `firstFigures` false, series never shown are left out (`seriesAwaitingFigures`): their
    /// first figures cost many times a quiet series' (every window made), and a snapshot out of
    /// time for new series leaves them to the next.
    mutating func snapshots(
        nowNanos now: UInt64, quantiles: [Double], versions: inout VersionCounter, firstFigures: Bool = true
    ) -> [SeriesSnapshot] {
        advance(toNanos: now)
        if emptyWindows.count != layout.windowNanos.count {
            emptyWindows = Array(repeating: WindowStats(), count: layout.windowNanos.count)
        }
        var result: [SeriesSnapshot] = []
        result.reserveCapacity(seriesCount)
        var packing = Packing(leftABlock: snapshotPass.removedFromABlock, packsQuiet: snapshotPass.packingLeft)
        snapshotPass.awaitingFigures = 0
        snapshotPass.shownFirst = 0
        snapshotPass.unchangedUntilNanos = .max
        appendHistogramSnapshots(
            of: \.histograms, to: &result, packing: &packing, now: now, quantiles: quantiles, firstFigures: firstFigures,
            versions: &versions,
            window: { series, window, stats in
                stats.exemplars = series.exemplars?.value.largest(window: window, nowNanos: now) ?? []
            },
            whole: { series, cumulative, snapshot in
                // Shared, not copied: the exporters compute their buckets from it when they render.
                snapshot.cumulative = cumulative
                snapshot.cumulativeExactSum = cumulative.exactSum
                snapshot.cumulativeMax = Int128(cumulative.max)
                snapshot.droppedSum = Int128(series.cells.droppedSum)
                snapshot.droppedMax = Int128(series.cells.droppedMax)
                snapshot.bucketExemplars = series.exemplars?.value.latestByBucket.values.sorted { $0.value < $1.value } ?? []
            })
        appendHistogramSnapshots(
            of: \.signedHistograms, to: &result, packing: &packing, now: now, quantiles: quantiles, firstFigures: firstFigures,
            versions: &versions,
            whole: { series, cumulative, snapshot in
                snapshot.signedCumulative = cumulative
                snapshot.cumulativeSignedSum = cumulative.exactSum
                snapshot.cumulativeMax = cumulative.isEmpty ? 0 : Int128(cumulative.max)
                // Stored in offset binary, as the values are (VALUES in ringside.h).
                snapshot.droppedSum = Int128(OffsetBinary.sum(series.cells.droppedSum, count: series.cells.dropped))
                snapshot.droppedMax = OffsetBinary.maximum(series.cells.droppedMax).map { Int128($0) } ?? 0
            })
        appendSnapshots(
            of: \.counters, to: &result, packing: &packing, now: now, firstFigures: firstFigures, versions: &versions,
            rateMovesEachSlice: true,
            window: { series, window, stats in
                stats.increase = series.windows.sum(window: window, nowNanos: now)
                stats.rate = series.windows.rate(window: window, nowNanos: now)
            },
            slid: { series, window, stats in stats.rate = series.windows.rate(window: window, nowNanos: now) },
            whole: { series, snapshot in
                snapshot.cumulativeSum = Double(series.cells.total)
                snapshot.cumulativeExactSum = UInt128(series.cells.total)
                snapshot.clampedValues = series.cells.clamped
            })
        appendSnapshots(
            of: \.gauges, to: &result, packing: &packing, now: now, firstFigures: firstFigures, versions: &versions,
            window: { series, window, stats in
                if let range = series.windows.range(window: window, nowNanos: now) {
                    stats.gaugeMin = range.min
                    stats.gaugeMax = range.max
                }
            },
            slid: { _, _, _ in },  // a gauge's window has no rate
            whole: { series, snapshot in
                // The cell holds the last value set by any thread, exact even when records dropped.
                snapshot.lastValue = series.cells.lastValue ?? series.windows.last
                snapshot.droppedRecords = series.cells.dropped
                snapshot.clampedValues = series.cells.clamped  // values that were no number (a binding's)
            })
        // With series left out, the result's places are not the tables' (see `keep`): blocks
        // wait for a pass that shows every series, which packs every quiet series.
        snapshotPass.packingLeft = snapshotPass.awaitingFigures > 0
        if !snapshotPass.packingLeft {
            snapshotPass.removedFromABlock = false
            pack(&result, packing)
        }
        return result
    }

    /// The series a pass moves into a block of their own (see `SeriesSnapshot.packed`): those
    /// whose figures it made again and found quiet (every window empty), which keep those
    /// figures until they record again; and whether any series left a block (it recorded, or
    /// it went).
    private struct Packing {
        /// Places in the pass's result.
        var places: [Int] = []
        var leftABlock = false
        /// Every quiet series not in a block goes in one, not only those whose figures changed.
        var packsQuiet = false
    }

    /// Moves the series `packing` names, and those of blocks that most of their series left,
    /// into one new block; `result` holds every series of the bot, in the order of its tables.
    private mutating func pack(_ result: inout [SeriesSnapshot], _ packing: Packing) {
        var places = packing.places
        if packing.leftABlock {
            // A block lives as long as one of its series is quiet: one whose series are mostly
            // gone is made again with those left, so that it holds at most 4 times what they need.
            var members: [ObjectIdentifier: Int] = [:]
            for series in result { if let block = series.block { members[block.id, default: 0] += 1 } }
            for (place, series) in result.enumerated() {
                if let block = series.block, members[block.id, default: 0] * 4 < block.capacity { places.append(place) }
            }
        }
        guard places.count > 1 else {
            // One series left of a block most of whose series went: a box of its own, the block let go.
            if let place = places.first, result[place].isPacked {
                result[place] = result[place].unpacked()
                keep(result[place], at: place)
            }
            return
        }
        let packed = SeriesSnapshot.packed(places.map { result[$0] })
        for (place, series) in zip(places, packed) {
            result[place] = series
            keep(series, at: place)
        }
    }

    /// Keeps `series` as the snapshot of the series at `place` in the order of the tables.
    private mutating func keep(_ series: SeriesSnapshot, at place: Int) {
        let (histograms, signed, counters) = (tables.histograms.count, tables.signedHistograms.count, tables.counters.count)
        switch place {
        case ..<histograms: tables.histograms[place].cached = series
        case ..<(histograms + signed): tables.signedHistograms[place - histograms].cached = series
        case ..<(histograms + signed + counters): tables.counters[place - histograms - signed].cached = series
        default: tables.gauges[place - histograms - signed - counters].cached = series
        }
    }

    /// Appends the snapshots of a table of histograms, of unsigned or signed values alike (see
    /// `appendSnapshots`): each window's figures, and the totals of the series' whole histogram;
    /// `window` and `whole` add a kind's own (`whole` given that histogram).
    private mutating func appendHistogramSnapshots<Slice: HistogramFigures>(
        of table: WritableKeyPath<SeriesTables, [Series<Windowed<Slice>>]>, to result: inout [SeriesSnapshot],
        packing: inout Packing, now: UInt64, quantiles: [Double], firstFigures: Bool, versions: inout VersionCounter,
        window ownWindow: (Series<Windowed<Slice>>, Int, inout WindowStats) -> Void = { _, _, _ in },
        whole ownWhole: (Series<Windowed<Slice>>, Slice, inout SeriesSnapshot) -> Void
    ) {
        appendSnapshots(
            of: table, to: &result, packing: &packing, now: now, firstFigures: firstFigures, versions: &versions,
            countsBytes: { $0.allocatedBytes },
            window: { series, window, stats in
                stats.take(window, of: series.windows, nowNanos: now, quantiles: quantiles)
                ownWindow(series, window, &stats)
            },
            // Exemplars come with values, in their slices: a window no slice left keeps them too.
            slid: { series, window, stats in stats.takeCoveredFrom(window, of: series.windows, nowNanos: now) },
            whole: { series, snapshot in
                let cumulative = series.windows.cumulative
                snapshot.takeHistogramTotals(cumulative, cells: series.cells, sampled: series.sampled)
                ownWhole(series, cumulative, &snapshot)
            })
    }

    /// Appends to `result` the snapshots of the series in `table` (see `refresh`), noting each
    /// series that first shows a total at its ceiling. `countsBytes` (for histograms) measures
    /// what a series' counts hold: they grow with what is recorded, so they are measured here,
    /// where a busy series is touched anyway.
    private mutating func appendSnapshots<Windows: SlidingSeries>(
        of table: WritableKeyPath<SeriesTables, [Series<Windows>]>, to result: inout [SeriesSnapshot], packing: inout Packing,
        now: UInt64, firstFigures: Bool, versions: inout VersionCounter, countsBytes: ((Windows) -> Int)? = nil,
        rateMovesEachSlice: Bool = false,
        window: (Series<Windows>, Int, inout WindowStats) -> Void, slid: (Series<Windows>, Int, inout WindowStats) -> Void,
        whole: (Series<Windows>, inout SeriesSnapshot) -> Void
    ) {
        // The series is reached in place (`&`): reading a field of it through the key path
        // copies the whole series (its windows retained and released), a tenth of a build.
        for index in tables[keyPath: table].indices {
            if tables[keyPath: table][index].computedNanos == .max {
                guard firstFigures else {
                    snapshotPass.awaitingFigures += 1
                    continue
                }
                snapshotPass.shownFirst += 1
            } else if tables[keyPath: table][index].showsTheSame(atNanos: now) {
                // Most series of a busy bot: its snapshot as it is, its storage not read.
                result.append(tables[keyPath: table][index].cached)
                snapshotPass.unchangedUntilNanos = min(snapshotPass.unchangedUntilNanos, tables[keyPath: table][index].unchangedUntilNanos)
                if packing.packsQuiet, tables[keyPath: table][index].windowsHoldingValues == 0, !result[result.count - 1].isPacked {
                    packing.places.append(result.count - 1)
                }
                continue
            }
            let refreshed = Self.refresh(
                &tables[keyPath: table][index], countsBytes: countsBytes, layout: layout, emptyWindows: emptyWindows, now: now,
                versions: &versions, rateMovesEachSlice: rateMovesEachSlice, window: window, slid: slid, whole: whole)
            memory.counts += refreshed.countsGrowth
            snapshotPass.unchangedUntilNanos = min(snapshotPass.unchangedUntilNanos, tables[keyPath: table][index].unchangedUntilNanos)
            result.append(refreshed.snapshot)
            // A series that shows what it showed shows no new ceiling either; a quiet one is in
            // a block, unless the pass that found it quiet left series out (`packsQuiet`).
            guard refreshed.changed else {
                if packing.packsQuiet, !refreshed.snapshot.isPacked, tables[keyPath: table][index].windowsHoldingValues == 0 {
                    packing.places.append(result.count - 1)
                }
                continue
            }
            packing.leftABlock = packing.leftABlock || refreshed.wasPacked
            if tables[keyPath: table][index].windowsHoldingValues == 0 { packing.places.append(result.count - 1) }
            if let metric = tables[keyPath: table][index].takeSaturation(shown: refreshed.snapshot) { noteSaturation(of: metric) }
        }
    }

    /// What `refresh` made of a series: its snapshot, whether that changed (and the figures it
    /// showed were in a block), and how much its counts grew since last measured.
    private struct Refreshed {
        var snapshot: SeriesSnapshot
        var changed: Bool
        var wasPacked: Bool
        var countsGrowth: Int
    }

    /// Whether a series' snapshot shows a total at its ceiling, where it stays (saturating
    /// arithmetic: it never wraps back): a histogram's count or sum, a counter's total, records
    /// dropped, calls gathered.
    static func showsSaturation(_ snapshot: SeriesSnapshot) -> Bool {
        let total: UInt128 = snapshot.metric.kind == .counter ? UInt128(UInt64.max) : .max
        return snapshot.cumulativeCount == .max || snapshot.cumulativeExactSum == total || snapshot.droppedRecords == .max
            || snapshot.sampledRecords == .max || snapshot.signedCumulative?.isSaturated == true
    }

    /// Counts a series whose total reached its ceiling, and keeps it for the log.
    private mutating func noteSaturation(of metric: MetricDescriptor) {
        saturation.count += 1
        saturation.newly.append(metric)
    }

    /// The series that reached a ceiling since the last call, for the log.
    mutating func takeNewlySaturated() -> [MetricDescriptor] {
        defer { saturation.newly.removeAll() }
        return saturation.newly
    }

    /// The series' snapshot, recomputing only the windows that may have changed (all of them,
    /// and the whole-series figures, when records arrived): `window` fills in the statistics of
    /// a window (an index into the layout's), starting from empty ones; `whole` sets the
    /// whole-series figures (the control cell's, every kind has, set here); `slid` brings to
    /// `now` the statistics of a window that holds the same values (its rate, all that moves).
    /// A series whose windows are all empty shows `emptyWindows`, which every such series of the
    /// bot shares. It then shows the same until `unchangedUntilNanos`, unless records arrive: the
    /// next slice of a window that holds values where the figures keep a rate
    /// (`rateMovesEachSlice`: a counter's), else when such a window next holds other values or
    /// its covered span starts elsewhere (`holdsTheSameUntil`: a young series' values stay in
    /// its windows for their whole length, only the rate's end moves, and that is read).
    private static func refresh<Windows: SlidingSeries>(
        _ series: inout Series<Windows>, countsBytes: ((Windows) -> Int)?, layout: WindowLayout, emptyWindows: [WindowStats],
        now: UInt64, versions: inout VersionCounter, rateMovesEachSlice: Bool,
        window: (Series<Windows>, Int, inout WindowStats) -> Void, slid: (Series<Windows>, Int, inout WindowStats) -> Void,
        whole: (Series<Windows>, inout SeriesSnapshot) -> Void
    ) -> Refreshed {
        let countsGrowth = series.touched ? countsBytes.map { series.measureCounts($0) } ?? 0 : 0
        let shown = (version: series.cached.version, wholeVersion: series.cached.wholeVersion, isPacked: series.cached.isPacked)
        var snapshot = series.cached
        let first = series.computedNanos == .max
        if first {
            snapshot.update { fields in
                fields.id = versions.next()
                fields.windows = emptyWindows
            }
        }
        var windowsChanged = series.touched || first
        for index in layout.windowNanos.indices {
            // Every window's statistics were computed at `computedNanos` (see the end).
            guard
                series.touched || first
                    || layout.sliceID(window: index, atNanos: now) != layout.sliceID(window: index, atNanos: series.computedNanos)
            else {
                continue
            }
            if !series.touched && !first {
                // Nothing recorded since: an empty window stays empty, and one that no slice
                // left holds the same values; only what the span it covers divides moves.
                if snapshot.windows[index].isEmpty { continue }
                if !series.windows.windowMayHaveChanged(index, since: series.computedNanos, to: now) {
                    var stats = snapshot.windows[index]
                    slid(series, index, &stats)
                    if stats.rate != snapshot.windows[index].rate || stats.coveredFromNanos != snapshot.windows[index].coveredFromNanos {
                        snapshot.windows[index] = stats
                        windowsChanged = true
                    }
                    continue
                }
            }
            var stats = WindowStats()
            if index > 0, series.exemplars == nil, series.windows.holdsTheSameRecords(window: index, as: index - 1, nowNanos: now) {
                // The window before's figures, made at `now` (a young series' windows hold its one
                // tick alone): their quantiles are not made again, and their storage is shared.
                // Exemplars are kept apart from the values: a series with some makes each window's.
                stats = snapshot.windows[index - 1]
                slid(series, index, &stats)
            } else {
                window(series, index, &stats)
            }
            // An empty window that stays empty changes nothing.
            if stats.isEmpty && snapshot.windows[index].isEmpty && !series.touched { continue }
            snapshot.windows[index] = stats
            if stats.isEmpty { series.windowsHoldingValues &= ~(1 << index) } else { series.windowsHoldingValues |= 1 << index }
            windowsChanged = true
        }
        series.computedNanos = now
        series.unchangedUntilNanos = layout.windowNanos.indices.reduce(UInt64.max) { until, index in
            guard series.windowsHoldingValues & 1 << index != 0 else { return until }
            let next =
                rateMovesEachSlice
                ? layout.sliceStartNanos(window: index, sliceID: layout.sliceID(window: index, atNanos: now) + 1)
                : series.windows.holdsTheSameUntil(window: index, nowNanos: now)
            return min(until, next)
        }
        if windowsChanged, snapshot.windows.allSatisfy(\.isEmpty) { snapshot.windows = emptyWindows }
        if series.touched || first {
            whole(series, &snapshot)
            snapshot.control = series.cells.control
            snapshot.wholeVersion = versions.next()
        }
        if windowsChanged { snapshot.version = versions.next() }
        series.cached = snapshot
        series.touched = false
        return Refreshed(
            snapshot: snapshot, changed: snapshot.version != shown.version || snapshot.wholeVersion != shown.wholeVersion,
            wasPacked: shown.isPacked, countsGrowth: countsGrowth)
    }
}

extension BotAggregator.Series {
    /// Whether its snapshot at `now` is the one cached: nothing recorded since, and not yet the
    /// time its windows' figures next move (`unchangedUntilNanos`, see `refresh`).
    func showsTheSame(atNanos now: UInt64) -> Bool {
        !touched && computedNanos != .max && now < unchangedUntilNanos
    }

    /// Marks it saturated when `shown`, its latest snapshot, first shows a total at its ceiling.
    /// - Returns: its metric then (for the log, once), else nil.
    mutating func takeSaturation(shown: SeriesSnapshot?) -> MetricDescriptor? {
        guard !saturated, let shown, BotAggregator.showsSaturation(shown) else { return nil }
        saturated = true
        return metric
    }

    /// Measures what its counts hold (`bytes` of its windows) and returns how much that grew
    /// since last measured: when records arrived since the last snapshot, or its slices went.
    mutating func measureCounts(_ bytes: (Windows) -> Int) -> Int {
        let measured = bytes(windows)
        defer { countsBytes = measured }
        return measured - countsBytes
    }
}

/// What a bot's snapshot passes leave, for the publisher and for the next pass.
struct SnapshotPassState {
    /// Series whose windows' slices were let go since last asked (`takeWindowsLetGo`).
    var windowsLetGo = 0
    /// A series in a block went since the last pass that packed (a worker's gauge, with its
    /// file): the next looks for blocks most of whose series are gone.
    var removedFromABlock = false
    /// Series the last pass left out, their first figures not made (see `snapshots`), and
    /// those it showed for the first time.
    var awaitingFigures = 0
    var shownFirst = 0
    /// Until when the series the last pass showed show what they showed (see
    /// `seriesUnchangedUntilNanos`): the earliest of theirs.
    var unchangedUntilNanos: UInt64 = .max
    /// The last pass left series out, so it put none in blocks: the next that shows every
    /// series puts every quiet one in.
    var packingLeft = false
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

    /// Window `window` of a histogram series, of unsigned or signed values alike, as of `now`:
    /// its figures, and where the span it covers starts (its rate is read from it). An empty
    /// window keeps no quantiles (an empty list allocates nothing): it has none to show.
    fileprivate mutating func take<Slice: HistogramFigures>(
        _ window: Int, of windows: Windowed<Slice>, nowNanos now: UInt64, quantiles: [Double]
    ) {
        let histogram = windows.snapshot(window: window, nowNanos: now)
        count = histogram.count
        sum = histogram.sum
        min = Int128(histogram.min)
        max = Int128(histogram.max)
        mean = histogram.mean
        // Allocation is most of a burst's figures: a window emptied as its values left keeps
        // none, and one whose values are all the same (one value, most often) makes one list,
        // not the histogram's and a widened copy.
        if histogram.isEmpty {
            quantileValues = nil
        } else if histogram.min == histogram.max {
            quantileValues = Array(repeating: Int128(histogram.max), count: quantiles.count)
        } else {
            quantileValues = histogram.values(atQuantiles: quantiles).map { Int128($0) }
        }
        takeCoveredFrom(window, of: windows, nowNanos: now)
    }

    /// Where the span window `window`, whose `count` is taken, covers at `now` starts (0: empty).
    fileprivate mutating func takeCoveredFrom<Slice: HistogramFigures>(_ window: Int, of windows: Windowed<Slice>, nowNanos now: UInt64) {
        coveredFromNanos = count == 0 ? 0 : windows.coveredFromNanos(window: window, nowNanos: now)
    }
}

extension SeriesSnapshot {
    /// The whole-series figures histograms of unsigned and signed values share: `cumulative`'s
    /// count and sum, and from the cells, what was dropped, gathered and clamped.
    fileprivate mutating func takeHistogramTotals(_ cumulative: some HistogramFigures, cells: MetricCells, sampled: UInt64) {
        update { fields in
            fields.cumulativeCount = cumulative.count
            fields.cumulativeSum = cumulative.sum
            fields.droppedRecords = cells.dropped
            fields.sampledRecords = sampled
            fields.clampedValues = cells.clamped
            fields.exemplarsRefused = cells.exemplarsRefused
        }
    }
}

/// What a window's statistics take from a histogram, of unsigned or signed values.
private protocol HistogramFigures: WindowedHistogramSlice where Value: BinaryInteger {
    var count: UInt64 { get }
    var sum: Double { get }
    var mean: Double { get }
    var isEmpty: Bool { get }
    var min: Value { get }
    var max: Value { get }
    func values(atQuantiles quantiles: [Double]) -> [Value]
}

extension Histogram: HistogramFigures {}
extension SignedHistogram: HistogramFigures {}
