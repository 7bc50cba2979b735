import CRingside
import RingsideSnapshot
import Ringside
import RingsideAggregation

extension BotAggregator {
    /// Where a registered metric's records go: the address of its series (its kind's table and
    /// the slot in it) and the weight a record counts with. 12 bytes, as a bot holds one per
    /// metric of each of its files and one per series in its index.
    struct SeriesAddress {
        private var slotIndex: Int32
        /// Histogram counts per call: the metric's "1 in N" sampling (its gathered calls count as
        /// much: SAMPLING in ringside.h).
        private var sampleEvery: UInt32
        var kind: UInt8
        /// A signed histogram's: its series is in `signedHistograms`, and its values are stored
        /// in offset binary (VALUES in ringside.h).
        var isSigned: Bool

        init(kind: UInt8, slot: Int, weight: UInt32, isSigned: Bool = false) {
            (self.kind, self.isSigned, slotIndex, sampleEvery) = (kind, isSigned, Int32(slot), weight)
        }

        /// Its series' index in its kind's table (`refusedSlot`: none). A bot holds far fewer than
        /// 2^31 series: each takes hundreds of bytes, and the series caps stop it long before.
        var slot: Int {
            get { Int(slotIndex) }
            set { slotIndex = Int32(newValue) }
        }
        var weight: UInt64 { UInt64(sampleEvery) }
    }

    /// One file of the bot: how its registry's indices map to series, and what its records cost.
    struct Source {
        var addresses: [SeriesAddress] = []
        /// Records refused: unknown metric, wrong kind, or a sequence that disagrees with its cursor.
        var rejected: UInt64 = 0
        /// Histogram calls its lanes gathered rather than wrote while they filled (SAMPLING in
        /// ringside.h), counted from their gather cells.
        var sampled: UInt64 = 0
        /// This drain's gathered calls not placed in a bucket yet (see `drain`).
        var gathered = GatherPlacement()
        /// Its metrics given no series (a cap, or another kind under the same name and labels),
        /// and their records since (valid, but not aggregated).
        var refusedSeries = 0, refusedRecords: UInt64 = 0
        var inUse = true
        /// The pid of the process that writes it: a per-worker gauge's label.
        var pid: Int32 = 0
        /// Exemplars half read, by lane.
        var exemplars = ExemplarAssembler()
        /// Its metrics retired (RETIRING A SERIES in ringside.h), by registry index: their cells
        /// when the retirement was seen, which a revival counts from.
        var retiredCells: [Int: MetricCells] = [:]
        /// Retirements seen (series that left the bot, or this file's share of one).
        var retirements: UInt64 = 0
    }

    /// A source's cells of one series, what it counts toward the series' totals, and when the
    /// collector saw its cells change.
    struct SourceCells {
        /// As last read.
        var cells: MetricCells
        /// What it counts: a counter's total and the records dropped grow by what the cells grew
        /// by, saturating, and a cell read lower than before (a wrap at 2^64, or a hostile writer)
        /// counts as a reset (its new value is growth), so no total ever goes back; the rest as read.
        var counted: MetricCells
        var changedNanos: UInt64

        /// What `cells`, read after `before`, count: `before`'s count grown by the cells' growth.
        init(_ cells: MetricCells, after before: SourceCells?, changedNanos: UInt64) {
            var counted = cells
            if let before {
                counted.total = before.counted.total.saturatingAdd(Self.growth(from: before.cells.total, to: cells.total))
                counted.dropped = before.counted.dropped.saturatingAdd(Self.growth(from: before.cells.dropped, to: cells.dropped))
            }
            self.cells = cells
            self.counted = counted
            self.changedNanos = changedNanos
        }

        /// Cells read as `cells`, counting `counted` (a revived series' start: RETIRING A SERIES).
        init(counting counted: MetricCells, from cells: MetricCells) {
            self.cells = cells
            self.counted = counted
            changedNanos = 0
        }

        /// How much a cell read `before`, then `now`, grew: a cell read lower was reset (its whole value is new).
        static func growth(from before: UInt64, to now: UInt64) -> UInt64 { now >= before ? now - before : now }
    }

    struct Series<Windows> {
        /// A per-worker gauge's source: the series goes when it does.
        var owner: Int?
        /// Records arrived since the last snapshot of this series.
        var touched = true
        /// A total of it reached its ceiling (see `noteSaturation`): counted once.
        var saturated = false
        /// The windows of its cached statistics that hold values (bit `1 << index`, at most 16
        /// windows; none: the series is quiet). Beside the flags: it fits in their padding, a
        /// million series pay nothing for it.
        var windowsHoldingValues: UInt16 = 0
        /// Gauges merged by sum, max or min: each source's last recorded value, whose merge the
        /// windows take at each record.
        var recordedValues: [Double?] = []
        var windows: Windows
        /// The last snapshot (its metric the series' own, and before the first snapshot its id 0);
        /// a window of it is reused until records arrive or its slice rotates.
        var cached: SeriesSnapshot
        /// When its cached statistics were computed (`UInt64.max`: never, nor the rest of its
        /// snapshot): every window's were computed in that time's slice (`layout.sliceID`).
        var computedNanos: UInt64 = .max
        /// Until when its cached snapshot holds if nothing is recorded (see `refresh`).
        var unchangedUntilNanos: UInt64 = 0
        /// The cells merged over the sources: a counter's exact total, a gauge's last value, drops.
        /// Held apart, and shared while they stay as they start: most histograms' never move.
        private var mergedCells = BotAggregator.noCells
        var cells: MetricCells { mergedCells.value }
        /// Each source's cells (by source index), and what removed sources left: their totals
        /// and drops, and the last value one of them set (and when).
        var sourceCells: [SourceCells?] = []
        var folded = BotAggregator.nothingFolded
        /// Histograms: the bytes their counts held when last measured.
        var countsBytes = 0
        /// Histograms: the exemplars kept, from the first one recorded.
        var exemplars: Indirect<WindowedExemplars>?
        /// Histograms: calls gathered rather than written while a lane filled, since this
        /// collector started (counted, summed and placed all the same: SAMPLING in ringside.h).
        var sampled: UInt64 = 0

        /// A series of bot `ring`'s metric `metric`, nothing recorded yet.
        init(ring: String, metric: MetricDescriptor, owner: Int? = nil, windows: Windows) {
            cached = SeriesSnapshot(ring: ring, metric: metric, id: 0, windows: [])
            self.owner = owner
            self.windows = windows
        }

        /// Its metric: kept once, in its snapshot.
        var metric: MetricDescriptor { cached.metric }
        /// Its metric's gauge merge, without a copy of the metric.
        var gaugeMerge: GaugeMerge { cached.gaugeMerge }

        /// Keeps `sampled`, source `source`'s cells as just read, and merges.
        /// - Returns: how much the source's total grew, and whether the merged cells changed.
        mutating func takeCells(_ sampled: MetricCells, from source: Int, nowNanos now: UInt64) -> (growth: UInt64, changed: Bool) {
            let before = source < sourceCells.count ? sourceCells[source] : nil
            // Cells that stay as they start (nothing counted, dropped or set) are not kept: most
            // histograms' never move, and an idle series holds no copy of them.
            guard sampled != before?.cells, before != nil || sampled != MetricCells() else { return (0, false) }
            if sourceCells.count <= source { sourceCells += Array(repeating: nil, count: source + 1 - sourceCells.count) }
            // A gauge that was never set is not newer than one that was.
            let changedNanos = before == nil && sampled.lastValue == nil ? 0 : now
            let taken = SourceCells(sampled, after: before, changedNanos: changedNanos)
            sourceCells[source] = taken
            return (taken.counted.total - (before?.counted.total ?? 0), merge())
        }

        /// Folds source `source`'s cells into what removed sources left: the merged cells stay.
        mutating func removeSource(_ source: Int) {
            guard source < sourceCells.count, let gone = sourceCells[source] else { return }
            folded.value.cells = Self.folding(gone, into: folded.value.cells)
            folded.value.cells.control = 0  // the switches are the live files' only
            if gone.cells.lastValue != nil, gone.changedNanos >= folded.value.changedNanos {
                folded.value.cells.lastValue = gone.cells.lastValue
                folded.value.changedNanos = gone.changedNanos
            }
            sourceCells[source] = nil
            if source < recordedValues.count { recordedValues[source] = nil }
            _ = merge()
        }

        /// `cells` with what `source` counts added (saturating; the dropped values' sum modulo
        /// 2^64, as the files keep it): its figures once it is folded in, or merged.
        static func folding(_ source: SourceCells, into cells: MetricCells) -> MetricCells {
            var result = cells
            result.total = cells.total.saturatingAdd(source.counted.total)
            result.dropped = cells.dropped.saturatingAdd(source.counted.dropped)
            result.droppedSum = cells.droppedSum &+ source.cells.droppedSum
            result.droppedMax = max(cells.droppedMax, source.cells.droppedMax)
            result.clamped = cells.clamped.saturatingAdd(source.cells.clamped)
            result.exemplarsRefused = cells.exemplarsRefused.saturatingAdd(source.cells.exemplarsRefused)
            // The operator's tool writes every file of a bot alike; while it does, off wins, and the sparser sampling.
            let off = (cells.control | source.cells.control) & (RS_CONTROL_OFF | RS_CONTROL_BOT_OFF)
            result.control = off | max(cells.control & RS_CONTROL_SAMPLE, source.cells.control & RS_CONTROL_SAMPLE)
            return result
        }

        /// Takes what removed sources left before this collector started (see `CollectorState`):
        /// added to what this run folded already (nothing, as a rule), saturating.
        mutating func takeFolded(_ seed: MetricCells) {
            folded.value.cells.total = folded.value.cells.total.saturatingAdd(seed.total)
            folded.value.cells.dropped = folded.value.cells.dropped.saturatingAdd(seed.dropped)
            _ = merge()
        }

        /// What removed sources left once source `source` is folded in too, if it counted toward
        /// this series (nil when it did not): for `CollectorState`.
        func foldedEntry(folding source: Int) -> CollectorState.Entry? {
            guard source < sourceCells.count, let live = sourceCells[source], live.counted.total > 0 || live.counted.dropped > 0
            else { return nil }
            let cells = Self.folding(live, into: folded.value.cells)
            return CollectorState.Entry(metric: metric.name, labels: metric.encodedLabels, total: cells.total, dropped: cells.dropped)
        }

        /// The merged cells: sums, and a gauge's value by its policy: the value set last (the
        /// source seen to change it latest), or the sum, max or min of the live sources' values.
        private mutating func merge() -> Bool {
            var merged = folded.value.cells
            var latest = folded.value.changedNanos
            for case let source? in sourceCells {
                merged = Self.folding(source, into: merged)
                if let value = source.cells.lastValue, merged.lastValue == nil || source.changedNanos > latest {
                    merged.lastValue = value
                    latest = source.changedNanos
                }
            }
            if gaugeMerge.combinesLiveSources {
                merged.lastValue = gaugeMerge.combine(sourceCells.lazy.map { $0?.cells.lastValue })
            }
            guard merged != cells else { return false }
            mergedCells.value = merged
            touched = true
            return true
        }
    }

    /// What a series starts with of gone sources: nothing, shared by every series until one folds a source.
    static let nothingFolded = Indirect(SourceCells(MetricCells(), after: nil, changedNanos: 0))
    /// The cells a series starts with (nothing counted, dropped or set), shared by every series
    /// until its own move.
    static let noCells = Indirect(MetricCells(total: 0, dropped: 0, lastValue: nil))

    /// The series a bot holds and the memory they are charged (see `SeriesCost`); also what
    /// the caps leave it room for.
    struct Usage {
        var series = 0
        var bytes = 0
    }

    /// Where a series is, by metric name and encoded labels.
    struct SeriesKey: Hashable {
        let name: String
        let labels: String
    }
}

extension BotAggregator.Series {
    /// Takes a histogram's record (unsigned or signed): its windows count it and the series is
    /// marked touched, in one access to the series (the drain's every record; two accesses checked
    /// the table unique twice).
    mutating func record<Slice>(_ value: Slice.Value, count: UInt64, atNanos time: UInt64) where Windows == Windowed<Slice> {
        windows.record(value, count: count, atNanos: time)
        touched = true
    }
}

extension BotAggregator.Series where Windows == WindowedGauge {
    /// Takes a gauge's record from `source`: its windows see the value set, or, for a gauge merged
    /// by sum, max or min, that merge over the sources' last recorded values.
    mutating func set(_ value: Double, from source: Int, atNanos time: UInt64) {
        touched = true
        guard gaugeMerge.combinesLiveSources else {
            windows.set(value, atNanos: time)
            return
        }
        if recordedValues.count <= source { recordedValues += Array(repeating: nil, count: source + 1 - recordedValues.count) }
        recordedValues[source] = value
        if let merged = gaugeMerge.combine(recordedValues) { windows.set(merged, atNanos: time) }
    }
}

extension GaugeMerge {
    /// Whether the merged value is computed over the live sources' values (sum, max, min).
    var combinesLiveSources: Bool { self == .sum || self == .max || self == .min }

    /// The sum, max or min of the values present; nil when none is.
    func combine(_ values: some Sequence<Double?>) -> Double? {
        var result: Double?
        for case let value? in values {
            guard let soFar = result else {
                result = value
                continue
            }
            switch self {
            case .sum: result = soFar + value
            case .max: result = Swift.max(soFar, value)
            case .min: result = Swift.min(soFar, value)
            case .last, .perWorker: result = value
            }
        }
        return result
    }
}

extension MetricDescriptor {
    /// The descriptor with the label `pid="<pid>"` added, for a per-worker gauge's series; nil
    /// when the labels cannot take it (a `pid` of their own, or too long).
    func labelled(pid: Int32) -> MetricDescriptor? {
        var pairs = labelDictionary
        guard pairs["pid"] == nil else { return nil }
        pairs["pid"] = String(pid)
        guard case let .success(encoded) = MetricDescriptor.encode(labels: pairs) else { return nil }
        return MetricDescriptor(
            index: index, name: name, kind: kind, unit: unit, encodedLabels: encoded, help: help,
            sampleEvery: sampleEvery, gaugeMerge: gaugeMerge)
    }
}
