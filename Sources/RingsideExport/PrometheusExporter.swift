import Ringside
import RingsideCommandLine
import RingsideSnapshot
import Synchronization

/// Renders a snapshot in the Prometheus text format 0.0.4.
///
/// Per metric, in base units (latencies recorded in ns are exported in seconds):
/// - histogram `NAME_seconds`: cumulative `_bucket{le}`, `_sum`, `_count` over all time, so
///   Prometheus can merge bots and hosts with `histogram_quantile`;
///   summary `NAME_windowed_seconds{window,quantile}` with per-window `_sum` and `_count`;
///   gauge `NAME_window_max_seconds{window}`;
/// - counter `NAME_total` (scaled by sampling) and gauge `NAME_rate{window}` per second;
/// - gauge `NAME` (last value) and `NAME_window_min` / `NAME_window_max{window}`;
/// plus the `ringside_ring_*`, `ringside_collector_*` and `ringside_slo_*` self-metrics,
/// `ringside_build_info`, and the `process_*` families of the client libraries.
/// Every series carries `ring`; metric labels named `ring`, `window`, `quantile`, `le` or `slo`
/// are exported as `exported_<name>`. A family name two metrics claim with different types goes
/// to the first; the others are left out (and counted in `ringside_collector_series_conflicts`).
package enum PrometheusExporter {
    package static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// The page for a snapshot, with the `process_*` families of `process` when given.
    package static func render(_ snapshot: Snapshot, process: ProcessMetrics? = nil) -> [UInt8] {
        PrometheusRenderer().render(snapshot, process: process)
    }

    /// `ringside_build_info`: the version and the git revision, as node_exporter's `node_exporter_build_info`.
    static let buildInfo = FixedFamily(
        "ringside_build_info", "gauge",
        "A metric with a constant '1' value labeled by version and revision from which ringside-collector was built",
        [([("version", RingsideVersion.version), ("revision", RingsideVersion.revision)], 1)])

    /// Label text shared by every series of one render: `window="1s"`, `window="1s",quantile="0.5"`.
    struct SharedLabels {
        let windows: [[UInt8]]
        let windowQuantiles: [[[UInt8]]]

        init(windows: [String], quantiles: [Double]) {
            self.windows = windows.map { Array("window=\"\($0)\"".utf8) }
            windowQuantiles = windows.map { window in
                quantiles.map { Array("window=\"\(window)\",quantile=\"\($0.formatted6)\"".utf8) }
            }
        }
    }

    /// `le="..."` for every export bucket bound, per unit: the same for every render.
    static let bucketLabels: [MetricUnit: [[UInt8]]] = Dictionary(
        uniqueKeysWithValues: MetricUnit.allCases.map { unit in
            (unit, ExportBuckets.upperBounds(for: unit).map { Array("le=\"\(formatLe($0, unit: unit))\"".utf8) })
        })
    static let infiniteBucketLabel = Array("le=\"+Inf\"".utf8)

    /// The `le` labels of a metric with steps (`ExportBuckets.stepBounds`), in base units: made
    /// once per form and step.
    static func stepBucketLabels(_ metric: MetricDescriptor) -> [[UInt8]] {
        let key = StepLabelsKey(isSigned: metric.isSigned, exponent: metric.baseUnitExponent)
        return stepLabels.withLock { cache in
            if let labels = cache[key] { return labels }
            let labels = ExportBuckets.stepBounds(signed: key.isSigned).map {
                Array("le=\"\(ExactDecimal.text(Int128($0), exponent: key.exponent))\"".utf8)
            }
            cache[key] = labels
            return labels
        }
    }
    private struct StepLabelsKey: Hashable {
        let isSigned: Bool
        let exponent: Int
    }
    private static let stepLabels = Mutex<[StepLabelsKey: [[UInt8]]]>([:])

    /// The family and sample names a metric exports, computed once per metric name and unit.
    /// A class: every series of the metric shares one, without copying its arrays.
    final class FamilyNames: Sendable {
        let main: String, windowed: String, windowMax: String, windowMin: String, rate: String
        let bucket: [UInt8], sum: [UInt8], count: [UInt8]
        let windowedSum: [UInt8], windowedCount: [UInt8]
        let mainBytes: [UInt8], windowedBytes: [UInt8], windowMaxBytes: [UInt8], windowMinBytes: [UInt8], rateBytes: [UInt8]
        /// The families, in the order they are written, with their types.
        let parts: [(part: PrometheusPage.Part, family: String, type: String)]

        init(_ metric: MetricDescriptor) {
            let suffix = unitSuffix(metric.unit)
            if metric.kind == .counter {
                let stem = metric.name.hasSuffix("_total") ? String(metric.name.dropLast(6)) : metric.name
                main = withUnitSuffix(stem, suffix) + "_total"
                rate = stem + "_rate"
            } else {
                main = withUnitSuffix(metric.name, suffix)
                rate = metric.name + "_rate"
            }
            windowed = withUnitSuffix(metric.name + "_windowed", suffix)
            windowMax = withUnitSuffix(metric.name + "_window_max", suffix)
            windowMin = withUnitSuffix(metric.name + "_window_min", suffix)
            bucket = Array((main + "_bucket").utf8)
            sum = Array((main + "_sum").utf8)
            count = Array((main + "_count").utf8)
            windowedSum = Array((windowed + "_sum").utf8)
            windowedCount = Array((windowed + "_count").utf8)
            mainBytes = Array(main.utf8)
            windowedBytes = Array(windowed.utf8)
            windowMaxBytes = Array(windowMax.utf8)
            windowMinBytes = Array(windowMin.utf8)
            rateBytes = Array(rate.utf8)
            switch metric.kind {
            case .histogram:
                parts = [(.whole, main, "histogram"), (.windowed, windowed, "summary"), (.windowMax, windowMax, "gauge")]
            case .counter: parts = [(.whole, main, "counter"), (.rate, rate, "gauge")]
            case .gauge: parts = [(.whole, main, "gauge"), (.windowMin, windowMin, "gauge"), (.windowMax, windowMax, "gauge")]
            }
        }
    }

    /// About the bytes a series of `metric` in ring `ring` takes on the text page, for the
    /// collector's memory budget: each of its lines repeats its family's name and its labels
    /// (`{ring="...",key="value",le="..."} value\n`, the value and `le` taken at 40 bytes).
    package static func pageBytes(of metric: MetricDescriptor, ring: String, windows: Int, quantiles: Int) -> Int {
        let names = FamilyNames(metric)
        let labels = ring.utf8.count + 8 + metric.labels.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 4 }
        return names.parts.reduce(0) { total, part in
            total + PrometheusPage.lines(of: part.part, metric: metric, windows: windows, quantiles: quantiles)
                * (part.family.utf8.count + labels + 40)
        }
    }

    /// The HELP text of a family a metric exports.
    static func help(_ role: HelpRole, of metric: MetricDescriptor) -> String {
        let own =
            metric.help.isEmpty
            ? "\(metric.name) (\(metric.kind), recorded in \(metric.unit)) from Ringside producers"
            : metric.help
        switch role {
        case .metric: return own
        case .windowed: return own + " (sliding windows)"
        case .windowMax: return "The largest \(metric.name) in each sliding window"
        case .windowMin: return "The smallest \(metric.name) set in each sliding window"
        case .rate: return "\(metric.name) per second over each sliding window"
        }
    }

    // MARK: - Self-metrics

    /// A family of the collector's own, its samples and their lines.
    struct FixedFamily {
        let name: String
        let type: String
        let help: String
        /// The samples, and their lines in the text formats.
        let samples: [([(String, String)], Double)]
        let lines: [UInt8]

        init(_ name: String, _ type: String, _ help: String, _ samples: [([(String, String)], Double)]) {
            self.name = name
            self.type = type
            self.help = help
            self.samples = samples
            let text = TextBuffer(capacity: 256)
            for (labels, value) in samples {
                text.append(name)
                if !labels.isEmpty {
                    text.append(UInt8(ascii: "{"))
                    for (index, (key, value)) in labels.enumerated() {
                        if index > 0 { text.append(UInt8(ascii: ",")) }
                        text.append("\(key)=\"")
                        text.appendEscaped(value, inLabel: true)
                        text.append(UInt8(ascii: "\""))
                    }
                    text.append(UInt8(ascii: "}"))
                }
                text.append(UInt8(ascii: " "))
                text.appendNumber(value)
                text.append(UInt8(ascii: "\n"))
            }
            lines = text.bytes
        }
    }

    /// Drops per metric (histograms and gauges; counters are exact and never drop): a line per
    /// series, so the renderer keeps the family while the series stay as they were.
    /// The collector's families with a line per series: its records dropped, and (a histogram's)
    /// calls gathered, and the dropped values' sum and largest. They change only when a series does
    /// (`SeriesContentKey`), so a renderer keeps them.
    static func perMetricFamilies(_ snapshot: Snapshot) -> [FixedFamily] {
        var drops: [([(String, String)], Double)] = []
        var sampled: [([(String, String)], Double)] = []
        var droppedSums: [([(String, String)], Double)] = []
        var droppedMaxima: [([(String, String)], Double)] = []
        var clamped: [([(String, String)], Double)] = []
        var enabled: [([(String, String)], Double)] = []
        var sampleEvery: [([(String, String)], Double)] = []
        for series in snapshot.series {
            let labels = series.metric.labels.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
            let names = [("ring", series.ring), ("metric", series.metric.name), ("labels", labels)]
            // Only the series an operator switched, and the histograms that write fewer than every
            // call: a line for each of 100,000 series would double the page for what is nearly always 1.
            if series.control != 0 { enabled.append((names, series.isEnabled ? 1 : 0)) }
            let every = UInt64(series.metric.sampleEvery) * series.controlSampleEvery
            if series.metric.kind == .histogram, every > 1 { sampleEvery.append((names, Double(every))) }
            // Only metrics that take values other than whole units can be handed one they cannot hold.
            if series.metric.hasSteps { clamped.append((names, Double(series.clampedValues))) }
            guard series.metric.kind != .counter else { continue }
            drops.append((names, Double(series.droppedRecords)))
            guard series.metric.kind == .histogram else { continue }
            sampled.append((names, Double(series.sampledRecords)))
            // A counter never goes back: a signed histogram's dropped values' sum may (it is in /latest).
            if !series.metric.isSigned { droppedSums.append((names, series.metric.inBaseUnits(Double(series.droppedSum)))) }
            droppedMaxima.append((names, series.metric.inBaseUnits(Double(series.droppedMax))))
        }
        return [
            FixedFamily(
                perMetricFamilyNames[0], "counter",
                "Records of one metric and label set that were dropped (full lanes, or threads without a lane)", drops),
            // Counted in the histogram's count, sum and maximum exactly (SAMPLING in ringside.h).
            FixedFamily(
                perMetricFamilyNames[1], "counter",
                "Histogram calls of one metric and label set gathered rather than written while a lane filled: counted, summed and placed all the same",
                sampled),
            FixedFamily(
                perMetricFamilyNames[2], "counter",
                "The sum of the values of a histogram's dropped records, in base units (seconds for times): what full lanes hid",
                droppedSums),
            FixedFamily(
                perMetricFamilyNames[3], "gauge",
                "The largest value of a histogram's dropped records, in base units (seconds for times): what full lanes hid",
                droppedMaxima),
            FixedFamily(
                perMetricFamilyNames[4], "counter",
                "Values of a histogram or counter with a resolution or signed values that its producers clamped to what it holds, or did not record (NaN)",
                clamped),
            FixedFamily(
                perMetricFamilyNames[5], "gauge",
                "0 while the operator switched a metric or its bot off, 1 while it records under the operator's sampling (ringside-dump control); absent: as registered",
                enabled),
            FixedFamily(
                perMetricFamilyNames[6], "gauge",
                "A histogram writes 1 call in this many (absent: every call): its registered sample_every times the operator's (ringside-dump control); its count, sum and maximum stay exact",
                sampleEvery),
        ]
    }

    static let perMetricFamilyNames = [
        "ringside_metric_records_dropped_total", "ringside_metric_records_sampled_total", "ringside_metric_dropped_values_total",
        "ringside_metric_dropped_max", "ringside_metric_clamped_total", "ringside_metric_enabled", "ringside_metric_sample_every",
    ]

    /// The collector's own families; `perMetric`, when given, is `perMetricFamilies` of the snapshot, kept.
    static func selfMetrics(_ snapshot: Snapshot, perMetric: [FixedFamily]? = nil) -> [FixedFamily] {
        var result: [FixedFamily] = []
        func family(_ name: String, _ type: String, _ help: String, _ samples: [([(String, String)], Double)]) {
            result.append(FixedFamily(name, type, help, samples))
        }
        let attached = snapshot.rings.filter { $0.state != .skipped }
        func perRing(_ value: (RingSnapshot) -> Double) -> [([(String, String)], Double)] {
            attached.map { ($0.labels, value($0)) }
        }
        family(
            "ringside_ring_producer_alive", "gauge", "1 while the ring's producer process holds its lock",
            perRing { $0.producerAlive ? 1 : 0 })
        family(
            "ringside_ring_producer_stopped", "gauge",
            "1 while the ring's producer process is stopped (SIGSTOP, a debugger): alive, but recording nothing",
            perRing { $0.state == .producerStopped ? 1 : 0 })
        family(
            "ringside_ring_producer_heartbeat_age_seconds", "gauge", "Seconds since the producer last wrote or attached",
            perRing { $0.heartbeatAgeSeconds })
        family(
            "ringside_ring_capacity_records", "gauge", "Records each lane of the ring holds (a lane per recording thread)",
            perRing { Double($0.capacity) })
        family("ringside_ring_backlog_records", "gauge", "Records published and not yet drained", perRing { Double($0.backlog) })
        family(
            "ringside_ring_records_written_total", "counter", "Records the producers published into the ring",
            perRing { Double($0.recordsTotal) })
        family(
            "ringside_ring_records_dropped_total", "counter",
            "Records producers dropped: a lane was full, or a thread found every lane taken",
            perRing { Double($0.droppedTotal) })
        family(
            "ringside_ring_records_sampled_total", "counter",
            "Histogram records its lanes did not write while they filled, counted by the weighted records drained",
            perRing { Double($0.sampledTotal) })
        family(
            "ringside_ring_records_drained_total", "counter", "Records this collector drained from the ring",
            perRing { Double($0.drainedTotal) })
        family(
            "ringside_ring_records_rejected_total", "counter",
            "Drained records refused as invalid (unknown metric, kind or sequence)", perRing { Double($0.rejectedTotal) })
        family(
            "ringside_ring_skipped", "gauge", "1 for a ring the collector cannot read (see its log and /health)",
            snapshot.rings.filter { $0.state == .skipped }.map { ([("ring", $0.name)], 1) })
        family(
            "ringside_ring_series_refused", "gauge",
            "Metrics of the ring given no series because a series cap was reached (see the log)",
            perRing { Double($0.seriesRefused) })
        family(
            "ringside_ring_records_refused_total", "counter",
            "Valid records of series refused at a cap: counted, not aggregated", perRing { Double($0.recordsRefusedTotal) })
        family(
            "ringside_ring_workers_refused_total", "counter",
            "Processes refused a worker file of the bot: every one of its max_workers files held by a live worker; they write nothing",
            attached.filter { $0.worker == nil }.map { ($0.labels, Double($0.workersRefusedTotal)) })
        family(
            "ringside_ring_quarantined", "gauge",
            "1 while the ring's records are not read: many were invalid lately (see its log and /health)",
            perRing { $0.quarantined ? 1 : 0 })
        family(
            "ringside_ring_quarantines_total", "counter", "Times the ring was quarantined for invalid records",
            perRing { Double($0.quarantinesTotal) })
        family(
            "ringside_ring_lanes", "gauge", "Lanes (one per recording thread) in the ring's file",
            perRing { Double($0.lanes.count) })

        // Each lane is one thread's ring: its liveness, backlog and drops.
        func perLane(_ value: (LaneSnapshot) -> Double) -> [([(String, String)], Double)] {
            attached.flatMap { ring in ring.lanes.map { (ring.labels + [("lane", String($0.index))], value($0)) } }
        }
        family(
            "ringside_lane_active", "gauge", "1 while a live thread holds the lane, 0 once it is retired",
            perLane { $0.state == .active ? 1 : 0 })
        family(
            "ringside_lane_heartbeat_age_seconds", "gauge", "Seconds since the lane's thread last wrote or claimed it",
            perLane { $0.heartbeatAgeSeconds })
        family(
            "ringside_lane_backlog_records", "gauge", "Records published in the lane and not yet drained",
            perLane { Double($0.backlog) })
        family(
            "ringside_lane_records_written_total", "counter", "Records the lane's threads published",
            perLane { Double($0.recordsTotal) })
        family(
            "ringside_lane_records_dropped_total", "counter", "Records dropped because the lane was full",
            perLane { Double($0.droppedTotal) })

        result += perMetric ?? perMetricFamilies(snapshot)

        let stats = snapshot.collector
        family(
            "ringside_collector_records_drained_total", "counter", "Records drained from every ring",
            [([], Double(stats.recordsDrained))])
        family(
            "ringside_collector_drain_records_per_second", "gauge", "Records drained per second, over the last second",
            [([], stats.drainRate)])
        family(
            "ringside_collector_lag_seconds", "gauge", "Age of the oldest record drained in the last busy pass",
            [([], stats.lagSeconds)])
        family(
            "ringside_collector_pass_duration_seconds", "gauge", "How long the last drain pass took",
            [([], stats.lastPassSeconds)])
        family("ringside_collector_rings", "gauge", "Rings attached", [([], Double(attached.count))])
        family("ringside_collector_series", "gauge", "Series kept (bot, metric and labels)", [([], Double(stats.series))])
        family(
            "ringside_collector_series_limit", "gauge", "Series the collector keeps at most (--max-series)",
            [([], Double(stats.seriesLimit))])
        family(
            "ringside_collector_series_limit_per_ring", "gauge", "Series kept per ring at most (--max-series-per-ring)",
            [([], Double(stats.seriesLimitPerRing))])
        family(
            "ringside_collector_series_bytes", "gauge",
            "Memory the series take, as charged against --max-series-bytes (windows, counts and page text)",
            [([], Double(stats.seriesBytes))])
        family(
            "ringside_collector_series_bytes_limit", "gauge", "Memory the series may take at most (--max-series-bytes)",
            [([], Double(stats.seriesBytesLimit))])
        family(
            "ringside_collector_start_time_seconds", "gauge", "When the collector started, in Unix seconds",
            [([], Double(stats.startedRealtimeNanos) / 1e9)])
        family(
            "ringside_collector_log_lines_suppressed_total", "counter",
            "Log lines about single rings left out because more than 20 a second came (their states are in /health)",
            [([], Double(stats.logLinesSuppressed))])
        family(
            "ringside_collector_rings_waiting", "gauge",
            "Ring files found but not attached: the open-file limit, less the HTTP server's reserve, is reached",
            [([], Double(stats.ringsWaitingForDescriptors))])
        family(
            "ringside_collector_series_saturated", "gauge",
            "Series with a total at its ceiling (a count or counter at 2^64 - 1, a histogram's sum at 2^128 - 1), where it stays, never wrapping back",
            [([], Double(stats.seriesSaturated))])
        if let state = stats.state { stateFamilies(state, family) }
        family(
            "ringside_collector_ring_files_refused", "gauge",
            "ringside.* files found and not read: empty or being made, another user's, not a regular file, invalid, or waiting "
                + "for a descriptor (the first 1,000 worth showing are ringside_ring_skipped)",
            [([], Double(stats.ringFilesRefused))])
        family(
            "ringside_collector_discovery_rescans_total", "counter",
            "Whole listings of the ring directory: at start, when inotify lost events, and every 30 s",
            [([], Double(stats.discoveryRescans))])
        family(
            "ringside_collector_discovery_opens_total", "counter",
            "Files discovery opened to look at; a file refused is opened again only when it changes",
            [([], Double(stats.discoveryOpens))])
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
        }
        if let recorder = stats.recorder { recorderFamilies(recorder, family) }
        if let captures = stats.captures { captureFamilies(captures, family) }
        if let otlp = stats.otlp { otlpFamilies(otlp, family) }
        if let security = stats.webSecurity { webSecurityFamilies(security, family) }

        // Each SLO's series carry its severity, which its alerts take (`severity=` after the rule).
        let slos = snapshot.slos
        func perSLO(_ value: (SLOSnapshot) -> Double?) -> [([(String, String)], Double)] {
            slos.compactMap { slo in value(slo).map { ([("slo", slo.rule), ("severity", slo.severity)], $0) } }
        }
        family("ringside_slo_violated", "gauge", "1 while the SLO is broken over its window", perSLO { $0.violated ? 1 : 0 })
        family(
            "ringside_slo_violations_total", "counter", "Times the SLO went from met to broken", perSLO { Double($0.violations) })
        family(
            "ringside_slo_compliance_ratio", "gauge", "Fraction of the window's events within the SLO's threshold",
            perSLO { $0.compliance })
        family(
            "ringside_slo_window_events", "gauge", "Events in the SLO's window across its matching series", perSLO { Double($0.events) })
        family(
            "ringside_slo_objective_ratio", "gauge",
            "Fraction of events the SLO wants good: an availability's 1 - bound, a quantile's quantile",
            perSLO { $0.objectiveRatio })
        family(
            "ringside_slo_events_total", "counter",
            "An availability SLO's events (its total counters' increase) since the collector started",
            perSLO { $0.eventsTotal.map { Double($0) } })
        family(
            "ringside_slo_bad_events_total", "counter",
            "An availability SLO's bad events (its bad counters' increase) since the collector started",
            perSLO { $0.badEventsTotal.map { Double($0) } })
        family(
            "ringside_slo_window_covered_seconds", "gauge",
            "How much of an availability SLO's period the collector has seen (less than the period until it has run that long)",
            perSLO { $0.coveredSeconds })
        return result
    }

    /// The flight recorder's figures (`--recorder-seconds`), each a family written by `family`.
    static func recorderFamilies(_ recorder: RecorderStats, _ family: (String, String, String, [([(String, String)], Double)]) -> Void) {
        family(
            "ringside_recorder_bytes", "gauge", "Memory the flight recorder's chunks of raw records take",
            [([], Double(recorder.bytes))])
        family(
            "ringside_recorder_bytes_limit", "gauge", "Memory the flight recorder may take at most (--recorder-max-bytes)",
            [([], Double(recorder.bytesLimit))])
        family("ringside_recorder_records", "gauge", "Raw records the flight recorder holds", [([], Double(recorder.records))])
        family(
            "ringside_recorder_seconds_held", "gauge",
            "The span the flight recorder holds, from its oldest record to now: below ringside_recorder_retention_seconds "
                + "when its budget is too small for them",
            [([], recorder.secondsHeld)])
        family(
            "ringside_recorder_retention_seconds", "gauge", "The span the flight recorder is asked to hold (--recorder-seconds)",
            [([], recorder.retentionSeconds)])
        family(
            "ringside_recorder_evicted_records_total", "counter",
            "Records the flight recorder let go of for its budget before they were --recorder-seconds old",
            [([], Double(recorder.evictedRecords))])
    }

    /// The captures' figures (`--capture-dir`), each a family written by `family`: a series per
    /// trigger kind, so that a rate shows from the first capture.
    static func captureFamilies(_ captures: CaptureStats, _ family: (String, String, String, [([(String, String)], Double)]) -> Void) {
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

    /// The state's figures (the totals of workers that are gone, kept across restarts), each a
    /// family written by `family`.
    static func stateFamilies(_ state: CollectorStateStats, _ family: (String, String, String, [([(String, String)], Double)]) -> Void) {
        family(
            "ringside_collector_state_save_failures_total", "counter",
            "Saves of the collector's state that failed: a fold's journal line (the worker's file is kept), or a snapshot not written under its name (saved under another) or at all (tried again)",
            [([], Double(state.saveFailures))])
        family(
            "ringside_collector_state_failing", "gauge", "1 while the collector's state cannot be saved (see its log)",
            [([], state.failing ? 1 : 0)])
        family(
            "ringside_collector_state_read_failures", "gauge",
            "State files found at start that could not be read (too large for --state-max-bytes, or not state): their totals are not counted",
            [([], Double(state.readFailures))])
        family(
            "ringside_collector_state_bytes", "gauge", "The size of the state's last snapshot", [([], Double(state.bytes))])
        family(
            "ringside_collector_state_bytes_limit", "gauge", "The most a collector reads of one state file (--state-max-bytes)",
            [([], Double(state.bytesLimit))])
        family("ringside_collector_state_bots", "gauge", "Bots whose figures the state keeps", [([], Double(state.bots))])
        family(
            "ringside_collector_state_bots_expired_total", "counter",
            "Bots whose figures left the state: their files had all been gone longer than --state-expiry",
            [([], Double(state.botsExpired))])
        family(
            "ringside_collector_state_last_save_time_seconds", "gauge",
            "When the state's last snapshot was saved, in Unix seconds (0: not yet)",
            [([], Double(state.lastSaveRealtimeNanos ?? 0) / 1e9)])
    }

    /// The OTLP exporter's figures (`--otlp-endpoint`), each a family written by `family`.
    static func otlpFamilies(_ otlp: OTLPStats, _ family: (String, String, String, [([(String, String)], Double)]) -> Void) {
        family(
            "ringside_otlp_exports_total", "counter",
            "OTLP exports by result: sent (the receiver took them), failed (refused for good), dropped (unsent: the queue full, or the stop)",
            [
                ([("result", "sent")], Double(otlp.sent)), ([("result", "failed")], Double(otlp.failed)),
                ([("result", "dropped")], Double(otlp.dropped)),
            ])
        family(
            "ringside_otlp_retries_total", "counter",
            "OTLP attempts that failed and were made again (429, 502, 503, 504, no connection, no answer in time)",
            [([], Double(otlp.retries))])
        family(
            "ringside_otlp_timeouts_total", "counter", "OTLP attempts with no answer within --otlp-timeout", [([], Double(otlp.timeouts))])
        family(
            "ringside_otlp_sent_bytes_total", "counter", "Bytes of the OTLP exports the receiver took, gzipped, as sent",
            [([], Double(otlp.sentBytes))])
        family(
            "ringside_otlp_rejected_points_total", "counter", "Data points the OTLP receiver rejected in exports it took (partial success)",
            [([], Double(otlp.rejectedPoints))])
        family("ringside_otlp_queue_exports", "gauge", "OTLP exports waiting to be sent", [([], Double(otlp.queued))])
        family("ringside_otlp_queue_capacity", "gauge", "OTLP exports the queue holds at most", [([], Double(otlp.queueCapacity))])
        family(
            "ringside_otlp_last_success_time_seconds", "gauge", "When the OTLP receiver last took an export, in Unix seconds (0: never)",
            [([], Double(otlp.lastSuccessRealtimeNanos ?? 0) / 1e9)])
        family("ringside_otlp_failing", "gauge", "1 while the last OTLP attempt failed", [([], otlp.failing ? 1 : 0)])
    }

    /// The HTTP listener's figures with `--web-config-file`, each a family written by `family`.
    static func webSecurityFamilies(
        _ security: WebSecurityStats, _ family: (String, String, String, [([(String, String)], Double)]) -> Void
    ) {
        family(
            "ringside_http_auth_failures_total", "counter",
            "Requests refused with 401 (--web-config-file): without credentials (missing), or with a wrong user or password (wrong)",
            [([("reason", "missing")], Double(security.authMissing)), ([("reason", "wrong")], Double(security.authWrong))])
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

    // MARK: - Names and units

    /// The suffix of the base unit a metric is exported in (times in seconds, sizes in bytes).
    static func unitSuffix(_ unit: MetricUnit) -> String {
        unit.nanoseconds != nil ? "_seconds" : unit == .bytes ? "_bytes" : ""
    }

    static func withUnitSuffix(_ name: String, _ suffix: String) -> String {
        suffix.isEmpty || name.hasSuffix(suffix) ? name : name + suffix
    }

    /// Label names of the exporter's own, which a metric's labels are renamed away from.
    static let reservedLabelNames: [[UInt8]] = ["ring", "window", "quantile", "le", "slo"].map { Array($0.utf8) }

    /// A bucket bound in base units, exactly: 100 ns is `0.0000001`, never `1.0000000000000001e-07`.
    static func formatLe(_ bound: UInt64, unit: MetricUnit) -> String {
        guard let nanosPerUnit = unit.nanoseconds else { return String(bound) }
        let nanos = bound * nanosPerUnit
        var fraction = String(nanos % 1_000_000_000)
        fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
        while fraction.hasSuffix("0") { fraction.removeLast() }
        return String(nanos / 1_000_000_000) + (fraction.isEmpty ? "" : "." + fraction)
    }
}

extension ProcessMetrics {
    /// The families, with HELP and TYPE as the Prometheus client libraries write them (and in their order).
    func families() -> [PrometheusExporter.FixedFamily] {
        typealias Family = PrometheusExporter.FixedFamily
        return [
            Family(
                "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
                [([], cpuSeconds)]),
            Family("process_max_fds", "gauge", "Maximum number of open file descriptors.", [([], maxFDs)]),
            Family("process_open_fds", "gauge", "Number of open file descriptors.", [([], openFDs)]),
            Family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", [([], residentMemoryBytes)]),
            Family(
                "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
                [([], startTimeSeconds)]),
            Family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", [([], virtualMemoryBytes)]),
        ]
    }
}

/// Which HELP text a family gets: derived from its metric once, when the family is first claimed.
enum HelpRole: Sendable {
    case metric, windowed, windowMax, windowMin, rate
}

/// Renders pages, keeping the buffers it writes them in from one page to the next while they
/// are small. Safe to call from any thread; renders take turns.
package final class PrometheusRenderer: Sendable {
    private let buffers = Mutex<[TextBuffer]>([])
    /// The drops and samples per metric of the last page, by its series: a line per series each,
    /// as costly as a third of a page of 10,000 series when nothing else changed.
    private let keptPerMetric = Mutex<(key: SeriesContentKey, families: [PrometheusExporter.FixedFamily])?>(nil)
    /// Buffers of at most this many bytes in all are kept for the next page (faulting in fresh
    /// pages costs more than writing them); larger ones, of a page of some 100,000 series, are
    /// freed: kept, they would hold a second copy of the page between scrapes.
    static let keptBufferBytes = 64 << 20

    package init() {}

    /// The page for `snapshot` in `format`, with the `process_*` families of `process` when
    /// given (the collector's endpoint reads them when it renders; a snapshot rendered elsewhere has none).
    package func render(_ snapshot: Snapshot, process: ProcessMetrics? = nil, format: ExpositionFormat = .text) -> [UInt8] {
        write(plan(snapshot, process: process), format: format, families: nil, threads: PrometheusPage.threads)
    }

    /// The page's plan, with the per-metric families of the last page when its series are the same.
    private func plan(_ snapshot: Snapshot, process: ProcessMetrics?) -> PrometheusPage {
        let key = SeriesContentKey(snapshot)
        let kept = key.isVersioned ? keptPerMetric.withLock { $0?.key == key ? $0?.families : nil } : nil
        let page = PrometheusPage(snapshot, process: process, perMetric: kept)
        if kept == nil, key.isVersioned { keptPerMetric.withLock { $0 = (key, page.perMetric) } }
        return page
    }

    /// The page for `snapshot` in two sections that, one after the other, are `render`'s page:
    /// the families of the series, which change only when a series does (its `version` or
    /// `wholeVersion`, or which series there are), then the collector's own (its rings, lanes,
    /// threads, SLOs, figures and process), which change with every snapshot. A caller that kept
    /// the series' section of a snapshot with the same series writes only the other.
    ///
    /// Nil when the page does not split so: a bot's metric named as one of the collector's own
    /// families, with its type, shares that family with it (render the page whole then).
    /// - Parameters:
    ///   - series: whether to write the series' section (nil in the result when not).
    ///   - threads: threads a large section is written on (text only; by default as `render`'s).
    package func renderSections(
        _ snapshot: Snapshot, process: ProcessMetrics? = nil, format: ExpositionFormat = .text, series: Bool = true,
        threads: Int? = nil
    ) -> (series: [UInt8]?, own: [UInt8])? {
        let threads = threads ?? PrometheusPage.threads
        let page = plan(snapshot, process: process)
        guard let sections = page.sections else { return nil }
        let seriesBytes = series ? write(page, format: format, families: sections.series, threads: threads) : nil
        return (seriesBytes, write(page, format: format, families: sections.own, threads: threads))
    }

    private func write(_ page: PrometheusPage, format: ExpositionFormat, families: Range<Int>?, threads: Int) -> [UInt8] {
        if format == .protobuf { return page.writeProtobuf(families: families) }
        return buffers.withLock { buffers in
            let bytes = page.write(reusing: &buffers, threads: threads, openMetrics: format == .openMetrics, families: families)
            if buffers.reduce(0, { $0 + $1.capacity }) > Self.keptBufferBytes { buffers = [] }
            return bytes
        }
    }
}
