import CRingside

/// Puts exemplars back together from their records (EXEMPLARS in ringside.h), lane by lane: a
/// value's record flagged with an exemplar, then its exemplar records, each carrying 16 of its
/// bytes. A drain may hand a group over in two batches (the lane wraps, or the drain stops at its
/// limit), so what is half read waits here for the rest. Nothing in the records is trusted: a part
/// out of place, a length out of range, or bytes that are not an exemplar are rejected.
package struct ExemplarAssembler {
    /// An exemplar whose value was read and whose bytes are still coming.
    package struct Pending {
        /// The series the value went to; nil when its exemplar is not wanted (a refused series).
        package var slot: Int?
        package var metric: UInt32
        package var value: UInt64
        package var timeNanos: UInt64
        package var length: Int
        package var nextCursor: UInt64
        package var bytes: [UInt8]
    }

    /// What a record of kind RS_KIND_EXEMPLAR did.
    package enum Outcome: Equatable {
        /// A part taken; more to come.
        case part
        /// The last part: the exemplar's labels, for the series in `slot`.
        case complete(slot: Int, value: UInt64, timeNanos: UInt64, labels: String)
        /// The last part of an exemplar nobody wants (its series was refused).
        case unwanted
        /// A part with no exemplar begun, or out of place: invalid.
        case stray
        /// The bytes, once whole, are no exemplar: its parts are invalid.
        case malformed(parts: Int)
    }

    package static let exemplarKind = UInt8(RS_KIND_EXEMPLAR.rawValue)
    package static let exemplarFlag = UInt8(RS_FLAG_EXEMPLAR)
    private static let bytesPerPart = Int(RS_EXEMPLAR_BYTES_PER_RECORD)

    /// By lane.
    private var pending: [Pending?] = []

    package init() {}

    /// Whether lane `lane` has an exemplar half read.
    package func isPending(lane: Int) -> Bool { lane < pending.count && pending[lane] != nil }

    /// The parts an exemplar of `length` bytes takes.
    package static func parts(ofLength length: Int) -> Int { (length + bytesPerPart - 1) / bytesPerPart }

    /// A value's record with the exemplar flag, read at `cursor`, whose value went to `slot`.
    /// - Returns: whether its length is one a producer writes (else no parts are expected, and
    ///   the caller counts the record's exemplar as invalid).
    package mutating func begin(_ record: RingRecord, at cursor: UInt64, lane: Int, slot: Int?) -> Bool {
        let length = Int(record.exemplar_length)
        guard (1...Int(RS_EXEMPLAR_MAX)).contains(length) else { return false }
        if pending.count <= lane { pending += Array(repeating: nil, count: lane + 1 - pending.count) }
        var bytes = pending[lane]?.bytes ?? []
        bytes.removeAll(keepingCapacity: true)
        pending[lane] = Pending(
            slot: slot, metric: record.metric, value: record.value, timeNanos: record.timestamp_ns, length: length,
            nextCursor: cursor &+ 1, bytes: bytes)
        return true
    }

    /// Forgets lane `lane`'s half-read exemplar: another record came before its parts did.
    /// - Returns: whether there was one.
    package mutating func abandon(lane: Int) -> Bool {
        guard isPending(lane: lane) else { return false }
        pending[lane] = nil
        return true
    }

    /// An exemplar record read at `cursor` in lane `lane`.
    package mutating func take(_ record: RingRecord, at cursor: UInt64, lane: Int) -> Outcome {
        guard lane < pending.count, var current = pending[lane] else { return .stray }
        guard record.sequence == cursor, cursor == current.nextCursor, record.metric == current.metric,
            record.flags == 0, record.exemplar_length == 0
        else {
            pending[lane] = nil
            return .stray
        }
        withUnsafeBytes(of: record.timestamp_ns) { current.bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: record.value) { current.bytes.append(contentsOf: $0) }
        current.nextCursor = cursor &+ 1
        guard current.bytes.count >= current.length else {
            pending[lane] = current
            return .part
        }
        pending[lane] = nil
        let parts = Self.parts(ofLength: current.length)
        let bytes = current.bytes.prefix(current.length)
        // The producer checked it; a reader checks again: the file is not trusted.
        let checked = bytes.withUnsafeBytes { raw in
            rs_exemplar_check(raw.baseAddress?.assumingMemoryBound(to: CChar.self), raw.count, nil) == 0
        }
        guard checked, current.bytes[current.length...].allSatisfy({ $0 == 0 }),
            let labels = String(validating: bytes, as: UTF8.self)
        else { return .malformed(parts: parts) }
        guard let slot = current.slot else { return .unwanted }
        return .complete(slot: slot, value: current.value, timeNanos: current.timeNanos, labels: labels)
    }
}
