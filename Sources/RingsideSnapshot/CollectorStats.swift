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
    /// What the snapshot these figures came with counted when it was built.
    package var snapshotBuild = SnapshotBuildFigures()
    package var startedRealtimeNanos: UInt64 = 0
    /// With `--hlog`: the latency log's failed opens, writes and renames; nil without it.
    package var hlogErrors: UInt64?
    /// With `--history`: the series its per-second history holds, those of the last snapshot it
    /// refused for want of room, its cap (`--history-max-series`) and the memory it holds (its
    /// points and each series' record); nil with `--history 0`.
    package var history: (series: Int, refused: Int, limit: Int, bytes: Int)?
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
    /// The drain thread's sleeps under the doorbells (DOORBELL in ringside.h).
    package var doorbell = DoorbellFigures()
    /// With `--otlp-endpoint`: what the OTLP exporter did; nil without it.
    package var otlp: OTLPStats?
    /// With `--web-config-file`: what the HTTP listener refused and reloaded; nil without it.
    package var webSecurity: WebSecurityStats?
    /// What the state file (`ringside-collector.state`) went through; nil when the collector keeps none.
    package var state: CollectorStateStats?
    /// The flight recorder's figures; nil with `--recorder-seconds 0`.
    package var recorder: RecorderStats?
    /// Captures of the recorder's records (`--capture-dir`); nil without it.
    package var captures: CaptureStats?
    /// What the routes did with their query strings: per-bot pages, queries refused.
    package var queries = QueryStats()

    package init() {}
}

/// The figures a snapshot's build sets: kept as one value, so that an update between snapshots
/// (`PublishedSnapshot.update`) keeps them all, those added later too.
package struct SnapshotBuildFigures: Sendable, Equatable {
    /// The drain thread's time spent building the snapshot (in slices, between drain passes):
    /// what spaces publishes out (see `SnapshotPublisher.spacingNanos`).
    package var seconds: Double = 0
    /// Series kept (those in the snapshot and `seriesAwaitingFigures`), and the caps
    /// (`--max-series`, `--max-series-per-ring`).
    package var series = 0, seriesLimit = 0, seriesLimitPerRing = 0
    /// The memory the series take as the collector charges it, and its budget (`--max-series-bytes`).
    package var seriesBytes = 0
    package var seriesBytesLimit = 0
    /// Series with a total at its ceiling (a counter's at 2^64 - 1, a histogram's count at
    /// 2^64 - 1 or sum at 2^128 - 1, their drops), where it stays: saturated, never wrapped back.
    package var seriesSaturated = 0
    /// Series kept but not in the snapshot yet: new, their first figures left to the next
    /// snapshot by one that spent its time for new series (a burst of them, see `SnapshotPublisher`).
    package var seriesAwaitingFigures = 0

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
/// the collector started: RingsideHTTP's `WebSecurity` counts it, the snapshot carries it.
package struct WebSecurityStats: Sendable, Equatable {
    /// Requests answered 401: without credentials (or not Basic ones), and with a wrong user or password.
    package var authMissing: UInt64 = 0
    package var authWrong: UInt64 = 0
    /// Requests answered 429 without a check: too many passwords from one address and user
    /// waiting for bcrypt, or a wait past 10 s.
    package var authThrottled: UInt64 = 0
    /// Passwords checked with bcrypt (tens of milliseconds each): one per user until the file
    /// changes (verified ones are remembered), and one per wrong password.
    package var passwordChecks: UInt64 = 0
    /// TLS handshakes that failed: bad or missing client certificates, plain HTTP on the TLS
    /// port, clients that closed or went silent (the head timeout) mid-handshake.
    package var tlsHandshakeFailures: UInt64 = 0
    /// Changes of the file (or of a file it names) that loaded, and that were refused.
    package var reloads: UInt64 = 0, reloadFailures: UInt64 = 0
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
    /// What the bots' figures take in a snapshot now: kept within `bytesLimit` (a fold that would
    /// pass it is refused); the all-time histograms take what is left.
    package var totalsBytes: UInt64 = 0
    /// Folds refused because the bots' figures would pass `bytesLimit` (the workers' files kept,
    /// their totals in them; a fold tried again counts again).
    package var foldsRefused: UInt64 = 0
    /// All-time histograms the last snapshot left out for room (their series' `_count` and `_sum`
    /// would start again after a restart).
    package var histogramsShed = 0
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
    package var p50: Double = 0, p99: Double = 0, p999: Double = 0, max: Double = 0

    package init() {}
}

/// The doorbells the drain thread sleeps under (DOORBELL in ringside.h): the first write after it
/// fell asleep wakes it, instead of its next poll.
package struct DoorbellFigures: Sendable, Equatable {
    /// Sleeps under at least one doorbell, and those a producer's ring ended, since the start.
    package var sleeps: UInt64 = 0
    package var wakes: UInt64 = 0
    /// Sleeps not begun: the look after the announcement found records written meanwhile.
    package var caughtByLook: UInt64 = 0
    /// At the last sleep: rings whose doorbell it watched, and rings left to the poll (their
    /// producer does not ring, or past the 127 one sleep watches); nil before the first.
    package var watchedRings: Int?
    package var polledRings: Int?
    /// The producers' barrier failed (a kernel without `membarrier`, or a filter): every ring is polled.
    package var barrierFailed = false

    package init() {}
}

/// What the OTLP exporter (`--otlp-endpoint`) did since the collector started.
package struct OTLPStats: Sendable, Equatable {
    /// Exports the receiver took (a 2xx answer), and their bytes as sent (gzipped bodies).
    package var sent: UInt64 = 0, sentBytes: UInt64 = 0
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
    package var queued = 0, queueCapacity = 0
    /// CLOCK_REALTIME of the last export the receiver took; nil before the first.
    package var lastSuccessRealtimeNanos: UInt64?
    /// Whether the last attempt failed, and why.
    package var failing = false
    package var lastError: String?

    package init() {}
}
