import RingsideSnapshot

/// What the thread sampler follows: its processes and threads, by key and in the order rounds
/// take them (rebuilt when `orderStale`), and the descriptors they keep open.
struct FollowedTasks {
    var processes: [Int32: SampledProcess] = [:]
    var threads: [ThreadKey: SampledThread] = [:]
    var processOrder: [SampledProcess] = []
    var threadOrder: [SampledThread] = []
    var orderStale = true
    /// Descriptors kept open over every process and thread.
    var kept = 0
}

/// Targets the thread sampler set aside, and when to try them again.
struct SetAsideTargets {
    /// Targets that could not be read: a thread or process gone, or another process at the pid,
    /// never while it stays a target; one unreadable, after `ThreadHealthSampler.retryNanos`.
    var unreadable: [ThreadKey: UInt64] = [:]
    var unreadableProcesses: [Int32: UInt64] = [:]
    /// Targets refused (not their rings' owner's, not a thread of the process, a reused id), and
    /// when to look again (a process may change users, a lane be claimed anew).
    var refusedThreads: [ThreadKey: UInt64] = [:]
    var refusedProcesses: [Int32: UInt64] = [:]
    /// The earliest of those times.
    var nextRetryNanos = UInt64.max
    /// Whether the log said that a file could not be read (once: thousands of threads may not be).
    var loggedUnreadable = false
}

/// What the thread sampler refused: each target once while it stays one; the counts by ring,
/// while the ring is in the snapshots; the bots and reasons the log has said; and the user each
/// process's rings were last judged for, until the targets change.
struct RefusalLedger {
    /// A target refused: a ring's process (`lane` nil) or a lane's thread, and why.
    struct Refusal: Hashable {
        struct Target: Hashable {
            var ring: String
            var pid: Int32
            var lane: Int?
            var tid: Int32

            init(_ ring: ThreadHealthTargets.Ring, lane: ThreadHealthTargets.Lane?) {
                self.ring = ring.name
                pid = ring.pid
                self.lane = lane?.index
                tid = lane?.tid ?? 0
            }
        }
        var target: Target
        var reason: ThreadHealthRefusal
    }

    struct LoggedRefusal: Hashable {
        var bot: String
        var reason: ThreadHealthRefusal
    }

    var refusals = Set<Refusal>()
    var totals: [String: [ThreadHealthRefusal: UInt64]] = [:]
    var logged = Set<LoggedRefusal>()
    var judged: [Int32: UInt32] = [:]
}

/// The thread sampler's rounds so far, and the CPU time they took.
struct RoundTally {
    var rounds: UInt64 = 0
    var cpuNanos: UInt64 = 0
}
