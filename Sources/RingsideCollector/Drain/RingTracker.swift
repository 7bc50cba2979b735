import RingsideSnapshot
import CRingside
import Ringside
import RingsideAggregation

/// The collector's part that knows which rings there are: it adopts the rings `RingDiscovery`
/// found and opened (on its own thread), lets go of those whose files were removed or replaced
/// or that it cannot read (and tells discovery), asks after their producers (`observe`),
/// quarantines rings that write garbage, releases dead and drained ones and takes them up again,
/// and admits series within the caps. It drains a ring when asked (`drain`); which rings and
/// when is the `DrainScheduler`'s business.
///
/// Touched by the drain thread only.
final class RingTracker {
    let options: CollectorOptions
    let ringLog: RingLog
    /// The drain's watch on the directory (shared with the drain loop, which sleeps on it).
    let wakeup: DrainWakeup
    /// What crosses to and from discovery's thread.
    let handoff: DiscoveryHandoff
    private(set) var tracked = TrackedRings()
    /// Rings let go of: their producers are dead and every record is drained, so their files
    /// are closed and unmapped; their series stay. Taken up again when a process opens the file.
    private(set) var released: [String: TrackedRing] = [:]
    /// The bots the rings write, their series and the caps.
    let roster: BotRoster
    /// Rings that wait for something to be done with them.
    private var waiting = WaitingRings()
    private var descriptors: DescriptorBudget
    /// The directory's lock and the state kept in it.
    private var claim: DirectoryClaim
    /// What the next snapshot should show that no record says.
    private var changes = RingChanges()
    /// Which producer processes are stopped, read once per process per look.
    var processStates = ProcessStates()
    /// Age of the oldest record drained lately: how far behind the drain runs.
    var lagSeconds: Double = 0
    /// The flight recorder (nil with `--recorder-seconds 0`): what the drain takes, kept raw.
    let recorder: Recorder?
    /// Where a bot that dies or stops asks for a capture (nil without `--capture-dir`).
    var captureDesk: CaptureDesk?
    /// CLOCK_REALTIME when the collector was made: counters of bots made before count in totals only.
    var startedRealtimeNanos: UInt64 { roster.startedRealtimeNanos }

    /// - Throws: `DirectoryLock.Refusal.held` when another collector holds the ring directory.
    init(
        options: CollectorOptions, makeAggregator: @escaping (_ bot: String) -> BotAggregator, log: CollectorLog, ringLog: RingLog,
        wakeup: DrainWakeup,
        handoff: DiscoveryHandoff, ringLimit: Int
    ) throws(DirectoryLock.Refusal) {
        self.options = options
        self.ringLog = ringLog
        self.wakeup = wakeup
        self.handoff = handoff
        descriptors = DescriptorBudget(ringLimit: ringLimit)
        recorder =
            options.recorderNanos > 0
            ? Recorder(retentionNanos: options.recorderRetentionNanos, budgetBytes: options.recorderMaxBytes) : nil
        let state = try CollectorState(options: options, log: log)
        claim = DirectoryClaim(state: state, directory: options.directory, log: log)
        roster = BotRoster(options: options, state: state, makeAggregator: makeAggregator)
    }

    /// The rings drained and those released, in name order.
    var everyRing: [TrackedRing] {
        released.isEmpty ? tracked.ordered : (tracked.ordered + released.values).sorted { $0.name < $1.name }
    }

    /// Whether `ring` is still one of ours (drained, or released).
    func holds(_ ring: TrackedRing) -> Bool {
        tracked[ring.name] === ring || released[ring.name] === ring
    }

    /// Whether a ring named `name` is ours (drained, or released).
    func holds(name: String) -> Bool { tracked[name] != nil || released[name] != nil }

    /// Whether something changed that the next snapshot should show, since the last call.
    func takeRingsChanged() -> Bool { changes.take() }

    /// Something changed that the next snapshot should show.
    func noteRingsChanged() { changes.note() }

    /// Has `ring`, found dead and drained, let go of at the end of the pass.
    func releaseAtPassEnd(_ ring: TrackedRing) { waiting.releases.append(ring) }

    /// How long the drain loop may sleep for the tracker's sake: briefly while a bot was just
    /// attached (its producer is about to write, and add lanes).
    func sleepNanos(nowNanos now: UInt64) -> UInt64 {
        changes.sleepNanos(nowNanos: now)
    }

    // MARK: - A pass's start

    /// What the start of a pass found: every ring to be visited (files looked at, events lost),
    /// and rings whose files were touched (to be visited now).
    struct Findings {
        var sweep = false
        var touched: [TrackedRing] = []
    }

    /// Reacts to what inotify saw, adopts the rings discovery found (a bounded number unless
    /// `whole`), lets go of those whose files discovery saw removed or replaced, and now and then
    /// looks at every ring for new lanes.
    func beginPass(nowNanos now: UInt64, whole: Bool = false) -> Findings {
        var findings = Findings()
        roster.passBegins()
        // Events that arrived while a pass ran (or with no drain thread waiting: a test stepping time).
        if wakeup.isWatching { wakeup.collect(holds: holds(name:)) }
        lookAtTouchedFiles(nowNanos: now, &findings)
        if handoff.takeSkippedChanged() { changes.note() }  // the next snapshot shows them
        // A directory that came after the start: its lock and state first (another collector may
        // hold it); what discovery found waits until then.
        guard claim.mayCollect(nowNanos: now) else { return findings }
        let deadline = rs_clock_precise_ns() &+ options.adoptionNanos
        var changed: [String] = []
        for adopted in 0..<(whole ? Int.max : DrainTiming.adoptionsPerPass) {
            if adopted > 0, !whole, rs_clock_precise_ns() >= deadline { break }
            let taken = handoff.take(foundUpTo: 1)
            changed += taken.changed
            guard let ring = taken.found.first else { break }
            adopt(ring, nowNanos: now)
        }
        for name in changed { checkIdentity(of: name, nowNanos: now) }
        // New lanes are looked for now and then (a file grows by each lane it adds, which the
        // drain's watch reports; this is for a lost event), and without inotify each pass. With
        // inotify only the rings that found some are visited: the lane watch looks at every
        // file's lane count each second, and idle rings' looks come spread over 30 s (visiting
        // 2,000 idle rings at once, each one's liveness asked, was a third of their idle cost).
        if waiting.sweepIsDue(nowNanos: now, watching: wakeup.isWatching) {
            retryRetirements()
            if wakeup.isWatching {
                findings.touched += tracked.ordered.filter { $0.consumer.lookForNewLanes() }
            } else {
                for ring in tracked.ordered { ring.consumer.lookForNewLanes() }
                findings.sweep = true  // every ring is visited this pass: those with new lanes adopt them
            }
        }
        return findings
    }

    /// At a pass's end: tells discovery how many rings are open (it opens no more than the budget
    /// leaves), and wakes it when fewer are (rings may wait for a descriptor) or rings were let go of.
    func tellDiscovery() {
        let fewer = descriptors.tell(handoff, open: tracked.count)
        if fewer || handoff.hasLetGo { handoff.wakeDiscovery() }
    }

    // MARK: - Adopting what discovery found

    /// A ring discovery says was removed or replaced under the same name: what is left is drained,
    /// then it is let go of.
    private func checkIdentity(of name: String, nowNanos now: UInt64) {
        guard let ring = tracked[name] ?? released[name] else { return }
        let identity = options.directory.fileIdentity(of: name)
        guard identity != ring.identity else { return }
        if tracked[name] === ring { _ = drain(ring, nowNanos: now) }
        forget(ring)
        changes.note()
        ringLog("ring \(name) detached: its file was \(identity == nil ? "removed" : "replaced by a new ring")")
    }

    /// Takes up a ring discovery opened: its series, its first look at cells and status.
    private func adopt(_ found: DiscoveryHandoff.FoundRing, nowNanos now: UInt64) {
        let consumer = found.consumer
        let name = consumer.name
        if let ring = tracked[name] ?? released[name] {
            // The ring of the file replaced, not let go of yet: it is now (discovery holds the new one).
            guard ring.identity != consumer.identity else { return }  // the same file: ours already
            checkIdentity(of: name, nowNanos: now)
        }
        do {
            let ring = TrackedRing(consumer: consumer, bot: roster.series(writtenBy: name))
            ring.logged.skipped = found.loggedProblem
            ring.aggregator.addMetrics(of: consumer, source: ring.source) { roster.allowance(for: ring.bot, holding: $0) }
            sayRefusedSeries(of: ring)
            let status = try consumer.status()
            // Counters made before this collector started (it restarted, say) count in totals
            // but not in its windows, where they would show as a burst; a bot created since is
            // seen whole.
            ring.aggregator.sampleCells(
                of: consumer, source: ring.source, nowNanos: now, isBaseline: status.createdRealtimeNanos < startedRealtimeNanos)
            ring.liveness.read(status, nowNanos: nil)
            ring.liveness.producer(alive: status.producerAlive)
            ring.liveness.observed(nowNanos: now)
            ring.liveness.attached(nowNanos: now)
            tracked.insert(ring)
            ring.touched(nowNanos: now)
            changes.attached(nowNanos: now)
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

    /// Says why ring `name`, let go of, could not be read (unless the log said so when it was
    /// last skipped: `saidBefore`), and hands it back to discovery, which shows it as skipped and
    /// tries it again after `DrainTiming.unreadableRetryNanos`.
    func skip(_ name: String, _ error: RingError, saidBefore: String? = nil, nowNanos now: UInt64) {
        let problem = "\(error)"
        if problem != saidBefore { ringLog("skipping ring \(name): \(problem)", level: .warn) }
        handoff.post(letGo: DiscoveryHandoff.LetGo(name: name, problem: problem, retryNanos: DrainTiming.unreadableRetryNanos))
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
            waiting.toReacquire.formUnion(released.keys)
            for ring in tracked.ordered { ring.liveness.observeSoon() }
            findings.sweep = true
        }
        for (name, kinds) in touched.events {
            if let ring = tracked[name] {
                ring.touched(nowNanos: now)  // perhaps a producer between its open and its lock: not released yet
                findings.touched.append(ring)
                do { try ring.consumer.checkIntact() } catch {
                    forget(ring)
                    skip(name, error, saidBefore: ring.logged.skipped, nowNanos: now)
                }
            } else if released[name] != nil, DrainWakeup.moreThanClosed(kinds) {
                waiting.toReacquire.insert(name)
            }
        }
        for name in waiting.toReacquire { reacquire(name, nowNanos: now) }
    }

    /// Lets go, at the end of a pass, of the rings `observe` found dead and drained.
    func releaseDueRings(nowNanos now: UInt64) {
        for ring in waiting.takeReleases() where tracked[ring.name] === ring { release(ring, nowNanos: now) }
    }

    /// Lets go of a dead, drained ring's file (its descriptor and mappings), keeping its series:
    /// thousands of finished bots must not hold the descriptors new ones need.
    private func release(_ ring: TrackedRing, nowNanos now: UInt64) {
        // A last look at its registry and cells: counters' totals and gauges are final now.
        ring.aggregator.refreshMetrics(of: ring.consumer, source: ring.source) { roster.allowance(for: ring.bot, holding: $0) }
        if ring.aggregator.sampleCells(of: ring.consumer, source: ring.source, nowNanos: now) {
            ring.liveness.moved()
        }
        if ring.liveness.activitySinceStatus, let status = try? ring.consumer.status(producerAlive: false) {
            ring.liveness.read(status, nowNanos: nil)
        }
        ring.liveness.settled()
        if let worker = WorkerRing(ring.name) {
            if retire(ring, worker: worker) { return }
            waiting.unretired.insert(ring.name)
        }
        tracked[ring.name] = nil
        ring.release()
        released[ring.name] = ring
        ring.bot.shown = nil  // its next snapshot is made afresh
        changes.note()
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
        guard claim.state.isOpen else { return false }  // nowhere to keep its totals: its file keeps them
        let entries = ring.bot.aggregator.foldedEntries(folding: ring.source)
        let removed: Bool
        do {
            removed = try options.directory.removeUnlessProducerAlive(ring.name, allowedOwners: Set(options.allowedUIDs)) { status in
                guard case .success(let status) = status, status.backlog == 0,
                    options.directory.fileIdentity(of: ring.name) == ring.identity
                else { return false }
                return claim.state.recordFold(entries, bot: worker.bot, worker: ring.name, identity: ring.identity)
            }
        } catch {
            removed = false
        }
        guard removed else { return false }
        forget(ring)
        claim.state.folded(entries, bot: worker.bot)
        changes.note()
        ringLog(
            "ring \(ring.name): worker pid \(worker.pid) of bot \(worker.bot) is gone and every record is drained; its "
                + "totals stay in the bot's series, and its file is removed")
        return true
    }

    /// Tries again to remove the released workers' files that could not go.
    private func retryRetirements() {
        for name in waiting.unretired {
            guard let ring = released[name], let worker = WorkerRing(name) else {
                waiting.unretired.remove(name)
                continue
            }
            if retire(ring, worker: worker) { waiting.unretired.remove(name) }
        }
    }

    /// Opens a released ring's file again and drains it as before, its series intact. A file
    /// replaced meanwhile is another ring: the released one is forgotten and discovery attaches
    /// the new file.
    private func reacquire(_ name: String, nowNanos now: UInt64) {
        guard let ring = released[name] else {
            waiting.toReacquire.remove(name)
            return
        }
        // Kept in `waiting.toReacquire` until a descriptor is free.
        guard tracked.count + handoff.foundWaiting < descriptors.ringLimit else { return }
        waiting.toReacquire.remove(name)
        let consumer: RingConsumer
        do {
            consumer = try RingConsumer(
                name, directory: options.directory, allowedOwners: Set(options.allowedUIDs), readsWeights: true,
                drainIntervalNanos: DrainTiming.passBudgetNanos)
        } catch {
            forget(ring)
            changes.note()
            if case .notFound = error {
                ringLog("ring \(name) detached: its file was removed")
            } else {
                skip(name, error, saidBefore: ring.logged.skipped, nowNanos: now)
            }
            return
        }
        guard consumer.identity == ring.identity else {
            forget(ring)  // discovery is told, and looks at the new file
            ringLog("ring \(name) detached: its file was replaced by a new ring")
            return
        }
        released[name] = nil
        waiting.unretired.remove(name)
        ring.reopen(consumer)
        ring.touched(nowNanos: now)
        if let status = try? consumer.status() {
            ring.liveness.read(status, nowNanos: now)
            ring.liveness.producer(alive: status.producerAlive)
        }
        tracked.insert(ring)
        ring.liveness.attached(nowNanos: now)
        changes.attached(nowNanos: now)
        ringLog("ring \(name) taken up again: a process opened its file")
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
        handoff.post(letGo: DiscoveryHandoff.LetGo(name: ring.name, identity: ring.identity))
        ring.aggregator.removeSource(ring.source)
        ring.bot.rings -= 1
        ring.bot.changedSincePublish = true
        roster.letGo(ring.bot)
    }

    /// Saves the state with the all-time histograms of the bots with workers, and lets go of the
    /// ring directory's lock (the collector stops), for its next run.
    func closeState() {
        claim.state.close(histograms: roster.keptHistograms)
    }

    /// What the state went through (nil while it is not kept).
    var stateStats: CollectorStateStats? { claim.state.stats }

    /// Lets go of every ring (the collector stops): records not yet drained stay in their rings.
    func releaseAll() {
        for ring in tracked.ordered { ringLog("ring \(ring.name) released") }
        tracked.removeAll()
    }
}
