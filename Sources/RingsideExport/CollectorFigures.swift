import RingsideJSON
import RingsideSnapshot
import RingsideText

/// A figure's value, in the form each page writes it.
enum FigureValue: Sendable {
    /// A count or a size: JSON writes its digits; Prometheus, as a float.
    case count(UInt64)
    case integer(Int)
    /// A measure (seconds, a ratio): as it is in both.
    case measure(Double)
    /// JSON's true or false; Prometheus's 1 or 0.
    case flag(Bool)
    /// CLOCK_REALTIME nanoseconds, nil for never: JSON's UTC timestamp or null; Prometheus's
    /// Unix seconds, 0 for never.
    case time(UInt64?)

    var sample: Double {
        switch self {
        case let .count(count): Double(count)
        case let .integer(integer): Double(integer)
        case let .measure(measure): measure
        case let .flag(flag): flag ? 1 : 0
        case let .time(nanos): Double(nanos ?? 0) / 1e9
        }
    }
}

/// One of the collector's own figures, named once for the two pages that write it: its key in
/// `/latest`'s JSON and its Prometheus family (name, type, help), with how to read it from `Stats`.
struct CollectorFigure<Stats>: Sendable {
    let key: String
    let family: String
    let type: String
    let help: String
    let value: @Sendable (Stats) -> FigureValue

    init(_ key: String, _ family: String, _ type: String, _ help: String, _ value: @escaping @Sendable (Stats) -> FigureValue) {
        self.key = key
        self.family = family
        self.type = type
        self.help = help
        self.value = value
    }
}

extension Sequence {
    /// Writes the figures' fields, in their order, from `stats`.
    func write<Stats>(_ stats: Stats, into json: JSONWriter) where Element == CollectorFigure<Stats> {
        for figure in self {
            switch figure.value(stats) {
            case let .count(count): json.field(figure.key, count)
            case let .integer(integer): json.field(figure.key, integer)
            case let .measure(measure): json.field(figure.key, measure)
            case let .flag(flag): json.field(figure.key, flag)
            case let .time(nanos): json.field(figure.key, nanos.map { utcTimestamp(realtimeNanos: $0) })
            }
        }
    }

    /// Adds the figures' families, in their order, a sample each, from `stats`.
    func addFamilies<Stats>(_ stats: Stats, _ family: PrometheusExporter.AddFamily) where Element == CollectorFigure<Stats> {
        for figure in self { family(figure.family, figure.type, figure.help, [([], figure.value(stats).sample)]) }
    }
}

extension CollectorStateStats {
    /// The state's figures: `/latest`'s `collector.state` and the `ringside_collector_state_*` families.
    static let figures: [CollectorFigure<Self>] = [
        .init(
            "save_failures", "ringside_collector_state_save_failures_total", "counter",
            "Saves of the collector's state that failed: a fold's journal line (the worker's file is kept), or a snapshot not written under its name (saved under another) or at all (tried again)"
        ) { .count($0.saveFailures) },
        .init("failing", "ringside_collector_state_failing", "gauge", "1 while the collector's state cannot be saved (see its log)") {
            .flag($0.failing)
        },
        .init(
            "read_failures", "ringside_collector_state_read_failures", "gauge",
            "State files found at start that could not be read (too large for --state-max-bytes, or not state): their totals are not counted"
        ) { .integer($0.readFailures) },
        .init("bytes", "ringside_collector_state_bytes", "gauge", "The size of the state's last snapshot") { .count($0.bytes) },
        .init(
            "bytes_limit", "ringside_collector_state_bytes_limit", "gauge",
            "The most a collector reads of one state file (--state-max-bytes)"
        ) { .count($0.bytesLimit) },
        .init(
            "totals_bytes", "ringside_collector_state_totals_bytes", "gauge",
            "What the bots' folded figures take in a state snapshot: kept within --state-max-bytes, a fold that would pass it refused"
        ) { .count($0.totalsBytes) },
        .init(
            "folds_refused", "ringside_collector_state_folds_refused_total", "counter",
            "Folds refused because the bots' figures would pass --state-max-bytes: the workers' files are kept, their totals in them"
        ) { .count($0.foldsRefused) },
        .init(
            "histograms_shed", "ringside_collector_state_histograms_shed", "gauge",
            "All-time histograms the last state snapshot left out for room (--state-max-bytes): their _count and _sum start again after a restart"
        ) { .integer($0.histogramsShed) },
        .init("bots", "ringside_collector_state_bots", "gauge", "Bots whose figures the state keeps") { .integer($0.bots) },
        .init(
            "bots_expired", "ringside_collector_state_bots_expired_total", "counter",
            "Bots whose figures left the state: their files had all been gone longer than --state-expiry"
        ) { .count($0.botsExpired) },
        .init(
            "last_save_at", "ringside_collector_state_last_save_time_seconds", "gauge",
            "When the state's last snapshot was saved, in Unix seconds (0: not yet)"
        ) { .time($0.lastSaveRealtimeNanos) },
    ]
}

extension RecorderStats {
    /// The flight recorder's figures (`--recorder-seconds`): `/latest`'s `collector.recorder` and
    /// the `ringside_recorder_*` families.
    static let figures: [CollectorFigure<Self>] = [
        .init("bytes", "ringside_recorder_bytes", "gauge", "Memory the flight recorder's chunks of raw records take") {
            .integer($0.bytes)
        },
        .init(
            "bytes_limit", "ringside_recorder_bytes_limit", "gauge",
            "Memory the flight recorder may take at most (--recorder-max-bytes)"
        ) { .integer($0.bytesLimit) },
        .init("records", "ringside_recorder_records", "gauge", "Raw records the flight recorder holds") { .integer($0.records) },
        .init(
            "seconds_held", "ringside_recorder_seconds_held", "gauge",
            "The span the flight recorder holds, from its oldest record to now: below ringside_recorder_retention_seconds "
                + "when its budget is too small for them"
        ) { .measure($0.secondsHeld) },
        .init(
            "retention_seconds", "ringside_recorder_retention_seconds", "gauge",
            "The span the flight recorder is asked to hold (--recorder-seconds)"
        ) { .measure($0.retentionSeconds) },
        .init(
            "evicted_records", "ringside_recorder_evicted_records_total", "counter",
            "Records the flight recorder let go of for its budget before they were --recorder-seconds old"
        ) { .count($0.evictedRecords) },
    ]
}

extension OTLPStats {
    /// The OTLP exporter's figures (`--otlp-endpoint`) but its exports by result and its last
    /// error: `/latest`'s `collector.otlp` and the `ringside_otlp_*` families.
    static let figures: [CollectorFigure<Self>] = [
        .init(
            "retries", "ringside_otlp_retries_total", "counter",
            "OTLP attempts that failed and were made again (429, 502, 503, 504, no connection, no answer in time)"
        ) { .count($0.retries) },
        .init("timeouts", "ringside_otlp_timeouts_total", "counter", "OTLP attempts with no answer within --otlp-timeout") {
            .count($0.timeouts)
        },
        .init("sent_bytes", "ringside_otlp_sent_bytes_total", "counter", "Bytes of the OTLP exports the receiver took, gzipped, as sent") {
            .count($0.sentBytes)
        },
        .init(
            "rejected_points", "ringside_otlp_rejected_points_total", "counter",
            "Data points the OTLP receiver rejected in exports it took (partial success)"
        ) { .count($0.rejectedPoints) },
        .init("queued", "ringside_otlp_queue_exports", "gauge", "OTLP exports waiting to be sent") { .integer($0.queued) },
        .init("queue_capacity", "ringside_otlp_queue_capacity", "gauge", "OTLP exports the queue holds at most") {
            .integer($0.queueCapacity)
        },
        .init(
            "last_success_at", "ringside_otlp_last_success_time_seconds", "gauge",
            "When the OTLP receiver last took an export, in Unix seconds (0: never)"
        ) { .time($0.lastSuccessRealtimeNanos) },
        .init("failing", "ringside_otlp_failing", "gauge", "1 while the last OTLP attempt failed") { .flag($0.failing) },
    ]
}

extension CollectorStats {
    /// The drain's pace: `/latest`'s `collector` fields and the `ringside_collector_*` families of
    /// the records drained, their rate, the drain's lag and its last pass.
    static let drainFigures: [CollectorFigure<Self>] = [
        .init("records_drained", "ringside_collector_records_drained_total", "counter", "Records drained from every ring") {
            .count($0.recordsDrained)
        },
        .init(
            "drain_rate", "ringside_collector_drain_records_per_second", "gauge", "Records drained per second, over the last second"
        ) { .measure($0.drainRate) },
        .init("lag_seconds", "ringside_collector_lag_seconds", "gauge", "Age of the oldest record drained in the last busy pass") {
            .measure($0.lagSeconds)
        },
        .init("last_pass_seconds", "ringside_collector_pass_duration_seconds", "gauge", "How long the last drain pass took") {
            .measure($0.lastPassSeconds)
        },
    ]

    /// What met a bound: log lines past the log's budget, ring files waiting for a descriptor,
    /// series whose total reached its ceiling.
    static let boundFigures: [CollectorFigure<Self>] = [
        .init(
            "log_lines_suppressed", "ringside_collector_log_lines_suppressed_total", "counter",
            "Log lines about single rings left out because more than 20 a second came (their states are in /health)"
        ) { .count($0.logLinesSuppressed) },
        .init(
            "rings_waiting", "ringside_collector_rings_waiting", "gauge",
            "Ring files found but not attached: the open-file limit, less the HTTP server's reserve, is reached"
        ) { .integer($0.ringsWaitingForDescriptors) },
        .init(
            "series_saturated", "ringside_collector_series_saturated", "gauge",
            "Series with a total at its ceiling (a count or counter at 2^64 - 1, a histogram's sum at 2^128 - 1), where it stays, never wrapping back"
        ) { .integer($0.snapshotBuild.seriesSaturated) },
    ]

    /// What discovery found and looked at: the ring files it refused, its listings and its opens.
    static let discoveryFigures: [CollectorFigure<Self>] = [
        .init(
            "ring_files_refused", "ringside_collector_ring_files_refused", "gauge",
            "ringside.* files found and not read: empty or being made, another user's, not a regular file, invalid, or waiting "
                + "for a descriptor (the first 1,000 worth showing are ringside_ring_skipped)"
        ) { .integer($0.ringFilesRefused) },
        .init(
            "discovery_rescans", "ringside_collector_discovery_rescans_total", "counter",
            "Whole listings of the ring directory: at start, when inotify lost events, and every 30 s"
        ) { .count($0.discoveryRescans) },
        .init(
            "discovery_opens", "ringside_collector_discovery_opens_total", "counter",
            "Files discovery opened to look at; a file refused is opened again only when it changes"
        ) { .count($0.discoveryOpens) },
    ]
}
