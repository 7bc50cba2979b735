import Ringside
import RingsideSnapshot

extension PrometheusExporter {
    /// The collector's figures (`ringside_collector_*`), with those of its recorder, captures,
    /// OTLP exporter and HTTP listener when they run; `rings`: the rings attached.
    static func collectorFamilies(_ stats: CollectorStats, rings: Int, currentRealtimeNanos: UInt64, _ family: AddFamily) {
        CollectorStats.drainFigures.addFamilies(stats, family)
        family(
            "ringside_collector_snapshot_timestamp_seconds", "gauge",
            "When the figures of this page were last known to hold, in Unix seconds: when their snapshot was built, or later "
                + "when every ring was found still quiet (alert on time() minus it)",
            [([], Double(currentRealtimeNanos) / 1e9)])
        family(
            "ringside_collector_snapshot_build_seconds", "gauge",
            "The drain thread's time spent building that snapshot, in slices between drain passes; the next begins at least twice it later",
            [([], stats.snapshotBuild.seconds)])
        family("ringside_collector_rings", "gauge", "Rings attached", [([], Double(rings))])
        family(
            "ringside_collector_series", "gauge", "Series kept (bot, metric and labels), those not on this page yet too",
            [([], Double(stats.snapshotBuild.series))])
        family(
            "ringside_collector_series_awaiting_figures", "gauge",
            "Series kept but not on this page yet: new, their first figures left to the next snapshot by one that spent its time "
                + "for new series (200 ms of the drain thread)",
            [([], Double(stats.snapshotBuild.seriesAwaitingFigures))])
        family(
            "ringside_collector_series_limit", "gauge", "Series the collector keeps at most (--max-series)",
            [([], Double(stats.snapshotBuild.seriesLimit))])
        family(
            "ringside_collector_series_limit_per_ring", "gauge", "Series kept per ring at most (--max-series-per-ring)",
            [([], Double(stats.snapshotBuild.seriesLimitPerRing))])
        family(
            "ringside_collector_series_bytes", "gauge",
            "Memory the series take, as charged against --max-series-bytes (windows, counts and page text)",
            [([], Double(stats.snapshotBuild.seriesBytes))])
        family(
            "ringside_collector_series_bytes_limit", "gauge", "Memory the series may take at most (--max-series-bytes)",
            [([], Double(stats.snapshotBuild.seriesBytesLimit))])
        family(
            "ringside_collector_start_time_seconds", "gauge", "When the collector started, in Unix seconds",
            [([], Double(stats.startedRealtimeNanos) / 1e9)])
        CollectorStats.boundFigures.addFamilies(stats, family)
        if let state = stats.state { CollectorStateStats.figures.addFamilies(state, family) }
        CollectorStats.discoveryFigures.addFamilies(stats, family)
        let gap = stats.drainGap
        family(
            "ringside_collector_drain_gap_seconds", "gauge",
            "How long records of filling rings waited between two drains, over the last minute, by percentile",
            [("50", gap.p50), ("99", gap.p99), ("99.9", gap.p999)].map { ([("percentile", $0.0)], $0.1) })
        family(
            "ringside_collector_drain_gap_max_seconds", "gauge",
            "The longest records of a filling ring waited between two drains, over the last minute: a lane must hold what "
                + "its thread writes in this time",
            [([], gap.max)])
        family(
            "ringside_collector_drain_gaps", "gauge", "Drain gaps measured over the last minute (see ringside_collector_drain_gap_seconds)",
            [([], Double(gap.count))])
        doorbellFamilies(stats.doorbell, family)
        if let errors = stats.hlogErrors {
            family(
                "ringside_collector_hlog_errors_total", "counter", "Failed opens, writes and renames of the --hlog latency log",
                [([], Double(errors))])
        }
        if let history = stats.history {
            family(
                "ringside_collector_history_series", "gauge", "Series the per-second history (/api/history) holds",
                [([], Double(history.series))])
            family(
                "ringside_collector_history_series_limit", "gauge", "Series the history holds at most (--history-max-series)",
                [([], Double(history.limit))])
            family(
                "ringside_collector_history_series_refused", "gauge",
                "Series of the last snapshot the history refused: it holds --history-max-series, none gone",
                [([], Double(history.refused))])
            family(
                "ringside_collector_history_bytes", "gauge",
                "Memory the history holds: its series' points (what changed, second to second) and records",
                [([], Double(history.bytes))])
        }
        if let recorder = stats.recorder { RecorderStats.figures.addFamilies(recorder, family) }
        if let captures = stats.captures { captureFamilies(captures, family) }
        if let otlp = stats.otlp { otlpFamilies(otlp, family) }
        if let security = stats.webSecurity { webSecurityFamilies(security, family) }
    }

    /// The captures' figures (`--capture-dir`), each a family written by `family`: a series per
    /// trigger kind, so that a rate shows from the first capture.
    static func captureFamilies(_ captures: CaptureStats, _ family: AddFamily) {
        let kinds = ["slo", "threshold", "bot_died", "bot_stopped", "request"]
        family(
            "ringside_captures_total", "counter", "Captures of the flight recorder's records written to --capture-dir, by trigger",
            kinds.map { ([("trigger", $0)], Double(captures.written[$0] ?? 0)) })
        family(
            "ringside_captures_suppressed_total", "counter",
            "Captures asked for within --capture-min-interval of the trigger's last one, not made, by trigger",
            kinds.map { ([("trigger", $0)], Double(captures.suppressed[$0] ?? 0)) })
        family(
            "ringside_capture_failures_total", "counter", "Captures that could not be written (the log says why)",
            [([], Double(captures.failed))])
    }

    /// The OTLP exporter's figures (`--otlp-endpoint`), each a family written by `family`: its exports by
    /// result, then those `/latest` writes too (`OTLPStats.figures`).
    static func otlpFamilies(_ otlp: OTLPStats, _ family: AddFamily) {
        family(
            "ringside_otlp_exports_total", "counter",
            "OTLP exports by result: sent (the receiver took them), failed (refused for good), dropped (unsent: the queue full, or the stop)",
            [
                ([("result", "sent")], Double(otlp.sent)), ([("result", "failed")], Double(otlp.failed)),
                ([("result", "dropped")], Double(otlp.dropped)),
            ])
        OTLPStats.figures.addFamilies(otlp, family)
    }

    /// The HTTP listener's figures with `--web-config-file`, each a family written by `family`.
    static func webSecurityFamilies(
        _ security: WebSecurityStats, _ family: AddFamily
    ) {
        family(
            "ringside_http_auth_failures_total", "counter",
            "Requests refused (--web-config-file): 401 without credentials (missing) or with a wrong user or password (wrong); "
                + "429 unchecked, too many passwords from one address and user waiting for bcrypt (throttled)",
            [
                ([("reason", "missing")], Double(security.authMissing)), ([("reason", "wrong")], Double(security.authWrong)),
                ([("reason", "throttled")], Double(security.authThrottled)),
            ])
        family(
            "ringside_http_password_checks_total", "counter",
            "Passwords checked with bcrypt: once per user while the file is unchanged (then remembered), and each wrong one",
            [([], Double(security.passwordChecks))])
        family(
            "ringside_http_tls_handshake_failures_total", "counter",
            "TLS handshakes that failed: bad or missing client certificates, plain HTTP on the TLS port, clients gone or silent",
            [([], Double(security.tlsHandshakeFailures))])
        family(
            "ringside_http_web_config_reloads_total", "counter",
            "Changes of --web-config-file or its certificate, key or CA files: loaded (success) or refused, the running one kept (failure)",
            [([("result", "success")], Double(security.reloads)), ([("result", "failure")], Double(security.reloadFailures))])
        family(
            "ringside_http_web_config_last_reload_successful", "gauge",
            "1 when the last version of --web-config-file and its files loaded, 0 when it was refused (the one before serves)",
            [([], security.lastReloadSucceeded ? 1 : 0)])
        family("ringside_http_tls_enabled", "gauge", "1 when the HTTP listener speaks TLS", [([], security.tls ? 1 : 0)])
        family("ringside_http_basic_auth_users", "gauge", "Users --web-config-file lets in with basic auth", [([], Double(security.users))])
    }

    /// The drain thread's sleeps under the producers' doorbells (DOORBELL in ringside.h).
    private static func doorbellFamilies(_ doorbell: DoorbellFigures, _ family: AddFamily) {
        family(
            "ringside_collector_doorbell_sleeps_total", "counter",
            "Drain sleeps under the producers' doorbells: the first record, increment or gauge written after it fell asleep wakes it",
            [([], Double(doorbell.sleeps))])
        family(
            "ringside_collector_doorbell_wakes_total", "counter", "Drain sleeps a producer's doorbell ended before the poll",
            [([], Double(doorbell.wakes))])
        family(
            "ringside_collector_doorbell_sleeps_skipped_total", "counter",
            "Drain sleeps not begun: the look after announcing it found records written meanwhile",
            [([], Double(doorbell.caughtByLook))])
        family(
            "ringside_collector_doorbell_rings", "gauge",
            "Rings at the last sleep: watched by their doorbell, or polled (their producer rings none, or past the 127 a sleep watches); none before the first sleep",
            [("doorbell", doorbell.watchedRings), ("poll", doorbell.polledRings)].compactMap { by, rings in
                rings.map { ([("by", by)], Double($0)) }
            })
    }
}
