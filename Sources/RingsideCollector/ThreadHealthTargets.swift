import Ringside
import RingsideSnapshot

/// What the thread sampler reads, from a published snapshot: the process of each ring whose
/// producer lives (a worker's too), and the threads holding its active lanes. A lane released, a
/// ring let go or its producer dead drops out of the next snapshot, and so out of the sampler.
struct ThreadHealthTargets: Equatable {
    /// Each process, with the earliest time its rings say it attached (0: unknown): it started before.
    private(set) var processes: [Int32: UInt64] = [:]
    /// Each thread, once, in the snapshot's order (rings by name, lanes by index).
    private(set) var threads: [ThreadKey] = []

    init(_ snapshot: Snapshot) {
        var seen = Set<ThreadKey>()
        for ring in snapshot.rings where ring.producerAlive && ring.producerPID > 0 {
            let pid = ring.producerPID
            let attached = ring.producerStartRealtimeNanos
            if let known = processes[pid] {
                processes[pid] = known == 0 || attached == 0 ? max(known, attached) : min(known, attached)
            } else {
                processes[pid] = attached
            }
            for lane in ring.lanes where lane.state == .active && lane.threadID > 0 {
                let key = ThreadKey(pid: pid, tid: lane.threadID)
                if seen.insert(key).inserted { threads.append(key) }
            }
        }
    }
}
