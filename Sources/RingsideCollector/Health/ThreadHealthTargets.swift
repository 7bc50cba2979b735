import Ringside
import RingsideSnapshot

/// What the thread sampler reads, from a published snapshot: the process of each ring whose
/// producer lives (a worker's too), and the threads holding its active lanes. A lane released, a
/// ring let go or its producer dead drops out of the next snapshot, and so out of the sampler.
///
/// A ring names its producer's pid and its lanes' thread ids itself, so each target keeps who
/// names it: the rings, their files' owners, and each lane's heartbeat, which the sampler checks
/// what it finds at those ids against.
struct ThreadHealthTargets {
    /// Which processes and threads, named by which rings: equal for two snapshots that name the
    /// same, whatever their lanes' heartbeats.
    struct Names: Equatable {
        /// Each process, with the earliest time its rings say it attached (0: unknown): it started before.
        var processes: [Int32: UInt64] = [:]
        /// Each thread, once, in the snapshot's order (rings by name, lanes by index).
        var threads: [ThreadKey] = []
        var rings: [Ring] = []
        /// Every ring of the snapshot, live or not, and its bot: what the sampler counts of one lasts as long.
        var allRings: [String: String] = [:]
    }

    /// A live ring with a producer pid, and its active lanes' threads.
    struct Ring: Equatable {
        var name: String
        var bot: String
        /// The user that owns its file (nil: not known, and so nothing it names is read).
        var owner: UInt32?
        var pid: Int32
        var lanes: [Lane]
    }

    struct Lane: Equatable {
        var index: Int
        var tid: Int32
    }

    /// A ring's lane: its index in `names.rings`, and in that ring's `lanes`.
    struct LaneRef: Hashable {
        var ring, lane: Int
    }

    private(set) var names = Names()
    /// Each lane's heartbeat (CLOCK_MONOTONIC_COARSE of its last claim or record), as `names.rings`
    /// holds the lanes: the thread that claimed it started before.
    private(set) var heartbeats: [[UInt64]] = []
    /// The rings naming each process, and the lanes naming each thread.
    private(set) var ringsNaming: [Int32: [Int]] = [:]
    private(set) var lanesNaming: [ThreadKey: [LaneRef]] = [:]

    var processes: [Int32: UInt64] { names.processes }
    var threads: [ThreadKey] { names.threads }
    var rings: [Ring] { names.rings }

    init(_ snapshot: Snapshot) {
        var seen = Set<ThreadKey>()
        for ring in snapshot.rings {
            names.allRings[ring.name] = ring.bot
            guard ring.producerAlive, ring.producerPID > 0 else { continue }
            let pid = ring.producerPID
            let attached = ring.producerStartRealtimeNanos
            if let known = names.processes[pid] {
                names.processes[pid] = known == 0 || attached == 0 ? max(known, attached) : min(known, attached)
            } else {
                names.processes[pid] = attached
            }
            let index = names.rings.count
            ringsNaming[pid, default: []].append(index)
            var target = Ring(name: ring.name, bot: ring.bot, owner: ring.owner, pid: pid, lanes: [])
            var laneHeartbeats: [UInt64] = []
            for lane in ring.lanes where lane.state == .active && lane.threadID > 0 {
                let key = ThreadKey(pid: pid, tid: lane.threadID)
                if seen.insert(key).inserted { names.threads.append(key) }
                lanesNaming[key, default: []].append(LaneRef(ring: index, lane: target.lanes.count))
                target.lanes.append(Lane(index: lane.index, tid: lane.threadID))
                laneHeartbeats.append(lane.heartbeatMonotonicNanos)
            }
            names.rings.append(target)
            heartbeats.append(laneHeartbeats)
        }
    }

    /// The owners of the rings naming process `pid`.
    func owners(ofProcess pid: Int32) -> [UInt32?] { (ringsNaming[pid] ?? []).map { names.rings[$0].owner } }

    /// Whether a lane of a ring that `owner` owns names thread `key`.
    func isNamed(_ key: ThreadKey, byRingOf owner: UInt32) -> Bool {
        (lanesNaming[key] ?? []).contains { names.rings[$0.ring].owner == owner }
    }

    func heartbeat(_ lane: LaneRef) -> UInt64 { heartbeats[lane.ring][lane.lane] }
}
