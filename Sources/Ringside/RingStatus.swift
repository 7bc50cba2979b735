// What a reader sees of a bot file now: each lane's holder and cursors, and the file's figures,
// its lanes' added up. `MappedRingFile.status` reads them; the tools and the collector show them.

import CRingside

/// Who holds a lane (`state` in `ringside.h`). Public for the collector's export snapshots.
package enum LaneState: Sendable, Equatable, CustomStringConvertible {
    /// Allocated and never claimed yet.
    case unused
    /// A live thread writes it.
    case active
    /// Its thread exited: the next thread that needs a lane takes it over.
    case retired
    /// A value the format does not have.
    case invalid(UInt32)

    init(_ raw: UInt32) {
        switch raw {
        case RS_LANE_UNUSED: self = .unused
        case RS_LANE_ACTIVE: self = .active
        case RS_LANE_RETIRED: self = .retired
        default: self = .invalid(raw)
        }
    }

    public var description: String {
        switch self {
        case .unused: return "unused"
        case .active: return "active"
        case .retired: return "retired"
        case let .invalid(raw): return "invalid(\(raw))"
        }
    }
}

/// One lane (one thread's ring) as a reader sees it now; cursors are checked before they are shown.
package struct LaneStatus: Sendable, Equatable {
    package let index: Int
    package let state: LaneState
    /// The kernel thread id holding it (0 when retired).
    package let ownerTID: Int32
    /// The name its holder gave its thread (THREAD NAMES in ringside.h); "" when none.
    package let threadName: String
    /// Threads that have held it.
    package let claims: UInt32
    /// Records published ever; also the producer's cursor.
    package let writeCursor: UInt64
    /// Records consumed ever; also the consumer's cursor.
    package let readCursor: UInt64
    /// Records dropped because the lane was full.
    package let dropped: UInt64
    /// CLOCK_MONOTONIC_COARSE of the lane's last record (or claim).
    package let heartbeatMonotonicNanos: UInt64
    /// Histogram calls gathered rather than written while the lane was sampled (SAMPLING in ringside.h).
    package var gathered: UInt64 = 0

    /// Records published and not yet consumed.
    package var backlog: UInt64 { writeCursor - readCursor }
}

/// A bot file's state as a reader sees it now; the bot's figures are its lanes' added up.
///
/// Exactly, from one status: records attempted (after sampling) == `writeCursor + dropped`, and
/// `writeCursor == readCursor + backlog`; so attempted == consumed + dropped + backlog.
package struct RingStatus: Sendable, Equatable {
    package let name: String
    package let path: String
    package let formatVersion: UInt32
    /// Records each lane holds.
    package let capacity: UInt64
    /// Metrics the registry holds.
    package let maxMetrics: Int
    /// Lanes the file may hold: threads recording at once.
    package let maxLanes: Int
    /// The file's size with its lanes now.
    package let fileSize: Int
    /// CLOCK_REALTIME and CLOCK_MONOTONIC when the file was created, to turn record times into wall time.
    package let createdRealtimeNanos: UInt64
    package let createdMonotonicNanos: UInt64
    /// Records published ever, in every lane.
    package let writeCursor: UInt64
    /// Records consumed ever, in every lane.
    package let readCursor: UInt64
    /// Records dropped: by full lanes, and by threads that found no lane (`unlanedDropped`).
    package let dropped: UInt64
    /// Of `dropped`, the records of threads that found every lane taken.
    package let unlanedDropped: UInt64
    /// Times a thread found every lane taken.
    package let lanesExhausted: UInt64
    /// A bot's own file: processes refused a worker file, every one held by a live worker (see
    /// WORKERS in ringside.h).
    package let workersRefused: UInt64
    package let metricCount: Int
    package let producerPID: Int32
    /// Whether a live process holds the producer lock.
    package let producerAlive: Bool
    package let producerStartRealtimeNanos: UInt64
    /// CLOCK_MONOTONIC_COARSE of the bot's last record in any lane (or its last attach or claim).
    package let heartbeatMonotonicNanos: UInt64
    package let producerAttaches: UInt32
    package let consumerPID: Int32
    package let consumerAlive: Bool
    /// Records in a lane below which its histograms are never sampled (SAMPLING in ringside.h), as
    /// the attached process chose; 0: never sampled.
    package let sampleAbove: UInt32
    /// The longest the consumer said it leaves a filling lane undrained; 0: not said.
    package var drainIntervalNanos: UInt64 = 0
    /// Whether the consumer said it reads weighted records: the producer samples only then.
    package let consumerReadsWeights: Bool
    /// Each lane, by index.
    package let lanes: [LaneStatus]
    /// Histogram calls gathered in every lane.
    package var gathered: UInt64 { lanes.reduce(0) { $0 &+ $1.gathered } }

    /// Records published and not yet consumed, in every lane. The totals may each wrap (a lane's
    /// cursors are free-running); their difference, taken modulo 2^64, is still the lanes' sum.
    package var backlog: UInt64 { writeCursor &- readCursor }

    /// Wall-clock nanoseconds of a record's (monotonic) timestamp.
    package func realtimeNanos(ofMonotonic timestamp: UInt64) -> UInt64 {
        createdRealtimeNanos &+ (timestamp &- createdMonotonicNanos)
    }
}
