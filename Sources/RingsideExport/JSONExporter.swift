import RingsideSystem
import Ringside
import RingsideAggregation
import RingsideCommandLine
import RingsideJSON
import RingsideText
import RingsideSnapshot
import Synchronization

/// Renders snapshots as JSON: the `/latest` document (also the `--json-dump` file) and `/health`.
///
/// `/latest`: `{"generated_at", "series": [...], "rings": [...], "slos": [...], "collector": {...}}`.
/// Each series has `ring`, `metric`, `kind`, `unit`, `labels` and `windows` keyed by window
/// (`"1s"`): histograms give `count`, `sum`, `min`, `max`, `mean` and a key per quantile
/// (`p50` ... `p999`) in the metric's own unit (`min` to the quantiles null when no value fell in
/// the window: no data, not 0); counters `total`, `increase` and `rate` (per
/// second); gauges `value`, `min` and `max`: null when never set (`min` and `max`: in the window),
/// and NaN and the infinities as Prometheus' HTTP API writes them, the strings `"NaN"`, `"+Inf"`, `"-Inf"`.
package enum JSONExporter {
    package static let contentType = "application/json"

    /// Renders `/latest` from scratch.
    package static func latest(_ snapshot: Snapshot) -> [UInt8] {
        LatestRenderer().render(snapshot)
    }

    /// `/latest`, with each series' JSON given by `seriesJSON`, in room for `expectedBytes`.
    static func latest(_ snapshot: Snapshot, expectedBytes: Int = 4096, seriesJSON: (SeriesSnapshot) -> [UInt8]) -> [UInt8] {
        let json = JSONWriter(capacity: expectedBytes)
        json.object {
            json.field("generated_at", utcTimestamp(realtimeNanos: snapshot.generatedRealtimeNanos))
            json.key("series")
            json.array(snapshot.series) { series in json.raw(seriesJSON(series)) }
            json.key("rings")
            json.array(snapshot.rings) { ring in writeRing(ring, threadHealth: snapshot.threadHealth, into: json) }
            json.key("slos")
            json.array(snapshot.slos) { slo in
                json.object {
                    json.field("rule", slo.rule)
                    json.field("statistic", slo.statistic)
                    json.field("window", slo.window)
                    json.field("violated", slo.violated)  // null: no events in its window, neither met nor broken
                    json.field("violations", slo.violations)
                    json.field("compliance", slo.compliance)
                    json.field("observed", slo.observed)
                    json.field("threshold", slo.threshold)
                    json.field("events", slo.events)
                    json.field("matching_series", slo.matchingSeries)
                    json.field("unjudged_series", slo.unjudgedSeries)
                    if let problem = slo.unjudgedProblem { json.field("unjudged_reason", problem) }
                    json.field("severity", slo.severity)
                    json.field("objective_ratio", slo.objectiveRatio)
                    if let eventsTotal = slo.eventsTotal, let badEventsTotal = slo.badEventsTotal {
                        json.field("events_total", eventsTotal)
                        json.field("bad_events_total", badEventsTotal)
                    }
                    if let covered = slo.coveredSeconds { json.field("covered_seconds", covered) }
                }
            }
            json.key("collector")
            writeCollector(snapshot.collector, threadHealth: snapshot.threadHealth, into: json)
        }
        return json.bytes
    }

    /// `/health`: each ring's state, whether the drain loop makes progress, and how many bots
    /// are alive (see `BotHealth`, judged with `maxAgeSeconds`). With `asked` (`/health?ring=`),
    /// those bots' states and reasons, and only their files: its status is `ok` when the drain
    /// loop makes progress and every bot asked is alive, `unhealthy` when one is not, `stalled`
    /// when the loop makes none. `nowNanos`: CLOCK_REALTIME now (by default the snapshot's build).
    package static func health(
        _ snapshot: Snapshot, isHealthy: Bool, lastPassAgeSeconds: Double, snapshotAgeSeconds: Double,
        maxAgeSeconds: Double = BotHealth.defaultMaxAgeSeconds, asked: [BotHealth]? = nil,
        nowNanos: UInt64? = nil
    ) -> [UInt8] {
        let json = JSONWriter()
        let now = nowNanos ?? snapshot.generatedRealtimeNanos
        let bots = BotHealth.all(in: snapshot, nowNanos: now, maxAgeSeconds: maxAgeSeconds)
        let askedNames = asked.map { Set($0.map(\.name)) }
        json.object {
            let allAlive = asked?.allSatisfy(\.isAlive) ?? true
            json.field("status", !isHealthy ? "stalled" : allAlive ? "ok" : "unhealthy")
            json.field("last_pass_age_seconds", lastPassAgeSeconds)
            json.field("snapshot_age_seconds", snapshotAgeSeconds)
            json.field("snapshot_build_seconds", snapshot.collector.snapshotBuild.seconds)
            // Kept: those on the page, and those whose first figures wait for the next snapshot.
            json.field("series", snapshot.collector.snapshotBuild.series)
            json.field("series_awaiting_figures", snapshot.collector.snapshotBuild.seriesAwaitingFigures)
            json.field("bots_known", bots.count)
            json.field("bots_alive", bots.count { $0.isAlive })
            json.field("max_age_seconds", maxAgeSeconds)
            if let asked {
                json.key("bots")
                json.array(asked) { bot in writeBotHealth(bot, into: json) }
            }
            json.key("rings")
            json.array(snapshot.rings.filter { askedNames?.contains($0.bot) ?? true }) { ring in
                json.object {
                    json.field("name", ring.name)
                    writeCondition(ring, into: json)
                    json.field("producer_pid", ring.producerPID)
                    json.field("backlog", ring.backlog)
                    json.field("dropped_total", ring.droppedTotal)
                    json.field("heartbeat_age_seconds", ring.heartbeatAgeSeconds)
                }
            }
            guard asked == nil else { return }
            json.key("slos")
            json.array(snapshot.slos) { slo in
                json.object {
                    json.field("rule", slo.rule)
                    json.field("violated", slo.violated)
                }
            }
        }
        return json.bytes
    }

    /// One bot of `/health?ring=`: its state, whether that is alive, and why not.
    private static func writeBotHealth(_ bot: BotHealth, into json: JSONWriter) {
        json.object {
            json.field("name", bot.name)
            json.field("state", bot.state.rawValue)
            json.field("alive", bot.isAlive)
            json.field("reason", bot.reason)
            json.field("heartbeat_age_seconds", bot.heartbeatAgeSeconds)
            json.field("producer_pid", bot.producerPID)
            json.field("files", bot.files)
        }
    }

    /// `/api/captures`: where captures go, their counts by trigger, and the latest ones (newest
    /// first), with their files; `{"enabled": false}` without `--capture-dir`.
    package static func captures(_ snapshot: Snapshot) -> [UInt8] {
        let json = JSONWriter()
        json.object {
            guard let captures = snapshot.collector.captures else {
                json.field("enabled", false)
                return
            }
            json.field("enabled", true)
            json.field("directory", captures.directory)
            for (key, counts) in [("written", captures.written), ("suppressed", captures.suppressed)] {
                json.key(key)
                json.object { for kind in counts.keys.sorted() { json.field(kind, counts[kind] ?? 0) } }
            }
            json.field("failed", captures.failed)
            json.key("captures")
            json.array(Array(captures.recent.reversed())) { capture in
                json.object {
                    json.field("id", capture.id)
                    json.field("trigger", capture.trigger)
                    if !capture.detail.isEmpty { json.field("detail", capture.detail) }
                    json.key("bots")
                    json.array(capture.bots) { json.value($0) }
                    json.field("at", utcTimestamp(realtimeNanos: capture.atRealtimeNanos))
                    json.field("before_seconds", capture.beforeSeconds)
                    json.field("after_seconds", capture.afterSeconds)
                    json.field("status", capture.status.rawValue)
                    json.key("files")
                    json.array(capture.files) { json.value($0) }
                    json.field("bytes", capture.bytes)
                    json.field("records", capture.records)
                    json.field("records_left_out", capture.recordsLeftOut)
                    if !capture.reason.isEmpty { json.field("reason", capture.reason) }
                }
            }
        }
        return json.bytes
    }

    /// One series' JSON object.
    static func seriesJSON(_ series: SeriesSnapshot, windows: [String], quantileKeys: [String]) -> [UInt8] {
        let json = JSONWriter()
        writeSeries(series, windows: windows, quantileKeys: quantileKeys, into: json)
        // Copied to its size: `LatestRenderer` keeps it, and the writer reserves 4 KiB, some four
        // times a series' JSON.
        return Array(json.bytes[...])
    }

    /// A series' identity as `/latest` and `/api/history` name it: its ring, metric, kind, unit
    /// and labels (fields of an object being written).
    package static func writeIdentity(ring: String, metric: MetricDescriptor, into json: JSONWriter) {
        json.field("ring", ring)
        json.field("metric", metric.name)
        json.field("kind", metric.kind.description)
        json.field("unit", metric.unit.description)
        if metric.kind != .gauge {
            // What its values are: a histogram's or counter's values are whole numbers of
            // `resolution` (0.01 for basis points to a hundredth), signed for a signed histogram.
            json.field("resolution", decimal: metric.resolutionText)
            json.field("signed", metric.isSigned)
        }
        json.key("labels")
        json.object {
            for (key, value) in metric.labels { json.field(key, value) }
        }
    }

    private static func writeSeries(
        _ series: SeriesSnapshot, windows: [String], quantileKeys: [String],
        into json: JSONWriter
    ) {
        let metric = series.metric
        json.object {
            writeIdentity(ring: series.ring, metric: metric, into: json)
            if !metric.help.isEmpty { json.field("help", metric.help) }
            json.field("sample_every", metric.sampleEvery)
            // The operator's switches (CONTROL in ringside.h): recording on or off, and a histogram's sampling.
            json.field("enabled", series.isEnabled)
            if metric.kind == .histogram { json.field("control_sample_every", series.controlSampleEvery) }
            switch metric.kind {
            case .histogram:
                json.field("total_count", UInt128(series.cumulativeCount))
                let sum = series.exactSumSteps
                json.field(
                    "total_sum", decimal: ExactDecimal.text(negative: sum.negative, magnitude: sum.magnitude, exponent: Int(metric.scale)))
                json.field("total_max", steps: series.cumulativeMax, of: metric)
                json.field("dropped_records", series.droppedRecords)
                json.field("dropped_sum", steps: series.droppedSum, of: metric)
                json.field("dropped_max", steps: series.droppedMax, of: metric)
                json.field("sampled_records", series.sampledRecords)
                json.field("clamped_values", series.clampedValues)
                json.field("exemplars_refused", series.exemplarsRefused)
                if !series.bucketExemplars.isEmpty {
                    json.key("bucket_exemplars")
                    json.array(series.bucketExemplars) { writeExemplar($0, into: json) }
                }
            case .counter:
                json.field("total", steps: series.cumulativeExactSum, of: metric)
                json.field("clamped_values", series.clampedValues)
            case .gauge:
                json.field("value", sample: series.lastValue)
                json.field("merge", metric.gaugeMerge.description)
                json.field("dropped_records", series.droppedRecords)
                json.field("clamped_values", series.clampedValues)
            }
            json.key("windows")
            json.object {
                for (window, stats) in zip(windows, series.windows) {
                    json.key(window)
                    json.object {
                        switch metric.kind {
                        case .histogram:
                            json.field("count", stats.count)
                            json.field("sum", metric.inOwnUnit(stats.sum))
                            // An empty window's: null (no data), never 0.
                            json.field("min", steps: stats.min, of: metric)
                            json.field("max", steps: stats.max, of: metric)
                            json.field("mean", stats.mean.map { metric.inOwnUnit($0) })
                            if let values = stats.quantileValues {
                                for (key, value) in zip(quantileKeys, values) { json.field(key, steps: value, of: metric) }
                            } else {
                                for key in quantileKeys { json.field(key, nil as Double?) }
                            }
                            if !stats.exemplars.isEmpty {
                                json.key("exemplars")
                                json.array(stats.exemplars) { writeExemplar($0, into: json) }
                            }
                        case .counter:
                            json.field("total", steps: series.cumulativeExactSum, of: metric)
                            json.field("increase", metric.inOwnUnit(stats.increase))
                            json.field("rate", metric.inOwnUnit(stats.rate))
                        case .gauge:
                            json.field("value", sample: series.lastValue)
                            json.field("min", sample: stats.gaugeMin)
                            json.field("max", sample: stats.gaugeMax)
                        }
                    }
                }
            }
        }
    }

    /// An exemplar: its value (in the series' unit), its labels, when (wall time, seconds) and who.
    private static func writeExemplar(_ exemplar: KeptExemplar, into json: JSONWriter) {
        json.object {
            json.field("value", exemplar.value)
            json.key("labels")
            json.object {
                for pair in exemplar.pairs { json.field(pair.key, pair.value) }
            }
            json.field("time", Double(exemplar.wallTimeNanos) / 1e9)
            json.field("pid", exemplar.pid)
            json.field("thread_id", exemplar.threadID)
            json.field("thread_name", exemplar.threadName)
        }
    }

    /// A ring, its lanes, and with a thread sample, its process's figures and each lane thread's.
    private static func writeRing(_ ring: RingSnapshot, threadHealth sample: ThreadHealthSample?, into json: JSONWriter) {
        json.object {
            json.field("name", ring.name)
            json.field("bot", ring.bot)
            if let worker = ring.worker { json.field("worker_pid", worker) }
            if let owner = ring.owner { json.field("uid", owner) }
            json.field("producer_pid", ring.producerPID)
            json.field("alive", ring.producerAlive)
            json.field("capacity", ring.capacity)
            json.field("backlog", ring.backlog)
            json.field("records_total", ring.recordsTotal)
            json.field("consumed_total", ring.consumedTotal)
            json.field("dropped_total", ring.droppedTotal)
            json.field("unlaned_dropped_total", ring.unlanedDropped)
            json.field("drained_total", ring.drainedTotal)
            json.field("rejected_total", ring.rejectedTotal)
            json.field("sampled_total", ring.sampledTotal)
            json.field("sample_above", ring.sampleAbove)
            json.field("series_refused", ring.seriesRefused)
            if let cap = ring.seriesRefusedBy { json.field("series_refused_by", cap) }
            json.field("records_refused_total", ring.recordsRefusedTotal)
            if ring.worker == nil { json.field("workers_refused_total", ring.workersRefusedTotal) }
            json.field("heartbeat_age_seconds", ring.heartbeatAgeSeconds)
            json.field("metrics", ring.metricCount)
            writeCondition(ring, into: json)
            json.field("quarantines_total", ring.quarantinesTotal)
            json.field("max_lanes", ring.maxLanes)
            if let process = sample?.process(writing: ring) {
                json.key("process")
                writeProcessHealth(process, pid: ring.producerPID, into: json)
            }
            if let sample {
                json.key("thread_health_refused")
                writeRefusals(sample.refusals[ring.name] ?? [:], into: json)
            }
            json.key("lanes")
            json.array(ring.lanes) { lane in
                json.object {
                    json.field("lane", lane.index)
                    json.field("state", lane.state.description)
                    json.field("thread_id", lane.threadID)
                    json.field("thread_name", lane.threadName)
                    json.field("backlog", lane.backlog)
                    json.field("records_total", lane.recordsTotal)
                    json.field("consumed_total", lane.consumedTotal)
                    json.field("dropped_total", lane.droppedTotal)
                    json.field("heartbeat_age_seconds", lane.heartbeatAgeSeconds)
                    if let thread = sample?.thread(holding: lane, of: ring) {
                        json.key("thread")
                        writeThreadHealth(thread, into: json)
                    }
                }
            }
        }
    }

    /// A ring's state, why it is skipped or quarantined, and whether it is: /health and /latest alike.
    private static func writeCondition(_ ring: RingSnapshot, into json: JSONWriter) {
        json.field("state", ring.state.rawValue)
        json.field("problem", ring.problem)
        json.field("quarantined", ring.quarantined)
    }

    private static func writeCollector(_ stats: CollectorStats, threadHealth sample: ThreadHealthSample?, into json: JSONWriter) {
        json.object {
            json.field("uid", stats.uid)
            CollectorStats.drainFigures.write(stats, into: json)
            json.field("passes", stats.passes)
            json.field("snapshot_build_seconds", stats.snapshotBuild.seconds)
            json.field("started_at", utcTimestamp(realtimeNanos: stats.startedRealtimeNanos))
            CollectorStats.boundFigures.write(stats, into: json)
            json.field("series_awaiting_figures", stats.snapshotBuild.seriesAwaitingFigures)
            if let state = stats.state {
                json.key("state")
                json.object { CollectorStateStats.figures.write(state, into: json) }
            }
            CollectorStats.discoveryFigures.write(stats, into: json)
            json.key("drain_gap_seconds")
            json.object {
                json.field("p50", stats.drainGap.p50)
                json.field("p99", stats.drainGap.p99)
                json.field("p999", stats.drainGap.p999)
                json.field("max", stats.drainGap.max)
                json.field("count", stats.drainGap.count)
            }
            json.key("doorbell")
            json.object {
                json.field("sleeps", stats.doorbell.sleeps)
                json.field("wakes", stats.doorbell.wakes)
                json.field("sleeps_skipped", stats.doorbell.caughtByLook)
                json.field("watched_rings", stats.doorbell.watchedRings.map(Double.init))
                json.field("polled_rings", stats.doorbell.polledRings.map(Double.init))
                json.field("barrier_failed", stats.doorbell.barrierFailed)
            }
            if let errors = stats.hlogErrors { json.field("hlog_errors", errors) }
            if let history = stats.history {
                json.field("history_series", history.series)
                json.field("history_series_refused", history.refused)
                json.field("history_bytes", history.bytes)
            }
            if let recorder = stats.recorder {
                json.key("recorder")
                json.object { RecorderStats.figures.write(recorder, into: json) }
            }
            if let captures = stats.captures {
                json.key("captures")
                json.object {
                    json.field("written", captures.written.values.reduce(0, +))
                    json.field("suppressed", captures.suppressed.values.reduce(0, +))
                    json.field("failed", captures.failed)
                }
            }
            if let otlp = stats.otlp {
                json.key("otlp")
                json.object {
                    json.field("exports_sent", otlp.sent)
                    json.field("exports_failed", otlp.failed)
                    json.field("exports_dropped", otlp.dropped)
                    OTLPStats.figures.write(otlp, into: json)
                    json.field("last_error", otlp.lastError)
                }
            }
            if let sample {
                json.key("thread_sampler")
                writeSamplerFigures(sample, into: json)
            }
        }
    }
}

/// Renders `/latest`, keeping each series' JSON while its versions stay the same. Safe to call
/// from any thread.
package final class LatestRenderer: Sendable {
    private let cache = Locked<[UInt64: (versions: [UInt64], json: [UInt8])]>([:])

    package init() {}

    package func render(_ snapshot: Snapshot) -> [UInt8] {
        let windows = snapshot.windowNanos.map { formatDuration($0) }
        let quantileKeys = snapshot.quantiles.map(quantileKey)
        let previous = cache.withLock { $0 }
        var current: [UInt64: (versions: [UInt64], json: [UInt8])] = [:]
        current.reserveCapacity(snapshot.series.count)
        // Room for the last page's series and a little more (rings and SLOs are small beside them).
        let expected = previous.values.reduce(0) { $0 + $1.json.count } * 9 / 8 + 64 * 1024
        let body = JSONExporter.latest(snapshot, expectedBytes: expected) { series in
            let versions = [series.version, series.wholeVersion]
            let json: [UInt8]
            if let hit = previous[series.id], hit.versions == versions {
                json = hit.json
            } else {
                json = JSONExporter.seriesJSON(series, windows: windows, quantileKeys: quantileKeys)
            }
            current[series.id] = (versions, json)
            return json
        }
        cache.withLock { $0 = current }
        return body
    }
}

extension JSONWriter {
    /// A judgement, or null when there was nothing to judge.
    package func field(_ name: String, _ value: Bool?) {
        guard let value else { return field(name, nil as Double?) }
        field(name, value)
    }

    /// A window's figure in steps (see `field(_:steps:of:)`), or null when the window has none.
    package func field(_ name: String, steps: Int128?, of metric: MetricDescriptor) {
        guard let steps else { return field(name, nil as Double?) }
        field(name, steps: steps, of: metric)
    }

    /// A whole number of `metric`'s steps in its unit, exactly: `-3.5` for -350 hundredths; digits
    /// alone for a metric of whole units.
    package func field(_ name: String, steps: some BinaryInteger, of metric: MetricDescriptor) {
        if metric.scale == 0 {
            field(name, steps)
        } else {
            field(name, decimal: ExactDecimal.text(negative: steps < 0, magnitude: UInt128(steps.magnitude), exponent: Int(metric.scale)))
        }
    }
}
