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

    private let source: @Sendable () -> Snapshot
    private let publish: @Sendable (ThreadHealthSample) -> Void
    private let log: CollectorLog
    private let clock = ProcClock.system
    /// What it follows, by key, and in the order rounds take them (rebuilt when `orderStale`).
    private var processes: [Int32: SampledProcess] = [:]
    private var threads: [ThreadKey: SampledThread] = [:]
    private var processOrder: [SampledProcess] = []
    private var threadOrder: [SampledThread] = []
    private var orderStale = true
    /// Targets that could not be read, and when to try again: a thread or process gone, or another
    /// process at the pid, never while it stays a target; one unreadable, after `retryNanos`.
    private var unreadable: [ThreadKey: UInt64] = [:]
    private var refusedProcesses: [Int32: UInt64] = [:]
    private var nextRetryNanos = UInt64.max
    static let retryNanos: UInt64 = 30_000_000_000
    /// The targets, and the generation of the snapshot they came from (the same one names the same).
    private var targets: ThreadHealthTargets?
    private var targetsGeneration: UInt64?
    private var cursors = (process: 0, schedstat: 0, details: 0)
    private var kept = 0
    private var sequence: UInt64 = 0
    private var cpuNanosTotal: UInt64 = 0
    /// The one buffer every file is read into (4 KB: a status is about 1.4 KB).
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
    /// Whether the log said that a file could not be read (once: thousands of threads may not be).
    private var saidUnreadable = false

    private let stopRequested = Atomic<Bool>(false)
    private let wakeup = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private var isRunning = false

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
        precondition(!isRunning, "the thread sampler is already running")
        isRunning = true
        let thread = Thread { [self] in
            try? System.setThreadName("ringside-sample")  // for top -H and /proc/PID/task/TID/comm
            // Below the drain thread, as the HTTP threads are: a round waits, the drain does not.
            // On Linux the nice value is a thread's own: PRIO_PROCESS with id 0 is this thread.
            let which = __priority_which_t(PRIO_PROCESS.rawValue)
            if let nice = try? System.getpriority(which, 0) { try? System.setpriority(which, 0, min(19, nice + 10)) }
            while !stopRequested.load(ordering: .acquiring) {
                let began = rs_clock_precise_ns()
                sampleRound()
                let spent = rs_clock_precise_ns() &- began
                _ = wakeup.wait(timeout: .now() + .nanoseconds(Int(clamping: intervalNanos &- min(spent, intervalNanos))))
            }
            closeEverything()
            finished.signal()
        }
        thread.start()
    }

    /// Stops its thread, which closes every file it kept.
    func stop() {
        guard isRunning else { return }
        stopRequested.store(true, ordering: .releasing)
        wakeup.signal()
        finished.wait()
        isRunning = false
    }

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
        if orderStale || began >= nextRetryNanos { takeUpNew(nowNanos: began) }
        let budget = max(UInt64(Double(intervalNanos) * Self.budgetFraction), 100_000)
        var figures = ThreadSamplerFigures()
        if let clock {
            readProcesses(clock: clock, until: cpuBegan &+ budget / 3)
            readSchedstats(until: cpuBegan &+ budget * 2 / 3)
            readDetails(until: cpuBegan &+ budget)
            figures.deferred = threadOrder.count { !$0.isClosed && $0.detailsDue }
        }
        var sample = ThreadHealthSample(
            sequence: 0, realtimeNanos: 0, intervalNanos: intervalNanos, threads: [:], processes: [:], figures: figures)
        sample.threads.reserveCapacity(threadOrder.count)
        for thread in threadOrder where !thread.isClosed {
            if let health = thread.health { sample.threads[thread.key] = health }
        }
        for process in processOrder where !process.isClosed {
            if let health = process.health { sample.processes[process.pid] = health }
        }
        cpuNanosTotal &+= Self.threadCPUNanos() &- cpuBegan
        sequence += 1
        sample.sequence = sequence
        sample.realtimeNanos = rs_clock_realtime_ns()
        sample.figures.threads = sample.threads.count
        sample.figures.processes = sample.processes.count
        // Every target is followed but those that could not be read (or whose process could not).
        sample.figures.unreadable = max(0, (targets?.threads.count ?? 0) - threads.count)
        sample.figures.roundSeconds = Double(rs_clock_precise_ns() &- began) / 1e9
        sample.figures.cpuSecondsTotal = Double(cpuNanosTotal) / 1e9
        sample.figures.keptDescriptors = kept
        sample.figures.keptDescriptorLimit = keptDescriptorLimit
        publish(sample)
        return sample
    }

    /// Lets go of what is no longer a target (its lane released, its ring let go or dead).
    private func follow(_ new: ThreadHealthTargets) {
        guard new != targets else { return }
        let wanted = Set(new.threads)
        for key in Array(threads.keys) where !wanted.contains(key) { dropThread(key) }
        unreadable = unreadable.filter { wanted.contains($0.key) }
        for pid in Array(processes.keys) where new.processes[pid] == nil { dropProcess(pid) }
        refusedProcesses = refusedProcesses.filter { new.processes[$0.key] != nil }
        targets = new
        orderStale = true
    }

    /// Takes up the targets not followed yet, those whose time to be tried again has come, and
    /// puts them in the order the rounds take them.
    private func takeUpNew(nowNanos now: UInt64) {
        guard let targets else { return }
        refusedProcesses = refusedProcesses.filter { $0.value > now }
        unreadable = unreadable.filter { $0.value > now }
        nextRetryNanos = min(refusedProcesses.values.min() ?? .max, unreadable.values.min() ?? .max)
        processOrder = targets.processes.keys.sorted().compactMap { pid in
            guard refusedProcesses[pid] == nil else { return nil }
            if let process = processes[pid] { return process }
            let process = SampledProcess(pid: pid)
            processes[pid] = process
            return process
        }
        threadOrder = targets.threads.compactMap { key in
            guard unreadable[key] == nil, let process = processes[key.pid] else { return nil }
            if let thread = threads[key] { return thread }
            let thread = SampledThread(key, of: process)
            threads[key] = thread
            return thread
        }
        orderStale = false
    }

    /// Each process's stat and descriptors, in turn from where the last round stopped.
    private func readProcesses(clock: ProcClock, until deadline: UInt64) {
        let now = rs_clock_precise_ns()
        visitInTurn(processOrder, from: &cursors.process, until: deadline) { process in
            guard !process.isClosed else { return }
            let before = process.keptDescriptors
            let outcome = process.read(
                buffer, keep: before > 0 || kept + 2 <= keptDescriptorLimit, nowNanos: now,
                attachedRealtimeNanos: targets?.processes[process.pid] ?? 0, clock: clock)
            kept += process.keptDescriptors - before
            guard outcome != .read else { return }
            // Its threads go too: what was read of them was of the process gone.
            dropProcess(process.pid)
            refusedProcesses[process.pid] = retryTime(after: outcome == .gone || outcome == .anotherProcess ? nil : now)
            if case let .unreadable(reason) = outcome { sayUnreadable(reason) }
        }
    }

    /// Each thread's schedstat, in turn; its descriptor kept while any may be.
    private func readSchedstats(until deadline: UInt64) {
        visitInTurn(threadOrder, from: &cursors.schedstat, until: deadline) { thread in
            guard !thread.isClosed, thread.process.health != nil, !thread.process.isClosed else { return }
            read(thread) {
                let keep = thread.schedstatKept || kept < keptDescriptorLimit
                return thread.readSchedstat(buffer, keep: keep, nowNanos: rs_clock_precise_ns())
            }
        }
    }

    /// The stat and status of each thread whose schedstat moved, in turn; their descriptors kept
    /// only with room left once every thread's schedstat may be (else given back).
    private func readDetails(until deadline: UInt64) {
        let schedstatsNotKept = threadOrder.count { !$0.isClosed && !$0.schedstatKept }
        visitInTurn(threadOrder, from: &cursors.details, until: deadline) { thread in
            guard !thread.isClosed, thread.detailsDue, thread.process.health != nil, !thread.process.isClosed else { return }
            read(thread) {
                let keep = kept + schedstatsNotKept + (thread.detailsKept ? 0 : 2) <= keptDescriptorLimit
                return thread.readDetails(buffer, keep: keep, nowNanos: rs_clock_precise_ns())
            }
        }
    }

    /// Reads `thread` with `body`, counting the descriptors it keeps; a thread gone or unreadable
    /// is let go and remembered until it is no longer a target.
    private func read(_ thread: SampledThread, _ body: () -> SampledThread.Reading) {
        let before = thread.keptDescriptors
        let outcome = body()
        kept += thread.keptDescriptors - before
        guard outcome != .read else { return }
        dropThread(thread.key)
        unreadable[thread.key] = retryTime(after: outcome == .gone ? nil : rs_clock_precise_ns())
        if case let .unreadable(reason) = outcome { sayUnreadable(reason) }
    }

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
        guard let thread = threads.removeValue(forKey: key) else { return }
        kept -= thread.keptDescriptors
        thread.close()
        orderStale = true
    }

    /// Lets go of a process and of its threads.
    private func dropProcess(_ pid: Int32) {
        guard let process = processes.removeValue(forKey: pid) else { return }
        kept -= process.keptDescriptors
        process.close()
        for key in Array(threads.keys) where key.pid == pid { dropThread(key) }
        orderStale = true
    }

    private func closeEverything() {
        for key in Array(threads.keys) { dropThread(key) }
        for pid in Array(processes.keys) { dropProcess(pid) }
        targets = nil
        targetsGeneration = nil
    }

    private func sayUnreadable(_ reason: String) {
        guard !saidUnreadable else { return }
        saidUnreadable = true
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
