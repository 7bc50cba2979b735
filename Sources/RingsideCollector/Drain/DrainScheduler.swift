import RingsideSnapshot
import CRingside
import Ringside

/// The collector's part that decides which rings a pass drains, in what order, and how long the
/// drain loop may sleep after it. It looks at every lane's write cursor at once (`LaneWatch`),
/// visits the rings whose cursors moved or that are due a look, serves them cheapest and most
/// trusted first within a time budget, and keeps each ring's fill rate so the loop wakes before
/// a lane can fill. Draining and asking after a ring are the `RingTracker`'s.
///
/// Touched by the drain thread only.
final class DrainScheduler {
    private let tracker: RingTracker
    /// The rings' lanes' write cursors, looked at together each pass, the rings in the watch's
    /// order, and what the pass visits.
    let laneWatch = LaneWatch()
    private var watched = WatchedRings()

    /// The rings in the lane watch's order, the tracker's version of its rings they were taken
    /// at, and whether a ring mapped new lanes (the watch is rebuilt at the next pass). And when
    /// each is due a look at its liveness at the soonest, as of its last visit, and whether the
    /// directory was watched then: the once-a-second round over thousands of idle rings reads
    /// these, not the rings themselves (a cold object each, most of that round's cost).
    private struct WatchedRings {
        private(set) var rings: [TrackedRing] = []
        private var version: UInt64 = .max
        private var stale = false
        private(set) var lookDueNanos: [UInt64] = []
        private var dueWhileWatching = true

        /// Ring `index` visited at `now`: due again `interval` after its last look (less the
        /// slack `isObservationDue` allows). An interval only lengthens with time unless the ring
        /// is busy or touched, which visits it anyway; so the due time is never late.
        mutating func visited(_ index: Int, interval: UInt64) {
            let ring = rings[index]
            let due = ring.liveness.lastObservedNanos &+ interval
            lookDueNanos[index] = due > DrainTiming.livenessSlackNanos ? due - DrainTiming.livenessSlackNanos : 0
        }

        /// Every ring due now if whether the directory is watched changed (the intervals did).
        mutating func noteWatching(_ watching: Bool) {
            guard watching != dueWhileWatching else { return }
            dueWhileWatching = watching
            for index in lookDueNanos.indices { lookDueNanos[index] = 0 }
        }

        /// A ring mapped new lanes: the watch is rebuilt at the next pass.
        mutating func lanesChanged() { stale = true }

        /// Whether the watch must be rebuilt: rings came or went (the tracker's `version` moved), or mapped lanes.
        func isOutdated(version: UInt64) -> Bool { stale || self.version != version }

        /// The watch was rebuilt with `rings`, the tracker's at `version`.
        mutating func rebuilt(_ rings: [TrackedRing], version: UInt64) {
            self.rings = rings
            lookDueNanos = [UInt64](repeating: 0, count: rings.count)
            self.version = version
            stale = false
        }
    }
    /// Per watched ring: visit it this pass; and whether a counter of it moved since the last
    /// look (counters write no records: the next snapshot reads its cells). And the rings the
    /// last pass wants visited again.
    private var visit: [Bool] = []
    private var counted: [Bool] = []
    private var followUps: [Int] = []
    /// Once a second (`DrainTiming.livenessIntervalNanos`) the rings due a look are visited, and
    /// those whose files have lanes not mapped yet.
    private var lastLivenessRoundNanos: UInt64 = 0
    private var lastLaneCountCheckNanos: UInt64 = 0
    /// Passes so far: each begins its turns one ring further on.
    private var passes: UInt64 = 0
    /// Whether the last pass ran out of time before visiting every ring it meant to (or left an
    /// unproven clean ring's records for the next), and the time of the first of the passes cut
    /// short one after the other up to it (nil: the last pass was whole). Their own time, not
    /// the last whole pass's: passes a test steps long after the last are not overloaded for it.
    private(set) var cutShort = false
    private var cutShortSinceNanos: UInt64?
    /// How long the fastest-filling lane of any ring takes to fill at its recent rate (UInt64.max:
    /// none is filling), as of the last pass.
    private var soonestFillNanos = UInt64.max
    /// When this pass and the last looked at every lane's write cursor, and the gaps measured.
    private var observedNanos: UInt64 = 0
    private var lastObservedNanos: UInt64 = 0
    private(set) var gaps = DrainGaps()

    init(tracker: RingTracker) {
        self.tracker = tracker
    }

    /// What a pass did: the records it drained, and whether a ring changed in a way the
    /// snapshot should show (a producer died, stopped, dropped records).
    struct Pass {
        var drained = 0
        var changed = false
    }

    /// Drains the rings due: those whose lanes' write cursors moved (one flat loop over every
    /// lane), those the last pass asked for (busy lately, a capped drain going on, a fill rate, a
    /// quarantine, new lanes), `touched` ones (inotify saw their files opened or closed), and once
    /// a second those due a look at their liveness; every ring in a `sweep`. A `forced` pass (at
    /// stop, or a test stepping time) visits every ring whole and looks at each one's liveness.
    func run(nowNanos now: UInt64, sweep: Bool, touched: [TrackedRing], forced: Bool) -> Pass {
        let sweep = sweep || forced
        _ = watchLanes()
        passes &+= 1
        let rings = watched.rings
        var pass = Pass()
        pass.changed = markDue(rings, touched: touched, sweep: sweep, nowNanos: now)
        // The rings that cost least come first, those that wrote invalid records last; a pass
        // ends when its time is spent, and the rings it did not reach come first in the next.
        let order = serviceOrder(rings, sweep: sweep, nowNanos: now)
        let budgetEnd = rs_clock_precise_ns() &+ DrainTiming.passBudgetNanos
        var soonestFill = UInt64.max
        cutShort = false
        for (position, index) in order.enumerated() {
            let visitNanos = rs_clock_precise_ns()
            if position > 0, !forced, visitNanos >= budgetEnd {
                for rest in order[position...] {
                    visit[rest] = true
                    rings[rest].schedule.watch.leftOverPass = passes
                }
                cutShort = true
                break
            }
            visit[index] = false
            if let fill = drain(rings[index], at: index, visitNanos: visitNanos, nowNanos: now, forced: forced, pass: &pass) {
                soonestFill = min(soonestFill, fill)
            }
        }
        soonestFillNanos = soonestFill
        if !cutShort {
            cutShortSinceNanos = nil
        } else if cutShortSinceNanos == nil {
            cutShortSinceNanos = now
        }
        return pass
    }

    /// Marks the rings due a visit this pass (`visit`): those whose lanes' write cursors moved, the
    /// `touched`, the last pass's follow-ups, and once a second those due a look; returns whether a
    /// counter moved (a snapshot is due, as for a record).
    private func markDue(_ rings: [TrackedRing], touched: [TrackedRing], sweep: Bool, nowNanos now: UInt64) -> Bool {
        // A touched ring's file was written to (a lane added, by fallocate), opened or closed:
        // its new lanes are looked for now, so that this visit drains them (and a visit of it left
        // to the next pass, this one cut short), not a visit after the look that `observe` makes.
        for ring in touched where ring.schedule.watch.index < visit.count && rings[ring.schedule.watch.index] === ring {
            visit[ring.schedule.watch.index] = true
            _ = ring.consumer.lookForNewLanes()
        }
        laneWatch.markMoved(&visit, counted: &counted)
        (lastObservedNanos, observedNanos) = (observedNanos, rs_clock_precise_ns())
        var countersMoved = false
        for index in counted.indices where counted[index] {
            counted[index] = false
            rings[index].schedule.cellMoves &+= 1
            countersMoved = true
        }
        for index in followUps where index < visit.count { visit[index] = true }
        followUps.removeAll(keepingCapacity: true)
        if !sweep, now &- lastLivenessRoundNanos >= DrainTiming.livenessIntervalNanos {
            lastLivenessRoundNanos = now
            markRingsDueALook(rings, nowNanos: now)
        }
        // A lane a bot adds long after it attached (a thread's first record after a warm-up) is
        // drained within a second, not at the bot's next look (every 30 s for a quiet one) when
        // nothing else brought it in (inotify's event for the file's growth did not, in a burst).
        if now &- lastLaneCountCheckNanos >= DrainTiming.livenessIntervalNanos {
            lastLaneCountCheckNanos = now
            laneWatch.markLanesAdded(&visit)
        }
        return countersMoved
    }

    /// One ring's visit: drains it (whole when `forced`), looks at its liveness when due, and
    /// says whether the next pass visits it again. Returns how soon its lanes fill, if it is timed.
    private func drain(
        _ ring: TrackedRing, at index: Int, visitNanos: UInt64, nowNanos now: UInt64, forced: Bool, pass: inout Pass
    ) -> UInt64? {
        let wasFilling = ring.schedule.fill.isTiming
        let drained = tracker.drain(ring, nowNanos: now, whole: forced)
        measureGap(of: ring, drained: drained.count, filling: wasFilling && !forced, atNanos: visitNanos, nowNanos: now)
        if drained.recordsLeft { cutShort = true }  // the next pass follows at once, and a snapshot waits for it
        pass.drained += drained.count
        if drained.count > 0 { ring.schedule.lastActiveNanos = now }
        guard !drained.letGo else { return nil }  // its cursors were corrupt
        if ring.consumer.laneCount != ring.schedule.watch.lanes { watched.lanesChanged() }
        // Only rings that drained lately have a rate: idle ones cost nothing here.
        var fill: UInt64?
        if drained.count > 0 || ring.schedule.fill.isTiming {
            fill = ring.schedule.fill.fillNanos(capacity: ring.consumer.capacity, nowNanos: now)
        }
        // Liveness and drop logging cost system calls: asked as often as `livenessInterval`
        // says (a forced pass looks now).
        let interval = ring.livenessInterval(nowNanos: now, watching: tracker.wakeup.isWatching)
        if forced || ring.isObservationDue(nowNanos: now, interval: interval) {
            pass.changed = tracker.observe(ring, nowNanos: now) || pass.changed
            // Asked again: the look may have found it dead or stopped, asked after more often.
            watched.visited(index, interval: ring.livenessInterval(nowNanos: now, watching: tracker.wakeup.isWatching))
        } else {
            watched.visited(index, interval: interval)
        }
        // A bot attached moments ago may be adding its first lanes after the file event that
        // had it attached: look for them every pass until the moment has passed.
        let isNew = now &- ring.liveness.attachedNanos < DrainTiming.newRingNanos
        if isNew, ring.consumer.lookForNewLanes() { ring.schedule.watch.newLanesPending = true }
        // Visited again next pass: a ring busy in the last second or whose file was just opened
        // or closed (its liveness is asked four times a second), new, timing a fill rate,
        // quarantined, or with lanes to adopt.
        if interval == DrainTiming.activeLivenessIntervalNanos || isNew || drained.count > 0 || ring.schedule.fill.isTiming
            || ring.quarantine.isOn || ring.schedule.watch.newLanesPending
        {
            followUps.append(index)
        }
        return fill
    }

    /// Records the gap a ring's records waited (see `DrainGapFigures`): since its last drain when
    /// the last pass visited it or meant to (it ran out of time first: the records waited since,
    /// however many passes left it over), else since the last pass's look at every lane, which
    /// found nothing new in it. Only for a ring filling already: its first records after a quiet
    /// spell waited for a loop that slept as long as nothing was filling.
    private func measureGap(of ring: TrackedRing, drained: Int, filling: Bool, atNanos visit: UInt64, nowNanos now: UInt64) {
        if drained > 0, filling {
            let watch = ring.schedule.watch
            let sinceItsDrain = watch.visitedPass == passes &- 1 || watch.leftOverPass == passes &- 1
            let caughtUp = sinceItsDrain ? watch.visitedNanos : lastObservedNanos
            if caughtUp != 0, caughtUp <= visit { gaps.record(visit - caughtUp, atNanos: now) }
        }
        ring.schedule.watch.visitedPass = passes
        ring.schedule.watch.visitedNanos = visit
    }

    /// Whether a snapshot may begin: after a pass that visited every ring it meant to (one cut
    /// short would show rings not drained yet), or when passes have been cut short for a second
    /// (the drain is overloaded).
    func mayPublish(nowNanos now: UInt64) -> Bool {
        guard cutShort, let since = cutShortSinceNanos else { return true }
        return now &- since >= DrainTiming.overloadedPublishNanos
    }

    /// How long the drain loop may sleep for the scheduler's sake: not at all while rings wait
    /// that a pass did not reach; else a quarter of the time the fastest-filling lane needs to
    /// fill, and no less than `minimumSleepNanos`. A quarter, not a half: producers write in
    /// bursts (a paced one writes a millisecond's worth at once, twice that when it wakes late),
    /// and a sleep overshoots by tens of microseconds; with half, 2 M records a second into
    /// 4,096 slots lost 4 to 9.5 %.
    func sleepNanos() -> UInt64 {
        if cutShort { return 0 }
        return soonestFillNanos == .max ? .max : max(soonestFillNanos / 4, DrainTiming.minimumSleepNanos)
    }

    /// Rebuilds the lane watch now if rings came or went (they were released, or the collector
    /// stops: the watch lets go of their files too, as it holds their consumers).
    func followRings() { _ = watchLanes() }

    /// Marks the rings due a look at their producer (see `TrackedRing.livenessInterval`): an
    /// idle one every 30 s, but at most a thirtieth of all rings in one round, so that thousands
    /// of bots attached together have their system calls spread over the seconds, not in one pass.
    private func markRingsDueALook(_ rings: [TrackedRing], nowNanos now: UInt64) {
        let rounds = Int(DrainTiming.idleLivenessIntervalNanos / DrainTiming.livenessIntervalNanos)
        var idleLooks = (rings.count + rounds - 1) / rounds
        let watching = tracker.wakeup.isWatching
        watched.noteWatching(watching)
        for index in watched.lookDueNanos.indices where watched.lookDueNanos[index] <= now && index < visit.count && !visit[index] {
            let ring = rings[index]
            let interval = ring.livenessInterval(nowNanos: now, watching: watching)
            guard ring.isObservationDue(nowNanos: now, interval: interval) else { continue }
            if interval == DrainTiming.idleLivenessIntervalNanos {
                guard idleLooks > 0 else { continue }
                idleLooks -= 1
            }
            visit[index] = true
        }
    }

    /// The rings a pass visits (all of them in a sweep, else those marked), in the order it
    /// serves them, by class: first the clean rings proven by their valid records, with a few
    /// unproven ones (`probesPerPass`, the ones attached last first) among them; then the other
    /// unproven rings; then the suspect ones (invalid records lately). In a class by recent
    /// drain cost, least first; ties in turn, one ring further on each pass. So a new bot is
    /// drained within a few passes, and hundreds of unknown rings cannot go before a proven one.
    private func serviceOrder(_ rings: [TrackedRing], sweep: Bool, nowNanos now: UInt64) -> [Int] {
        guard !rings.isEmpty else { return [] }
        let first = Int(passes % UInt64(rings.count))
        var order: [(rank: Int, cost: Double, turn: Int, index: Int)] = []
        var unknown: [(attached: UInt64, position: Int)] = []
        for turn in rings.indices {
            let index = (first + turn) % rings.count
            guard sweep || visit[index] else { continue }
            let ring = rings[index], account = ring.account
            let rank = account.isSuspect(nowNanos: now) ? 2 : account.isProven ? 0 : 1
            if rank == 1 { unknown.append((ring.liveness.attachedNanos, order.count)) }
            order.append((rank, account.recentCost(nowNanos: now), turn, index))
        }
        if unknown.count > DrainTiming.probesPerPass { unknown.sort { $0.attached > $1.attached } }
        for probe in unknown.prefix(DrainTiming.probesPerPass) { order[probe.position].rank = 0 }
        if order.count > 1 {
            order.sort { a, b in
                if a.rank != b.rank { return a.rank < b.rank }
                if a.cost != b.cost { return a.cost < b.cost }
                return a.turn < b.turn
            }
        }
        return order.map(\.index)
    }

    /// Rebuilds the lane watch when rings came or went or mapped lanes; returns whether it did.
    /// The visits due carry over: rings marked or followed up, rings new to the watch, and rings
    /// with lanes the watch did not have (with thousands of rings coming and going, a rebuild
    /// must not drop the visits a pass cut short left for the next).
    private func watchLanes() -> Bool {
        guard watched.isOutdated(version: tracker.tracked.version) else { return false }
        var due = Set<ObjectIdentifier>()
        for index in followUps where index < watched.rings.count { due.insert(ObjectIdentifier(watched.rings[index])) }
        for (index, ring) in watched.rings.enumerated() where index < visit.count && visit[index] { due.insert(ObjectIdentifier(ring)) }
        let known = Set(watched.rings.map(ObjectIdentifier.init))
        watched.rebuilt(tracker.tracked.ordered, version: tracker.tracked.version)
        laneWatch.watch(watched.rings.map(\.consumer))
        visit = watched.rings.map { ring in
            due.contains(ObjectIdentifier(ring)) || !known.contains(ObjectIdentifier(ring))
                || ring.schedule.watch.lanes != ring.consumer.laneCount
        }
        counted = [Bool](repeating: false, count: watched.rings.count)
        for (index, ring) in watched.rings.enumerated() {
            ring.schedule.watch.lanes = ring.consumer.laneCount
            ring.schedule.watch.index = index
        }
        followUps.removeAll()
        return true
    }
}

/// A ring's place in the drain's schedule: written here, by the `DrainScheduler` (and by the
/// drain through `countDrained` and `noteNewLanes`), read by the rest.
struct SchedulePlace {
    /// Its place in the lane watch.
    fileprivate(set) var watch = TrackedRing.WatchPlace()
    /// How fast its lanes fill.
    fileprivate(set) var fill = FillRate()
    /// How many times the lane watch saw its counters move (`cell_writes`).
    fileprivate(set) var cellMoves: UInt64 = 0
    /// When a pass last drained records from it (0: never).
    fileprivate(set) var lastActiveNanos: UInt64 = 0

    init() {}

    /// Counts `records` drained from `lane`, for the fill rate.
    mutating func countDrained(_ records: Int, lane: Int) { fill.counted(records, lane: lane) }

    /// Its file opened again: not in the watch, not timed (the moves of its counters count on).
    mutating func reopened() {
        watch = TrackedRing.WatchPlace()
        fill = FillRate()
    }

    /// Whether the ring's file has lanes the watch does not hold yet.
    mutating func noteNewLanes(_ pending: Bool) { watch.newLanesPending = pending }
}
