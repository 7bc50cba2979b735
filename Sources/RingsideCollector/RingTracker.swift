import RingsideSnapshot
import RingsideExport
import CRingside
import Ringside
import RingsideAggregation

/// The collector's part that knows which rings there are: it finds ring files (inotify, and
/// scans now and then), attaches them within the descriptor budget, skips the ones it cannot
/// read, asks after their producers (`observe`), quarantines rings that write garbage, releases
/// dead and drained ones and takes them up again, and admits series within the caps. It drains a
/// ring when asked (`drain`); which rings and when is the `DrainScheduler`'s business.
///
/// Touched by the drain thread only.
final class RingTracker {
    let options: CollectorOptions
    private let layout: WindowLayout
    private let log: CollectorLog
    let ringLog: RingLog
    /// inotify on the directory (shared with the drain loop, which sleeps on it).
    let wakeup: DrainWakeup
    /// CLOCK_REALTIME when the collector was made: counters of bots made before count in totals only.
    let startedRealtimeNanos: UInt64
    var tracked = TrackedRings()
    /// Rings let go of: their producers are dead and every record is drained, so their files
    /// are closed and unmapped; their series stay. Taken up again when a process opens the file.
    private(set) var released: [String: TrackedRing] = [:]
    private(set) var skipped: [String: SkippedRing] = [:]
    /// The bots the rings write, by name: a bot's own ring and its workers' feed one series.
    private(set) var bots: [String: BotSeries] = [:]
    /// What the bots' workers that are gone left, kept across restarts.
    private let state: CollectorState
    /// Rings that wait for something to be done with them.
    private var due = DueRings()
    private var scan = DirectoryScan()
    private var descriptors: DescriptorBudget
    /// Which producer processes are stopped, read once per process per look.
    var processStates = ProcessStates()
    /// When a ring was last attached or taken up again.
    private(set) var lastAttachNanos: UInt64 = 0
    /// Something changed that the next snapshot should show (a ring came, went or changed state).
    private var news = false
    /// Age of the oldest record drained lately: how far behind the drain runs.
    var lagSeconds: Double = 0

    /// Rings that wait for something: files found while being made (not ready), and since when,
    /// tried again every pass for a second, since a bot's file may get no other event once it is
    /// ready (its lanes come with its threads' first records); released rings to take up again
    /// (a process opened their files, or events were lost); rings `observe` found dead and
    /// drained, let go of at the end of the pass.
    private struct DueRings {
        var beingMade: [String: UInt64] = [:]
        var toReacquire: Set<String> = []
        var releases: [TrackedRing] = []
        /// Released workers' rings whose files could not go (their fold could not be written):
        /// tried again at each discovery.
        var unretired: Set<String> = []
    }

    /// When the directory was last scanned, tracked files last checked for removal or
    /// replacement, whether inotify saw a change since, and what is wrong with it (said once).
    private struct DirectoryScan {
        var lastNanos: UInt64 = 0
        var lastIdentityCheckNanos: UInt64 = 0
        var changed = false
        var problem: String?
        /// Why another collector holds the directory (said once), while it does.
        var heldBy: String?
    }

    /// Rings this collector may hold open (the descriptor limit less a reserve for HTTP
    /// clients), the rings found that wait for a descriptor, and whether the log said so.
    private struct DescriptorBudget {
        let ringLimit: Int
        var waiting = 0
        var said = false
    }

    // MARK: - Timing

    /// How often the directory is scanned for new, removed or replaced rings while inotify
    /// watches it (a fallback), and without inotify.
    static let watchedDiscoveryIntervalNanos: UInt64 = 5_000_000_000
    static let discoveryIntervalNanos: UInt64 = 250_000_000
    /// How often a ring's producer liveness is asked of the kernel (a system call per ring, and a
    /// read of /proc per process: whether it is stopped), by how lately it recorded: see
    /// `TrackedRing.livenessInterval`. A producer that exits closes its file, which inotify
    /// reports at once, so an idle ring is asked only every 30 s (whether its process is
    /// stopped, and in case an event was lost): thousands of idle bots cost little. Also how
    /// often a quiet ring's cells are looked at.
    static let livenessIntervalNanos: UInt64 = 1_000_000_000
    static let activeLivenessIntervalNanos: UInt64 = 250_000_000
    static let idleLivenessIntervalNanos: UInt64 = 30_000_000_000
    /// A look is due this much early: a ring looked at late in one round (a pass cut short) is
    /// still due in the next, not one round later.
    static let lookSlackNanos: UInt64 = 50_000_000
    /// A ring that recorded this recently is asked each second (a bot stopped within 10 s of
    /// its last record is seen stopped within a second), however quiet it is now.
    static let recentNanos: UInt64 = 10_000_000_000
    /// A ring where nothing moved has its status read again this often all the same.
    static let quietStatusNanos: UInt64 = 10_000_000_000
    /// Without an inotify event, tracked files are checked for removal or replacement, and for
    /// new lanes, this often.
    static let identityCheckNanos: UInt64 = 30_000_000_000
    /// How soon to try again a ring that could not be attached.
    static let retryNanos: UInt64 = 5_000_000_000
    /// The least time between two log lines about drops (or rejections) of one ring.
    static let dropLogIntervalNanos: UInt64 = 10_000_000_000
    /// For this long after a bot is attached (or its file found being made), the drain loop
    /// sleeps at most `newRingSleepNanos`, and looks for the bot's new lanes every pass.
    static let newRingNanos: UInt64 = 1_000_000_000
    static let newRingSleepNanos: UInt64 = 5_000_000
    /// A ring whose file was opened this recently is not released: the opener may be a producer
    /// between its open (the event, already seen) and its lock (none), which would go unnoticed.
    static let releaseGraceNanos: UInt64 = 1_000_000_000

    /// - Throws: `DirectoryLock.Refusal.held` when another collector holds the ring directory.
    init(
        options: CollectorOptions, layout: WindowLayout, log: CollectorLog, wakeup: DrainWakeup, ringLimit: Int
    ) throws(DirectoryLock.Refusal) {
        self.options = options
        self.layout = layout
        self.log = log
        ringLog = RingLog(log)
        self.wakeup = wakeup
        startedRealtimeNanos = rs_clock_realtime_ns()
        descriptors = DescriptorBudget(ringLimit: ringLimit)
        state = try CollectorState(options: options, log: log)
    }

    /// The rings drained and those released, in name order.
    var everyRing: [TrackedRing] {
        released.isEmpty ? tracked.ordered : (tracked.ordered + released.values).sorted { $0.name < $1.name }
    }

    /// Whether `ring` is still one of ours (drained, or released).
    func holds(_ ring: TrackedRing) -> Bool {
        tracked[ring.name] === ring || released[ring.name] === ring
    }

    /// Ring files found that wait for a descriptor.
    var ringsWaitingForDescriptors: Int { descriptors.waiting }

    /// Whether something changed that the next snapshot should show, since the last call.
    func takeNews() -> Bool {
        defer { news = false }
        return news
    }

    /// Something changed that the next snapshot should show.
    func markNews() { news = true }

    /// Has `ring`, found dead and drained, let go of at the end of the pass.
    func releaseAtPassEnd(_ ring: TrackedRing) { due.releases.append(ring) }

    /// inotify saw the directory change (the drain loop's wait returned an event).
    func directoryChanged() { scan.changed = true }

    /// How long the drain loop may sleep for the tracker's sake: briefly while a bot was just
    /// attached or a file is being made (their producers are about to write).
    func sleepNanos(nowNanos now: UInt64) -> UInt64 {
        if !due.beingMade.isEmpty || (lastAttachNanos != 0 && now &- lastAttachNanos < Self.newRingNanos) {
            return Self.newRingSleepNanos
        }
        return .max
    }

    // MARK: - A pass's start

    /// What the start of a pass found: every ring to be visited (files looked at, events lost),
    /// and rings whose files were touched (to be visited now).
    struct Findings {
        var sweep = false
        var touched: [TrackedRing] = []
    }

    /// Reacts to what inotify saw, discovers rings now and then, and attaches files being made.
    func beginPass(nowNanos now: UInt64) -> Findings {
        var findings = Findings()
        // Events that arrived while a pass ran (or with no drain thread waiting: a test stepping time).
        if wakeup.isWatching, !scan.changed, wakeup.wait(timeoutNanos: 0) { scan.changed = true }
        lookAtTouchedFiles(nowNanos: now, &findings)
        let discoveryInterval = wakeup.isWatching ? Self.watchedDiscoveryIntervalNanos : Self.discoveryIntervalNanos
        if scan.lastNanos == 0 || scan.changed || now &- scan.lastNanos >= discoveryInterval {
            // Files removed or replaced are looked for when inotify saw a change, or now and
            // then (a stat per ring); new lanes likewise (a file grows by each lane it adds).
            let lookAtFiles = scan.changed || !wakeup.isWatching || now &- scan.lastIdentityCheckNanos >= Self.identityCheckNanos
            if lookAtFiles {
                scan.lastIdentityCheckNanos = now
                for ring in tracked.ordered { ring.consumer.lookForNewLanes() }
                findings.sweep = true  // every ring is visited this pass: those with new lanes adopt them
            }
            scan.changed = false
            discover(nowNanos: now, checkingIdentities: lookAtFiles)
            scan.lastNanos = now
        }
        for (name, since) in due.beingMade {
            if tracked[name] != nil || now &- since >= Self.newRingNanos {
                due.beingMade[name] = nil  // attached, or left to the discoveries (a file that stays empty)
            } else if tracked.count < descriptors.ringLimit {
                attach(name, nowNanos: now)
            }
        }
        return findings
    }

    // MARK: - Discovery

    private func discover(nowNanos now: UInt64, checkingIdentities: Bool) {
        let directory = options.directory
        // A missing or unreadable directory is said once (and once more when it comes back).
        let problem = directory.accessProblem()
        if problem != scan.problem {
            log(
                problem.map { "ring directory \(directory.path): \($0); waiting for it" }
                    ?? "ring directory \(directory.path) is readable", level: problem == nil ? .info : .warn)
            scan.problem = problem
        }
        if problem == nil, !wakeup.isWatching { wakeup.watchDirectory(directory.path) }
        // A directory that came after the start: its lock and state first (another collector may hold it).
        guard problem != nil || mayCollect() else { return }
        // Rings removed or replaced under the same name: drain what is left, then let go.
        for ring in tracked.ordered where checkingIdentities {
            let name = ring.name
            let identity = directory.fileIdentity(of: name)
            guard identity != ring.identity else { continue }
            _ = drain(ring, nowNanos: now)
            forget(ring)
            ringLog("ring \(name) detached: its file was \(identity == nil ? "removed" : "replaced by a new ring")")
        }
        for (name, ring) in released where checkingIdentities {
            let identity = directory.fileIdentity(of: name)
            guard identity != ring.identity else { continue }
            forget(ring)
            news = true
            ringLog("ring \(name) detached: its file was \(identity == nil ? "removed" : "replaced by a new ring")")
        }
        let names = options.rings.isEmpty ? directory.ringNames() : options.rings
        var waiting: [String] = []
        for name in names where tracked[name] == nil && released[name] == nil {
            if let skip = skipped[name], now < skip.retryAtNanos { continue }
            guard tracked.count < descriptors.ringLimit else {
                waiting.append(name)
                continue
            }
            attach(name, nowNanos: now)
        }
        sayWaiting(waiting, nowNanos: now)
        retryRetirements()
        // A skipped ring whose file is gone is forgotten.
        for name in skipped.keys where directory.fileIdentity(of: name) == nil && !options.rings.contains(name) {
            skipped[name] = nil
        }
    }

    /// Lists the rings that wait for a descriptor (each shown as skipped, with the reason, and
    /// counted), and says in the log when rings begin and stop waiting.
    private func sayWaiting(_ waiting: [String], nowNanos now: UInt64) {
        let problem =
            "not attached: \(tracked.count) rings are open, all that the open-file limit allows beside the "
            + "HTTP server's reserve; raise the limit (ulimit -n, LimitNOFILE=), or remove finished bots' files "
            + "(ringside-dump clean)"
        for name in waiting {
            skipped[name] = SkippedRing(problem: problem, retryAtNanos: now, isQuiet: false)
        }
        if waiting.count != descriptors.waiting { news = true }
        descriptors.waiting = waiting.count
        if !waiting.isEmpty, !descriptors.said {
            log(
                "cannot attach \(waiting.count) rings: \(tracked.count) are open, and the rest of this process's open-file "
                    + "limit is kept for HTTP clients; raise the limit (ulimit -n, LimitNOFILE=); they are listed as skipped "
                    + "and counted in ringside_collector_rings_waiting", level: .warn)
            descriptors.said = true
        } else if waiting.isEmpty, descriptors.said {
            log("every ring found is attached again")
            descriptors.said = false
        }
    }

    private func attach(_ name: String, nowNanos now: UInt64) {
        do {
            let consumer = try RingConsumer(
                name, directory: options.directory, allowedOwners: Set(options.allowedUIDs), readsWeights: true,
                drainIntervalNanos: DrainScheduler.passBudgetNanos)
            let ring = TrackedRing(consumer: consumer, bot: botSeries(writtenBy: name))
            ring.aggregator.addMetrics(of: consumer, source: ring.source) { seriesAllowance(for: ring, holding: $0) }
            sayRefusedSeries(of: ring)
            let status = try consumer.status()
            // Counters made before this collector started (it restarted, say) count in totals
            // but not in its windows, where they would show as a burst; a bot created since is
            // seen whole.
            ring.aggregator.sampleCells(
                of: consumer, source: ring.source, nowNanos: now, isBaseline: status.createdRealtimeNanos < startedRealtimeNanos)
            ring.liveness.status = status
            ring.liveness.producerAlive = status.producerAlive
            ring.liveness.lastObservedNanos = now
            ring.liveness.attachedNanos = now
            tracked.insert(ring)
            ring.touched(nowNanos: now)
            lastAttachNanos = now
            skipped[name] = nil
            ringLog(
                "ring \(name) attached: producer pid \(status.producerPID) \(status.producerAlive ? "alive" : "dead"), "
                    + "\(status.lanes.count) of \(status.maxLanes) lanes of \(status.capacity) records, "
                    + "\(consumer.metrics.count) metrics, backlog \(status.backlog)")
            // Drops before this collector came are said once, now; later ones as they happen.
            sayDrops(of: ring, status, nowNanos: now, before: "before this collector attached")
        } catch {
            skip(name, error, nowNanos: now)
        }
    }

    func skip(_ name: String, _ error: RingError, nowNanos now: UInt64) {
        let problem = "\(error)"
        if case .notReady = error {
            // Being created: looked at again every pass for a second (see `DueRings`), then at
            // each discovery, quietly.
            let since = skipped[name]?.notReadySinceNanos ?? now
            skipped[name] = SkippedRing(problem: problem, retryAtNanos: now, isQuiet: true, notReadySinceNanos: since)
            if now &- since < Self.newRingNanos { due.beingMade[name] = since }
            return
        }
        if skipped[name]?.problem != problem { ringLog("skipping ring \(name): \(problem)", level: .warn) }
        skipped[name] = SkippedRing(problem: problem, retryAtNanos: now + Self.retryNanos, isQuiet: false)
    }

    // MARK: - Touched files, releasing and taking up again

    /// Reacts to files inotify saw written to, changed, opened or closed: a tracked ring's file is
    /// checked whole (cut short or hole-punched under its mappings: let go, with the reason) and
    /// the ring watched closely for a moment (a producer attaching or detaching: its liveness is
    /// asked at once and again shortly), and a released ring's is taken up again when opened (a
    /// producer is attaching; its own close, at release, is not one).
    private func lookAtTouchedFiles(nowNanos now: UInt64, _ findings: inout Findings) {
        let touched = wakeup.takeTouched()
        if touched.overflowed {
            // An open or a close may have been missed: every ring is looked at in the next pass.
            due.toReacquire.formUnion(released.keys)
            for ring in tracked.ordered { ring.liveness.lastObservedNanos = 0 }
            findings.sweep = true
        }
        for (name, kinds) in touched.events {
            if let ring = tracked[name] {
                ring.touched(nowNanos: now)  // perhaps a producer between its open and its lock: not released yet
                findings.touched.append(ring)
                do { try ring.consumer.checkIntact() } catch {
                    forget(ring)
                    skip(name, error, nowNanos: now)
                }
            } else if released[name] != nil, DrainWakeup.moreThanClosed(kinds) {
                due.toReacquire.insert(name)
            }
        }
        for name in due.toReacquire { reacquire(name, nowNanos: now) }
    }

    /// Lets go, at the end of a pass, of the rings `observe` found dead and drained.
    func releaseDueRings(nowNanos now: UInt64) {
        for ring in due.releases where tracked[ring.name] === ring { release(ring, nowNanos: now) }
        due.releases.removeAll()
    }

    /// Lets go of a dead, drained ring's file (its descriptor and mappings), keeping its series:
    /// thousands of finished bots must not hold the descriptors new ones need.
    private func release(_ ring: TrackedRing, nowNanos now: UInt64) {
        // A last look at its registry and cells: counters' totals and gauges are final now.
        ring.aggregator.refreshMetrics(of: ring.consumer, source: ring.source) { seriesAllowance(for: ring, holding: $0) }
        if ring.aggregator.sampleCells(of: ring.consumer, source: ring.source, nowNanos: now) {
            ring.liveness.activitySinceStatus = true
        }
        if ring.liveness.activitySinceStatus, let status = try? ring.consumer.status(producerAlive: false) {
            ring.liveness.status = status
        }
        ring.liveness.activitySinceStatus = false
        if let worker = WorkerRing(ring.name) {
            if retire(ring, worker: worker) { return }
            due.unretired.insert(ring.name)
        }
        tracked[ring.name] = nil
        ring.release()
        released[ring.name] = ring
        ring.bot.quietSeries = nil  // its next snapshot is made afresh
        news = true
        if descriptors.waiting > 0 { scan.changed = true }  // a descriptor is free for them
        ringLog(
            "ring \(ring.name) released: its producer is dead and every record is drained; its series stay, and its "
                + "file is taken up again when a producer attaches")
    }

    /// A worker's ring whose process is dead and every record drained: its totals are folded
    /// into its bot's series and its file removed, so that a pool whose workers come and go
    /// leaves no files behind. The file is removed under its producer lock, and only if it holds
    /// no record still: a process that attached it meanwhile keeps it. Returns whether it went.
    /// Its fold is written in the state's journal first, under the lock, so that the totals are
    /// neither lost nor counted twice whatever stops between the two (see `CollectorState`); a fold
    /// that cannot be written keeps the file.
    private func retire(_ ring: TrackedRing, worker: WorkerRing) -> Bool {
        guard state.isOpen else { return false }  // nowhere to keep its totals: its file keeps them
        let entries = ring.bot.aggregator.foldedEntries(folding: ring.source)
        let removed: Bool
        do {
            removed = try options.directory.removeUnlessProducerAlive(ring.name, allowedOwners: Set(options.allowedUIDs)) { status in
                guard case .success(let status) = status, status.backlog == 0,
                    options.directory.fileIdentity(of: ring.name) == ring.identity
                else { return false }
                return state.recordFold(entries, bot: worker.bot, worker: ring.name, identity: ring.identity)
            }
        } catch {
            removed = false
        }
        guard removed else { return false }
        forget(ring)
        state.folded(entries, bot: worker.bot)
        news = true
        if descriptors.waiting > 0 { scan.changed = true }  // a descriptor is free for them
        ringLog(
            "ring \(ring.name): worker pid \(worker.pid) of bot \(worker.bot) is gone and every record is drained; its "
                + "totals stay in the bot's series, and its file is removed")
        return true
    }

    /// Tries again to remove the released workers' files that could not go.
    private func retryRetirements() {
        for name in due.unretired {
            guard let ring = released[name], let worker = WorkerRing(name) else {
                due.unretired.remove(name)
                continue
            }
            if retire(ring, worker: worker) { due.unretired.remove(name) }
        }
    }

    /// Opens a released ring's file again and drains it as before, its series intact. A file
    /// replaced meanwhile is another ring: the released one is forgotten and discovery attaches
    /// the new file.
    private func reacquire(_ name: String, nowNanos now: UInt64) {
        guard let ring = released[name] else {
            due.toReacquire.remove(name)
            return
        }
        guard tracked.count < descriptors.ringLimit else { return }  // kept in `due.toReacquire` until a descriptor is free
        due.toReacquire.remove(name)
        let consumer: RingConsumer
        do {
            consumer = try RingConsumer(
                name, directory: options.directory, allowedOwners: Set(options.allowedUIDs), readsWeights: true,
                drainIntervalNanos: DrainScheduler.passBudgetNanos)
        } catch {
            forget(ring)
            news = true
            if case .notFound = error {
                ringLog("ring \(name) detached: its file was removed")
            } else {
                skip(name, error, nowNanos: now)
            }
            return
        }
        guard consumer.identity == ring.identity else {
            forget(ring)
            ringLog("ring \(name) detached: its file was replaced by a new ring")
            scan.changed = true
            return
        }
        released[name] = nil
        due.unretired.remove(name)
        ring.reopen(consumer)
        ring.touched(nowNanos: now)
        if let status = try? consumer.status() {
            ring.liveness.status = status
            ring.liveness.statusNanos = now
            ring.liveness.producerAlive = status.producerAlive
        }
        tracked.insert(ring)
        ring.liveness.attachedNanos = now
        lastAttachNanos = now
        news = true
        ringLog("ring \(name) taken up again: a process opened its file")
    }

    /// The series of the bot ring `name` writes, made when its first ring comes.
    private func botSeries(writtenBy name: String) -> BotSeries {
        let bot = BotSeries.botName(ofRing: name)
        if let series = bots[bot] {
            if WorkerRing(name) != nil { series.keepsHistograms = true }
            return series
        }
        let series = BotSeries(
            name: bot,
            aggregator: RingAggregator(
                ring: bot, layout: layout, quantiles: options.quantiles.count, exemplarSchema: options.nativeHistogramSchema ?? 0))
        state.botCame(bot)
        series.aggregator.seed(state.foldedTotals(for: bot))
        let kept = state.histograms(for: bot)
        series.aggregator.seedHistograms(kept)
        series.keepsHistograms = WorkerRing(name) != nil || !kept.isEmpty
        bots[bot] = series
        return series
    }

    /// Stops tracking a ring whose file is gone, replaced or unreadable: its source leaves its
    /// bot's series, which keep its counters' totals while another ring of the bot remains;
    /// with the bot's last ring, its series go. A bot with workers keeps its all-time histograms
    /// then, for its series when a file of it comes again (as its gone workers' totals are kept):
    /// a pool whose workers all exit at once (uvicorn's, at their request limit) has no file for
    /// a moment, and its `_count` and `_sum` must not go back.
    func forget(_ ring: TrackedRing) {
        if tracked[ring.name] === ring { tracked[ring.name] = nil }
        if released[ring.name] === ring { released[ring.name] = nil }
        ring.aggregator.removeSource(ring.source)
        ring.bot.rings -= 1
        ring.bot.changedSincePublish = true
        if ring.bot.rings == 0, bots[ring.bot.name] === ring.bot {
            if ring.bot.keepsHistograms { state.keepHistograms(ring.bot.aggregator.allTimeHistograms, for: ring.bot.name) }
            bots[ring.bot.name] = nil
            state.botWent(ring.bot.name)
        }
    }

    /// Saves the state with the all-time histograms of the bots with workers, and lets go of the
    /// ring directory's lock (the collector stops), for its next run.
    func closeState() {
        state.close(histograms: bots.filter { $0.value.keepsHistograms }.mapValues(\.aggregator.allTimeHistograms))
    }

    /// What the state went through (nil while it is not kept).
    var stateStats: CollectorStateStats? { state.stats }

    /// Whether this collector may attach the directory's rings: its state is open (the
    /// directory's lock taken), or cannot be (a directory unsafe for it: the rings are collected,
    /// the workers' files kept). Not while another collector holds the directory: said once.
    private func mayCollect() -> Bool {
        do {
            try state.open()
            if scan.heldBy != nil { log("ring directory \(options.directory.path) is free again; collecting it") }
            scan.heldBy = nil
            return true
        } catch {
            if scan.heldBy != "\(error)" { log("ring directory \(options.directory.path): \(error); waiting for it", level: .error) }
            scan.heldBy = "\(error)"
            return false
        }
    }

    /// Lets go of every ring (the collector stops): records not yet drained stay in their rings.
    func releaseAll() {
        for ring in tracked.ordered { ringLog("ring \(ring.name) released") }
        tracked.removeAll()
    }
}
