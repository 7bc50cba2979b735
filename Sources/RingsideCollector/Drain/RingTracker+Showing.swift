import RingsideSnapshot
import CRingside
import Ringside

/// What the publisher reads of the rings (`SeriesFeed`): each ring shown with its figures, its
/// cells and registry read when due; the bots to show and to judge; what the series cost.
extension RingTracker: SeriesFeed {
    func botsToShow(of rings: [TrackedRing]) -> [BotSeries] {
        let held = handoff.heldAtStart()
        let shown = rings.filter { holds($0) && !held.holds($0.bot.name) }
        return Dictionary(grouping: shown, by: \.bot.name).sorted { $0.key < $1.key }.map { $0.value[0].bot }
    }

    func botsToJudge() -> (bots: [BotSeries], startSettled: Bool) {
        let held = handoff.heldAtStart()
        return (roster.bots.values.filter { !held.holds($0.name) }.sorted { $0.name < $1.name }, held == .none)
    }

    var refusedFiles: [RingSnapshot] { handoff.shown.skipped }

    /// How long a ring's cells may go unseen when nothing says they moved (see `CellSamplingPace`).
    func cellSampleIntervalNanos() -> UInt64 {
        // Read in place (`bot.aggregator`): `TrackedRing.aggregator`'s getter copies the aggregator.
        roster.cellSamplingPace.intervalNanos(metrics: tracked.ordered.reduce(0) { $0 + $1.bot.aggregator.metricCount(of: $1.source) })
    }

    func show(_ ring: TrackedRing, nowNanos now: UInt64, _ showing: RingShowing) -> ShownRing {
        // Counters and gauges' last values come from the cells, sampled here; figures of the
        // ring from one status, so that they add up exactly. The status is read again when
        // records moved since (an idle ring's is read by `observe`, once a second).
        refreshStatus(of: ring, nowNanos: now)
        // A ring that drained nothing has its cells and registry read once a second (or as
        // `CellSamplingPace` allows), or as soon as a counter of it moved (the lane watch saw its
        // `cell_writes` move): thousands of idle rings cost little to publish, and a million
        // series whose windows slide do not have their cells read at every publish.
        var added = 0
        var cellsChanged = false
        let quiet = ring.bot.shown?.isQuiet == true && ring.drainedSincePublish == 0
        let sampleDue =
            showing.forced || ring.drainedSincePublish > 0 || ring.cellsMoved
            || now &- ring.cellSampling.sampledNanos >= showing.cellSampleNanos
        // A released ring has no cells to read: its release took their last values.
        if ring.file != nil, sampleDue {
            (added, cellsChanged) = sampleCellsAndRegistry(of: ring, nowNanos: now, admitting: showing.admitting)
        }
        if added > 0 || cellsChanged { ring.bot.changedSincePublish = true }
        ring.drainedAtPublish.mark(ring.drained)
        var snapshot = ring.ringSnapshot(nowNanos: now)
        snapshot.seriesRefusedBy = refusingCap(of: ring)
        return ShownRing(snapshot: snapshot, quiet: quiet && !cellsChanged && added == 0, added: added)
    }

    func seriesFigures() -> (bytes: Int, saturated: Int) {
        (roster.usage().bytes, roster.bots.values.reduce(0) { $0 + $1.aggregator.saturatedSeries })
    }

    /// What refused series to `ring`'s metrics, if any did: a cap, named by its flag
    /// (`--max-series-per-ring`, `--max-series`, `--max-series-bytes`), or `kind` when another file
    /// of the bot registered a name and labels as another kind, unit or policy.
    func refusingCap(of ring: TrackedRing) -> String? {
        guard ring.sourceFigures.refusedSeries > 0 else { return nil }
        guard ring.aggregator.refusedSeries > 0 else { return "kind" }
        if ring.aggregator.firstRefusedForBytes { return "--max-series-bytes" }
        return ring.aggregator.seriesCount >= options.maxSeriesPerRing ? "--max-series-per-ring" : "--max-series"
    }

    /// Reads a ring's status again if records moved or its cells changed since it was read, so
    /// that the snapshot shows its figures as they are now.
    func refreshStatus(of ring: TrackedRing, nowNanos now: UInt64) {
        guard ring.liveness.activitySinceStatus, let status = try? ring.file?.status(producerAlive: ring.liveness.producerAlive) else {
            return
        }
        ring.liveness.read(status, nowNanos: now)
    }

    /// Looks at a ring's registry (counters write no records, so a metric registered since is
    /// found here, not by a record naming it) and samples its cells: counter totals, gauges.
    /// Returns the metrics added and whether a cell changed (its status is then read again).
    /// Without `admitting`, the registry waits for the next sample (a snapshot out of time for it).
    func sampleCellsAndRegistry(of ring: TrackedRing, nowNanos now: UInt64, admitting: Bool = true) -> (added: Int, cellsChanged: Bool) {
        guard let consumer = ring.file else { return (0, false) }
        var added = 0
        if admitting {
            added = ring.aggregator.refreshMetrics(of: consumer, source: ring.source) { roster.allowance(for: ring.bot, holding: $0) }
            sayRefusedSeries(of: ring)
        }
        // Series its file retired leave the bot, and revived ones come back (RETIRING A SERIES in ringside.h).
        let allowance: ((BotAggregator.Usage) -> BotAggregator.Usage)? =
            admitting ? { self.roster.allowance(for: ring.bot, holding: $0) } : nil
        let moved = ring.aggregator.retireAndRevive(of: consumer, source: ring.source, admitting: allowance)
        let start = rs_clock_precise_ns()
        let cellsChanged = ring.aggregator.sampleCells(of: consumer, source: ring.source, nowNanos: now) || moved
        roster.cellSamplingPace.note(nanos: rs_clock_precise_ns() &- start, metrics: ring.bot.aggregator.metricCount(of: ring.source))
        ring.cellSampling.sampled(nowNanos: now, moves: ring.schedule.cellMoves)
        if cellsChanged { ring.liveness.moved() }
        return (added, cellsChanged)
    }
}

/// When a ring's cells were last sampled: written here, read by the rest.
struct CellSampling {
    /// When its cells were last sampled.
    fileprivate(set) var sampledNanos: UInt64 = 0
    /// The lane watch's count of counter moves then (`SchedulePlace.cellMoves`).
    fileprivate(set) var movesSampled: UInt64 = 0

    init() {}

    fileprivate mutating func sampled(nowNanos now: UInt64, moves: UInt64) {
        sampledNanos = now
        movesSampled = moves
    }
}

/// A ring's records drained, ever, when it was last shown in a snapshot: written here, read by the rest.
struct DrainedAtPublish {
    fileprivate(set) var count: UInt64 = 0

    fileprivate mutating func mark(_ drained: UInt64) { count = drained }
}
