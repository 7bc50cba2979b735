import RingsideSnapshot
import RingsideExport
import CRingside
import Ringside
import RingsideAggregation
import RingsideSystem
import Synchronization

/// What crosses threads: the latest snapshot the drain thread published, the thread sampler's
/// latest sample, and when the drain loop last finished a pass. The HTTP server and the daemon's
/// subscribers (history, `--hlog`, the JSON dump, the demo) read them; nothing else of the
/// collector is shared.
package final class PublishedSnapshot: Sendable {
    private let latest = Locked(Snapshot())
    private let threadHealth = Locked<ThreadHealthSample?>(nil)
    private let lastPass = Atomic<UInt64>(0)
    private let changes = Atomic<UInt64>(0)
    /// Woken after each change (the /metrics renderer's thread): a call that returns at once.
    private let watchers = Locked<[@Sendable () -> Void]>([])

    init() {}

    /// Moves whenever what `snapshot` returns may have changed: a snapshot published, the
    /// collector's figures brought up to date, a thread sample attached. Read it before
    /// `snapshot`, so what is read is at least as new as the revision.
    package var revision: UInt64 { changes.load(ordering: .acquiring) }

    /// Calls `wake` after every change, on the thread that made it (the drain thread or the
    /// thread sampler's): it must return at once, as signalling a semaphore does.
    package func watch(_ wake: @escaping @Sendable () -> Void) { watchers.withLock { $0.append(wake) } }

    private func changed() {
        changes.wrappingAdd(1, ordering: .releasing)
        for wake in watchers.withLock({ $0 }) { wake() }
    }

    /// The latest snapshot, carrying the latest thread sample (a copy; cheap, its arrays are
    /// shared). The sample comes on its own cadence: a quiet collector publishes snapshots every
    /// 10 s, and each one served still has the sample of the last round.
    package var snapshot: Snapshot {
        var snapshot = latest.withLock { $0 }
        snapshot.threadHealth = threadHealth.withLock { $0 }
        return snapshot
    }

    /// The latest thread sample alone (nil before the first, or with the sampler off).
    var threadSample: ThreadHealthSample? { threadHealth.withLock { $0 } }

    /// Replaces the thread sample (from the sampler's thread); the old one is freed outside the lock.
    func attach(_ sample: ThreadHealthSample) {
        var replaced: ThreadHealthSample? = sample
        threadHealth.withLock { swap(&$0, &replaced) }
        changed()
    }

    /// When the drain loop last finished a pass (CLOCK_MONOTONIC; 0: never), stored every pass,
    /// so `/health` follows the loop itself and not the snapshots, which are spaced out when
    /// publishing is costly.
    package var lastPassMonotonicNanos: UInt64 { lastPass.load(ordering: .acquiring) }

    func passed(atNanos nanos: UInt64) { lastPass.store(nanos, ordering: .releasing) }

    /// Replaces the snapshot; the old one (thousands of series) is freed by the caller, not under the lock.
    func publish(_ snapshot: inout Snapshot) {
        latest.withLock { swap(&$0, &snapshot) }
        changed()
    }

    /// Brings the collector's own figures up to date without a new snapshot (every ring quiet),
    /// and notes that its figures still hold (`currentRealtimeNanos`). The series' figures are
    /// counted when a snapshot is built: those of the snapshot stay.
    func update(_ stats: CollectorStats, currentRealtimeNanos: UInt64) {
        latest.withLock { snapshot in
            snapshot.currentRealtimeNanos = max(snapshot.currentRealtimeNanos, currentRealtimeNanos)
            var stats = stats
            let built = snapshot.collector
            stats.series = built.series
            stats.seriesLimit = built.seriesLimit
            stats.seriesLimitPerRing = built.seriesLimitPerRing
            stats.seriesBytes = built.seriesBytes
            stats.seriesBytesLimit = built.seriesBytesLimit
            stats.seriesSaturated = built.seriesSaturated
            stats.seriesAwaitingFigures = built.seriesAwaitingFigures
            stats.snapshotBuildSeconds = built.snapshotBuildSeconds
            snapshot.collector = stats
        }
        changed()
    }
}

/// The collector's part that builds snapshots of every ring's series, judges the SLOs and
/// publishes them: as often as records arrive (at most every poll), a slice at a time so the
/// drain goes on meanwhile, and rarely when every ring is quiet.
///
/// Touched by the drain thread only.
final class SnapshotPublisher {
    private var options: CollectorOptions
    private let layout: WindowLayout
    private let log: CollectorLog
    /// What the log said: the series that reached a ceiling, and each series's operator switches.
    private var said = SaidInLog()
    /// Gives the heap's free pages back once many series' windows were let go.
    private var heapTrim = HeapTrim()
    /// Heap trims started (see `HeapTrim`).
    var heapTrims: Int { heapTrim.trims }
    private let tracker: RingTracker
    let published = PublishedSnapshot()
    private var pending: PendingPublish?
    private var generation: UInt64 = 0
    private var seriesVersions = VersionCounter()
    private var sloStates: [SLOState]
    /// Something changed since the last snapshot began.
    private var hasChanges = false
    /// When it last published, what that took, and what it found.
    private var last = LastPublish()

    /// When the publisher last began, what that took (see `PublishPace`), when it last
    /// began to sample quiet rings and the round under way, and whether the last publish found
    /// every ring quiet.
    private struct LastPublish {
        var pace = PublishPace()
        var quietSampleNanos: UInt64 = 0
        var quietLook: QuietLook?
        var wasQuiet = false
    }

    /// A round of looks at quiet rings' cells and registries, some rings each pass: a million
    /// series' cells take about a second to look at, and the rings must be drained meanwhile.
    private struct QuietLook {
        let rings: [TrackedRing]
        var next = 0
    }

    /// The most time one pass spends building a snapshot.
    static let sliceNanos: UInt64 = 10_000_000
    /// Windows slide even when nothing arrives: publish at least this often.
    static let idleRefreshNanos: UInt64 = 250_000_000
    /// With every ring quiet (all windows empty, nothing drained, no cell changed), the rings'
    /// cells and registries are looked at this often, or as `CellLookPace` allows (a counter's
    /// increments after a quiet spell are seen within it), and a full publish made this often
    /// (ages move on). Any change (records, cells, a producer's death or stop) publishes at
    /// once; rebuilding a snapshot of thousands of idle bots every 2 s cost 0.3 % of a core.
    static let quietSampleNanos: UInt64 = 2_000_000_000
    static let quietRefreshNanos: UInt64 = 10_000_000_000

    /// Where an SLO marked `capture`, or a `--capture-when` bound, asks for a capture.
    private let captureDesk: CaptureDesk?
    private var captureBounds: [CaptureBoundState]

    init(options: CollectorOptions, layout: WindowLayout, log: CollectorLog, tracker: RingTracker, captureDesk: CaptureDesk? = nil) {
        self.options = options
        self.layout = layout
        self.log = log
        self.tracker = tracker
        self.captureDesk = captureDesk
        sloStates = options.sloRules.map { SLOState(rule: $0) }
        captureBounds = captureDesk == nil ? [] : options.captureBounds.map { CaptureBoundState(bound: $0) }
    }

    /// Takes a reload's SLO rules and quantiles from the next snapshot on: a rule that stays
    /// keeps its state (its violations, an availability's counts), a new one starts afresh.
    func reconfigure(sloRules: [SLORule], quantiles: [Double]) {
        let kept = sloStates
        sloStates = sloRules.map { rule in kept.first { $0.rule == rule } ?? SLOState(rule: rule) }
        options.sloRules = sloRules
        options.quantiles = quantiles
        hasChanges = true
    }

    /// A snapshot being built, some rings each pass: with hundreds of thousands of series a
    /// snapshot takes seconds, and the rings must be drained meanwhile.
    private struct PendingPublish {
        var snapshot: Snapshot
        /// The rings as they were when it began, and the next one to take; then their bots', in
        /// name order (a bot's series once, whichever rings feed it).
        let rings: [TrackedRing]
        var bots: [BotSeries] = []
        let forced: Bool
        /// How long a ring's cells may go unseen when nothing says they moved (`CellLookPace`).
        let cellLookNanos: UInt64
        var next = 0
        var nextBot = 0
        var everyRingQuiet = true
        var costNanos: UInt64 = 0
        /// Series whose windows' slices were let go (idle) while it was built.
        var windowsLetGo = 0
        /// New series (see `mayAdmit`): the drain thread's time it spent admitting metrics new
        /// in its rings' registries, and the rings that had some; its time making new series'
        /// first figures, and the bots that had some; the series it left out for the next.
        var admittingNanos: UInt64 = 0
        var ringsAdmitting = 0
        var firstFiguresNanos: UInt64 = 0
        var botsShowingFirst = 0
        var awaitingFigures = 0
        /// A ring's registry went unread, the time spent: a next snapshot is due, which reads it
        /// if the ring's look is due then (else at its next look, as `CellLookPace` allows).
        var registriesUnread = false

        /// A snapshot spends at most `newSeriesNanos` (an option) admitting metrics new in its
        /// rings' registries, and at most that making new series' first figures (every window
        /// made: many times what a series that only slid costs); past it, new series wait for
        /// the next snapshot and registries for their ring's next look, and a record naming a
        /// metric admits it as it is drained. A million series registered at once cost seconds
        /// to admit and to show: `seriesAwaitingFigures` counts those waiting. Each snapshot
        /// admits at least one ring's and shows at least one bot's new series, in order, so
        /// each is shown in turn; a forced one (at stop, or a test stepping time) shows all.
        func mayAdmit(within budget: UInt64) -> Bool { forced || ringsAdmitting == 0 || admittingNanos < budget }
        func mayShowFirst(within budget: UInt64) -> Bool { forced || botsShowingFirst == 0 || firstFiguresNanos < budget }
    }

    /// Snapshots are published at most this often while records arrive (publishing costs a
    /// pass over every series): at most one poll interval, so a record is visible within one;
    /// but never sooner than the pace's spacing (`PublishPace.spacingNanos`).
    private var intervalNanos: UInt64 {
        max(min(max(options.pollNanos, 10_000_000), 100_000_000), last.pace.spacingNanos)
    }

    /// How long the drain loop may sleep for the publisher's sake: not at all with a snapshot
    /// half built; else until the next is due when something changed.
    func sleepNanos(nowNanos now: UInt64) -> UInt64 {
        if pending != nil { return 0 }
        guard hasChanges else { return .max }
        let due = last.pace.begunNanos &+ intervalNanos
        return due > now ? due - now : 0
    }

    /// After each pass: begins a snapshot when one is due (`changed`: the pass found something
    /// new; `mayBegin`: the pass reached every ring it meant to), and builds a slice of the one
    /// pending. A `forced` publish (at stop, or a test stepping time) begins afresh and finishes now.
    func afterPass(nowNanos now: UInt64, changed: Bool, mayBegin: Bool, forced: Bool, stats: CollectorStats) {
        if changed { hasChanges = true }
        let sinceLast = now &- last.pace.begunNanos
        if forced
            || (mayBegin
                && (last.pace.begunNanos == 0 || (hasChanges && sinceLast >= intervalNanos)
                    || sinceLast >= max(Self.idleRefreshNanos, last.pace.spacingNanos)))
        {
            if !forced, !hasChanges, last.wasQuiet, sinceLast < Self.quietRefreshNanos {
                // Every ring quiet, nothing new: windows have nothing to slide, so only the
                // collector's own figures (the pass /health looks at) are brought up to date, and
                // now and then the rings' cells and registries looked at (counters write no records).
                published.update(stats, currentRealtimeNanos: rs_clock_realtime_ns())
                let sinceLook = now &- last.quietSampleNanos
                if last.quietLook == nil, sinceLook >= Self.quietSampleNanos, sinceLook >= tracker.cellLookIntervalNanos() {
                    last.quietSampleNanos = now
                    last.quietLook = QuietLook(rings: tracker.tracked.ordered)
                }
                if lookAtQuietRings(nowNanos: now, until: rs_clock_precise_ns() &+ Self.sliceNanos) { hasChanges = true }
            } else if forced || pending == nil {
                last.quietLook = nil  // the publish looks at every ring due a look
                pending = PendingPublish(
                    snapshot: startSnapshot(), rings: tracker.everyRing, forced: forced, cellLookNanos: tracker.cellLookIntervalNanos())
                last.pace.begunNanos = now
                hasChanges = false  // what changes from now on goes in the next one
            }
        }
        if pending != nil {
            // A slice at a time, so the passes between drain every ring and keep /health fresh.
            continuePublish(nowNanos: now, until: forced ? .max : rs_clock_precise_ns() &+ Self.sliceNanos, stats: stats)
        }
        heapTrim.note(letGo: 0, nowNanos: now)
    }

    /// A new, empty snapshot with the next generation.
    private func startSnapshot() -> Snapshot {
        var snapshot = Snapshot()
        generation += 1
        snapshot.generation = generation
        snapshot.generatedRealtimeNanos = rs_clock_realtime_ns()
        snapshot.currentRealtimeNanos = snapshot.generatedRealtimeNanos
        snapshot.windowNanos = options.windowNanos
        snapshot.quantiles = options.quantiles
        snapshot.nativeHistogramSchema = options.nativeHistogramSchema
        return snapshot
    }

    /// Adds rings to the pending snapshot until `deadline` (CLOCK_MONOTONIC), and publishes it
    /// once every ring is in.
    private func continuePublish(nowNanos now: UInt64, until deadline: UInt64, stats: CollectorStats) {
        guard var building = pending else { return }
        pending = nil
        let sliceStart = rs_clock_precise_ns()
        // First the rings (their figures, cells and registries), then the bots' series.
        while building.next < building.rings.count {
            let ring = building.rings[building.next]
            building.next += 1
            // A ring let go since the snapshot began is left out.
            guard tracker.holds(ring) else { continue }
            let start = rs_clock_precise_ns()
            let admitting = building.mayAdmit(within: options.newSeriesNanos)
            let (quiet, added) = addToSnapshot(
                ring, &building.snapshot, nowNanos: now, forced: building.forced, cellLookNanos: building.cellLookNanos,
                admitting: admitting)
            building.registriesUnread = building.registriesUnread || !admitting
            if added > 0 {
                building.admittingNanos &+= rs_clock_precise_ns() &- start
                building.ringsAdmitting += 1
            }
            building.everyRingQuiet = building.everyRingQuiet && quiet
            if building.next == building.rings.count {
                // A bot with files found at the start not taken up yet is not shown: its totals would read low.
                let held = tracker.handoff.heldAtStart()
                let shown = building.rings.filter { tracker.holds($0) && !held.holds($0.bot.name) }
                building.bots = Dictionary(grouping: shown, by: \.bot.name).sorted { $0.key < $1.key }.map { $0.value[0].bot }
            }
            if rs_clock_precise_ns() >= deadline { break }
        }
        while building.next >= building.rings.count, building.nextBot < building.bots.count, rs_clock_precise_ns() < deadline {
            let bot = building.bots[building.nextBot]
            building.nextBot += 1
            let quiet = addSeries(of: bot, to: &building, nowNanos: now)
            building.everyRingQuiet = building.everyRingQuiet && quiet  // a bot is the unit: it may hold 4,096 series
        }
        building.costNanos &+= rs_clock_precise_ns() &- sliceStart
        guard building.next >= building.rings.count, building.nextBot >= building.bots.count else {
            pending = building
            return
        }
        var snapshot = building.snapshot
        (snapshot.monotonicNanos, snapshot.tickNanos) = (now, layout.tickNanos)  // a histogram's rate is read at that time
        // The files discovery refused (as it last showed them), within its limit.
        snapshot.rings += tracker.handoff.shown.skipped
        // Where other users' files are read, each file's series say whose it is.
        if !options.allowedUIDs.isEmpty {
            for index in snapshot.rings.indices { snapshot.rings[index].showsOwner = true }
        }
        last.wasQuiet = building.everyRingQuiet
        // Series left out, and registries not read, are the next snapshot's, due as any change is.
        if building.awaitingFigures > 0 || building.registriesUnread { hasChanges = true }
        snapshot.slos = evaluateSLOs(nowNanos: now)
        var stats = stats
        // Kept: those on the page and those whose first figures wait for the next snapshot.
        stats.series = snapshot.series.count + building.awaitingFigures
        stats.seriesAwaitingFigures = building.awaitingFigures
        stats.seriesLimit = options.maxSeries
        stats.seriesLimitPerRing = options.maxSeriesPerRing
        stats.seriesBytes = tracker.seriesUsage().bytes
        stats.seriesBytesLimit = options.maxSeriesBytes
        stats.seriesSaturated = tracker.bots.values.reduce(0) { $0 + $1.aggregator.saturatedSeries }
        stats.snapshotBuildSeconds = Double(building.costNanos) / 1e9
        snapshot.collector = stats
        last.pace.published(nowNanos: now, costNanos: building.costNanos)
        published.publish(&snapshot)
        heapTrim.note(letGo: building.windowsLetGo, nowNanos: now)
    }

    /// Adds one ring's figures to `snapshot`, and looks at its cells and registry for its
    /// bot's series; returns whether the ring is quiet, and the metrics admitted.
    /// - Parameters:
    ///   - forced: look at the ring's cells now, quiet or not (a stop, a test stepping time).
    ///   - admitting: admit the metrics new in its registry (not once the snapshot spent its time
    ///     admitting, see `PendingPublish.mayAdmit`).
    private func addToSnapshot(
        _ ring: TrackedRing, _ snapshot: inout Snapshot, nowNanos now: UInt64, forced: Bool, cellLookNanos: UInt64, admitting: Bool
    ) -> (quiet: Bool, added: Int) {
        // Counters and gauges' last values come from the cells, sampled here; figures of the
        // ring from one status, so that they add up exactly. The status is read again when
        // records moved since (an idle ring's is read by `observe`, once a second).
        tracker.refreshStatus(of: ring, nowNanos: now)
        // A ring that drained nothing has its cells and registry looked at once a second (or as
        // `CellLookPace` allows), or as soon as a counter of it moved (the lane watch saw its
        // `cell_writes` move): thousands of idle rings cost little to publish, and a million
        // series whose windows slide do not have their cells read at every publish.
        var added = 0, cellsChanged = false
        let quiet = ring.bot.shown?.isQuiet == true && ring.drainedSincePublish == 0
        let looksDue = forced || ring.drainedSincePublish > 0 || ring.cellsMoved || now &- ring.cellLook.sampledNanos >= cellLookNanos
        // A released ring has no cells to look at: its release took their last values.
        if ring.file != nil, looksDue {
            (added, cellsChanged) = tracker.sampleCellsAndRegistry(of: ring, nowNanos: now, admitting: admitting)
        }
        if added > 0 || cellsChanged { ring.bot.changedSincePublish = true }
        ring.published.mark(drained: ring.drained)
        snapshot.rings.append(ring.ringSnapshot(nowNanos: now))
        snapshot.rings[snapshot.rings.count - 1].seriesRefusedBy = tracker.refusingCap(of: ring)
        return (quiet && !cellsChanged && added == 0, added)
    }

    /// Adds a bot's series to the snapshot `building`: what it showed, when nothing changed
    /// since and none of its series' figures moved yet (`Shown.untilNanos`: a million series
    /// whose values wait to leave the minute window cost little meanwhile); returns whether the bot
    /// is quiet (every window empty). Its series never shown are left out when the snapshot has
    /// spent its time on new series (`mayShowFirst`); a bot whose only change is such series then
    /// shows what it showed, not walked again to leave them out again.
    private func addSeries(of bot: BotSeries, to building: inout PendingPublish, nowNanos now: UInt64) -> Bool {
        if !bot.changedSincePublish, let shown = bot.shown, now < shown.untilNanos,
            shown.awaitingFigures == 0 || !building.mayShowFirst(within: options.newSeriesNanos)
        {
            building.snapshot.series.append(part: shown.series)
            building.awaitingFigures += shown.awaitingFigures
            return shown.isQuiet
        }
        let start = rs_clock_precise_ns()
        let series = bot.aggregator.snapshots(
            nowNanos: now, quantiles: options.quantiles, versions: &seriesVersions,
            firstFigures: building.mayShowFirst(within: options.newSeriesNanos))
        if bot.aggregator.seriesShownFirst > 0 {
            building.firstFiguresNanos &+= rs_clock_precise_ns() &- start
            building.botsShowingFirst += 1
        }
        let leftOut = bot.aggregator.seriesAwaitingFigures
        building.awaitingFigures += leftOut
        building.windowsLetGo += bot.aggregator.takeWindowsLetGo()
        building.snapshot.series.append(part: series)
        for metric in bot.aggregator.takeNewlySaturated() { saySaturated(metric, of: bot.name) }
        for one in series where one.control != said.control(of: one.id) { sayControl(of: one, bot: bot.name) }
        bot.shown = BotSeries.Shown(series: series, untilNanos: bot.aggregator.seriesUnchangedUntilNanos, awaitingFigures: leftOut)
        bot.changedSincePublish = false
        return false
    }

    /// Says that the operator's switches of a series changed (CONTROL in ringside.h): off, on, or sampled.
    private func sayControl(of series: SeriesSnapshot, bot: String) {
        said.controls[series.id] = series.control
        let labels = series.metric.labels.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
        let name = series.metric.name + (labels.isEmpty ? "" : "{" + labels + "}")
        let state =
            series.control & RS_CONTROL_BOT_OFF != 0
            ? "off (the bot is switched off)"
            : series.control & RS_CONTROL_OFF != 0
                ? "off (switched off)"
                : series.metric.kind == .histogram && series.controlSampleEvery > 1
                    ? "recording, 1 call in \(series.controlSampleEvery) written (the others counted, summed and their largest kept)"
                    : "recording as registered"
        log("bot \(bot): series \(name): \(state), by the operator's control (ringside-dump control)")
    }

    /// Says once that a series' total reached its ceiling (once a run: its bot may go and come again).
    private func saySaturated(_ metric: MetricDescriptor, of bot: String) {
        guard said.saturated.insert([bot, metric.name, metric.encodedLabels]).inserted else { return }
        let labels = metric.labels.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
        log(
            "bot \(bot): series \(metric.name)\(labels.isEmpty ? "" : "{" + labels + "}") reached its ceiling (a count or total "
                + "of 2^64 - 1, or a sum of 2^128 - 1) and stays there: it never goes back, and what comes beyond is not added "
                + "to it (counted in ringside_collector_series_saturated)", level: .warn)
    }

    /// Looks at the rings of the round under way (`last.quietLook`) until `deadline`; returns whether
    /// a bot's series must be made again.
    private func lookAtQuietRings(nowNanos now: UInt64, until deadline: UInt64) -> Bool {
        guard var look = last.quietLook else { return false }
        var changed = false
        while look.next < look.rings.count {
            let ring = look.rings[look.next]
            look.next += 1
            // A ring let go since the round began is left out.
            if tracker.holds(ring), sampleCells(of: ring, nowNanos: now) { changed = true }
            if rs_clock_precise_ns() >= deadline { break }
        }
        last.quietLook = look.next < look.rings.count ? look : nil
        return changed
    }

    /// `sampleCellsAndRegistry` for a quiet ring between publishes; returns whether its bot's
    /// series must be made again (the next publish then does, rather than show what it showed).
    private func sampleCells(of ring: TrackedRing, nowNanos now: UInt64) -> Bool {
        let (added, cellsChanged) = tracker.sampleCellsAndRegistry(of: ring, nowNanos: now)
        guard added > 0 || cellsChanged else { return false }
        ring.bot.changedSincePublish = true
        return true
    }

    private func evaluateSLOs(nowNanos now: UInt64) -> [SLOSnapshot] {
        let held = tracker.handoff.heldAtStart()
        let bots = tracker.bots.values.filter { !held.holds($0.name) }.sorted { $0.name < $1.name }
        if let captureDesk {
            for index in captureBounds.indices {
                if let above = captureBounds[index].evaluate(bots: bots, nowNanos: now) {
                    _ = captureDesk.submit(.threshold(captureBounds[index].bound.text), bots: above, nowNanos: now)
                }
            }
        }
        return sloStates.indices.map { index in
            let outcome = sloStates[index].evaluate(bots: bots, layout: layout, nowNanos: now)
            for line in sloStates[index].notes(on: outcome, startSettled: held == .none) { log(line, level: .warn) }
            if let transition = sloStates[index].record(outcome) {
                log(transition, level: sloStates[index].violated ? .warn : .info)
                if sloStates[index].violated, sloStates[index].rule.capture, let captureDesk {
                    _ = captureDesk.submit(.slo(sloStates[index].rule.text), bots: outcome.bots, nowNanos: now)
                }
            }
            return sloStates[index].snapshot(outcome)
        }
    }
}

/// What the publisher last saw of a ring: written here, read by the rest.
struct PublishMarks {
    /// The ring's records drained, ever, at the last publish.
    fileprivate(set) var drained: UInt64 = 0

    fileprivate mutating func mark(drained: UInt64) { self.drained = drained }
}
