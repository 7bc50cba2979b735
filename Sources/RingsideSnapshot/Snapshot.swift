import RingsideSystem
import Ringside
import RingsideAggregation
import Synchronization

/// What the collector knows at one moment, as plain values: the drain thread builds it, the
/// HTTP thread and the JSON dump read it. A histogram's values are whole numbers of its metric's
/// step, `10^scale` of its unit (VALUES in ringside.h: `scale` 0, whole units, for most), signed
/// for a signed histogram: `Int128` holds every value of either form exactly.
package struct Snapshot: Sendable {
    /// CLOCK_REALTIME when it was built.
    package var generatedRealtimeNanos: UInt64 = 0
    /// CLOCK_REALTIME when its figures were last known to hold: when it was built, or later, when
    /// the collector found every ring still quiet (no record, no window to slide; a counter's
    /// cells are looked at every 2 s then, or as the collector's `CellSamplingPace` allows). What its
    /// age is told from.
    package var currentRealtimeNanos: UInt64 = 0
    /// Increases with every snapshot; exporters cache their text by it.
    package var generation: UInt64 = 0
    /// Window lengths, in the order of every series' `windows`.
    package var windowNanos: [UInt64] = []
    /// CLOCK_MONOTONIC when its series' figures were taken (the last pass of its build), and the
    /// windows' tick: a histogram window's rate is read at that time (`WindowStats.valuesPerSecond`).
    package var monotonicNanos: UInt64 = 0
    package var tickNanos: UInt64 = 1
    package var quantiles: [Double] = []
    /// With `--native-histograms`: the schema of the native buckets histograms carry in protobuf.
    package var nativeHistogramSchema: Int?
    /// Each bot's series, a part each (see `SeriesList`).
    package var series = SeriesList()
    package var rings: [RingSnapshot] = []
    package var slos: [SLOSnapshot] = []
    package var collector = CollectorStats()
    /// The thread sampler's latest round, when it runs (`--thread-sample-interval`): attached to
    /// each snapshot served, as it comes on its own cadence.
    package var threadHealth: ThreadHealthSample?

    package init() {}
}

/// One series: a ring's metric with its labels.
///
/// Its figures are held once on the heap and shared by every copy, copied on write: a quiet
/// series is in the snapshot being built, the one published and its bot's cache at once, and
/// each holds 16 bytes of it, not the 256 of its figures. Read and write them as properties
/// (`snapshot.cumulativeCount`, in `SeriesSnapshot+Figures.swift`): see ``Fields``.
package struct SeriesSnapshot: Sendable {
    /// A series' figures, as plain values.
    package struct Fields: Sendable {
        // The 128-bit figures first, so that their alignment costs no padding.
        /// The all-time sum exactly, in steps, for histograms of unsigned values and counters: a
        /// `Double` is not exact past 2^53, and a busy series passes that in days.
        package var cumulativeExactSum: UInt128 = 0
        /// Histograms: the largest value ever recorded, exact (gathered calls included).
        package var cumulativeMax: Int128 = 0
        package var ring: String
        package var metric: MetricDescriptor
        /// Identifies the series across snapshots, for the whole life of the collector.
        package var id: UInt64
        /// Change when the window statistics (`version`) or the whole-series figures
        /// (`wholeVersion`: the all-time histogram, totals, last value) change, so an exporter may reuse
        /// what it rendered for either part.
        package var version: UInt64 = 0
        package var wholeVersion: UInt64 = 0
        /// One entry per window (the snapshot's `windowNanos`).
        package var windows: [WindowStats]
        /// Gauges: the last value set, if any.
        package var lastValue: Double?
        /// Histograms: all-time count and sum; counters: all-time total (scaled by sampling).
        package var cumulativeCount: UInt64 = 0
        package var cumulativeSum: Double = 0
        /// What few series have, held apart (nil: none of it): see ``Rare``.
        private var rare: Indirect<Rare>?
        /// Histograms: every value recorded, all time (set through `cumulative` or
        /// `signedCumulative`, which forget the classic buckets computed from the one before).
        package fileprivate(set) var allTime: AllTime?

        /// The figures that stay 0 (or empty) for most series: drops, gathered calls, clamped values,
        /// the operator's switches, exemplars, a signed sum. A series that has none of them pays 8
        /// bytes for them, not 90 (a million series are mostly quiet ones).
        private struct Rare: Sendable, Equatable {
            var droppedRecords: UInt64 = 0
            var droppedSum: Int128 = 0, droppedMax: Int128 = 0
            var cumulativeSignedSum: Int128 = 0
            var sampledRecords: UInt64 = 0
            var clampedValues: UInt64 = 0
            var exemplarsRefused: UInt64 = 0
            var control: UInt32 = 0
            var bucketExemplars: [KeptExemplar] = []
        }

        /// Sets a rare figure (`write`); setting one to its default (`isDefault`) where none was
        /// set keeps nothing. A closure, not a key path: every series' figures are set at every
        /// snapshot, and a key path is projected at run time (its generic metadata looked up),
        /// 4 % of the drain thread while a million series registered (0.6 % now).
        private mutating func setRare(isDefault: Bool, _ write: (inout Rare) -> Void) {
            if rare == nil {
                guard !isDefault else { return }
                rare = Indirect(Rare())
            }
            write(&rare!.value)
        }

        /// Signed histograms: the sum exactly, in steps (`cumulativeExactSum` is 0 for them).
        package var cumulativeSignedSum: Int128 {
            get { rare?.value.cumulativeSignedSum ?? 0 }
            set { setRare(isDefault: newValue == 0) { $0.cumulativeSignedSum = newValue } }
        }
        /// Histograms and gauges: records of this series dropped (full lanes, or threads without one).
        package var droppedRecords: UInt64 {
            get { rare?.value.droppedRecords ?? 0 }
            set { setRare(isDefault: newValue == 0) { $0.droppedRecords = newValue } }
        }
        /// Histograms: the dropped records' values, their sum (modulo 2^64: unsigned, or read as an
        /// int64 for a signed histogram) and the largest (0 when none dropped): what a full lane hid
        /// from the windows.
        package var droppedSum: Int128 {
            get { rare?.value.droppedSum ?? 0 }
            set { setRare(isDefault: newValue == 0) { $0.droppedSum = newValue } }
        }
        package var droppedMax: Int128 {
            get { rare?.value.droppedMax ?? 0 }
            set { setRare(isDefault: newValue == 0) { $0.droppedMax = newValue } }
        }
        /// Histograms: calls gathered rather than written while a lane filled (SAMPLING in
        /// ringside.h), since this collector started: counted in `cumulativeCount`, their sum in the
        /// sum and their largest in the maximum, exactly; their buckets from the records beside them.
        package var sampledRecords: UInt64 {
            get { rare?.value.sampledRecords ?? 0 }
            set { setRare(isDefault: newValue == 0) { $0.sampledRecords = newValue } }
        }
        /// Histograms and counters: values its producers clamped to what the metric holds, or did not
        /// record (a NaN), as VALUES in ringside.h says: counted, never wrapped.
        package var clampedValues: UInt64 {
            get { rare?.value.clampedValues ?? 0 }
            set { setRare(isDefault: newValue == 0) { $0.clampedValues = newValue } }
        }
        /// Histograms: exemplars its producers refused (malformed, or given to a signed histogram),
        /// their values recorded without them (EXEMPLARS in ringside.h).
        package var exemplarsRefused: UInt64 {
            get { rare?.value.exemplarsRefused ?? 0 }
            set { setRare(isDefault: newValue == 0) { $0.exemplarsRefused = newValue } }
        }
        /// The operator's switches over the bot's live files (CONTROL in ringside.h): off, the bot off,
        /// a histogram sampled 1 in 2^n (the low five bits) on top of its registered 1 in N.
        package var control: UInt32 {
            get { rare?.value.control ?? 0 }
            set { setRare(isDefault: newValue == 0) { $0.control = newValue } }
        }
        /// Histograms: the latest exemplar of each bucket that had one (at most 64), by value.
        package var bucketExemplars: [KeptExemplar] {
            get { rare?.value.bucketExemplars ?? [] }
            set { setRare(isDefault: newValue.isEmpty) { $0.bucketExemplars = newValue } }
        }

        init(ring: String, metric: MetricDescriptor, id: UInt64, windows: [WindowStats]) {
            (self.ring, self.metric, self.id, self.windows) = (ring, metric, id, windows)
        }
    }

    /// The figures of one series (a box, which a copy holding it alone writes in place), or of
    /// many (a block, never written: a copy that writes takes its figures out into a box of its
    /// own). A block holds the series a bot let go quiet in one publish, side by side: their
    /// figures stay, unchanged, for as long as they are quiet, and are not left scattered
    /// between the boxes of busy series that come and go at every publish (which kept pages
    /// resident for a few of them each: 1.1 KB a quiet series at a million, against 0.7 KB).
    /// `@unchecked`: only a copy that holds a box alone writes it.
    @usableFromInline
    final class Storage: @unchecked Sendable {
        /// Unchecked: every figure read or written went through the run-time exclusivity check
        /// (the box is a class), 6 % of the drain thread building a million series' snapshot;
        /// only a copy that holds the box alone writes it, and never while reading it.
        @exclusivity(unchecked) @usableFromInline var fields: ContiguousArray<Fields>
        /// The all-time histograms' classic buckets (see ``classicCounts(_:)``), by the place of
        /// their series; empty until the first is computed.
        let classic: Locked<ContiguousArray<CompactCumulativeCounts?>>

        init(_ fields: ContiguousArray<Fields>, classic: ContiguousArray<CompactCumulativeCounts?> = []) {
            self.fields = fields
            self.classic = Locked(classic)
        }

        /// The classic counts kept for the series at `place`, if any.
        func classic(at place: Int) -> CompactCumulativeCounts? {
            classic.withLock { $0.isEmpty ? nil : $0[place] }
        }
    }

    @usableFromInline var storage: Storage
    /// Where its figures are in `storage`: 0 in a box.
    @usableFromInline var place: Int

    package init(ring: String, metric: MetricDescriptor, id: UInt64, windows: [WindowStats]) {
        storage = Storage([Fields(ring: ring, metric: metric, id: id, windows: windows)])
        place = 0
    }

    private init(storage: Storage, place: Int) {
        (self.storage, self.place) = (storage, place)
    }

    /// Writes several figures at once, in this copy alone.
    package mutating func update<Result>(_ body: (inout Fields) throws -> Result) rethrows -> Result {
        makeUnique()
        return try body(&storage.fields[0])
    }

    /// Gives this copy a box of its own before it writes its figures (then at `place` 0).
    @usableFromInline
    mutating func makeUnique() {
        if storage.fields.count == 1, isKnownUniquelyReferenced(&storage) { return }
        let classic = storage.classic(at: place)
        storage = Storage([storage.fields[place]], classic: classic.map { [$0] } ?? [])
        place = 0
    }

    /// Whether two copies share their figures (so nothing changed between them).
    package func sharesFigures(with other: SeriesSnapshot) -> Bool { storage === other.storage && place == other.place }

    /// Whether its figures are in a block with other series' (see ``packed(_:)``).
    package var isPacked: Bool { storage.fields.count > 1 }

    /// The block its figures are in (nil in a box of its own): which, and how many series it holds.
    package var block: (id: ObjectIdentifier, capacity: Int)? {
        isPacked ? (ObjectIdentifier(storage), storage.fields.count) : nil
    }

    /// The same series, its figures in a box of its own (out of its block, if it was in one).
    package func unpacked() -> SeriesSnapshot {
        var copy = self
        copy.makeUnique()
        return copy
    }

    /// The same series, their figures moved into one block, side by side (see `Storage`), with
    /// the classic counts computed for them: what a bot's series that went quiet together keep.
    package static func packed(_ series: [SeriesSnapshot]) -> [SeriesSnapshot] {
        guard series.count > 1 else { return series }
        let classic = series.map { $0.storage.classic(at: $0.place) }
        let block = Storage(
            ContiguousArray(series.map { $0.storage.fields[$0.place] }),
            classic: classic.contains { $0 != nil } ? ContiguousArray(classic) : [])
        return series.indices.map { SeriesSnapshot(storage: block, place: $0) }
    }

    /// Histograms of unsigned values: every value recorded, all time (its counts shared with the
    /// series' windows until either changes); the exporters compute their buckets from it when they
    /// render (see `ExportBuckets`).
    package var cumulative: Histogram? {
        get {
            guard case .unsigned(let histogram) = storage.fields[place].allTime else { return nil }
            return histogram
        }
        set {
            makeUnique()
            storage.fields[0].allTime = newValue.map(AllTime.unsigned)
            storage.classic.withLock { $0 = [] }
        }
    }

    /// Signed histograms (`metric.isSigned`): every value recorded, all time, as `cumulative` is
    /// for the others (which is nil for them).
    package var signedCumulative: SignedHistogram? {
        get {
            guard case .signed(let histogram) = storage.fields[place].allTime else { return nil }
            return histogram
        }
        set {
            makeUnique()
            storage.fields[0].allTime = newValue.map(AllTime.signed)
            storage.classic.withLock { $0 = [] }
        }
    }

    /// The classic buckets' counts of the all-time histogram: `compute`'s the first time, the same
    /// ever after, in this copy and in those made from it, until the all-time histogram changes:
    /// the collector hands the same figures to each snapshot while a series is quiet, so 10,000
    /// quiet series are not re-bucketed at every scrape. (The exporter owns the bounds; a series'
    /// unit, and so its bounds, never change.)
    package func classicCounts(_ compute: () -> [UInt64]) -> CompactCumulativeCounts {
        storage.classic.withLock { counts in
            if !counts.isEmpty, let kept = counts[place] { return kept }
            let computed = CompactCumulativeCounts(compute())
            if counts.isEmpty { counts = ContiguousArray(repeating: nil, count: storage.fields.count) }
            counts[place] = computed
            return computed
        }
    }
}

/// A histogram series' every value, all time: of unsigned values or signed ones, in one field.
package enum AllTime: Sendable {
    case unsigned(Histogram)
    /// Boxed: most histograms hold unsigned values, and pay for the 64 bytes of theirs alone.
    indirect case signed(SignedHistogram)
}

/// One lane of a bot: one thread's ring.
package struct LaneSnapshot: Sendable {
    package var index: Int
    package var state: LaneState
    /// The kernel thread id holding it (0 when retired).
    package var threadID: Int32
    /// The name its holder gave its thread ("" when none; see THREAD NAMES in ringside.h).
    package var threadName: String
    package var backlog: UInt64
    /// Records the lane's threads published, ever.
    package var recordsTotal: UInt64
    /// Records consumed, ever, by this collector and earlier ones.
    package var consumedTotal: UInt64
    package var droppedTotal: UInt64
    /// Seconds since the lane's last record (or claim).
    package var heartbeatAgeSeconds: Double
    /// When that was (CLOCK_MONOTONIC_COARSE; 0: not known): the thread holding it claimed it
    /// before, so it started before too (the thread sampler's test of a reused thread id).
    package var heartbeatMonotonicNanos: UInt64

    package init(
        index: Int, state: LaneState, threadID: Int32, threadName: String = "", backlog: UInt64, recordsTotal: UInt64,
        consumedTotal: UInt64, droppedTotal: UInt64, heartbeatAgeSeconds: Double, heartbeatMonotonicNanos: UInt64 = 0
    ) {
        self.index = index
        self.state = state
        self.threadID = threadID
        self.threadName = threadName
        self.backlog = backlog
        self.recordsTotal = recordsTotal
        self.consumedTotal = consumedTotal
        self.droppedTotal = droppedTotal
        self.heartbeatAgeSeconds = heartbeatAgeSeconds
        self.heartbeatMonotonicNanos = heartbeatMonotonicNanos
    }
}

/// A ring (a bot's file, with a lane per thread) as the collector sees it.
///
/// From one reading, exactly: `recordsTotal + droppedTotal` (records attempted) ==
/// `consumedTotal + droppedTotal + backlog`, for the bot and for each lane.
package struct RingSnapshot: Sendable {
    /// Its labels in the collector's own metrics: `ring` (the bot), and `worker` (its pid, and the
    /// random number of a name it took in place of its own: `4244.2718281828`) for a worker's
    /// file, so a bot's workers group under their bot; and `uid`, its file's owner, where the
    /// collector reads other users' files (`--allow-uid`), so that every file says whose it is.
    package var labels: [(String, String)] {
        var labels: [(String, String)] = worker == nil ? [("ring", name)] : [("ring", bot), ("worker", workerName)]
        if showsOwner, let owner { labels.append(("uid", String(owner))) }
        return labels
    }

    /// A worker file's name after its bot's and the separator: its pid, and a random number after it
    /// when it took another name (see WORKERS in ringside.h).
    package var workerName: String {
        guard let separator = name.lastIndex(of: "@") else { return worker.map { String($0) } ?? "" }
        return String(name[name.index(after: separator)...])
    }

    /// Whether its labels carry its owner: the collector reads other users' files (`--allow-uid`).
    package var showsOwner = false

    package enum State: String, Sendable {
        /// Attached, producer alive.
        case live
        /// Attached, its producer alive (it holds the lock) but stopped: SIGSTOP, or a debugger.
        case producerStopped = "producer_stopped"
        /// Attached, its producer has died; what it left is drained.
        case producerDead = "producer_dead"
        /// Refused: corrupt, owned by someone else, another consumer, ...; `problem` says why.
        case skipped
    }

    /// The file's name: a bot's, or a worker's `<bot>@<pid>`.
    package var name: String
    /// The bot it writes (its series are the bot's), and the worker's pid for a worker's file.
    package var bot: String
    package var worker: Int32?
    /// The user that owns its file (nil: not known). The thread sampler reads only that user's
    /// processes: the file names its producer's pid and its threads' ids itself.
    package var owner: UInt32?
    package var state: State
    /// Whether its producer process holds the bot (it may be stopped).
    package var producerAlive: Bool { state == .live || state == .producerStopped }
    /// Why it is skipped, or why an attached ring is quarantined.
    package var problem: String?
    /// Metrics given no series because a series cap was reached, and their records since; and
    /// what refused them: the cap's flag (`--max-series-per-ring`, `--max-series`,
    /// `--max-series-bytes`), or `kind` (another file of the bot registered the name and labels
    /// as another kind, unit or gauge policy).
    package var seriesRefused = 0
    package var seriesRefusedBy: String?
    package var recordsRefusedTotal: UInt64 = 0
    /// A bot's own file: processes refused a worker file, every one of the bot's held by a live
    /// worker (the bound, see docs/workers.md): they write nothing to the bot.
    package var workersRefusedTotal: UInt64 = 0
    /// Attached, but its records are not read for now: almost all of a pass's were invalid.
    package var quarantined = false
    package var quarantinesTotal: UInt64 = 0
    package var producerPID: Int32 = 0
    /// CLOCK_REALTIME when that process attached (0: unknown): it started before, so a process
    /// found at its pid that started after is another (the pid was reused).
    package var producerStartRealtimeNanos: UInt64 = 0
    package var capacity: UInt64 = 0
    package var backlog: UInt64 = 0
    /// Records the producer published, ever, in every lane.
    package var recordsTotal: UInt64 = 0
    /// Records consumed, ever, by this collector and earlier ones.
    package var consumedTotal: UInt64 = 0
    /// Records dropped: full lanes, and threads that found no lane (`unlanedDropped` of them).
    package var droppedTotal: UInt64 = 0
    package var unlanedDropped: UInt64 = 0
    /// Lanes the file may hold, and each lane now.
    package var maxLanes: Int = 0
    package var lanes: [LaneSnapshot] = []
    /// Records this collector drained, and refused as invalid.
    package var drainedTotal: UInt64 = 0
    package var rejectedTotal: UInt64 = 0
    /// Histogram records its lanes did not write while they filled, stood for by the weighted
    /// records this collector drained (SAMPLING in ringside.h).
    package var sampledTotal: UInt64 = 0
    /// Records in a lane past which its histograms are sampled, as its producer chose (0: never).
    package var sampleAbove: UInt32 = 0
    /// Seconds since the producer last wrote (or attached).
    package var heartbeatAgeSeconds: Double = 0
    package var metricCount: Int = 0

    package init(name: String, bot: String? = nil, worker: Int32? = nil, state: State, problem: String? = nil) {
        self.name = name
        self.bot = bot ?? name
        self.worker = worker
        self.state = state
        self.problem = problem
    }
}

/// A service-level objective's state.
package struct SLOSnapshot: Sendable {
    package var rule, statistic, window: String
    /// The severity its alerts carry (`severity=` after the rule; P1 by default).
    package var severity: String = "P1"
    /// Whether the objective is broken now; nil when its window holds no events (no data: neither
    /// met nor broken).
    package var violated: Bool?
    /// Transitions into violation since the collector started.
    package var violations: UInt64
    /// The fraction of the window's events that kept the threshold; nil when there were none.
    package var compliance: Double?
    /// The statistic's value now (in the metric's unit; a ratio's as a fraction), and the bound,
    /// when there is data.
    package var observed: Double?
    package var threshold: Double?
    /// Events in the window across the matching series.
    package var events: UInt64
    package var matchingSeries: Int
    /// The fraction of events the objective wants good (a ratio's 1 - bound, a quantile's
    /// quantile), nil for `max` and `mean`.
    package var objectiveRatio: Double?
    /// A ratio's: every event and every bad event counted since the collector started (the
    /// counters' increases: Prometheus takes any period from them); a gauge's, a rate's or a
    /// ratio's: how much of its period the collector has seen (less than the period until it has
    /// run that long).
    package var eventsTotal: UInt64?
    package var badEventsTotal: UInt64?
    package var coveredSeconds: Double?
    /// Series its selectors match that it cannot judge (a wrong kind, or another kind or unit
    /// than those it judges), and why the first of them.
    package var unjudgedSeries = 0
    package var unjudgedProblem: String?

    package init(
        rule: String, statistic: String, window: String, violated: Bool?, violations: UInt64, compliance: Double?,
        observed: Double?, threshold: Double?, events: UInt64, matchingSeries: Int
    ) {
        self.rule = rule
        self.statistic = statistic
        self.window = window
        self.violated = violated
        self.violations = violations
        self.compliance = compliance
        self.observed = observed
        self.threshold = threshold
        self.events = events
        self.matchingSeries = matchingSeries
    }
}
