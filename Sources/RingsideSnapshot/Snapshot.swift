import Ringside
import RingsideAggregation

/// What the collector knows at one moment, as plain values: the drain thread builds it, the
/// HTTP thread and the JSON dump read it. A histogram's values are whole numbers of its metric's
/// step, `10^scale` of its unit (VALUES in ringside.h: `scale` 0, whole units, for most), signed
/// for a signed histogram: `Int128` holds every value of either form exactly.
package struct Snapshot: Sendable {
    /// CLOCK_REALTIME when it was built.
    package var generatedRealtimeNanos: UInt64 = 0
    /// Increases with every snapshot; exporters cache their text by it.
    package var generation: UInt64 = 0
    /// Window lengths, in the order of every series' `windows`.
    package var windowNanos: [UInt64] = []
    package var quantiles: [Double] = []
    /// With `--native-histograms`: the schema of the native buckets histograms carry in protobuf.
    package var nativeHistogramSchema: Int?
    package var series: [SeriesSnapshot] = []
    package var rings: [RingSnapshot] = []
    package var slos: [SLOSnapshot] = []
    package var collector = CollectorStats()
    /// The thread sampler's latest round, when it runs (`--thread-sample-interval`): attached to
    /// each snapshot served, as it comes on its own cadence.
    package var threadHealth: ThreadHealthSample?

    package init() {}
}

/// One series: a ring's metric with its labels.
package struct SeriesSnapshot: Sendable {
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

    package init(ring: String, metric: MetricDescriptor, id: UInt64, windows: [WindowStats]) {
        self.ring = ring
        self.metric = metric
        self.id = id
        self.windows = windows
    }

    /// Histograms of unsigned values: every value recorded, all time (shared with the series until
    /// it changes); the exporters compute their buckets from it when they render (see `ExportBuckets`).
    package var cumulative: Histogram? {
        get { allTime?.histogram }
        set { allTime = newValue.map(AllTimeHistogram.init) }
    }
    /// `cumulative` with its buckets, kept from snapshot to snapshot while the series is unchanged.
    package private(set) var allTime: AllTimeHistogram<Histogram>?
    /// Signed histograms (`metric.isSigned`): every value recorded, all time, as `cumulative` is
    /// for the others (which is nil for them).
    package var signedCumulative: SignedHistogram? {
        get { signedAllTime?.histogram }
        set { signedAllTime = newValue.map(AllTimeHistogram.init) }
    }
    package private(set) var signedAllTime: AllTimeHistogram<SignedHistogram>?
    /// Histograms: all-time count and sum; counters: all-time total (scaled by sampling).
    package var cumulativeCount: UInt64 = 0
    package var cumulativeSum: Double = 0
    /// The same sum exactly, in steps, for histograms of unsigned values and counters: a `Double`
    /// is not exact past 2^53, and a busy series passes that in days.
    package var cumulativeExactSum: UInt128 = 0
    /// Signed histograms: the sum exactly, in steps (`cumulativeExactSum` is 0 for them).
    package var cumulativeSignedSum: Int128 = 0
    /// Gauges: the last value set, if any.
    package var lastValue: Double?
    /// Histograms and gauges: records of this series dropped (full lanes, or threads without one).
    package var droppedRecords: UInt64 = 0
    /// Histograms: the dropped records' values, their sum (modulo 2^64: unsigned, or read as an
    /// int64 for a signed histogram) and the largest (0 when none dropped): what a full lane hid
    /// from the windows.
    package var droppedSum: Int128 = 0
    package var droppedMax: Int128 = 0
    /// Histograms: the largest value ever recorded, exact (gathered calls included).
    package var cumulativeMax: Int128 = 0
    /// Histograms: calls gathered rather than written while a lane filled (SAMPLING in
    /// ringside.h), since this collector started: counted in `cumulativeCount`, their sum in the
    /// sum and their largest in the maximum, exactly; their buckets from the records beside them.
    package var sampledRecords: UInt64 = 0
    /// Histograms and counters: values its producers clamped to what the metric holds, or did not
    /// record (a NaN), as VALUES in ringside.h says: counted, never wrapped.
    package var clampedValues: UInt64 = 0
    /// The operator's switches over the bot's live files (CONTROL in ringside.h): off, the bot off,
    /// a histogram sampled 1 in 2^n (the low five bits) on top of its registered 1 in N.
    package var control: UInt32 = 0
    /// Histograms: the latest exemplar of each bucket that had one (at most 64), by value.
    package var bucketExemplars: [KeptExemplar] = []
}

/// A series' statistics over one window.
package struct WindowStats: Sendable {
    // Histograms (count is scaled by sampling) ...
    package var count: UInt64 = 0
    /// In steps, as `mean`.
    package var sum: Double = 0
    package var min: Int128 = 0
    package var max: Int128 = 0
    package var mean: Double = 0
    /// One value per configured quantile.
    package var quantileValues: [Int128] = []
    // ... counters ...
    /// What was added in the window (scaled by sampling).
    package var increase: Double = 0
    /// Counters: the increase per second; histograms: observations per second. Both over the
    /// span the window covers (less than its length while the series is young).
    package var rate: Double = 0
    // ... and gauges: the extremes set in the window, nil when nothing was.
    package var gaugeMin: Double?
    package var gaugeMax: Double?
    /// Histograms: the largest values recorded with an exemplar in the window, largest first
    /// (at most 5): the first is the maximum's when the maximum had one.
    package var exemplars: [KeptExemplar] = []

    package init() {}
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
    /// Metrics given no series because a series cap was reached, and their records since.
    package var seriesRefused = 0
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
    package var rule: String
    package var statistic: String
    package var window: String
    /// The severity its alerts carry (`severity=` after the rule; P1 by default).
    package var severity: String = "P1"
    /// Whether the objective is broken now.
    package var violated: Bool
    /// Transitions into violation since the collector started.
    package var violations: UInt64
    /// The fraction of the window's events that kept the threshold (1 when there were none).
    package var compliance: Double
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
    /// counters' increases: Prometheus takes any period from them), and how much of its period
    /// the collector has seen (less than the period until it has run that long).
    package var eventsTotal: UInt64?
    package var badEventsTotal: UInt64?
    package var coveredSeconds: Double?

    package init(
        rule: String, statistic: String, window: String, violated: Bool, violations: UInt64, compliance: Double,
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

/// The collector's own figures.
package struct CollectorStats: Sendable {
    /// The user the collector runs as: a ring of another user's shows its owner.
    package var uid: UInt32 = 0
    package var recordsDrained: UInt64 = 0
    /// Records drained per second over the last second or so.
    package var drainRate: Double = 0
    /// Age of the oldest record drained in the last pass: how far behind the drain runs.
    package var lagSeconds: Double = 0
    /// CLOCK_MONOTONIC when the last drain pass finished, and how long it took.
    package var lastPassMonotonicNanos: UInt64 = 0
    package var lastPassSeconds: Double = 0
    package var passes: UInt64 = 0
    package var startedRealtimeNanos: UInt64 = 0
    /// Series kept, and the caps (`--max-series`, `--max-series-per-ring`).
    package var series = 0
    package var seriesLimit = 0
    package var seriesLimitPerRing = 0
    /// The memory the series take as the collector charges it, and its budget (`--max-series-bytes`).
    package var seriesBytes = 0
    package var seriesBytesLimit = 0
    /// With `--hlog`: the latency log's failed opens, writes and renames; nil without it.
    package var hlogErrors: UInt64?
    /// With `--history`: the series its per-second history holds, those of the last snapshot it
    /// refused for want of room, and its cap (`--history-max-series`); nil with `--history 0`.
    package var history: (series: Int, refused: Int, limit: Int)?
    /// Lines about single rings left out of the log by its budget (thousands of rings at once).
    package var logLinesSuppressed: UInt64 = 0
    /// Ring files found that could not be attached for want of open files (the limit less the
    /// HTTP server's reserve); each is listed as skipped with the reason.
    package var ringsWaitingForDescriptors = 0
    /// `ringside.*` files found and not read: empty or being made, another user's, not a regular
    /// file, invalid, or waiting for a descriptor. The first 1,000 that are not empty or being
    /// made are listed as skipped rings, with the reason.
    package var ringFilesRefused = 0
    /// Whole listings of the ring directory (at start, when inotify lost events, every 30 s), and
    /// files opened to be looked at (a refused file is opened again only when it changes).
    package var discoveryRescans: UInt64 = 0
    package var discoveryOpens: UInt64 = 0
    /// How long busy rings' records waited for the drain over the last minute (see `DrainGapFigures`).
    package var drainGap = DrainGapFigures()
    /// With `--otlp-endpoint`: what the OTLP exporter did; nil without it.
    package var otlp: OTLPStats?
    /// With `--web-config-file`: what the HTTP listener refused and reloaded; nil without it.
    package var webSecurity: WebSecurityStats?
    /// Series with a total at its ceiling (a counter's at 2^64 - 1, a histogram's count at
    /// 2^64 - 1 or sum at 2^128 - 1, their drops), where it stays: saturated, never wrapped back.
    package var seriesSaturated = 0
    /// What the state file (`ringside-collector.state`) went through; nil when the collector keeps none.
    package var state: CollectorStateStats?
    /// The flight recorder's figures; nil with `--recorder-seconds 0`.
    package var recorder: RecorderStats?
    /// Captures of the recorder's records (`--capture-dir`); nil without it.
    package var captures: CaptureStats?

    package init() {}
}

/// The captures made of the flight recorder's records, and those their rate limit suppressed.
package struct CaptureStats: Sendable, Equatable {
    /// Where they are written (`--capture-dir`).
    package var directory = ""
    /// Captures written, and suppressed by `--capture-min-interval`, by trigger kind (`slo`,
    /// `threshold`, `bot_died`, `bot_stopped`, `request`); captures that could not be written.
    package var written: [String: UInt64] = [:]
    package var suppressed: [String: UInt64] = [:]
    package var failed: UInt64 = 0
    /// The latest captures (at most `CaptureStats.listed`), oldest first.
    package var recent: [CaptureSnapshot] = []
    package static let listed = 100

    package init() {}
}

/// One capture: what asked for it, when, and what was written.
package struct CaptureSnapshot: Sendable, Equatable {
    package enum Status: String, Sendable {
        /// Waiting for its seconds after the trigger to pass, or being written.
        case pending
        case written
        case failed
    }

    package var id: UInt64
    /// The trigger's kind and what it names (a rule, a bound, a bot; empty for a request).
    package var trigger: String
    package var detail: String
    /// The bots asked for (empty: every bot).
    package var bots: [String]
    /// The trigger's time on the wall clock, and the span captured around it.
    package var atRealtimeNanos: UInt64
    package var beforeSeconds: Double
    package var afterSeconds: Double
    package var status: Status = .pending
    /// The files written, by name in the capture directory.
    package var files: [String] = []
    package var bytes = 0
    /// Records in the trace, and those of the span left out by `--capture-max-records` (the
    /// farthest from the trigger).
    package var records = 0
    package var recordsLeftOut = 0
    /// Why it failed.
    package var reason = ""

    package init(
        id: UInt64, trigger: String, detail: String, bots: [String], atRealtimeNanos: UInt64, beforeSeconds: Double,
        afterSeconds: Double
    ) {
        self.id = id
        self.trigger = trigger
        self.detail = detail
        self.bots = bots
        self.atRealtimeNanos = atRealtimeNanos
        self.beforeSeconds = beforeSeconds
        self.afterSeconds = afterSeconds
    }
}

/// What the flight recorder (`--recorder-seconds`) holds, and what its budget made it let go of.
package struct RecorderStats: Sendable, Equatable {
    /// The storage its chunks take, and its budget (`--recorder-max-bytes`).
    package var bytes = 0
    package var bytesLimit = 0
    /// Records held.
    package var records = 0
    /// The span it holds: from its oldest record's time to now. Less than `retentionSeconds`
    /// when the budget is too small for the seconds asked for (or the collector started lately).
    package var secondsHeld: Double = 0
    package var retentionSeconds: Double = 0
    /// Records let go of for the budget before they were `retentionSeconds` old, since the start.
    package var evictedRecords: UInt64 = 0

    package init() {}
}

/// What the HTTP listener's web configuration (`--web-config-file`) refused and reloaded since
/// the collector started.
package struct WebSecurityStats: Sendable, Equatable {
    /// Requests answered 401: without credentials (or not Basic ones), and with a wrong user or password.
    package var authMissing: UInt64 = 0
    package var authWrong: UInt64 = 0
    /// Passwords checked with bcrypt (tens of milliseconds each): one per user until the file
    /// changes (verified ones are remembered), and one per wrong password.
    package var passwordChecks: UInt64 = 0
    /// TLS handshakes that failed (bad or missing client certificates, plain HTTP, silent clients).
    package var tlsHandshakeFailures: UInt64 = 0
    /// Changes of the file (or of a file it names) that loaded, and that were refused.
    package var reloads: UInt64 = 0
    package var reloadFailures: UInt64 = 0
    /// Whether the last version read loaded (else the one before it serves).
    package var lastReloadSucceeded = true
    /// Whether the listener speaks TLS, and how many basic-auth users it knows.
    package var tls = false
    package var users = 0

    package init() {}
}

/// What the collector's state (the totals of workers that are gone, kept across restarts in
/// `ringside-collector.state` and its journals) went through since the collector started.
package struct CollectorStateStats: Sendable, Equatable {
    /// Saves that failed: a fold's journal line, or a snapshot that could not be written under its
    /// name (saved under another then) or at all (tried again).
    package var saveFailures: UInt64 = 0
    /// Whether the last save failed: the journal (workers' files are then kept, their totals in
    /// them) or the snapshot (tried again every 10 s).
    package var failing = false
    /// State files found at start that could not be read (too large, not state): left as they were.
    package var readFailures = 0
    /// The last snapshot's size, and the most a collector reads of one (`--state-max-bytes`).
    package var bytes: UInt64 = 0
    package var bytesLimit: UInt64 = 0
    /// Bots whose figures the state holds, as of the last snapshot (or the start).
    package var bots = 0
    /// Bots whose figures expired (gone longer than `--state-expiry`).
    package var botsExpired: UInt64 = 0
    /// CLOCK_REALTIME of the last snapshot saved; nil before the first.
    package var lastSaveRealtimeNanos: UInt64?

    package init() {}
}

/// How long records of busy rings could wait for the drain, over the last minute: for each ring
/// a pass drains records from while the ring is filling (it drained in the last 50 ms), the time
/// since it was last seen caught up (its last drain, or the last pass that found nothing new in
/// it). A lane must hold what its thread writes in the longest of these (docs/operations.md).
package struct DrainGapFigures: Sendable, Equatable {
    /// Gaps measured in the last minute, and their median, 99th and 99.9th percentiles and
    /// largest, in seconds (within 0.1 %).
    package var count: UInt64 = 0
    package var p50: Double = 0
    package var p99: Double = 0
    package var p999: Double = 0
    package var max: Double = 0

    package init() {}
}

/// What the OTLP exporter (`--otlp-endpoint`) did since the collector started.
package struct OTLPStats: Sendable, Equatable {
    /// Exports the receiver took (a 2xx answer), and their bytes as sent (gzipped bodies).
    package var sent: UInt64 = 0
    package var sentBytes: UInt64 = 0
    /// Exports given up: answered with a status that is not worth another try (a 4xx but 429).
    package var failed: UInt64 = 0
    /// Exports dropped unsent: the oldest when the queue was full, and those left at the stop.
    package var dropped: UInt64 = 0
    /// Attempts that failed and were tried again (429, 502, 503, 504, no connection, a timeout).
    package var retries: UInt64 = 0
    /// Attempts that ran out of time (`--otlp-timeout`): counted in `retries` too.
    package var timeouts: UInt64 = 0
    /// Data points the receiver said it rejected in a partial success.
    package var rejectedPoints: UInt64 = 0
    /// Exports waiting to be sent (the one being sent among them), and how many the queue holds.
    package var queued = 0
    package var queueCapacity = 0
    /// CLOCK_REALTIME of the last export the receiver took; nil before the first.
    package var lastSuccessRealtimeNanos: UInt64?
    /// Whether the last attempt failed, and why.
    package var failing = false
    package var lastError: String?

    package init() {}
}
