import RingsideSnapshot

/// A lane thread the sampler follows: its `schedstat`, `stat` and `status` files, and what it
/// keeps of it between reads (the last figures and when they were read, for rates; the last CPU,
/// for migrations). Touched by the sampler only; a class, so that a round reads it in place.
final class SampledThread {
    let key: ThreadKey
    /// Its process, read before it in each round: its threads are read once it has been.
    let process: SampledProcess
    /// Let go of (its files closed): no longer read.
    private(set) var isClosed = false
    private var schedstat: ProcFile
    private var stat: ProcFile
    private var status: ProcFile
    /// The last figures, once all three files were read (nil before: nothing is shown).
    private(set) var health: ThreadHealth?
    private var sched: (value: SchedStat, nanos: UInt64)?
    private var switches: (value: ContextSwitches, nanos: UInt64)?
    private var started: (ticks: UInt64, name: String, cpu: Int32)?
    /// Whether `stat` and `status` are to be read: its schedstat was read, and moved since they last
    /// were (a thread whose schedstat stands still was neither switched in nor out, so its
    /// switches and its CPU stand still too).
    private(set) var detailsDue = false

    init(_ key: ThreadKey, of process: SampledProcess) {
        self.key = key
        self.process = process
        let directory = "/proc/\(key.pid)/task/\(key.tid)/"
        schedstat = ProcFile(directory + "schedstat")
        stat = ProcFile(directory + "stat")
        status = ProcFile(directory + "status")
    }

    /// Whether a file of it was ever read: a thread id not found at its first read may be no
    /// thread of its process at all.
    private(set) var wasRead = false
    /// Who it ran as at its last read of `status`.
    private(set) var credentials: Credentials?

    /// How a read went: figures, or the thread gone from `/proc`, or a file that could not be read
    /// or made no sense (said for people), or a thread that runs as another user than its process
    /// was found to (its figures are not kept).
    enum Reading: Equatable {
        case read, gone
        case unreadable(String)
        case otherOwner
    }

    var keptDescriptors: Int { [schedstat.isKept, stat.isKept, status.isKept].count { $0 } }
    var schedstatKept: Bool { schedstat.isKept }
    var detailsKept: Bool { stat.isKept || status.isKept }

    /// Reads `schedstat`: the time on a CPU and waiting for one. `keep`: keep its descriptor.
    func readSchedstat(_ buffer: UnsafeMutableRawBufferPointer, keep: Bool, nowNanos now: UInt64) -> Reading {
        let text: ArraySlice<UInt8>
        switch Self.text(of: &schedstat, buffer, keep: keep) {
        case let .bytes(bytes): text = bytes
        case let .failed(reading): return reading
        }
        guard let value = SchedStat(text) else { return .unreadable("\(schedstat.path): not run, wait and timeslices") }
        wasRead = true
        if let previous = sched?.value,
            value.runNanos < previous.runNanos || value.waitNanos < previous.waitNanos || value.timeslices < previous.timeslices
        {
            // Totals never go back for one thread: this is another at the same id (read by path).
            restart()
        }
        if let previous = sched, now > previous.nanos {
            let span = Double(now - previous.nanos)
            health?.cpuRatio = Double(value.runNanos - previous.value.runNanos) / span
            health?.runQueueWaitRatio = Double(value.waitNanos - previous.value.waitNanos) / span
            if previous.value == value, switches != nil {
                // Neither switched in nor out over the span: no switch of either kind, exactly.
                health?.voluntarySwitchesPerSecond = 0
                health?.involuntarySwitchesPerSecond = 0
            }
        }
        if sched?.value != value { detailsDue = true }
        sched = (value, now)
        health?.cpuNanos = value.runNanos
        health?.runQueueWaitNanos = value.waitNanos
        health?.timeslices = value.timeslices
        return .read
    }

    /// Reads `stat` (its last CPU, its start) and `status` (its context switches, and who it runs
    /// as: its process's credentials, else nothing is kept), after `readSchedstat`. `keep`: keep
    /// their descriptors. `startClock` turns its start into CLOCK_MONOTONIC nanoseconds.
    func readDetails(
        _ buffer: UnsafeMutableRawBufferPointer, keep: Bool, nowNanos now: UInt64, startClock: ThreadStartClock
    ) -> Reading {
        let threadStat: ThreadStat
        switch Self.text(of: &stat, buffer, keep: keep) {
        case let .bytes(text):
            guard let parsed = ThreadStat(text) else { return .unreadable("\(stat.path): not a stat line") }
            threadStat = parsed
        case let .failed(reading): return reading
        }
        let counts: ContextSwitches
        switch Self.text(of: &status, buffer, keep: keep) {
        case let .bytes(text):
            guard let parsed = ContextSwitches(status: text) else { return .unreadable("\(status.path): no context switches") }
            guard let identity = TaskIdentity(status: text) else { return .unreadable("\(status.path): no Tgid, Uid and Gid") }
            // A thread's ids are its own: one may change them alone (a raw setuid system call).
            credentials = identity.credentials
            guard identity.credentials == process.credentials else { return .otherOwner }
            counts = parsed
        case let .failed(reading): return reading
        }
        if let started, started.ticks != threadStat.startTicks { restart() }  // another thread at this id
        guard let sched = sched?.value else { return .read }  // nothing is due before its schedstat is read
        var health =
            health
            ?? ThreadHealth(
                cpuNanos: sched.runNanos, runQueueWaitNanos: sched.waitNanos, timeslices: sched.timeslices, voluntarySwitches: 0,
                involuntarySwitches: 0, lastCPU: threadStat.processor, migrations: 0, kernelName: threadStat.name)
        if let started, started.cpu != threadStat.processor { health.migrations += 1 }
        if let previous = switches, now > previous.nanos, counts.voluntary >= previous.value.voluntary,
            counts.involuntary >= previous.value.involuntary
        {
            let seconds = Double(now - previous.nanos) / 1e9
            health.voluntarySwitchesPerSecond = Double(counts.voluntary - previous.value.voluntary) / seconds
            health.involuntarySwitchesPerSecond = Double(counts.involuntary - previous.value.involuntary) / seconds
        }
        health.voluntarySwitches = counts.voluntary
        health.involuntarySwitches = counts.involuntary
        health.lastCPU = threadStat.processor
        health.kernelName = threadStat.name
        health.startedMonotonicNanos = startClock.monotonicNanos(ofTicks: threadStat.startTicks)
        self.health = health
        switches = (counts, now)
        started = (threadStat.startTicks, threadStat.name, threadStat.processor)
        detailsDue = false
        return .read
    }

    /// Closes its files: it is no longer read.
    func close() {
        isClosed = true
        schedstat.close()
        stat.close()
        status.close()
    }

    /// Forgets what was read of it: the thread at its id is another one.
    private func restart() {
        health = nil
        sched = nil
        switches = nil
        started = nil
        detailsDue = false  // due again once its schedstat is read
    }

    /// A file's bytes, or why there are none.
    private enum Text {
        case bytes(ArraySlice<UInt8>)
        case failed(Reading)
    }

    private static func text(of file: inout ProcFile, _ buffer: UnsafeMutableRawBufferPointer, keep: Bool) -> Text {
        switch file.read(into: buffer, keep: keep) {
        case let .read(count): return .bytes(Array(UnsafeRawBufferPointer(rebasing: buffer[..<count]))[...])
        case .gone: return .failed(.gone)
        case let .failed(reason): return .failed(.unreadable(reason))
        }
    }
}
