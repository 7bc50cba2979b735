import Ringside
import RingsideSnapshot

extension PrometheusExporter {
    // MARK: - Self-metrics

    /// A family of the collector's own, its samples and their lines.
    struct FixedFamily {
        let name: String
        let type: String
        let help: String
        /// The samples, and their lines in the text formats.
        let samples: Samples
        let lines: [UInt8]

        init(_ name: String, _ type: String, _ help: String, _ samples: Samples) {
            self.name = name
            self.type = type
            self.help = help
            self.samples = samples
            let text = TextBuffer(capacity: 256)
            for (labels, value) in samples { Self.appendLine(to: text, name: name, labels: labels, value: value) }
            lines = text.bytes
        }

        /// One sample's line in the text formats: `name{key="value",...} value`.
        static func appendLine(to text: TextBuffer, name: String, labels: [(String, String)], value: Double) {
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
    }

    /// The samples of a family: each a label set and its value.
    typealias Samples = [([(String, String)], Double)]
    /// Adds a family to the page: its name, type, help and samples.
    typealias AddFamily = (String, String, String, Samples) -> Void

    /// The collector's own families, in the page's order, but those with a line per series
    /// (`PerMetricFamily`), which the page writes with the series.
    static func selfMetrics(_ snapshot: Snapshot) -> [FixedFamily] {
        fixedFamilies { family in
            let attached = fileFamilies(snapshot, family)
            collectorFamilies(snapshot.collector, rings: attached, currentRealtimeNanos: snapshot.currentRealtimeNanos, family)
            queryFamilies(snapshot.collector.queries, family)
            sloFamilies(snapshot.slos, family)
        }
    }

    /// The families `add` adds, in its order.
    static func fixedFamilies(_ add: (AddFamily) -> Void) -> [FixedFamily] {
        var result: [FixedFamily] = []
        add { result.append(FixedFamily($0, $1, $2, $3)) }
        return result
    }

    /// The bot files' families (`ringside_ring_*`, `ringside_lane_*`); returns how many files are attached (not skipped).
    static func fileFamilies(_ snapshot: Snapshot, _ family: AddFamily) -> Int {
        let attached = snapshot.rings.filter { $0.state != .skipped }
        ringFamilies(snapshot.rings, attached: attached, family)
        laneFamilies(attached, family)
        return attached.count
    }

    /// Each ring's figures (`ringside_ring_*`): its producer, records and refusals; a skipped ring only as skipped.
    static func ringFamilies(_ rings: [RingSnapshot], attached: [RingSnapshot], _ family: AddFamily) {
        func perRing(_ value: (RingSnapshot) -> Double) -> Samples {
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
            rings.filter { $0.state == .skipped }.map { ([("ring", $0.name)], 1) })
        family(
            "ringside_ring_series_refused", "gauge",
            "Metrics of the ring given no series because a series cap was reached (see the log)",
            perRing { Double($0.seriesRefused) })
        family(
            "ringside_ring_records_refused_total", "counter",
            "Valid records of series refused at a cap, or of series their producer retired: counted, not aggregated",
            perRing { Double($0.recordsRefusedTotal) })
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
    }

    /// Each lane's figures (`ringside_lane_*`).
    static func laneFamilies(_ attached: [RingSnapshot], _ family: AddFamily) {
        // Each lane is one thread's ring: its liveness, backlog and drops.
        func perLane(_ value: (LaneSnapshot) -> Double) -> Samples {
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
    }

    /// Each SLO's figures (`ringside_slo_*`).
    static func sloFamilies(_ slos: [SLOSnapshot], _ family: AddFamily) {
        // Each SLO's series carry its severity, which its alerts take (`severity=` after the rule).
        func perSLO(_ value: (SLOSnapshot) -> Double?) -> Samples {
            slos.compactMap { slo in value(slo).map { ([("slo", slo.rule), ("severity", slo.severity)], $0) } }
        }
        // With no events in its window an SLO is neither: NaN (no data), as its compliance.
        family(
            "ringside_slo_violated", "gauge", "1 while the SLO is broken over its window, 0 while met, NaN with no events in it",
            perSLO { slo in slo.violated.map { $0 ? 1 : 0 } ?? .nan })
        family(
            "ringside_slo_violations_total", "counter", "Times the SLO went from met to broken", perSLO { Double($0.violations) })
        family(
            "ringside_slo_compliance_ratio", "gauge", "Fraction of the window's events within the SLO's threshold (NaN: no events)",
            perSLO { $0.compliance ?? .nan })
        family(
            "ringside_slo_window_events", "gauge",
            "Events in the SLO's window across its matching series (a gauge's: those holding a value; a rate's: the counters' increase)",
            perSLO { Double($0.events) })
        family(
            "ringside_slo_matching_series", "gauge", "Series the SLO judges: 0 while it matches none (a typo, or a bot not started)",
            perSLO { Double($0.matchingSeries) })
        family(
            "ringside_slo_unjudged_series", "gauge",
            "Series the SLO's selector names that it cannot judge (a wrong kind, or another kind or unit than those it judges)",
            perSLO { Double($0.unjudgedSeries) })
        family(
            "ringside_slo_objective_ratio", "gauge",
            "Fraction of events the SLO wants good: an availability's 1 - bound (a floor's bound), a quantile's quantile",
            perSLO { $0.objectiveRatio })
        family(
            "ringside_slo_events_total", "counter",
            "An availability SLO's events (its total counters' increase) since the collector started",
            perSLO { $0.eventsTotal.map { Double($0) } })
        family(
            "ringside_slo_bad_events_total", "counter",
            "An availability SLO's bad events (its bad counters' increase; a floor's: its total's not in its first counters) since the collector started",
            perSLO { $0.badEventsTotal.map { Double($0) } })
        family(
            "ringside_slo_window_covered_seconds", "gauge",
            "How much of a gauge's, a rate's or an availability SLO's period the collector has seen (less than the period until it has run that long)",
            perSLO { $0.coveredSeconds })
    }
}
