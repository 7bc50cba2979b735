#if canImport(Glibc)
import Glibc
#endif
import CRingside
import Dispatch
import Foundation
import RingsideSnapshot
import RingsideSystem
import Synchronization

/// The collector's part that reads the scheduling health of the bots' lane threads and of their
/// processes from `/proc`, once an interval (`--thread-sample-interval`), on a thread of its own
/// at nice 10: `/proc` reads never delay the drain.
///
/// Each round takes the threads to read from the latest published snapshot (its rings' live
/// producers and the threads holding their active lanes), reads them, and publishes an immutable
/// `ThreadHealthSample`, which every snapshot served then carries. What it keeps between rounds
/// (files, the figures before, for rates and migrations) stays here.
///
/// A ring names its producer's pid and its threads' ids itself, so it reads only what the ring's
/// owner owns: a process whose real, effective, saved and filesystem ids are all the user that
/// owns the ring's file (its `status`, read first each round); a thread of that process, which
/// runs as it does and started before the lane's heartbeat (so before its claim). Anything else
/// is refused: not read further, counted once per ring and target while it stays one
/// (`ThreadHealthRefusal`), said in the log once per bot and reason, and tried again 30 s later.
///
/// Its cost is bounded: a round stops reading once it has spent `budgetFraction` of its interval
/// in CPU time, and the next takes up where it stopped. In turn: each process's `stat` and its
/// descriptors (at most a third of the budget), each thread's `schedstat` (to two thirds), then
/// `stat` and `status` of the threads whose schedstat moved (the rest). Files are kept open and
/// read again with `pread` while `keptDescriptorLimit` allows: each process's two, then each
/// thread's schedstat, then, with what is left, threads' stat and status.
// @unchecked: its state is touched by its own thread only, or by the caller of `sampleRound` when
// not started (tests step it); `stop` waits for the thread to finish.
package final class ThreadHealthSampler: @unchecked Sendable {
    package let intervalNanos: UInt64
    package let keptDescriptorLimit: Int
    /// The CPU time a round may take, as a fraction of the interval.
    static let budgetFraction = 0.005
    /// How many reads go between two looks at the CPU clock (a system call).
    static let readsPerClockLook = 16
    /// How soon a target refused or unreadable is tried again.
    static let retryNanos: UInt64 = 30_000_000_000

    private let source: @Sendable () -> Snapshot
    private let publish: @Sendable (ThreadHealthSample) -> Void
    private let log: CollectorLog
    private let clock = ProcClock.system
    /// What it follows, and the targets it set aside for a while.
    private var followed = FollowedTasks()
    private var setAside = SetAsideTargets()
    /// Where each kind of read stopped last round: the next round begins there.
    private var cursors = (process: 0, schedstat: 0, details: 0)
    /// What was refused, counted and said.
    private var ledger = RefusalLedger()
    /// The targets, and the generation of the snapshot they came from (the same one names the same).
    private var targets: ThreadHealthTargets?
    private var targetsGeneration: UInt64?
    private var tally = RoundTally()
    /// The one buffer every file is read into (4 KB: a status is about 1.4 KB).
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
    private let loop = PartThread(name: "ringside-sample")

    /// - Parameters:
    ///   - source: the latest published snapshot.
    ///   - publish: hands each round's sample over (to `PublishedSnapshot`).
    init(
        intervalNanos: UInt64, keptDescriptorLimit: Int, log: CollectorLog, source: @escaping @Sendable () -> Snapshot,
        publish: @escaping @Sendable (ThreadHealthSample) -> Void
    ) {
        self.intervalNanos = intervalNanos
        self.keptDescriptorLimit = keptDescriptorLimit
        self.log = log
        self.source = source
        self.publish = publish
    }

    deinit {
        closeEverything()
        buffer.deallocate()
    }

    // MARK: - Its thread

    func start() {
        loop.startOrExit { [self] in
            // Below the drain thread, as the HTTP threads are: a round waits, the drain does not.
            // On Linux the nice value is a thread's own: PRIO_PROCESS with id 0 is this thread.
            let which = __priority_which_t(PRIO_PROCESS.rawValue)
            if let nice = try? System.getpriority(which, 0) { try? System.setpriority(which, 0, min(19, nice + 10)) }
            while !loop.isStopping {
                let began = rs_clock_precise_ns()
                sampleRound()
                let spent = rs_clock_precise_ns() &- began
                loop.pause(nanos: intervalNanos &- min(spent, intervalNanos))
            }
            closeEverything()
        }
    }

    /// Stops its thread, which closes every file it kept.
    func stop() { loop.stop() }

    // MARK: - A round

    /// One round on the caller's thread: reads what the latest snapshot names, publishes the
    /// sample, and returns it.
    @discardableResult
    package func sampleRound() -> ThreadHealthSample {
        let began = rs_clock_precise_ns()
        let cpuBegan = Self.threadCPUNanos()
        let snapshot = source()
        if targets == nil || snapshot.generation != targetsGeneration {
            follow(ThreadHealthTargets(snapshot))
            targetsGeneration = snapshot.generation
        }
        if followed.orderStale || began >= setAside.nextRetryNanos { takeUpNew(nowNanos: began) }
        let budget = max(UInt64(Double(intervalNanos) * Self.budgetFraction), 100_000)
        let round = tally.rounds + 1
        var figures = ThreadSamplerFigures()
        if let clock {
            readProcesses(clock: clock, round: round, until: cpuBegan &+ budget / 3)
            readSchedstats(round: round, until: cpuBegan &+ budget * 2 / 3)
            readDetails(round: round, startClock: ThreadStartClock(clock), until: cpuBegan &+ budget)
            figures.deferred = followed.threadOrder.count { !$0.isClosed && $0.detailsDue }
        }
        var sample = ThreadHealthSample(
            sequence: 0, realtimeNanos: 0, intervalNanos: intervalNanos, threads: [:], processes: [:], figures: figures)
        sample.threads.reserveCapacity(followed.threadOrder.count)
        for thread in followed.threadOrder where !thread.isClosed {
            if let health = thread.health { sample.threads[thread.key] = health }
        }
        for process in followed.processOrder where !process.isClosed {
            if let health = process.health { sample.processes[process.pid] = health }
        }
        // Every target is followed but those refused and those that could not be read (or whose process could not).
        for key in targets?.threads ?? [] {
            if isRefused(key) {
                sample.figures.refused += 1
            } else if followed.threads[key] == nil {
                sample.figures.unreadable += 1
            }
        }
        sample.refusals = ledger.totals
        tally.cpuNanos &+= Self.threadCPUNanos() &- cpuBegan
        tally.rounds += 1
        sample.sequence = tally.rounds
        sample.realtimeNanos = rs_clock_realtime_ns()
        sample.figures.threads = sample.threads.count
        sample.figures.processes = sample.processes.count
        sample.figures.roundSeconds = Double(rs_clock_precise_ns() &- began) / 1e9
        sample.figures.cpuSecondsTotal = Double(tally.cpuNanos) / 1e9
        sample.figures.keptDescriptors = followed.kept
        sample.figures.keptDescriptorLimit = keptDescriptorLimit
        publish(sample)
        return sample
    }

    /// Lets go of what is no longer a target (its lane released, its ring let go or dead), and of
    /// what was counted of rings no longer in the snapshots. Takes the new lanes' heartbeats.
    private func follow(_ new: ThreadHealthTargets) {
        defer { targets = new }
        guard new.names != targets?.names else { return }
        let wanted = Set(new.threads)
        for key in Array(followed.threads.keys) where !wanted.contains(key) { dropThread(key) }
        setAside.unreadable = setAside.unreadable.filter { wanted.contains($0.key) }
        for pid in Array(followed.processes.keys) where new.processes[pid] == nil { dropProcess(pid) }
        setAside.unreadableProcesses = setAside.unreadableProcesses.filter { new.processes[$0.key] != nil }
        // Judged again at once (a ring of the process's owner may name it now); counted only if new.
        setAside.refusedThreads = [:]
        setAside.refusedProcesses = [:]
        let named = Set(new.rings.flatMap { ring in [Refusal.Target(ring, lane: nil)] + ring.lanes.map { Refusal.Target(ring, lane: $0) } })
        ledger.refusals = ledger.refusals.filter { named.contains($0.target) }
        ledger.totals = ledger.totals.filter { new.names.allRings[$0.key] != nil }
        let bots = Set(new.names.allRings.values)
        ledger.logged = ledger.logged.filter { bots.contains($0.bot) }
        ledger.judged = [:]
        followed.orderStale = true
    }

    /// Takes up the targets not followed yet, those whose time to be tried again has come, and
    /// puts them in the order the rounds take them.
    private func takeUpNew(nowNanos now: UInt64) {
        guard let targets else { return }
        setAside.unreadableProcesses = setAside.unreadableProcesses.filter { $0.value > now }
        setAside.unreadable = setAside.unreadable.filter { $0.value > now }
        setAside.refusedProcesses = setAside.refusedProcesses.filter { $0.value > now }
        setAside.refusedThreads = setAside.refusedThreads.filter { $0.value > now }
        setAside.nextRetryNanos =
            [
                setAside.unreadableProcesses.values.min(), setAside.refusedProcesses.values.min(), setAside.unreadable.values.min(),
                setAside.refusedThreads.values.min(),
            ]
            .compactMap { $0 }.min() ?? .max
        followed.processOrder = targets.processes.keys.sorted().compactMap { pid in
            guard setAside.unreadableProcesses[pid] == nil, setAside.refusedProcesses[pid] == nil else { return nil }
            if let process = followed.processes[pid] { return process }
            let process = SampledProcess(pid: pid)
            followed.processes[pid] = process
            return process
        }
        followed.threadOrder = targets.threads.compactMap { key in
            guard setAside.unreadable[key] == nil, setAside.refusedThreads[key] == nil, let process = followed.processes[key.pid] else {
                return nil
            }
            if let thread = followed.threads[key] { return thread }
            let thread = SampledThread(key, of: process)
            followed.threads[key] = thread
            return thread
        }
        followed.orderStale = false
    }

    /// Each process's status, stat and descriptors, in turn from where the last round stopped.
    private func readProcesses(clock: ProcClock, round: UInt64, until deadline: UInt64) {
        guard let targets else { return }
        let now = rs_clock_precise_ns()
        visitInTurn(followed.processOrder, from: &cursors.process, until: deadline) { process in
            guard !process.isClosed else { return }
            let before = process.keptDescriptors
            let owners = Set(targets.owners(ofProcess: process.pid).compactMap { $0 })
            let keep = before > 0 || followed.kept + SampledProcess.filesKept <= keptDescriptorLimit
            let outcome = process.read(
                buffer, keep: keep, nowNanos: now, attachedRealtimeNanos: targets.processes[process.pid] ?? 0, clock: clock,
                owners: owners, round: round)
            followed.kept += process.keptDescriptors - before
            if outcome == .read, let owner = process.owner {
                if ledger.judged[process.pid] != owner { judgeRings(of: process, in: targets, readAs: owner) }
                return
            }
            // Its threads go too: what was read of them was of the process gone.
            dropProcess(process.pid)
            switch outcome {
            case .otherOwner, .notAProcess:
                judgeRings(of: process, in: targets, readAs: nil, outcome: outcome)
                setAside.refusedProcesses[process.pid] = retryTime(after: now)
            default:
                setAside.unreadableProcesses[process.pid] = retryTime(after: outcome == .gone || outcome == .anotherProcess ? nil : now)
                if case let .unreadable(reason) = outcome { sayUnreadable(reason) }
            }
        }
    }

    /// Counts, as refused, each ring naming `process` that its user does not own (`owner`; nil:
    /// every ring, as `outcome` says), with each of its lanes.
    private func judgeRings(
        of process: SampledProcess, in targets: ThreadHealthTargets, readAs owner: UInt32?, outcome: SampledProcess.Reading = .read
    ) {
        if let owner { ledger.judged[process.pid] = owner }
        for index in targets.ringsNaming[process.pid] ?? [] {
            let ring = targets.rings[index]
            guard owner == nil || ring.owner != owner else { continue }
            let reason: ThreadHealthRefusal, why: String
            if case let .notAProcess(group) = outcome {
                reason = .notAProcess
                why = "is a thread of process \(group), not a process"
            } else {
                reason = .otherOwner
                why = "runs as \(Self.describe(process.credentials)), not as the file's owner \(Self.describe(ring.owner))"
            }
            let said = "ring \(ring.name) names pid \(process.pid) as its producer, which \(why)"
            let targetsRefused: [ThreadHealthTargets.Lane?] = [nil] + ring.lanes.map { $0 }
            for lane in targetsRefused { refuse(ring, lane: lane, reason, said) }
        }
    }

    /// Each thread's schedstat, in turn; its descriptor kept while any may be.
    private func readSchedstats(round: UInt64, until deadline: UInt64) {
        visitInTurn(followed.threadOrder, from: &cursors.schedstat, until: deadline) { thread in
            guard !thread.isClosed, isReadable(thread, round: round) else { return }
            read(thread) {
                let keep = thread.schedstatKept || followed.kept < keptDescriptorLimit
                return thread.readSchedstat(buffer, keep: keep, nowNanos: rs_clock_precise_ns())
            }
        }
    }

    /// The stat and status of each thread whose schedstat moved, in turn; their descriptors kept
    /// only with room left once every thread's schedstat may be (else given back).
    private func readDetails(round: UInt64, startClock: ThreadStartClock, until deadline: UInt64) {
        let schedstatsNotKept = followed.threadOrder.count { !$0.isClosed && !$0.schedstatKept }
        visitInTurn(followed.threadOrder, from: &cursors.details, until: deadline) { thread in
            guard !thread.isClosed, thread.detailsDue, isReadable(thread, round: round) else { return }
            read(thread) {
                let keep = followed.kept + schedstatsNotKept + (thread.detailsKept ? 0 : 2) <= keptDescriptorLimit
                return thread.readDetails(buffer, keep: keep, nowNanos: rs_clock_precise_ns(), startClock: startClock)
            }
            if !thread.isClosed { judgeClaims(of: thread) }
        }
    }

    /// Whether `thread` may be read now: its process was found its rings' owner's this round, and
    /// a lane of a ring of that owner names it (others' lanes that name it were counted then).
    private func isReadable(_ thread: SampledThread, round: UInt64) -> Bool {
        guard !thread.process.isClosed, thread.process.checkedRound == round, let owner = thread.process.owner else { return false }
        return targets?.isNamed(thread.key, byRingOf: owner) == true
    }

    /// Refuses each lane of its owner's rings naming `thread` that it started after (the thread
    /// that claimed it is another at the same id), and the thread when that is every one.
    private func judgeClaims(of thread: SampledThread) {
        guard let targets, let health = thread.health, let owner = thread.process.owner else { return }
        var claimed = false
        for ref in targets.lanesNaming[thread.key] ?? [] where targets.rings[ref.ring].owner == owner {
            guard health.startedAfter(heartbeatMonotonicNanos: targets.heartbeat(ref)) else {
                claimed = true
                continue
            }
            let ring = targets.rings[ref.ring], lane = ring.lanes[ref.lane]
            refuse(
                ring, lane: lane, .startedAfterClaim,
                "ring \(ring.name) lane \(lane.index) names thread \(lane.tid) of pid \(ring.pid), which started after the lane "
                    + "was last claimed or written: another thread at a reused id")
        }
        if !claimed { refuseThread(thread) }
    }

    /// Reads `thread` with `body`, counting the descriptors it keeps; a thread gone or unreadable
    /// is let go and remembered until it is no longer a target; one refused, counted and let go.
    private func read(_ thread: SampledThread, _ body: () -> SampledThread.Reading) {
        let before = thread.keptDescriptors
        let outcome = body()
        followed.kept += thread.keptDescriptors - before
        guard outcome != .read else { return }
        // Not found at its first read, while a task of that id lives: a thread of another process.
        let elsewhere = outcome == .gone && !thread.wasRead && (try? System.lstat("/proc/\(thread.key.tid)")) != nil
        if outcome == .otherOwner || elsewhere {
            guard let targets, let owner = thread.process.owner else { return dropThread(thread.key) }
            let reason: ThreadHealthRefusal = elsewhere ? .notItsThread : .otherOwner
            let why = elsewhere ? "is not a thread of that process" : "runs as \(Self.describe(thread.credentials)), not as its process"
            for ref in targets.lanesNaming[thread.key] ?? [] where targets.rings[ref.ring].owner == owner {
                let ring = targets.rings[ref.ring], lane = ring.lanes[ref.lane]
                refuse(
                    ring, lane: lane, reason,
                    "ring \(ring.name) lane \(lane.index) names thread \(lane.tid) of pid \(ring.pid), which \(why)")
            }
            return refuseThread(thread)
        }
        dropThread(thread.key)
        setAside.unreadable[thread.key] = retryTime(after: outcome == .gone ? nil : rs_clock_precise_ns())
        if case let .unreadable(reason) = outcome { sayUnreadable(reason) }
    }

    /// Lets go of a thread refused, until `retryNanos` from now.
    private func refuseThread(_ thread: SampledThread) {
        dropThread(thread.key)
        setAside.refusedThreads[thread.key] = retryTime(after: rs_clock_precise_ns())
    }

    /// Whether thread `key` is refused now: it, or its process, or by every ring of its process's owner.
    private func isRefused(_ key: ThreadKey) -> Bool {
        if setAside.refusedThreads[key] != nil || setAside.refusedProcesses[key.pid] != nil { return true }
        guard let owner = followed.processes[key.pid]?.owner, let targets else { return false }
        return !targets.isNamed(key, byRingOf: owner)
    }

    // MARK: - Refusals

    private typealias Refusal = RefusalLedger.Refusal
    private typealias LoggedRefusal = RefusalLedger.LoggedRefusal

    /// Counts a refusal of `ring`'s process or `lane` once while it stays a target, and says `why`
    /// in the log once for the ring's bot and `reason`.
    private func refuse(_ ring: ThreadHealthTargets.Ring, lane: ThreadHealthTargets.Lane?, _ reason: ThreadHealthRefusal, _ why: String) {
        guard ledger.refusals.insert(Refusal(target: .init(ring, lane: lane), reason: reason)).inserted else { return }
        ledger.totals[ring.name, default: [:]][reason, default: 0] += 1
        guard ledger.logged.insert(LoggedRefusal(bot: ring.bot, reason: reason)).inserted else { return }
        log(
            "thread sampling: \(why): not read (counted in ringside_thread_health_refused_total{reason=\"\(reason.rawValue)\"}; "
                + "said once for bot \(ring.bot))", level: .warn)
    }

    /// Who a task runs as, for the log.
    private static func describe(_ credentials: Credentials?) -> String {
        guard let credentials else { return "an unknown user" }
        if let user = credentials.soleUser { return "uid \(user)" }
        let ids = { (ids: [UInt32]) in ids.map(String.init).joined(separator: ",") }
        return "uids \(ids(credentials.uids)) and gids \(ids(credentials.gids)) (real, effective, saved, filesystem)"
    }

    private static func describe(_ owner: UInt32?) -> String { owner.map { "uid \($0)" } ?? "(not known)" }

    /// Calls `visit` with the items from `cursor` on, wrapping, each once at most, until the
    /// thread's CPU clock passes `deadline` (looked at every few visits; one visit at least);
    /// leaves `cursor` where the next round begins.
    private func visitInTurn<Item>(_ items: [Item], from cursor: inout Int, until deadline: UInt64, _ visit: (Item) -> Void) {
        guard !items.isEmpty else { return }
        var index = cursor % items.count
        for visited in 0..<items.count {
            if visited > 0, visited % Self.readsPerClockLook == 0, Self.threadCPUNanos() >= deadline { break }
            visit(items[index])
            index = (index + 1) % items.count
        }
        cursor = index
    }

    /// When to try a target again that could not be read at `now`; never (while it stays a
    /// target) when `now` is nil: it is gone, or another process holds its pid.
    private func retryTime(after now: UInt64?) -> UInt64 { now.map { $0 &+ Self.retryNanos } ?? .max }

    private func dropThread(_ key: ThreadKey) {
        guard let thread = followed.threads.removeValue(forKey: key) else { return }
        followed.kept -= thread.keptDescriptors
        thread.close()
        followed.orderStale = true
    }

    /// Lets go of a process and of its threads.
    private func dropProcess(_ pid: Int32) {
        guard let process = followed.processes.removeValue(forKey: pid) else { return }
        followed.kept -= process.keptDescriptors
        process.close()
        for key in Array(followed.threads.keys) where key.pid == pid { dropThread(key) }
        followed.orderStale = true
    }

    private func closeEverything() {
        for key in Array(followed.threads.keys) { dropThread(key) }
        for pid in Array(followed.processes.keys) { dropProcess(pid) }
        targets = nil
        targetsGeneration = nil
    }

    private func sayUnreadable(_ reason: String) {
        guard !setAside.loggedUnreadable else { return }
        setAside.loggedUnreadable = true
        log(
            "thread sampling: \(reason); such threads are not sampled (counted in ringside_collector_thread_sampler_unreadable)",
            level: .warn)
    }

    /// This thread's CPU time (CLOCK_THREAD_CPUTIME_ID, which cannot fail for the calling thread).
    static func threadCPUNanos() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
