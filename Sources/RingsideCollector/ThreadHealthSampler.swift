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
/// read again with `pread` while `keptDescriptorLimit` allows.
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
    private var processes: [Int32: SampledProcess] = [:]
    private var threads: [ThreadKey: SampledThread] = [:]
    /// Targets that could not be read, and when to try again: a thread or process gone, or another
    /// process at the pid, never while it stays a target; one unreadable, after `retryNanos`.
    private var unreadable: [ThreadKey: UInt64] = [:]
    private var refusedProcesses: [Int32: UInt64] = [:]
    static let retryNanos: UInt64 = 30_000_000_000
    private var targets: ThreadHealthTargets?
    private var processOrder: [Int32] = []
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
        for key in Array(threads.keys) { threads[key]?.close() }
        for pid in Array(processes.keys) { processes[pid]?.close() }
        buffer.deallocate()
    }

    // MARK: - Its thread

    func start() {
        precondition(!isRunning, "the thread sampler is already running")
        isRunning = true
        let thread = Thread { [self] in
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
        thread.name = "ringside-sample"
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
        follow(ThreadHealthTargets(source()))
        takeUpNew(nowNanos: began)
        let budget = max(UInt64(Double(intervalNanos) * Self.budgetFraction), 100_000)
        var figures = ThreadSamplerFigures()
        if let clock, let targets {
            readProcesses(clock: clock, until: cpuBegan &+ budget / 3)
            readSchedstats(targets, until: cpuBegan &+ budget * 2 / 3)
            readDetails(targets, until: cpuBegan &+ budget)
            figures.deferred = targets.threads.count { threads[$0]?.detailsDue == true }
        }
        var sample = ThreadHealthSample(
            sequence: 0, realtimeNanos: 0, intervalNanos: intervalNanos, threads: [:], processes: [:], figures: figures)
        for (key, thread) in threads {
            if let health = thread.health { sample.threads[key] = health }
        }
        for (pid, process) in processes {
            if let health = process.health { sample.processes[pid] = health }
        }
        let cpuSpent = Self.threadCPUNanos() &- cpuBegan
        cpuNanosTotal &+= cpuSpent
        sequence += 1
        sample.sequence = sequence
        sample.realtimeNanos = rs_clock_realtime_ns()
        sample.figures.threads = sample.threads.count
        sample.figures.processes = sample.processes.count
        sample.figures.unreadable = targets?.threads.count { unreadable[$0] != nil || refusedProcesses[$0.pid] != nil } ?? 0
        sample.figures.roundSeconds = Double(rs_clock_precise_ns() &- began) / 1e9
        sample.figures.cpuSecondsTotal = Double(cpuNanosTotal) / 1e9
        sample.figures.keptDescriptors = kept
        sample.figures.keptDescriptorLimit = keptDescriptorLimit
        publish(sample)
        return sample
    }

    /// Lets go of what is no longer a target (its lane released, its ring let go or dead), and
    /// takes up what is new.
    private func follow(_ new: ThreadHealthTargets) {
        guard new != targets else { return }
        let wanted = Set(new.threads)
        for key in Array(threads.keys) where !wanted.contains(key) { dropThread(key) }
        unreadable = unreadable.filter { wanted.contains($0.key) }
        for pid in Array(processes.keys) where new.processes[pid] == nil { dropProcess(pid) }
        refusedProcesses = refusedProcesses.filter { new.processes[$0.key] != nil }
        processOrder = new.processes.keys.sorted()
        targets = new
    }

    /// Takes up the targets not followed yet, and those whose time to be tried again has come.
    private func takeUpNew(nowNanos now: UInt64) {
        guard let targets else { return }
        for (pid, retry) in refusedProcesses where retry <= now { refusedProcesses[pid] = nil }
        for (key, retry) in unreadable where retry <= now { unreadable[key] = nil }
        for pid in processOrder where processes[pid] == nil && refusedProcesses[pid] == nil {
            processes[pid] = SampledProcess(pid: pid)
        }
        for key in targets.threads where threads[key] == nil && unreadable[key] == nil && refusedProcesses[key.pid] == nil {
            threads[key] = SampledThread(key)
        }
    }

    /// Each process's stat and descriptors, in turn from where the last round stopped.
    private func readProcesses(clock: ProcClock, until deadline: UInt64) {
        let now = rs_clock_precise_ns()
        var next = cursors.process
        visitInTurn(count: processOrder.count, from: &next, until: deadline) { index in
            let pid = processOrder[index]
            guard var process = processes.removeValue(forKey: pid) else { return }
            let before = process.keptDescriptors
            let outcome = process.read(
                buffer, keep: kept + 2 <= keptDescriptorLimit, nowNanos: now, attachedRealtimeNanos: targets?.processes[pid] ?? 0,
                clock: clock)
            kept += process.keptDescriptors - before
            switch outcome {
            case .read:
                processes[pid] = process
            case .gone, .unreadable, .anotherProcess:
                // Its threads go too: what was read of them was of the process gone.
                kept -= process.keptDescriptors
                process.close()
                refusedProcesses[pid] = retryTime(after: outcome == .gone || outcome == .anotherProcess ? nil : now)
                if case let .unreadable(reason) = outcome { sayUnreadable(reason) }
                for key in Array(threads.keys) where key.pid == pid { dropThread(key) }
            }
        }
        cursors.process = next
    }

    /// Each thread's schedstat, in turn.
    private func readSchedstats(_ targets: ThreadHealthTargets, until deadline: UInt64) {
        var next = cursors.schedstat
        visitInTurn(count: targets.threads.count, from: &next, until: deadline) { index in
            read(targets.threads[index]) { thread, keep in thread.readSchedstat(buffer, keep: keep, nowNanos: rs_clock_precise_ns()) }
        }
        cursors.schedstat = next
    }

    /// The stat and status of each thread whose schedstat moved, in turn.
    private func readDetails(_ targets: ThreadHealthTargets, until deadline: UInt64) {
        var next = cursors.details
        visitInTurn(count: targets.threads.count, from: &next, until: deadline) { index in
            let key = targets.threads[index]
            guard threads[key]?.detailsDue == true else { return }
            read(key) { thread, keep in thread.readDetails(buffer, keep: keep, nowNanos: rs_clock_precise_ns()) }
        }
        cursors.details = next
    }

    /// Reads thread `key` (of a process read and not refused) with `body`; a thread gone or
    /// unreadable is let go and remembered until it is no longer a target.
    private func read(_ key: ThreadKey, _ body: (inout SampledThread, Bool) -> SampledThread.Reading) {
        guard processes[key.pid]?.health != nil, var thread = threads.removeValue(forKey: key) else { return }
        let before = thread.keptDescriptors
        let outcome = body(&thread, kept + 3 - before <= keptDescriptorLimit)
        kept += thread.keptDescriptors - before
        switch outcome {
        case .read:
            threads[key] = thread
        case .gone, .unreadable:
            kept -= thread.keptDescriptors
            thread.close()
            unreadable[key] = retryTime(after: outcome == .gone ? nil : rs_clock_precise_ns())
            if case let .unreadable(reason) = outcome { sayUnreadable(reason) }
        }
    }

    /// Calls `visit` with indexes from `cursor` on, wrapping, each once at most, until the
    /// thread's CPU clock passes `deadline` (looked at every few visits; one visit at least);
    /// leaves `cursor` where the next round begins.
    private func visitInTurn(count: Int, from cursor: inout Int, until deadline: UInt64, _ visit: (Int) -> Void) {
        guard count > 0 else { return }
        var index = cursor % count
        for visited in 0..<count {
            if visited > 0, visited % Self.readsPerClockLook == 0, Self.threadCPUNanos() >= deadline { break }
            visit(index)
            index = (index + 1) % count
        }
        cursor = index
    }

    /// When to try a target again that could not be read at `now`; never (while it stays a
    /// target) when `now` is nil: it is gone, or another process holds its pid.
    private func retryTime(after now: UInt64?) -> UInt64 { now.map { $0 &+ Self.retryNanos } ?? .max }

    private func dropThread(_ key: ThreadKey) {
        guard var thread = threads.removeValue(forKey: key) else { return }
        kept -= thread.keptDescriptors
        thread.close()
    }

    private func dropProcess(_ pid: Int32) {
        guard var process = processes.removeValue(forKey: pid) else { return }
        kept -= process.keptDescriptors
        process.close()
    }

    private func closeEverything() {
        for key in Array(threads.keys) { dropThread(key) }
        for pid in Array(processes.keys) { dropProcess(pid) }
        targets = nil
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
