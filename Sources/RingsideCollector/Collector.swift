import RingsideExport
import RingsideSnapshot
import CRingside
import Dispatch
import Foundation
import Ringside
import RingsideAggregation
import Synchronization

/// Finds rings, drains them on a thread of its own, aggregates their records into windowed
/// series, judges the SLO rules, and publishes a `Snapshot` for the exporters.
///
/// The drain thread owns every ring and series; other threads only read the published snapshot,
/// so an HTTP client can never stall a drain. `runPass` does one pass on the caller's thread,
/// for tests that want to step time themselves.
public final class Collector: @unchecked Sendable {
    // @unchecked: the mutable state below is touched only by the drain thread (or by a test
    // driving `runPass` while no thread runs); what others see goes through `published`.
    public let options: CollectorOptions
    let layout: WindowLayout
    private let log: CollectorLog
    private var tracked = TrackedRings()
    /// Rings let go of: their producers are dead and every record is drained, so their files
    /// are closed and unmapped; their series stay. Taken up again when a process opens the file.
    private var released: [String: TrackedRing] = [:]
    /// Released rings to take up again: a process opened their files (or events were lost).
    private var toReacquire: Set<String> = []
    private var skipped: [String: SkippedRing] = [:]
    /// Files found while being made (not ready), and since when: tried again every pass for a
    /// second, since a bot's file may get no other event once it is ready (its lanes come with
    /// its threads' first records).
    private var beingMade: [String: UInt64] = [:]
    private var sloStates: [SLOState]
    private var stats = CollectorStats()
    private var lastDiscoveryNanos: UInt64 = 0
    private var lastPublishNanos: UInt64 = 0
    private var hasUnpublishedChanges = false
    private var directoryProblem: String?
    private var rateMark: (nanos: UInt64, drained: UInt64) = (0, 0)
    private var generation: UInt64 = 0
    private var seriesVersions = VersionCounter()
    /// With `--hlog`: where captures of the histogram series go, when the last was taken, and
    /// records drained since.
    let histogramCaptures: HistogramCaptureFeed?
    private var lastCaptureNanos: UInt64 = 0
    private var drainedSinceCapture = 0
    /// With `--hlog`: the writer's error count (the daemon stores it), shown in each snapshot.
    let hlogErrorCount = Atomic<UInt64>(0)
    /// With `--history`: the series the history holds and those it refused (the daemon stores
    /// them after feeding it each snapshot), shown in the next snapshot; -1 with `--history 0`.
    let historySeriesCount = Atomic<Int>(-1)
    let historyRefusedCount = Atomic<Int>(-1)

    private let published = Mutex(Snapshot())
    private let stopRequested = Atomic<Bool>(false)
    private let wakeup = DrainWakeup()
    private var directoryChanged = false
    private let finished = DispatchSemaphore(value: 0)
    private var isRunning = false
    /// Rings this collector may hold open: the descriptor limit less a reserve for HTTP clients.
    private let ringLimit: Int
    /// Descriptors kept for the HTTP server's connections and the process's own files (the
    /// listening socket, inotify, logs): the open-file limit less `ringLimit`.
    public let descriptorReserve: Int
    private var saidRingLimit = false

    /// How often the directory is scanned for new, removed or replaced rings while inotify
    /// watches it (a fallback), and without inotify.
    static let watchedDiscoveryIntervalNanos: UInt64 = 5_000_000_000
    static let discoveryIntervalNanos: UInt64 = 250_000_000
    /// Which producer processes are stopped, read once per process per look.
    private var processStates = ProcessStates()
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
    private var lastIdentityCheckNanos: UInt64 = 0
    /// How soon to try again a ring that could not be attached.
    static let retryNanos: UInt64 = 5_000_000_000
    /// The least time between two log lines about drops (or rejections) of one ring.
    static let dropLogIntervalNanos: UInt64 = 10_000_000_000

    public init(options: CollectorOptions, log: CollectorLog = .standardError) {
        self.options = options
        self.log = log
        layout = WindowLayout(windowNanos: options.windowNanos)
        sloStates = options.sloRules.map { SLOState(rule: $0) }
        stats.startedRealtimeNanos = rs_clock_realtime_ns()
        (ringLimit, descriptorReserve) = Self.descriptorBudget(afterRaising: true)
        histogramCaptures = options.hlogPath == nil ? nil : HistogramCaptureFeed()
    }

    /// Raises the soft limit on open files to the hard limit (per-thread lanes live in one file
    /// per bot, but a host may run thousands of bots), and splits it: how many rings may be open,
    /// and the reserve for the HTTP server's connections and the process's own files (an eighth,
    /// at least 64).
    static func descriptorBudget(afterRaising raise: Bool) -> (rings: Int, reserve: Int) {
        var limit = rlimit()
        guard getrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0 else { return (1_000, 64) }
        if raise, limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(RLIMIT_NOFILE_VALUE, &raised) == 0 { limit = raised }
        }
        let soft = Int(min(limit.rlim_cur, rlim_t(Int32.max)))
        let reserve = max(64, soft / 8)
        return (max(0, soft - reserve), min(reserve, soft))
    }

    private static var RLIMIT_NOFILE_VALUE: __rlimit_resource_t { __rlimit_resource_t(RLIMIT_NOFILE.rawValue) }

    /// CLOCK_REALTIME when the collector was made.
    var startedRealtimeNanos: UInt64 { stats.startedRealtimeNanos }

    /// The latest snapshot (a copy; cheap, its arrays are shared).
    public var snapshot: Snapshot { published.withLock { $0 } }

    /// When the drain loop last finished a pass (CLOCK_MONOTONIC; 0: never), stored every pass,
    /// so `/health` follows the loop itself and not the snapshots, which are spaced out when
    /// publishing is costly.
    public var lastPassMonotonicNanos: UInt64 { lastPass.load(ordering: .acquiring) }
    private let lastPass = Atomic<UInt64>(0)

    // MARK: - The drain thread

    /// Starts the drain thread.
    public func start() {
        precondition(!isRunning, "the collector is already running")
        isRunning = true
        let thread = Thread { [self] in
            while !stopRequested.load(ordering: .acquiring) {
                let drained = runPass(nowNanos: rs_clock_precise_ns())
                // Busy rings are drained again at once; idle ones are looked at every poll, or
                // sooner: before the fastest-filling lane can fill, when drained records still
                // wait to be published, or when a ring file appears or grows a lane (inotify).
                if drained == 0, wakeup.wait(timeoutNanos: sleepNanos(nowNanos: rs_clock_precise_ns())) {
                    directoryChanged = true
                }
            }
            finished.signal()
        }
        thread.name = "ringside-drain"
        thread.start()
    }

    /// Stops the drain thread after one last pass, and releases every ring: records not yet
    /// drained stay in their rings for the next collector.
    public func stop() {
        guard isRunning else { return }
        stopRequested.store(true, ordering: .releasing)
        wakeup.signal()
        finished.wait()
        isRunning = false
        _ = runPass(nowNanos: rs_clock_precise_ns(), forcePublish: true)
        for ring in tracked.ordered { ringLog("ring \(ring.name) released") }
        tracked.removeAll()
        _ = watchLanes() // the watch lets go of the rings too (it holds their consumers)
    }

    // MARK: - One pass

    /// Discovers rings (now and then), drains every ring, and publishes a snapshot when one is due.
    /// - Returns: the number of records drained.
    @discardableResult
    public func runPass(nowNanos now: UInt64, forcePublish: Bool = false) -> Int {
        let passStart = rs_clock_precise_ns()
        let discoveryInterval = wakeup.isWatching ? Self.watchedDiscoveryIntervalNanos : Self.discoveryIntervalNanos
        // Events that arrived while a pass ran (or with no drain thread waiting: a test stepping time).
        if wakeup.isWatching, !directoryChanged, wakeup.wait(timeoutNanos: 0) { directoryChanged = true }
        lookAtTouchedFiles(nowNanos: now)
        if lastDiscoveryNanos == 0 || directoryChanged || now &- lastDiscoveryNanos >= discoveryInterval {
            // Files removed or replaced are looked for when inotify saw a change, or now and
            // then (a stat per ring); new lanes likewise (a file grows by each lane it adds).
            let lookAtFiles = directoryChanged || !wakeup.isWatching || now &- lastIdentityCheckNanos >= Self.identityCheckNanos
            if lookAtFiles {
                lastIdentityCheckNanos = now
                for ring in tracked.ordered { ring.consumer.lookForNewLanes() }
                sweepNow = true // every ring is visited this pass: those with new lanes adopt them
            }
            directoryChanged = false
            discover(nowNanos: now, checkingIdentities: lookAtFiles)
            lastDiscoveryNanos = now
        }
        for (name, since) in beingMade {
            if tracked[name] != nil || now &- since >= Self.newRingNanos {
                beingMade[name] = nil // attached, or left to the discoveries (a file that stays empty)
            } else if tracked.count < ringLimit {
                attach(name, nowNanos: now)
            }
        }
        var drained = 0
        var changed = false
        var soonestFill = UInt64.max
        // Which rings this pass visits: those whose lanes' write cursors moved (one flat loop
        // over every lane), those the last pass asked for (busy lately, a capped drain going on,
        // a fill rate, a quarantine, new lanes), those whose files inotify saw opened or closed,
        // and once a second those due a look at their liveness.
        _ = watchLanes()
        let sweep = forcePublish || sweepNow
        sweepNow = false
        let rings = watchedRings
        laneWatch.markMoved(&visit)
        for index in followUps where index < visit.count { visit[index] = true }
        followUps.removeAll(keepingCapacity: true)
        if !sweep, now &- lastLookRoundNanos >= Self.livenessIntervalNanos {
            lastLookRoundNanos = now
            markRingsDueALook(rings, nowNanos: now)
        }
        // The rings that cost least come first, those that wrote invalid records last; a pass
        // ends when its time is spent, and the rings it did not reach come first in the next.
        let order = serviceOrder(rings, sweep: sweep, nowNanos: now)
        let budgetEnd = rs_clock_precise_ns() &+ Self.passBudgetNanos
        passCutShort = false
        for (position, index) in order.enumerated() {
            // (A forced pass, at stop or in a test stepping time, visits every ring.)
            if position > 0, !forcePublish, rs_clock_precise_ns() >= budgetEnd {
                for rest in order[position...] { visit[rest] = true }
                passCutShort = true
                break
            }
            visit[index] = false
            let ring = rings[index]
            let ringDrained = drain(ring, nowNanos: now, whole: forcePublish)
            drained += ringDrained
            if ringDrained > 0 { ring.lastActiveNanos = now }
            if ring.consumer.laneCount != ring.watchedLanes { laneWatchStale = true }
            // Only rings that drained lately have a rate: idle ones cost nothing here.
            if ringDrained > 0 || ring.rateSinceNanos != 0, let fill = ring.fillNanos(nowNanos: now) {
                soonestFill = min(soonestFill, fill)
            }
            // Liveness and drop logging cost system calls: asked as often as `livenessInterval`
            // says (a forced publish, at stop or in a test stepping time, looks now).
            let interval = ring.livenessInterval(nowNanos: now, watching: wakeup.isWatching)
            let active = interval == Self.activeLivenessIntervalNanos
            if forcePublish || ring.isLookDue(nowNanos: now, interval: interval) {
                ring.lastObservedNanos = now
                changed = observe(ring, nowNanos: now) || changed
            }
            // A bot attached moments ago may be adding its first lanes after the file event that
            // had it attached: look for them every pass until the moment has passed.
            let isNew = now &- ring.attachedNanos < Self.newRingNanos
            if isNew, ring.consumer.lookForNewLanes() { ring.newLanesPending = true }
            // Visited again next pass: a ring busy in the last second or whose file was just opened
            // or closed (its liveness is asked four times a second), new, timing a fill rate,
            // quarantined, or with lanes to adopt.
            if active || isNew || ringDrained > 0 || ring.rateSinceNanos != 0 || ring.quarantinedUntilNanos != 0
                || ring.newLanesPending {
                followUps.append(index)
            }
        }
        soonestFillNanos = soonestFill
        for ring in releasesDue where tracked[ring.name] === ring { release(ring, nowNanos: now) }
        releasesDue.removeAll()
        _ = watchLanes() // rebuilt now if rings were released: the watch lets go of their files too
        stats.recordsDrained += UInt64(drained)
        stats.passes += 1
        stats.lastPassMonotonicNanos = rs_clock_precise_ns()
        lastPass.store(stats.lastPassMonotonicNanos, ordering: .releasing) // release: /health reads it on another thread
        stats.lastPassSeconds = Double(stats.lastPassMonotonicNanos &- passStart) / 1e9
        if now &- rateMark.nanos >= 1_000_000_000 {
            if rateMark.nanos != 0 {
                stats.drainRate = Double(stats.recordsDrained - rateMark.drained) / (Double(now &- rateMark.nanos) / 1e9)
            }
            rateMark = (now, stats.recordsDrained)
        }
        if drained > 0 || changed { hasUnpublishedChanges = true }
        drainedSinceCapture += drained
        let sinceLast = now &- lastPublishNanos
        // --hlog: a capture is due every interval, and forces a publish when records wait for it.
        let captureDue = histogramCaptures != nil && (forcePublish || now &- lastCaptureNanos >= options.hlogIntervalNanos)
        let captureWaiting = captureDue && drainedSinceCapture > 0
        // A snapshot begins after a pass that visited every ring it meant to (one cut short would
        // show rings not drained yet), unless passes have been cut short for a second: overload.
        if !passCutShort || lastWholePassNanos == 0 { lastWholePassNanos = now }
        let afterWholePass = !passCutShort || now &- lastWholePassNanos >= Self.overloadedPublishNanos
        if forcePublish || (afterWholePass && (lastPublishNanos == 0 || (hasUnpublishedChanges && sinceLast >= publishIntervalNanos)
            || sinceLast >= max(Self.idleRefreshNanos, publishSpacingNanos) || (captureWaiting && pendingPublish == nil))) {
            if !forcePublish, !captureWaiting, !hasUnpublishedChanges, lastPublishWasQuiet, sinceLast < Self.quietRefreshNanos {
                // Every ring quiet, nothing new: windows have nothing to slide, so only the
                // collector's own figures (the pass /health looks at) are brought up to date, and
                // now and then the rings' cells and registries looked at (counters write no records).
                published.withLock { $0.collector = stats }
                if now &- lastQuietSampleNanos >= Self.quietSampleNanos {
                    lastQuietSampleNanos = now
                    for ring in tracked.ordered where sampleCells(of: ring, nowNanos: now) { hasUnpublishedChanges = true }
                }
            } else if forcePublish || pendingPublish == nil {
                // A forced one starts afresh (it looks at every ring's cells now).
                var publish = PendingPublish(snapshot: startSnapshot(), rings: everyRing, forced: forcePublish)
                if captureDue {
                    publish.capture = HistogramCapture(realtimeNanos: publish.snapshot.generatedRealtimeNanos)
                    lastCaptureNanos = now
                    drainedSinceCapture = 0
                }
                // A forced publish replaces one half built: what that one captured is kept.
                if let earlier = pendingPublish?.capture, var capture = publish.capture {
                    for (id, series) in earlier.series where capture.series[id] == nil { capture.series[id] = series }
                    publish.capture = capture
                }
                pendingPublish = publish
                lastPublishNanos = now
                hasUnpublishedChanges = false // what changes from now on goes in the next one
            }
        }
        if pendingPublish != nil {
            // A slice at a time, so the passes between drain every ring and keep /health fresh;
            // a forced publish (at stop, or a test stepping time) is finished now.
            continuePublish(nowNanos: now, until: forcePublish ? .max : rs_clock_precise_ns() &+ Self.publishSliceNanos)
        }
        return drained
    }

    /// A snapshot being built, some rings each pass: with hundreds of thousands of series a
    /// snapshot takes seconds, and the rings must be drained meanwhile.
    private struct PendingPublish {
        var snapshot: Snapshot
        /// The rings as they were when it began, and the next one to take.
        let rings: [TrackedRing]
        let forced: Bool
        var next = 0
        var everyRingQuiet = true
        var costNanos: UInt64 = 0
        /// With `--hlog`, when this publish takes a capture of the histogram series.
        var capture: HistogramCapture?
    }
    private var pendingPublish: PendingPublish?
    /// The most time one pass spends building a snapshot.
    static let publishSliceNanos: UInt64 = 10_000_000

    /// Snapshots are published at most this often while records arrive (publishing costs a
    /// pass over every series): at most one poll interval, so a record is visible within one;
    /// but never sooner than `publishSpacingNanos`.
    private var publishIntervalNanos: UInt64 {
        max(min(max(options.pollNanos, 10_000_000), 100_000_000), publishSpacingNanos)
    }
    /// What the last publish took, and the spacing that keeps publishing to a tenth of the drain
    /// thread's time: a few microseconds for a few series, but with 10,000 busy series a publish
    /// takes tens of milliseconds, which would otherwise take the CPU that scrapes need.
    private var lastPublishCostNanos: UInt64 = 0
    private var publishSpacingNanos: UInt64 { 10 * lastPublishCostNanos }
    /// Windows slide even when nothing arrives: publish at least this often.
    static let idleRefreshNanos: UInt64 = 250_000_000
    /// With every ring quiet (all windows empty, nothing drained, no cell changed), the rings'
    /// cells and registries are looked at this often (a counter's increments after a quiet
    /// spell are seen within it), and a full publish made this often (ages move on). Any change
    /// (records, cells, a producer's death or stop) publishes at once; rebuilding a snapshot of
    /// thousands of idle bots every 2 s cost a third of a percent of a core.
    static let quietSampleNanos: UInt64 = 2_000_000_000
    static let quietRefreshNanos: UInt64 = 10_000_000_000
    private var lastQuietSampleNanos: UInt64 = 0
    /// Whether the last publish found every ring quiet.
    private var lastPublishWasQuiet = false

    /// The rings' lanes' write cursors, looked at together each pass (see `LaneWatch`), the rings
    /// in the watch's order, and what the pass visits.
    private let laneWatch = LaneWatch()
    private var watchedRings: [TrackedRing] = []
    private var watchedVersion: UInt64 = .max
    /// A ring mapped new lanes: the watch is rebuilt at the next pass.
    private var laneWatchStale = false
    /// Per watched ring: visit it this pass. And the rings the last pass wants visited again.
    private var visit: [Bool] = []
    private var followUps: [Int] = []
    /// Every ring is visited in the next pass after `sweepNow` is set; once a second
    /// (`livenessIntervalNanos`) the rings due a look are.
    private var sweepNow = false
    private var lastLookRoundNanos: UInt64 = 0
    /// Rings `observe` found dead and drained this pass: let go of at its end.
    private var releasesDue: [TrackedRing] = []

    /// Marks the rings due a look at their producer (see `TrackedRing.livenessInterval`): an
    /// idle one every 30 s, but at most a thirtieth of all rings in one round, so that thousands
    /// of bots attached together have their system calls spread over the seconds, not in one pass.
    private func markRingsDueALook(_ rings: [TrackedRing], nowNanos now: UInt64) {
        let rounds = Int(Self.idleLivenessIntervalNanos / Self.livenessIntervalNanos)
        var idleLooks = (rings.count + rounds - 1) / rounds
        for (index, ring) in rings.enumerated() where index < visit.count && !visit[index] {
            let interval = ring.livenessInterval(nowNanos: now, watching: wakeup.isWatching)
            guard ring.isLookDue(nowNanos: now, interval: interval) else { continue }
            if interval == Self.idleLivenessIntervalNanos {
                guard idleLooks > 0 else { continue }
                idleLooks -= 1
            }
            visit[index] = true
        }
    }

    /// The time a pass may spend on the rings before it yields to the next pass, which begins again
    /// with the rings that cost least: however many rings flood the drain, a light one waits at
    /// most about this long (and one ring's drain: `passRecordLimit` records) for its turn.
    static let passBudgetNanos: UInt64 = 2_000_000
    /// Whether the last pass ran out of time before visiting every ring it meant to (or left an
    /// unproven clean ring's records for the next), and when a pass last did not.
    private var passCutShort = false
    private var lastWholePassNanos: UInt64 = 0
    /// Passes cut short for this long (the drain is overloaded) publish all the same.
    static let overloadedPublishNanos: UInt64 = 1_000_000_000

    /// The rings a pass visits (all of them in a sweep, else those marked), in the order it
    /// serves them, by class: first the clean rings proven by their valid records, with a few
    /// unproven ones (`probesPerPass`, the ones attached last first) among them; then the other
    /// unproven rings; then the suspect ones (invalid records lately). In a class by recent
    /// drain cost, least first; ties in turn, one ring further on each pass. So a new bot is
    /// drained within a few passes, and hundreds of unknown rings cannot go before a proven one.
    private func serviceOrder(_ rings: [TrackedRing], sweep: Bool, nowNanos now: UInt64) -> [Int] {
        guard !rings.isEmpty else { return [] }
        let first = Int(stats.passes % UInt64(rings.count))
        var order: [(rank: Int, cost: Double, turn: Int, index: Int)] = []
        var unknown: [(attached: UInt64, position: Int)] = []
        for turn in rings.indices {
            let index = (first + turn) % rings.count
            guard sweep || visit[index] else { continue }
            let ring = rings[index], account = ring.account
            let rank = account.isSuspect(nowNanos: now) ? 2 : account.isProven ? 0 : 1
            if rank == 1 { unknown.append((ring.attachedNanos, order.count)) }
            order.append((rank, account.recentCost(nowNanos: now), turn, index))
        }
        if unknown.count > Self.probesPerPass { unknown.sort { $0.attached > $1.attached } }
        for probe in unknown.prefix(Self.probesPerPass) { order[probe.position].rank = 0 }
        if order.count > 1 {
            order.sort { a, b in
                if a.rank != b.rank { return a.rank < b.rank }
                if a.cost != b.cost { return a.cost < b.cost }
                return a.turn < b.turn
            }
        }
        return order.map(\.index)
    }

    /// Records a visit takes from each lane of a ring not proven, or suspect: its records may be
    /// mostly invalid (and slow to refuse), so it is learnt from small visits.
    static let unprovenLaneRecordLimit = 1_024
    /// Unproven rings that a pass serves with the proven ones (see `serviceOrder`).
    static let probesPerPass = 4

    /// Rebuilds the lane watch when rings came or went or mapped lanes; returns whether it did.
    /// The visits due carry over: rings marked or followed up, rings new to the watch, and rings
    /// with lanes the watch did not have (with thousands of rings coming and going, a rebuild
    /// must not drop the visits a pass cut short left for the next).
    private func watchLanes() -> Bool {
        guard laneWatchStale || watchedVersion != tracked.version else { return false }
        var due = Set<ObjectIdentifier>()
        for index in followUps where index < watchedRings.count { due.insert(ObjectIdentifier(watchedRings[index])) }
        for (index, ring) in watchedRings.enumerated() where index < visit.count && visit[index] { due.insert(ObjectIdentifier(ring)) }
        let known = Set(watchedRings.map(ObjectIdentifier.init))
        watchedRings = tracked.ordered
        laneWatch.watch(watchedRings.map(\.consumer))
        visit = watchedRings.map { ring in
            due.contains(ObjectIdentifier(ring)) || !known.contains(ObjectIdentifier(ring)) || ring.watchedLanes != ring.consumer.laneCount
        }
        for (index, ring) in watchedRings.enumerated() {
            ring.watchedLanes = ring.consumer.laneCount
            ring.watchIndex = index
        }
        followUps.removeAll()
        watchedVersion = tracked.version
        laneWatchStale = false
        return true
    }

    /// How long the fastest-filling lane of any ring takes to fill at its recent rate (UInt64.max:
    /// none is filling), as of the last pass.
    private var soonestFillNanos = UInt64.max
    /// For this long after a bot is attached, the drain loop sleeps at most `newRingSleepNanos`.
    static let newRingNanos: UInt64 = 1_000_000_000
    static let newRingSleepNanos: UInt64 = 5_000_000
    private var lastAttachNanos: UInt64 = 0
    /// The least sleep between passes, however fast a lane fills: a lane that fills faster
    /// than this drops whatever the collector does, and the loop must not spin.
    static let minimumSleepNanos: UInt64 = 250_000

    /// How long the drain thread may sleep: a poll, but never more than a quarter of the time the
    /// fastest-filling lane needs to fill, and less when drained records wait to be published.
    /// A quarter, not a half: producers write in bursts (a paced one writes a millisecond's
    /// worth at once, twice that when it wakes late), and a sleep overshoots by tens of
    /// microseconds; with half, 2 M records a second into 4,096 slots lost 4 to 9.5 %.
    private func sleepNanos(nowNanos now: UInt64) -> UInt64 {
        if pendingPublish != nil || passCutShort { return 0 } // a snapshot half built, or rings not reached
        var sleep = options.pollNanos
        if soonestFillNanos != .max { sleep = min(sleep, max(soonestFillNanos / 4, Self.minimumSleepNanos)) }
        // A bot attached moments ago has no rate yet, and its producer is most likely about to
        // write: look often until it has one, or the moment has passed.
        if lastAttachNanos != 0, now &- lastAttachNanos < Self.newRingNanos { sleep = min(sleep, Self.newRingSleepNanos) }
        if !beingMade.isEmpty { sleep = min(sleep, Self.newRingSleepNanos) }
        guard hasUnpublishedChanges else { return sleep }
        let due = lastPublishNanos &+ publishIntervalNanos
        return min(sleep, due > now ? due - now : 0)
    }

    // MARK: - Discovery

    private func discover(nowNanos now: UInt64, checkingIdentities: Bool) {
        let directory = options.directory
        // A missing or unreadable directory is said once (and once more when it comes back).
        let problem = directory.accessProblem()
        if problem != directoryProblem {
            log(problem.map { "ring directory \(directory.path): \($0); waiting for it" }
                ?? "ring directory \(directory.path) is readable", level: problem == nil ? .info : .warn)
            directoryProblem = problem
        }
        if problem == nil, !wakeup.isWatching { wakeup.watchDirectory(directory.path) }
        // Rings removed or replaced under the same name: drain what is left, then let go.
        for ring in tracked.ordered where checkingIdentities {
            let name = ring.name
            let identity = directory.fileIdentity(of: name)
            guard identity != ring.identity else { continue }
            _ = drain(ring, nowNanos: now)
            tracked[name] = nil
            ringLog("ring \(name) detached: its file was \(identity == nil ? "removed" : "replaced by a new ring")")
        }
        for (name, ring) in released where checkingIdentities {
            let identity = directory.fileIdentity(of: name)
            guard identity != ring.identity else { continue }
            released[name] = nil
            hasUnpublishedChanges = true
            ringLog("ring \(name) detached: its file was \(identity == nil ? "removed" : "replaced by a new ring")")
        }
        let names = options.rings.isEmpty ? directory.ringNames() : options.rings
        var waiting: [String] = []
        for name in names where tracked[name] == nil && released[name] == nil {
            if let skip = skipped[name], now < skip.retryAtNanos { continue }
            guard tracked.count < ringLimit else {
                waiting.append(name)
                continue
            }
            attach(name, nowNanos: now)
        }
        sayWaiting(waiting, nowNanos: now)
        // A skipped ring whose file is gone is forgotten.
        for name in skipped.keys where directory.fileIdentity(of: name) == nil && !options.rings.contains(name) {
            skipped[name] = nil
        }
    }

    /// Lists the rings that wait for a descriptor (each shown as skipped, with the reason, and
    /// counted), and says in the log when rings begin and stop waiting.
    private func sayWaiting(_ waiting: [String], nowNanos now: UInt64) {
        let problem = "not attached: \(tracked.count) rings are open, all that the open-file limit allows beside the "
            + "HTTP server's reserve; raise the limit (ulimit -n, LimitNOFILE=), or remove finished bots' files "
            + "(ringside-dump clean)"
        for name in waiting {
            skipped[name] = SkippedRing(problem: problem, retryAtNanos: now, isQuiet: false)
        }
        if waiting.count != stats.ringsWaitingForDescriptors { hasUnpublishedChanges = true }
        stats.ringsWaitingForDescriptors = waiting.count
        if !waiting.isEmpty, !saidRingLimit {
            log("cannot attach \(waiting.count) rings: \(tracked.count) are open, and the rest of this process's open-file "
                + "limit is kept for HTTP clients; raise the limit (ulimit -n, LimitNOFILE=); they are listed as skipped "
                + "and counted in ringside_collector_rings_waiting", level: .warn)
            saidRingLimit = true
        } else if waiting.isEmpty, saidRingLimit {
            log("every ring found is attached again")
            saidRingLimit = false
        }
    }

    private func attach(_ name: String, nowNanos now: UInt64) {
        do {
            let consumer = try RingConsumer(name, directory: options.directory, allowedOwners: Set(options.allowedUIDs))
            let ring = TrackedRing(consumer: consumer, aggregator: RingAggregator(ring: name, layout: layout,
                                                                                       quantiles: options.quantiles.count))
            ring.aggregator.addMetrics(of: consumer) { seriesAllowance(for: ring, holding: $0) }
            sayRefusedSeries(of: ring)
            let status = try consumer.status()
            // Counters made before this collector started (it restarted, say) count in totals
            // but not in its windows, where they would show as a burst; a bot created since is
            // seen whole.
            ring.aggregator.sampleCells(of: consumer, nowNanos: now,
                                        isBaseline: status.createdRealtimeNanos < stats.startedRealtimeNanos)
            ring.status = status
            ring.producerAlive = status.producerAlive
            ring.lastObservedNanos = now
            ring.lastDropped = status.dropped
            ring.lastRejected = 0
            tracked.insert(ring)
            ring.attachedNanos = now
            ring.touched(nowNanos: now)
            lastAttachNanos = now
            skipped[name] = nil
            ringLog("ring \(name) attached: producer pid \(status.producerPID) \(status.producerAlive ? "alive" : "dead"), "
                + "\(status.lanes.count) of \(status.maxLanes) lanes of \(status.capacity) records, "
                + "\(consumer.metrics.count) metrics, backlog \(status.backlog)")
        } catch {
            skip(name, error, nowNanos: now)
        }
    }

    private func skip(_ name: String, _ error: RingError, nowNanos now: UInt64) {
        let problem = "\(error)"
        switch error {
        case .notReady:
            // Being created: looked at again every pass for a second (see `beingMade`), then at
            // each discovery, quietly.
            let since = skipped[name]?.notReadySinceNanos ?? now
            skipped[name] = SkippedRing(problem: problem, retryAtNanos: now, isQuiet: true, notReadySinceNanos: since)
            if now &- since < Self.newRingNanos { beingMade[name] = since }
            return
        default:
            break
        }
        if skipped[name]?.problem != problem { ringLog("skipping ring \(name): \(problem)", level: .warn) }
        skipped[name] = SkippedRing(problem: problem, retryAtNanos: now + Self.retryNanos, isQuiet: false)
    }

    // MARK: - Draining

    /// Records one pass takes from one ring at most, shared by its lanes: a ring with a huge
    /// backlog (left by an outage, or faked) is caught up over several passes, each of which
    /// visits every other ring first (a pass that drained anything is followed by another at once).
    static let passRecordLimit = 65_536
    /// Drains one ring into its series; a ring whose cursors turn out corrupt is let go, and one
    /// whose records are mostly invalid over time is quarantined (not read) for a while (see
    /// `DrainAccount`).
    /// - Parameter whole: take up to `passRecordLimit` whatever the ring's standing (a forced
    ///   pass, at stop or in a test stepping time, has no next pass to leave records to).
    private func drain(_ ring: TrackedRing, nowNanos now: UInt64, whole: Bool = false) -> Int {
        if ring.quarantinedUntilNanos != 0 {
            guard now >= ring.quarantinedUntilNanos else { return 0 }
            ring.quarantinedUntilNanos = 0
            ring.quarantineReason = nil
            ringLog("ring \(ring.name): quarantine over; reading its records again")
        }
        guard ring.consumer.hasWork else { return 0 }
        let started = rs_clock_precise_ns()
        let rejectedBefore = ring.aggregator.rejected
        let proven = whole || (ring.account.isProven && !ring.account.isSuspect(nowNanos: now))
        let limitPerLane = proven ? max(1_024, Self.passRecordLimit / max(1, ring.consumer.laneCount)) : Self.unprovenLaneRecordLimit
        do {
            let count = try ring.aggregator.drain(ring.consumer, limitPerLane: min(limitPerLane, Int(ring.consumer.capacity)),
                                                  nowNanos: now, admitting: { seriesAllowance(for: ring, holding: $0) },
                                                  counted: { ring.counted($0, lane: $1) })
            sayRefusedSeries(of: ring)
            ring.drained += UInt64(count)
            ring.drainedSincePublish += count
            ring.drainedSinceCapture += count
            let rejected = ring.aggregator.rejected &- rejectedBefore
            if let verdict = ring.account.charge(costNanos: rs_clock_precise_ns() &- started, records: count,
                                                 invalid: Int(clamping: rejected), nowNanos: now) {
                quarantine(ring, for: verdict.nanos, reason: verdict.reason, nowNanos: now)
            }
            // A clean ring learnt in small visits, with records left: the next pass follows at once,
            // and a snapshot waits for it (it would show a backlog half drained).
            if !proven, ring.quarantinedUntilNanos == 0, !ring.account.isSuspect(nowNanos: now), ring.consumer.hasWork {
                passCutShort = true
            }
            if count > 0 { ring.activitySinceStatus = true }
            if count > 0 { stats.lagSeconds = Double(now &- min(now, ring.aggregator.oldestInLastBatchNanos)) / 1e9 }
            return count
        } catch {
            tracked[ring.name] = nil
            skip(ring.name, error, nowNanos: now)
            return 0
        }
    }

    /// The room the caps leave `ring`, holding `held`: `--max-series-per-ring` for the ring,
    /// `--max-series` and `--max-series-bytes` for the collector. Metrics past it are refused,
    /// counted and exported. Series are admitted up to 7/8 of the memory budget: the rest is kept
    /// for what grows after admission (histograms' counts, refused metrics' descriptors) and for
    /// the allocator's slack.
    private func seriesAllowance(for ring: TrackedRing, holding held: RingAggregator.Usage) -> RingAggregator.Usage {
        // The ring itself counted once, whether it is tracked yet (a refresh) or not (at attach);
        // its aggregator is not read here: the caller may be mutating it.
        let others = seriesUsage(except: ring)
        return RingAggregator.Usage(
            series: max(0, min(options.maxSeriesPerRing - held.series, options.maxSeries - others.series - held.series)),
            bytes: max(0, options.maxSeriesBytes / 8 * 7 - others.bytes - held.bytes))
    }

    /// The series of every ring but `excluded`, and the memory they take.
    private func seriesUsage(except excluded: TrackedRing? = nil) -> RingAggregator.Usage {
        var total = RingAggregator.Usage()
        for ring in tracked.ordered where ring !== excluded {
            let usage = ring.aggregator.usage
            total.series += usage.series
            total.bytes += usage.bytes
        }
        for ring in released.values where ring !== excluded {
            let usage = ring.aggregator.usage
            total.series += usage.series
            total.bytes += usage.bytes
        }
        return total
    }

    /// Says once per ring in the log that a series cap refused some of its metrics.
    private func sayRefusedSeries(of ring: TrackedRing) {
        guard ring.aggregator.refusedSeries > 0, !ring.saidSeriesRefused, let first = ring.aggregator.firstRefused else { return }
        ring.saidSeriesRefused = true
        let cap = if ring.aggregator.firstRefusedForBytes {
            "the collector's memory budget for series of \(options.maxSeriesBytes >> 20) MiB (--max-series-bytes)"
        } else if ring.aggregator.seriesCount >= options.maxSeriesPerRing {
            "its cap of \(options.maxSeriesPerRing) series (--max-series-per-ring)"
        } else {
            "the collector's cap of \(options.maxSeries) series (--max-series)"
        }
        ringLog("ring \(ring.name): \(cap) is reached: metric \(first.name)"
            + (first.labels.isEmpty ? "" : "{" + first.labels.map { "\($0.key)=\($0.value)" }.joined(separator: ",") + "}")
            + " and any registered "
            + "after it get no series (counted in ringside_ring_series_refused and their records in "
            + "ringside_ring_records_refused_total); raise the cap, or register fewer label sets", level: .warn)
    }

    /// Stops reading a ring whose records were mostly invalid lately, for `nanos`: reading them
    /// costs every other ring its time. What it skips stays in its lanes, and a producer that then
    /// finds them full counts its drops.
    private func quarantine(_ ring: TrackedRing, for nanos: UInt64, reason: String, nowNanos now: UInt64) {
        ring.quarantinedUntilNanos = now &+ nanos
        ring.quarantines += 1
        ring.quarantineReason = reason
        ringLog("ring \(ring.name): \(reason); the other rings are drained meanwhile", level: .warn)
        hasUnpublishedChanges = true
    }

    /// Asks the kernel whether a ring's producer lives (one fcntl), reads its status again if it
    /// moved, and logs what changed: the producer's death or return, drops, rejected records.
    /// Returns whether something changed that the snapshot should show.
    private func observe(_ ring: TrackedRing, nowNanos now: UInt64) -> Bool {
        let name = ring.name
        ring.newLanesPending = ring.consumer.lookForNewLanes()
        let alive = ring.consumer.isProducerAlive
        if alive != ring.producerAlive || ring.activitySinceStatus || ring.status == nil
            || now &- ring.statusNanos >= Self.quietStatusNanos {
            guard let status = try? ring.consumer.status(producerAlive: alive) else { return false }
            ring.status = status
            ring.statusNanos = now
            ring.activitySinceStatus = false
        }
        guard let status = ring.status else { return false }
        // Dead and drained: nothing more can arrive until a producer attaches again (it opens the
        // file, which inotify reports), so the file is let go of at the end of the pass.
        if !alive, wakeup.isWatching, ring.quarantinedUntilNanos == 0, !ring.newLanesPending,
           now &- ring.touchedNanos >= Self.releaseGraceNanos,
           let fresh = ring.statusNanos == now ? status : try? ring.consumer.status(producerAlive: false),
           fresh.backlog == 0 {
            releasesDue.append(ring)
        }
        var changed = false
        if status.producerAlive != ring.producerAlive {
            changed = true
            ring.producerAlive = status.producerAlive
            ringLog(status.producerAlive ? "ring \(name): producer pid \(status.producerPID) attached"
                : "ring \(name): producer pid \(status.producerPID) died; draining what it left (backlog \(status.backlog))",
                level: status.producerAlive ? .info : .warn)
        }
        // Alive by its lock, but stopped (SIGSTOP, a debugger): nothing can be written meanwhile.
        let stopped = status.producerAlive && processStates.isStopped(pid: status.producerPID, nowNanos: now) == true
        if stopped != ring.producerStopped {
            changed = true
            ring.producerStopped = stopped
            ringLog(stopped ? "ring \(name): producer pid \(status.producerPID) is stopped (SIGSTOP or a debugger): "
                + "alive, but none of its threads can record" : "ring \(name): producer pid \(status.producerPID) runs again")
        }
        if status.dropped > ring.lastDropped, now &- ring.lastDropLogNanos >= Self.dropLogIntervalNanos {
            ringLog("ring \(name): producer dropped \(status.dropped - ring.lastDropped) records, the ring was full "
                + "(\(status.dropped) in all)", level: .warn)
            ring.lastDropped = status.dropped
            ring.lastDropLogNanos = now
            changed = true
        }
        let rejected = ring.aggregator.rejected
        if rejected > ring.lastRejected, now &- ring.lastRejectLogNanos >= Self.dropLogIntervalNanos {
            ringLog("ring \(name): rejected \(rejected - ring.lastRejected) invalid records (unknown metric, kind "
                + "or sequence; \(rejected) in all)", level: .warn)
            ring.lastRejected = rejected
            ring.lastRejectLogNanos = now
        }
        return changed
    }

    // MARK: - Releasing and taking up again

    /// A ring whose file was opened this recently is not released: the opener may be a producer
    /// between its open (the event, already seen) and its lock (none), which would go unnoticed.
    static let releaseGraceNanos: UInt64 = 1_000_000_000

    /// Lets go of a dead, drained ring's file (its descriptor and mappings), keeping its series:
    /// thousands of finished bots must not hold the descriptors new ones need.
    private func release(_ ring: TrackedRing, nowNanos now: UInt64) {
        // A last look at its registry and cells: counters' totals and gauges are final now.
        ring.aggregator.refreshMetrics(of: ring.consumer) { seriesAllowance(for: ring, holding: $0) }
        if ring.aggregator.sampleCells(of: ring.consumer, nowNanos: now) { ring.activitySinceStatus = true }
        if ring.activitySinceStatus, let status = try? ring.consumer.status(producerAlive: false) { ring.status = status }
        ring.activitySinceStatus = false
        tracked[ring.name] = nil
        ring.release()
        released[ring.name] = ring
        ring.quietSeries = nil // its next snapshot is made afresh, without a file
        hasUnpublishedChanges = true
        if stats.ringsWaitingForDescriptors > 0 { directoryChanged = true } // a descriptor is free for them
        ringLog("ring \(ring.name) released: its producer is dead and every record is drained; its series stay, and its "
            + "file is taken up again when a producer attaches")
    }

    /// Reacts to files inotify saw written to, changed, opened or closed: a tracked ring's file is
    /// checked whole (cut short or hole-punched under its mappings: let go, with the reason) and
    /// the ring watched closely for a moment (a producer attaching or detaching: its liveness is
    /// asked at once and again shortly), and a released ring's is taken up again when opened (a
    /// producer is attaching; its own close, at release, is not one).
    private func lookAtTouchedFiles(nowNanos now: UInt64) {
        let touched = wakeup.takeTouched()
        if touched.overflowed {
            // An open or a close may have been missed: every ring is looked at in the next pass.
            toReacquire.formUnion(released.keys)
            for ring in tracked.ordered { ring.lastObservedNanos = 0 }
            sweepNow = true
        }
        for (name, kinds) in touched.events {
            if let ring = tracked[name] {
                ring.touched(nowNanos: now) // perhaps a producer between its open and its lock: not released yet
                if ring.watchIndex < visit.count, watchedRings[ring.watchIndex] === ring { visit[ring.watchIndex] = true }
                do { try ring.consumer.checkIntact() } catch {
                    tracked[name] = nil
                    skip(name, error, nowNanos: now)
                }
            } else if released[name] != nil, kinds & ~UInt32(IN_CLOSE_WRITE) != 0 {
                toReacquire.insert(name)
            }
        }
        for name in toReacquire { reacquire(name, nowNanos: now) }
    }

    /// Opens a released ring's file again and drains it as before, its series intact. A file
    /// replaced meanwhile is another ring: the released one is forgotten and discovery attaches
    /// the new file.
    private func reacquire(_ name: String, nowNanos now: UInt64) {
        guard let ring = released[name] else {
            toReacquire.remove(name)
            return
        }
        guard tracked.count < ringLimit else { return } // kept in `toReacquire` until a descriptor is free
        toReacquire.remove(name)
        let consumer: RingConsumer
        do {
            consumer = try RingConsumer(name, directory: options.directory, allowedOwners: Set(options.allowedUIDs))
        } catch {
            released[name] = nil
            hasUnpublishedChanges = true
            if case .notFound = error {
                ringLog("ring \(name) detached: its file was removed")
            } else {
                skip(name, error, nowNanos: now)
            }
            return
        }
        released[name] = nil
        guard consumer.identity == ring.identity else {
            ringLog("ring \(name) detached: its file was replaced by a new ring")
            directoryChanged = true
            return
        }
        ring.reopen(consumer)
        ring.touched(nowNanos: now)
        if let status = try? consumer.status() {
            ring.status = status
            ring.statusNanos = now
            ring.producerAlive = status.producerAlive
        }
        tracked.insert(ring)
        ring.attachedNanos = now
        lastAttachNanos = now
        hasUnpublishedChanges = true
        ringLog("ring \(name) taken up again: a process opened its file")
    }

    /// Lines about single rings: 20 a second, 200 at once (see `LogBudget`).
    private var ringLogBudget = LogBudget(perSecond: 20, burst: 200)

    /// Logs a line about one ring, within `ringLogBudget`.
    private func ringLog(_ message: String, level: LogLevel = .info) {
        let (admitted, leftOut) = ringLogBudget.admit(nowNanos: rs_clock_precise_ns())
        if leftOut > 0 {
            log("\(leftOut) lines about rings were left out of this log lately (more than \(Int(ringLogBudget.perSecond)) a second); "
                + "/health and /latest show every ring's state, ringside_collector_log_lines_suppressed_total counts them",
                level: .warn)
        }
        stats.logLinesSuppressed = ringLogBudget.suppressedTotal
        if admitted { log(message, level: level) }
    }

    // MARK: - Publishing

    /// A new, empty snapshot with the next generation.
    private func startSnapshot() -> Snapshot {
        var snapshot = Snapshot()
        generation += 1
        snapshot.generation = generation
        snapshot.generatedRealtimeNanos = rs_clock_realtime_ns()
        snapshot.windowNanos = options.windowNanos
        snapshot.quantiles = options.quantiles
        snapshot.nativeHistogramSchema = options.nativeHistogramSchema
        return snapshot
    }

    /// Adds rings to the pending snapshot until `deadline` (CLOCK_MONOTONIC), and publishes it
    /// once every ring is in.
    private func continuePublish(nowNanos now: UInt64, until deadline: UInt64) {
        guard var pending = pendingPublish else { return }
        pendingPublish = nil
        let sliceStart = rs_clock_precise_ns()
        while pending.next < pending.rings.count {
            let ring = pending.rings[pending.next]
            pending.next += 1
            // A ring let go since the snapshot began is left out.
            guard tracked[ring.name] === ring || released[ring.name] === ring else { continue }
            let quiet = addToSnapshot(ring, &pending.snapshot, nowNanos: now, forced: pending.forced, capture: &pending.capture)
            pending.everyRingQuiet = pending.everyRingQuiet && quiet
            if rs_clock_precise_ns() >= deadline { break } // a ring is the unit: it may hold 4,096 series
        }
        pending.costNanos &+= rs_clock_precise_ns() &- sliceStart
        guard pending.next >= pending.rings.count else {
            pendingPublish = pending
            return
        }
        var snapshot = pending.snapshot
        for name in skipped.keys.sorted() where tracked[name] == nil {
            guard let skip = skipped[name], !skip.isQuiet else { continue }
            snapshot.rings.append(RingSnapshot(name: name, state: .skipped, problem: skip.problem))
        }
        lastPublishWasQuiet = pending.everyRingQuiet
        snapshot.slos = evaluateSLOs(nowNanos: now)
        stats.series = snapshot.series.count
        stats.seriesLimit = options.maxSeries
        stats.seriesLimitPerRing = options.maxSeriesPerRing
        stats.seriesBytes = seriesUsage().bytes
        stats.seriesBytesLimit = options.maxSeriesBytes
        stats.hlogErrors = histogramCaptures == nil ? nil : hlogErrorCount.load(ordering: .relaxed)
        let historySeries = historySeriesCount.load(ordering: .relaxed)
        stats.history = historySeries < 0 ? nil
            : (historySeries, historyRefusedCount.load(ordering: .relaxed), options.historyMaxSeries)
        snapshot.collector = stats
        lastPublishCostNanos = pending.costNanos
        // Swapped, so the old snapshot (thousands of series) is freed here, not under the lock.
        published.withLock { swap(&$0, &snapshot) }
        // After the snapshot: the log writer reads the snapshot's series to forget those gone.
        if let capture = pending.capture { histogramCaptures?.deliver(capture) }
    }

    /// Adds one ring's series and figures to `snapshot`; returns whether the ring is quiet.
    /// - Parameter forced: look at the ring's cells now, quiet or not (a stop, a test stepping time).
    private func addToSnapshot(_ ring: TrackedRing, _ snapshot: inout Snapshot, nowNanos now: UInt64, forced: Bool,
                               capture: inout HistogramCapture?) -> Bool {
        // Counters and gauges' last values come from the cells, sampled here; figures of the
        // ring from one status, so that they add up exactly. The status is read again when
        // records moved since (an idle ring's is read by `observe`, once a second).
        if ring.activitySinceStatus, let status = try? ring.file?.status(producerAlive: ring.producerAlive) {
            ring.status = status
            ring.statusNanos = now
            ring.activitySinceStatus = false
        }
        // A quiet ring (nothing drained, no cell changed, every window empty, so nothing can
        // slide) shows what it showed, and its cells and registry are looked at once a second:
        // thousands of idle rings cost little to publish.
        var added = 0, cellsChanged = false
        // A capture looks at every ring with records since the last one, quiet or not.
        let quiet = ring.quietSeries != nil && ring.drainedSincePublish == 0 && (capture == nil || ring.drainedSinceCapture == 0)
        // A released ring has no cells to look at: its release took their last values.
        if ring.file != nil, forced || !quiet || now &- ring.cellsSampledNanos >= Self.livenessIntervalNanos {
            (added, cellsChanged) = sampleCellsAndRegistry(of: ring, nowNanos: now)
        }
        if quiet, let series = ring.quietSeries, added == 0, !cellsChanged {
            snapshot.series += series
        } else {
            let series = ring.aggregator.snapshots(nowNanos: now, quantiles: options.quantiles,
                                                   versions: &seriesVersions, capture: &capture)
            if capture != nil { ring.drainedSinceCapture = 0 }
            snapshot.series += series
            ring.quietSeries = series.allSatisfy { $0.windows.allSatisfy(\.isEmpty) } ? series : nil
        }
        ring.drainedSincePublish = 0
        snapshot.rings.append(ring.ringSnapshot(nowNanos: now))
        return ring.quietSeries != nil && !cellsChanged && added == 0
    }

    /// Looks at a ring's registry (counters write no records, so a metric registered since is
    /// found here, not by a record naming it) and samples its cells: counter totals, gauges.
    /// Returns the metrics added and whether a cell changed (its status is then read again).
    private func sampleCellsAndRegistry(of ring: TrackedRing, nowNanos now: UInt64) -> (added: Int, cellsChanged: Bool) {
        guard let consumer = ring.file else { return (0, false) }
        let added = ring.aggregator.refreshMetrics(of: consumer) { seriesAllowance(for: ring, holding: $0) }
        sayRefusedSeries(of: ring)
        let cellsChanged = ring.aggregator.sampleCells(of: consumer, nowNanos: now)
        ring.cellsSampledNanos = now
        if cellsChanged { ring.activitySinceStatus = true }
        return (added, cellsChanged)
    }

    /// The same for a quiet ring between publishes; returns whether its series must be made
    /// again (the next publish then does, rather than show what it showed).
    private func sampleCells(of ring: TrackedRing, nowNanos now: UInt64) -> Bool {
        let (added, cellsChanged) = sampleCellsAndRegistry(of: ring, nowNanos: now)
        guard added > 0 || cellsChanged else { return false }
        ring.quietSeries = nil
        return true
    }

    /// The rings drained and those released, in name order.
    private var everyRing: [TrackedRing] {
        released.isEmpty ? tracked.ordered : (tracked.ordered + released.values).sorted { $0.name < $1.name }
    }

    private func evaluateSLOs(nowNanos now: UInt64) -> [SLOSnapshot] {
        let rings = everyRing
        return sloStates.indices.map { index in
            let state = sloStates[index]
            let outcome = state.evaluate(rings: rings, layout: layout, nowNanos: now)
            if let transition = sloStates[index].record(outcome) {
                log(transition, level: sloStates[index].violated ? .warn : .info)
            }
            return sloStates[index].snapshot(outcome)
        }
    }
}

/// The rings the collector drains, by name and in name order (kept sorted as rings come and go,
/// so a pass over thousands of idle rings sorts nothing).
struct TrackedRings {
    private(set) var ordered: [TrackedRing] = []
    private var byName: [String: TrackedRing] = [:]
    /// Changes whenever a ring comes or goes.
    private(set) var version: UInt64 = 0

    var count: Int { ordered.count }

    subscript(name: String) -> TrackedRing? {
        get { byName[name] }
        set {
            precondition(newValue == nil, "rings are added with insert")
            guard byName.removeValue(forKey: name) != nil else { return }
            ordered.removeAll { $0.name == name }
            version &+= 1
        }
    }

    mutating func insert(_ ring: TrackedRing) {
        let name = ring.name
        self[name] = nil
        byName[name] = ring
        let at = ordered.firstIndex { $0.name > name } ?? ordered.endIndex
        ordered.insert(ring, at: at)
        version &+= 1
    }

    mutating func removeAll() {
        ordered.removeAll()
        byName.removeAll()
        version &+= 1
    }
}

/// A ring the collector could not attach, and when to try again.
struct SkippedRing {
    var problem: String
    var retryAtNanos: UInt64
    /// Not worth showing (a ring still being created).
    var isQuiet: Bool
    /// When it was first found not ready (still being created), if it is.
    var notReadySinceNanos: UInt64?
}

/// A ring the collector drains, with its series and what was last logged about it.
final class TrackedRing {
    let name: String
    /// Which file it is: a file replaced under the same name is another ring.
    let identity: RingFileIdentity
    /// The open file, or nil once the ring is released (its producer dead, every record drained):
    /// its series stay, its descriptor and mappings are given back.
    private(set) var file: RingConsumer?
    /// The open file of a ring being drained (only rings in `Collector.tracked` are).
    var consumer: RingConsumer {
        guard let file else { preconditionFailure("ring \(name) is released: its file is closed") }
        return file
    }
    var aggregator: RingAggregator
    var status: RingStatus?
    /// When `status` was read, and when liveness was last asked of the kernel.
    var statusNanos: UInt64 = 0
    var lastObservedNanos: UInt64 = 0
    /// When a pass last drained records from it (0: never).
    var lastActiveNanos: UInt64 = 0
    /// Records drained from each lane since `rateSinceNanos` (0: the ring is idle, not timed); the
    /// fastest lane's rate (records a second) over the last span of at least `rateSpanNanos`:
    /// how soon the ring can fill.
    var drainedByLane: [Int] = []
    var rateSinceNanos: UInt64 = 0
    var fastestLaneRate: Double = 0
    static let rateSpanNanos: UInt64 = 50_000_000
    /// Records drained or cells changed since `status` was read: the next publish reads it again.
    var activitySinceStatus = false
    /// Records drained since the last publish, and the series it showed if they were all empty.
    var drainedSincePublish = 0
    /// With `--hlog`: records drained since the last capture of its histograms.
    var drainedSinceCapture = 0
    var quietSeries: [SeriesSnapshot]?
    /// When the cells were last sampled.
    var cellsSampledNanos: UInt64 = 0
    var drained: UInt64 = 0
    var producerAlive = false
    /// Alive, but its process is stopped (`T` or `t` in /proc/PID/stat).
    var producerStopped = false
    var lastDropped: UInt64 = 0
    var lastDropLogNanos: UInt64 = 0
    var lastRejected: UInt64 = 0
    var lastRejectLogNanos: UInt64 = 0
    /// When it was attached.
    var attachedNanos: UInt64 = 0
    /// Lanes the lane watch holds of it, and whether `observe` found more in the file; its
    /// place in the watch (`Collector.watchedRings`).
    var watchedLanes = 0
    var watchIndex = Int.max
    var newLanesPending = false
    /// Whether the log said that a series cap refused some of its metrics.
    var saidSeriesRefused = false
    /// When its file was last opened (by this collector at attach, or by anyone, as inotify
    /// says), closed or changed: not released for `Collector.releaseGraceNanos` after (0: never).
    var touchedNanos: UInt64 = 0
    /// Until when its records are not read (0: they are), why, and how many times it was.
    var quarantinedUntilNanos: UInt64 = 0
    var quarantineReason: String?
    var quarantines: UInt64 = 0
    /// What its drains cost lately and how many of its records were invalid.
    var account = DrainAccount()

    init(consumer: RingConsumer, aggregator: RingAggregator) {
        name = consumer.name
        identity = consumer.identity
        file = consumer
        self.aggregator = aggregator
    }

    /// Closes its file: the descriptor and mappings are given back; everything else stays.
    func release() { file = nil }

    /// Takes the ring up again with `consumer`, a new open of the same file.
    func reopen(_ consumer: RingConsumer) {
        precondition(file == nil && consumer.identity == identity, "reopened with another file")
        file = consumer
        watchedLanes = 0
        drainedByLane = []
        rateSinceNanos = 0
        newLanesPending = false
        lastObservedNanos = 0
    }

    /// Marks it opened or closed just now (by us or another process): it is not released for a
    /// moment, and its liveness is asked often meanwhile.
    func touched(nowNanos now: UInt64) { touchedNanos = now }

    /// How often its producer's liveness is asked: four times a second while it records or just
    /// after its file was opened or closed (a producer attaching, detaching or dying: the lock
    /// goes a moment after the close that inotify reports); each second when it recorded in the
    /// last 10 s, is stopped or dead (and not yet let go of), or without inotify; else every 30 s.
    func livenessInterval(nowNanos now: UInt64, watching: Bool) -> UInt64 {
        func within(_ nanos: UInt64, of time: UInt64) -> Bool { time != 0 && now &- time < nanos }
        if within(Collector.livenessIntervalNanos, of: lastActiveNanos) || within(Collector.livenessIntervalNanos, of: touchedNanos) {
            return Collector.activeLivenessIntervalNanos
        }
        if !watching || !producerAlive || producerStopped || within(Collector.recentNanos, of: lastActiveNanos) {
            return Collector.livenessIntervalNanos
        }
        return Collector.idleLivenessIntervalNanos
    }

    /// Whether its liveness is due to be asked, every `interval` (give or take a pass: a ring
    /// looked at late in one round is due in the next).
    func isLookDue(nowNanos now: UInt64, interval: UInt64) -> Bool {
        now &- lastObservedNanos &+ Collector.lookSlackNanos >= interval
    }

    /// Counts `count` records drained from `lane`, for the fill rate.
    func counted(_ count: Int, lane: Int) {
        if lane >= drainedByLane.count { drainedByLane += Array(repeating: 0, count: lane + 1 - drainedByLane.count) }
        drainedByLane[lane] += count
    }

    /// Closes a span of the rate once it is `rateSpanNanos` long; returns how long the fastest
    /// lane takes to fill at its rate (nil: it is not filling).
    func fillNanos(nowNanos now: UInt64) -> UInt64? {
        if rateSinceNanos == 0 { rateSinceNanos = now }
        let span = now &- rateSinceNanos
        // The open span's rate counts too (over at least a millisecond), so a lane that has just
        // started filling is not left for a whole poll: an overestimate costs a pass, not records.
        let openRate = Double(drainedByLane.max() ?? 0) / (Double(max(span, 1_000_000)) / 1e9)
        if span >= Self.rateSpanNanos {
            fastestLaneRate = openRate
            for lane in drainedByLane.indices { drainedByLane[lane] = 0 }
            rateSinceNanos = openRate > 0 ? now : 0 // a span with nothing: the ring is idle, no longer timed
        }
        let rate = max(fastestLaneRate, openRate)
        guard rate > 0 else { return nil }
        return UInt64(min(Double(consumer.capacity) / rate * 1e9, 1e15))
    }

    func ringSnapshot(nowNanos now: UInt64) -> RingSnapshot {
        var snapshot = RingSnapshot(name: name,
                                    state: !producerAlive ? .producerDead : producerStopped ? .producerStopped : .live)
        snapshot.problem = quarantineReason
        snapshot.quarantined = quarantineReason != nil
        snapshot.quarantinesTotal = quarantines
        guard let status else { return snapshot }
        snapshot.producerPID = status.producerPID
        snapshot.capacity = status.capacity
        snapshot.backlog = status.backlog
        snapshot.recordsTotal = status.writeCursor
        snapshot.consumedTotal = status.readCursor
        snapshot.droppedTotal = status.dropped
        snapshot.unlanedDropped = status.unlanedDropped
        snapshot.drainedTotal = drained
        snapshot.rejectedTotal = aggregator.rejected
        snapshot.seriesRefused = aggregator.refusedSeries
        snapshot.recordsRefusedTotal = aggregator.refusedRecords
        snapshot.metricCount = status.metricCount
        snapshot.maxLanes = status.maxLanes
        // The heartbeat is coarse monotonic time, which may lag `now` by a tick.
        func age(_ heartbeat: UInt64) -> Double { Double(now &- min(now, heartbeat)) / 1e9 }
        snapshot.heartbeatAgeSeconds = age(status.heartbeatMonotonicNanos)
        snapshot.lanes = status.lanes.map { lane in
            LaneSnapshot(index: lane.index, state: lane.state, threadID: lane.ownerTID, backlog: lane.backlog,
                         recordsTotal: lane.writeCursor, consumedTotal: lane.readCursor, droppedTotal: lane.dropped,
                         heartbeatAgeSeconds: age(lane.heartbeatMonotonicNanos))
        }
        return snapshot
    }
}
