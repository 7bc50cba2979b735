import RingsideSnapshot
import Ringside

/// A ring the collector drains (or has released), with its series and what the parts of the
/// collector keep about it: the tracker its liveness and quarantine, the scheduler its place in
/// the lane watch and its fill rate, the publisher its last quiet series. Touched by the drain
/// thread only.
final class TrackedRing {
    let name: String
    /// Which file it is: a file replaced under the same name is another ring.
    let identity: RingFileIdentity
    /// The user that owns that file (nil: not known).
    let owner: UInt32?
    /// The open file, or nil once the ring is released (its producer dead, every record drained):
    /// its series stay, its descriptor and mappings are given back.
    private(set) var file: RingConsumer?
    /// The bot's series, which this ring feeds as source `source` (with the bot's other rings).
    let bot: BotSeries
    let source: Int
    /// Its bot's store in the flight recorder and its file's id there, once it recorded.
    var recorded: (recording: BotRecording, source: UInt32)?
    /// What is known of its producer: the tracker's (`Liveness.swift`).
    var liveness = Liveness()
    /// Its place in the drain's schedule: the scheduler's (`DrainScheduler.swift`).
    var schedule = SchedulePlace()
    var quarantine = Quarantine()
    /// What its drains cost lately and how many of its records were invalid.
    var account = DrainAccount()
    /// What the log said last about it.
    var logged = LastLogged()
    /// Records drained, ever.
    var drained: UInt64 = 0
    /// Its records drained when it was last shown in a snapshot (`RingTracker+Showing.swift`).
    var drainedAtPublish = DrainedAtPublish()
    /// When its cells were last sampled (`RingTracker+Showing.swift`).
    var cellSampling = CellSampling()

    /// Whether a counter moved since its cells were last sampled (its lanes' `cell_writes`, seen
    /// by the drain scheduler's lane watch).
    var cellsMoved: Bool { schedule.cellMoves != cellSampling.movesSampled }
    /// Records drained since the last publish.
    var drainedSincePublish: UInt64 { drained &- drainedAtPublish.count }

    /// Its place in the lane watch (`DrainScheduler`): the lanes the watch holds of it, its index
    /// there, and whether `observe` found more lanes in the file.
    struct WatchPlace {
        var lanes = 0
        var index = Int.max
        var newLanesPending = false
        /// The pass that last visited it, and when (for the drain's gaps), and the last pass that
        /// meant to and ran out of time first.
        var visitedPass: UInt64 = 0
        var visitedNanos: UInt64 = 0
        var leftOverPass: UInt64 = 0
    }

    /// Until when its records are not read (0: they are), why, and how many times it was.
    struct Quarantine {
        private(set) var untilNanos: UInt64 = 0
        private(set) var reason: String?
        private(set) var count: UInt64 = 0

        var isOn: Bool { untilNanos != 0 }

        mutating func begin(untilNanos: UInt64, reason: String) {
            self.untilNanos = untilNanos
            self.reason = reason
            count += 1
        }

        /// Ends it if its time is up at `now`; returns whether it ended.
        mutating func end(ifOverAt now: UInt64) -> Bool {
            guard now >= untilNanos else { return false }
            untilNanos = 0
            reason = nil
            return true
        }
    }

    /// What the log last said of it, so each log line says what is new and comes at most every
    /// `DrainTiming.dropLogIntervalNanos`.
    struct LastLogged {
        private var dropped: UInt64 = 0
        private var unlanedDropped: UInt64 = 0
        private var droppedNanos: UInt64 = 0
        private var rejected: UInt64 = 0
        private var rejectedNanos: UInt64 = 0
        /// Whether the log said that a series cap refused some of its metrics.
        var seriesRefused = false
        /// Why it was skipped the last time (discovery took it up again since): said once.
        var skipped: String?

        /// Whether drops beyond those said are due to be said at `now`.
        func dropsDue(_ status: RingStatus, nowNanos now: UInt64) -> Bool {
            status.dropped > dropped && now &- droppedNanos >= DrainTiming.dropLogIntervalNanos
        }

        /// The drops since those last said, all and by threads without a lane, now said.
        mutating func sayingDrops(_ status: RingStatus, nowNanos now: UInt64) -> (total: UInt64, unlaned: UInt64) {
            let total = status.dropped &- min(status.dropped, dropped)
            let unlaned = min(total, status.unlanedDropped &- min(status.unlanedDropped, unlanedDropped))
            (dropped, unlanedDropped) = (status.dropped, status.unlanedDropped)
            if total > 0 { droppedNanos = now }
            return (total, unlaned)
        }

        /// The records rejected since those last said, if they are due to be said at `now` (then said).
        mutating func sayingRejected(_ total: UInt64, nowNanos now: UInt64) -> UInt64? {
            guard total > rejected, now &- rejectedNanos >= DrainTiming.dropLogIntervalNanos else { return nil }
            defer { (rejected, rejectedNanos) = (total, now) }
            return total - rejected
        }
    }

    /// A ring of `bot`: a new source of its series.
    init(consumer: RingConsumer, bot: BotSeries) {
        name = consumer.name
        identity = consumer.identity
        owner = consumer.owner
        file = consumer
        self.bot = bot
        // A worker's file names its pid; the bot's own file says who attached it.
        let pid = WorkerRing(consumer.name)?.pid ?? ((try? consumer.status())?.producerPID ?? 0)
        source = bot.aggregator.addSource(pid: pid)
        bot.rings += 1
    }

    /// The bot's aggregator, which its rings share.
    var aggregator: BotAggregator {
        get { bot.aggregator }
        _modify { yield &bot.aggregator }
    }

    /// What its records cost its bot's aggregator: rejected, refused.
    var sourceFigures: BotAggregator.Source { bot.aggregator.sources[source] }

    /// The open file of a ring being drained (only the tracker's `tracked` rings are).
    var consumer: RingConsumer {
        guard let file else { preconditionFailure("ring \(name) is released: its file is closed") }
        return file
    }

    /// Closes its file: the descriptor and mappings are given back; everything else stays.
    func release() { file = nil }

    /// Takes the ring up again with `consumer`, a new open of the same file.
    func reopen(_ consumer: RingConsumer) {
        precondition(file == nil && consumer.identity == identity, "reopened with another file")
        file = consumer
        schedule.reopened()
        liveness.observeSoon()
    }

    /// Marks it opened or closed just now (by us or another process): it is not released for a
    /// moment, and its liveness is asked often meanwhile.
    func touched(nowNanos now: UInt64) { liveness.touched(nowNanos: now) }

    /// How often its producer's liveness is asked: four times a second while it records or just
    /// after its file was opened or closed (a producer attaching, detaching or dying: the lock
    /// goes a moment after the close that inotify reports); each second when it recorded in the
    /// last 10 s, is stopped or dead (and not yet let go of), or without inotify; else every 30 s.
    func livenessInterval(nowNanos now: UInt64, watching: Bool) -> UInt64 {
        func within(_ nanos: UInt64, of time: UInt64) -> Bool { time != 0 && now &- time < nanos }
        // Its fields read in place: a copy of `liveness` retains its status (once a second for every ring).
        let lastActive = schedule.lastActiveNanos
        if within(DrainTiming.livenessIntervalNanos, of: lastActive)
            || within(DrainTiming.livenessIntervalNanos, of: liveness.touchedNanos)
        {
            return DrainTiming.activeLivenessIntervalNanos
        }
        if !watching || !liveness.producerAlive || liveness.producerStopped || within(DrainTiming.recentNanos, of: lastActive) {
            return DrainTiming.livenessIntervalNanos
        }
        return DrainTiming.idleLivenessIntervalNanos
    }

    /// Whether its liveness is due to be asked, every `interval` (give or take a pass: a ring
    /// looked at late in one round is due in the next).
    func isObservationDue(nowNanos now: UInt64, interval: UInt64) -> Bool {
        now &- liveness.lastObservedNanos &+ DrainTiming.livenessSlackNanos >= interval
    }

    func ringSnapshot(nowNanos now: UInt64) -> RingSnapshot {
        let live = liveness
        var snapshot = RingSnapshot(
            name: name, bot: bot.name, worker: WorkerRing(name)?.pid,
            state: !live.producerAlive ? .producerDead : live.producerStopped ? .producerStopped : .live)
        snapshot.owner = owner
        snapshot.problem = quarantine.reason
        snapshot.quarantined = quarantine.reason != nil
        snapshot.quarantinesTotal = quarantine.count
        guard let status = live.status else { return snapshot }
        snapshot.producerPID = status.producerPID
        snapshot.producerStartRealtimeNanos = status.producerStartRealtimeNanos
        snapshot.capacity = status.capacity
        snapshot.backlog = status.backlog
        snapshot.recordsTotal = status.writeCursor
        snapshot.consumedTotal = status.readCursor
        snapshot.droppedTotal = status.dropped
        snapshot.unlanedDropped = status.unlanedDropped
        snapshot.drainedTotal = drained
        let figures = sourceFigures
        snapshot.rejectedTotal = figures.rejected
        snapshot.seriesRefused = figures.refusedSeries
        snapshot.recordsRefusedTotal = figures.refusedRecords
        snapshot.sampledTotal = figures.sampled
        snapshot.sampleAbove = status.sampleAbove
        snapshot.workersRefusedTotal = status.workersRefused
        snapshot.metricCount = status.metricCount
        snapshot.maxLanes = status.maxLanes
        // The heartbeat is coarse monotonic time, which may lag `now` by a tick.
        func age(_ heartbeat: UInt64) -> Double { Double(now &- min(now, heartbeat)) / 1e9 }
        snapshot.heartbeatAgeSeconds = age(status.heartbeatMonotonicNanos)
        snapshot.lanes = status.lanes.map { lane in
            LaneSnapshot(
                index: lane.index, state: lane.state, threadID: lane.ownerTID, threadName: lane.threadName, backlog: lane.backlog,
                recordsTotal: lane.writeCursor, consumedTotal: lane.readCursor, droppedTotal: lane.dropped,
                heartbeatAgeSeconds: age(lane.heartbeatMonotonicNanos), heartbeatMonotonicNanos: lane.heartbeatMonotonicNanos)
        }
        return snapshot
    }
}

/// How fast a ring's lanes fill: records drained from each lane since `sinceNanos` (0: the ring
/// is idle, not timed), and the fastest lane's rate (records a second) over the last span of at
/// least `DrainTiming.fillRateSpanNanos` that drained any. The drain loop sleeps less than the fastest lane takes to
/// fill. A rate is kept for `DrainTiming.fillRateHoldNanos` after its last records: a producer the scheduler held
/// back for a moment (a paced one then writes all it owes at once) finds the loop still waking
/// at its pace, not asleep for a whole poll.
struct FillRate {
    private var drainedByLane: [Int] = []
    private(set) var sinceNanos: UInt64 = 0
    private var fastestLaneRate: Double = 0
    /// When a span last drained records.
    private var lastFillingNanos: UInt64 = 0

    /// Whether a span is open: the ring drained lately.
    var isTiming: Bool { sinceNanos != 0 }

    /// Counts `count` records drained from `lane`.
    mutating func counted(_ count: Int, lane: Int) {
        if lane >= drainedByLane.count { drainedByLane += Array(repeating: 0, count: lane + 1 - drainedByLane.count) }
        drainedByLane[lane] += count
    }

    /// Closes a span once it is `DrainTiming.fillRateSpanNanos` long; returns how long the fastest lane of `capacity`
    /// records takes to fill at its rate (nil: it is not filling).
    mutating func fillNanos(capacity: UInt64, nowNanos now: UInt64) -> UInt64? {
        if sinceNanos == 0 { sinceNanos = now }
        let span = now &- sinceNanos
        // The open span's rate counts too (over at least a millisecond), so a lane that has just
        // started filling is not left for a whole poll: an overestimate costs a pass, not records.
        let openRate = Double(drainedByLane.max() ?? 0) / (Double(max(span, 1_000_000)) / 1e9)
        if span >= DrainTiming.fillRateSpanNanos {
            if openRate > 0 {
                fastestLaneRate = openRate
                lastFillingNanos = now
            }
            for lane in drainedByLane.indices { drainedByLane[lane] = 0 }
            // Nothing for `DrainTiming.fillRateHoldNanos`: the ring is idle, no longer timed.
            let idle = openRate == 0 && now &- lastFillingNanos >= DrainTiming.fillRateHoldNanos
            if idle { fastestLaneRate = 0 }
            sinceNanos = idle ? 0 : now
        }
        let rate = max(fastestLaneRate, openRate)
        guard rate > 0 else { return nil }
        return UInt64(min(Double(capacity) / rate * 1e9, 1e15))
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
            ordered.remove(at: position(of: name))
            version &+= 1
        }
    }

    mutating func insert(_ ring: TrackedRing) {
        let name = ring.name
        self[name] = nil
        byName[name] = ring
        ordered.insert(ring, at: position(of: name))
        version &+= 1
    }

    /// Where `name` is in `ordered`, or would go: a binary search, so that thousands of bots
    /// attached or released together cost a comparison of names each, not a pass over all.
    private func position(of name: String) -> Int {
        var low = 0, high = ordered.count
        while low < high {
            let middle = (low + high) / 2
            if ordered[middle].name < name { low = middle + 1 } else { high = middle }
        }
        return low
    }

    mutating func removeAll() {
        ordered.removeAll()
        byName.removeAll()
        version &+= 1
    }
}
