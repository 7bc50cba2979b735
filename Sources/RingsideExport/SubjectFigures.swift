import RingsideSnapshot

/// A family of the collector's own with a sample of each of its subjects (a ring, a lane, an
/// SLO): its name, type and help, and how to read a subject's figure (nil: none of that subject).
struct SubjectFigure<Subject>: Sendable {
    let name: String
    let type: String
    let help: String
    let value: @Sendable (Subject) -> FigureValue?

    init(_ name: String, _ type: String, _ help: String, _ value: @escaping @Sendable (Subject) -> FigureValue?) {
        self.name = name
        self.type = type
        self.help = help
        self.value = value
    }
}

extension Sequence {
    /// Adds the figures' families, in their order, each a sample of every subject that has the
    /// figure, under that subject's labels.
    func addFamilies<Subject>(
        of subjects: [(labels: [(String, String)], subject: Subject)], _ family: PrometheusExporter.AddFamily
    ) where Element == SubjectFigure<Subject> {
        for figure in self {
            family(
                figure.name, figure.type, figure.help,
                subjects.compactMap { labels, subject in figure.value(subject).map { (labels, $0.sample) } })
        }
    }
}

extension RingSnapshot {
    /// A ring's producer and its records (`ringside_ring_*` before `ringside_ring_skipped`).
    static let producerFigures: [SubjectFigure<Self>] = [
        .init("ringside_ring_producer_alive", "gauge", "1 while the ring's producer process holds its lock") { .flag($0.producerAlive) },
        .init(
            "ringside_ring_producer_stopped", "gauge",
            "1 while the ring's producer process is stopped (SIGSTOP, a debugger): alive, but recording nothing"
        ) { .flag($0.state == .producerStopped) },
        .init("ringside_ring_producer_heartbeat_age_seconds", "gauge", "Seconds since the producer last wrote or attached") {
            .measure($0.heartbeatAgeSeconds)
        },
        .init("ringside_ring_capacity_records", "gauge", "Records each lane of the ring holds (a lane per recording thread)") {
            .count($0.capacity)
        },
        .init("ringside_ring_backlog_records", "gauge", "Records published and not yet drained") { .count($0.backlog) },
        .init("ringside_ring_records_written_total", "counter", "Records the producers published into the ring") {
            .count($0.recordsTotal)
        },
        .init(
            "ringside_ring_records_dropped_total", "counter",
            "Records producers dropped: a lane was full, or a thread found every lane taken"
        ) { .count($0.droppedTotal) },
        .init(
            "ringside_ring_records_sampled_total", "counter",
            "Histogram records its lanes did not write while they filled, counted by the weighted records drained"
        ) { .count($0.sampledTotal) },
        .init("ringside_ring_records_drained_total", "counter", "Records this collector drained from the ring") { .count($0.drainedTotal) },
        .init("ringside_ring_records_rejected_total", "counter", "Drained records refused as invalid (unknown metric, kind or sequence)") {
            .count($0.rejectedTotal)
        },
    ]

    /// What a ring had refused, its quarantine and its lanes (`ringside_ring_*` after
    /// `ringside_ring_skipped`); a worker's file has no count of refused workers.
    static let refusalFigures: [SubjectFigure<Self>] = [
        .init(
            "ringside_ring_series_refused", "gauge",
            "Metrics of the ring given no series because a series cap was reached (see the log)"
        ) { .integer($0.seriesRefused) },
        .init(
            "ringside_ring_records_refused_total", "counter",
            "Valid records of series refused at a cap, or of series their producer retired: counted, not aggregated"
        ) { .count($0.recordsRefusedTotal) },
        .init(
            "ringside_ring_workers_refused_total", "counter",
            "Processes refused a worker file of the bot: every one of its max_workers files held by a live worker; they write nothing"
        ) { $0.worker == nil ? .count($0.workersRefusedTotal) : nil },
        .init(
            "ringside_ring_quarantined", "gauge",
            "1 while the ring's records are not read: many were invalid lately (see its log and /health)"
        ) { .flag($0.quarantined) },
        .init("ringside_ring_quarantines_total", "counter", "Times the ring was quarantined for invalid records") {
            .count($0.quarantinesTotal)
        },
        .init("ringside_ring_lanes", "gauge", "Lanes (one per recording thread) in the ring's file") { .integer($0.lanes.count) },
    ]
}

extension LaneSnapshot {
    /// A lane's liveness, backlog and drops (`ringside_lane_*`): each lane is one thread's ring.
    static let figures: [SubjectFigure<Self>] = [
        .init("ringside_lane_active", "gauge", "1 while a live thread holds the lane, 0 once it is retired") {
            .flag($0.state == .active)
        },
        .init("ringside_lane_heartbeat_age_seconds", "gauge", "Seconds since the lane's thread last wrote or claimed it") {
            .measure($0.heartbeatAgeSeconds)
        },
        .init("ringside_lane_backlog_records", "gauge", "Records published in the lane and not yet drained") { .count($0.backlog) },
        .init("ringside_lane_records_written_total", "counter", "Records the lane's threads published") { .count($0.recordsTotal) },
        .init("ringside_lane_records_dropped_total", "counter", "Records dropped because the lane was full") { .count($0.droppedTotal) },
    ]
}

extension SLOSnapshot {
    /// An SLO's figures (`ringside_slo_*`). With no events in its window an SLO is neither met nor
    /// broken: NaN (no data), as its compliance.
    static let figures: [SubjectFigure<Self>] = [
        .init("ringside_slo_violated", "gauge", "1 while the SLO is broken over its window, 0 while met, NaN with no events in it") { slo in
            slo.violated.map(FigureValue.flag) ?? .measure(.nan)
        },
        .init("ringside_slo_violations_total", "counter", "Times the SLO went from met to broken") { .count($0.violations) },
        .init("ringside_slo_compliance_ratio", "gauge", "Fraction of the window's events within the SLO's threshold (NaN: no events)") {
            .measure($0.compliance ?? .nan)
        },
        .init(
            "ringside_slo_window_events", "gauge",
            "Events in the SLO's window across its matching series (a gauge's: those holding a value; a rate's: the counters' increase)"
        ) { .count($0.events) },
        .init("ringside_slo_matching_series", "gauge", "Series the SLO judges: 0 while it matches none (a typo, or a bot not started)") {
            .integer($0.matchingSeries)
        },
        .init(
            "ringside_slo_unjudged_series", "gauge",
            "Series the SLO's selector names that it cannot judge (a wrong kind, or another kind or unit than those it judges)"
        ) { .integer($0.unjudgedSeries) },
        .init(
            "ringside_slo_objective_ratio", "gauge",
            "Fraction of events the SLO wants good: an availability's 1 - bound (a floor's bound), a quantile's quantile"
        ) { $0.objectiveRatio.map(FigureValue.measure) },
        .init(
            "ringside_slo_events_total", "counter",
            "An availability SLO's events (its total counters' increase) since the collector started"
        ) { $0.eventsTotal.map(FigureValue.count) },
        .init(
            "ringside_slo_bad_events_total", "counter",
            "An availability SLO's bad events (its bad counters' increase; a floor's: its total's not in its first counters) since the collector started"
        ) { $0.badEventsTotal.map(FigureValue.count) },
        .init(
            "ringside_slo_window_covered_seconds", "gauge",
            "How much of a gauge's, a rate's or an availability SLO's period the collector has seen (less than the period until it has run that long)"
        ) { $0.coveredSeconds.map(FigureValue.measure) },
    ]
}
