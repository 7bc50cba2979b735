/// What the collector's thread sampler last read from `/proc` of the bots' lane threads and
/// processes: scheduling health, read at a low rate off the drain thread. Plain values, made once
/// per round and never changed: the snapshots served carry the latest (`Snapshot.threadHealth`).
package struct ThreadHealthSample: Sendable {
    /// Increases with every round; with the snapshot's generation, what the exporters' caches key on.
    package var sequence: UInt64
    /// CLOCK_REALTIME when the round ended.
    package var realtimeNanos: UInt64
    /// How often rounds begin (`--thread-sample-interval`).
    package var intervalNanos: UInt64
    /// Each lane thread read, by its process and its own id.
    package var threads: [ThreadKey: ThreadHealth]
    /// Each bot process read, by pid.
    package var processes: [Int32: ProcessHealth]
    package var figures: ThreadSamplerFigures
    /// Targets refused since the ring was first seen, by ring name and why (see `ThreadHealthRefusal`).
    package var refusals: [String: [ThreadHealthRefusal: UInt64]] = [:]

    package init(
        sequence: UInt64, realtimeNanos: UInt64, intervalNanos: UInt64, threads: [ThreadKey: ThreadHealth],
        processes: [Int32: ProcessHealth], figures: ThreadSamplerFigures
    ) {
        self.sequence = sequence
        self.realtimeNanos = realtimeNanos
        self.intervalNanos = intervalNanos
        self.threads = threads
        self.processes = processes
        self.figures = figures
    }

    /// The figures of the thread holding `lane` of `ring`, if it was read: its producer's pid and
    /// the lane's thread id name it. None for a ring whose producer is gone (the snapshot may be
    /// newer than the sample), whose process is not its file owner's (see `process(writing:)`),
    /// or for a thread that started after the lane's heartbeat: another thread at a reused id.
    package func thread(holding lane: LaneSnapshot, of ring: RingSnapshot) -> ThreadHealth? {
        guard lane.state == .active, lane.threadID > 0, process(writing: ring) != nil,
            let thread = threads[ThreadKey(pid: ring.producerPID, tid: lane.threadID)],
            !thread.startedAfter(heartbeatMonotonicNanos: lane.heartbeatMonotonicNanos)
        else { return nil }
        return thread
    }

    /// The figures of the process writing `ring`, if it was read and runs as the user that owns
    /// the ring's file: a file names its producer's pid itself, and another user's process is
    /// never shown under it, even when another ring's owner had it read.
    package func process(writing ring: RingSnapshot) -> ProcessHealth? {
        guard ring.producerAlive, ring.producerPID > 0, let owner = ring.owner, let process = processes[ring.producerPID],
            process.owner == owner
        else { return nil }
        return process
    }
}

/// Why the thread sampler refused a target a ring named: it reads only what the ring's owner owns.
package enum ThreadHealthRefusal: String, Sendable, CaseIterable, Comparable {
    /// The process (or the thread) runs as another user than the one owning the ring's file, or
    /// as more than one (a set-user-ID or set-group-ID program): its threads go with it.
    case otherOwner = "other_owner"
    /// The ring's producer pid is the id of a thread of another process.
    case notAProcess = "not_a_process"
    /// The lane's thread id is not a thread of the ring's producer process (it is one of another).
    case notItsThread = "not_its_thread"
    /// The thread at the lane's id started after the lane was last claimed or written: another
    /// thread than the one that claimed it, at a reused id.
    case startedAfterClaim = "started_after_claim"

    package static func < (left: Self, right: Self) -> Bool { left.rawValue < right.rawValue }
}

/// A thread: its process's id and its own (the kernel's tid).
package struct ThreadKey: Hashable, Sendable {
    package var pid: Int32
    package var tid: Int32

    package init(pid: Int32, tid: Int32) {
        self.pid = pid
        self.tid = tid
    }
}

/// One lane thread's scheduling as the kernel counts it: totals since the thread began, but
/// `migrations`, which the sampler counts itself.
package struct ThreadHealth: Sendable, Equatable {
    /// Time on a CPU, and time runnable but waiting for one (`/proc/PID/task/TID/schedstat`).
    package var cpuNanos: UInt64
    package var runQueueWaitNanos: UInt64
    /// Times the scheduler gave it a CPU (schedstat's third field).
    package var timeslices: UInt64
    /// `voluntary_ctxt_switches` (it blocked or slept) and `nonvoluntary_ctxt_switches` (it was
    /// preempted) of its `status`.
    package var voluntarySwitches: UInt64
    package var involuntarySwitches: UInt64
    /// The CPU it last ran on (field 39, `processor`, of its `stat`).
    package var lastCPU: Int32
    /// Reads of its `stat` that found it on another CPU than the read before: a lower bound on
    /// the kernel's migrations (two between reads count once), counted since the sampler began.
    package var migrations: UInt64
    /// The kernel's name for it (`comm`, field 2 of its `stat`): 15 bytes at most.
    package var kernelName: String
    /// Over the span between the last two reads of its schedstat (nil after the first): the
    /// fraction of one CPU it used, and the fraction of the span it waited for one.
    package var cpuRatio: Double?
    package var runQueueWaitRatio: Double?
    /// Over the span between the last two reads of its status (nil after the first): switches a second.
    package var voluntarySwitchesPerSecond: Double?
    package var involuntarySwitchesPerSecond: Double?
    /// No later than it started, in CLOCK_MONOTONIC nanoseconds (0: not known).
    package var startedMonotonicNanos: UInt64 = 0

    /// A thread's start read from `/proc` (clock ticks, 10 ms) and a lane's coarse heartbeat (a
    /// tick of the kernel's clock late at most, 1 to 10 ms) are each a little off: a thread that
    /// started less than this after the heartbeat may be the lane's.
    package static let claimSlackNanos: UInt64 = 50_000_000

    /// Whether it started after a lane's heartbeat (with the slack), so after the lane's claim:
    /// it is not the thread that claimed the lane.
    package func startedAfter(heartbeatMonotonicNanos heartbeat: UInt64) -> Bool {
        startedMonotonicNanos > heartbeat &+ Self.claimSlackNanos
    }

    package init(
        cpuNanos: UInt64, runQueueWaitNanos: UInt64, timeslices: UInt64, voluntarySwitches: UInt64,
        involuntarySwitches: UInt64, lastCPU: Int32, migrations: UInt64, kernelName: String
    ) {
        self.cpuNanos = cpuNanos
        self.runQueueWaitNanos = runQueueWaitNanos
        self.timeslices = timeslices
        self.voluntarySwitches = voluntarySwitches
        self.involuntarySwitches = involuntarySwitches
        self.lastCPU = lastCPU
        self.migrations = migrations
        self.kernelName = kernelName
    }
}

/// A bot's process as the kernel counts it (`/proc/PID/stat`, `/proc/PID/fd`).
package struct ProcessHealth: Sendable, Equatable {
    /// User and system CPU time of all its threads, those gone included (`utime + stime`).
    package var cpuSeconds: Double
    package var residentMemoryBytes: UInt64
    package var threads: Int
    /// Its open descriptors; nil when they may not be counted (another user's process).
    package var openFDs: Int?
    /// Page faults that had to read from disk (`majflt`).
    package var majorPageFaults: UInt64
    /// When it started, in Unix seconds.
    package var startTimeSeconds: Double
    /// Over the span between its last two reads (nil after the first): the CPUs it used.
    package var cpuRatio: Double?
    /// The user it runs as (real, effective, saved and filesystem ids all one): shown only under
    /// a ring whose file that user owns (nil: none).
    package var owner: UInt32?

    package init(
        cpuSeconds: Double, residentMemoryBytes: UInt64, threads: Int, openFDs: Int?, majorPageFaults: UInt64,
        startTimeSeconds: Double
    ) {
        self.cpuSeconds = cpuSeconds
        self.residentMemoryBytes = residentMemoryBytes
        self.threads = threads
        self.openFDs = openFDs
        self.majorPageFaults = majorPageFaults
        self.startTimeSeconds = startTimeSeconds
    }
}

/// What the sampler says of itself, so its cost and its gaps are seen.
package struct ThreadSamplerFigures: Sendable, Equatable {
    /// Lane threads and processes with figures in the sample.
    package var threads = 0
    package var processes = 0
    /// Lane threads named by live lanes that could not be read: gone from `/proc` (the thread or
    /// its process exited), not readable, or at a pid now held by another process.
    package var unreadable = 0
    /// Lane threads named by live lanes that the sampler refused to read: another user's, not a
    /// thread of the ring's producer, or started after the lane's claim (`ThreadHealthRefusal`).
    package var refused = 0
    /// Threads whose `stat` and `status` the round's CPU budget left for a later round (their
    /// context switches and last CPU are from an earlier read).
    package var deferred = 0
    /// The last round's time, and the sampler thread's CPU time since it began.
    package var roundSeconds: Double = 0, cpuSecondsTotal: Double = 0
    /// `/proc` files held open between rounds, and how many may be.
    package var keptDescriptors = 0
    package var keptDescriptorLimit = 0

    package init() {}
}
