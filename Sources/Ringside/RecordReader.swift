// The format's reader (RECORDS, SAMPLING and EXEMPLARS in ringside.h), in one place: what a
// record says (its weight, its exemplar), whether it is sound, and its exemplar put back together.
// The collector's drain, ringside-dump check, the trace and the tests all read records through it.

import CRingside

/// One 32-byte record as stored in a lane (see `rs_record` in `ringside.h`).
package typealias RingRecord = rs_record

extension RingRecord {
    /// k: 2^k - 1 calls of its metric were gathered on its lane before it (SAMPLING in
    /// `ringside.h`); 0 unsampled.
    @inlinable package var weightLog2: Int { Int(flags) >> Int(RS_FLAG_WEIGHT_SHIFT) }
    /// The gathered calls whose bucket the record stands for: 2^k - 1 (they are counted from the
    /// lane's gather cells, not from the record, which is one call).
    package var gatheredBefore: UInt64 { (1 << UInt64(weightLog2)) - 1 }
    /// The calls the record stands for in its value's bucket: itself and those gathered before it.
    package var bucketWeight: UInt64 { 1 << UInt64(weightLog2) }
    /// Whether it is one of an exemplar's records (its bytes, not a value).
    @inlinable
    package var isExemplarPart: Bool { kind == UInt8(RS_KIND_EXEMPLAR.rawValue) }
    /// Whether it is a value whose exemplar's records follow it.
    @inlinable
    package var carriesExemplar: Bool { flags & UInt8(RS_FLAG_EXEMPLAR) != 0 }
}

/// Whether each record is one a producer writes, alone (`problem(with:at:metrics:)`) and in its
/// lane (`problem(with:at:lane:)`: each value's exemplar records follow it whole, as the collector
/// puts them back together). Says what is wrong in words, for `ringside-dump check`.
package struct RecordCheck {
    private var exemplars = ExemplarAssembler()
    /// The registry's metrics (nil where an entry cannot be read); nil when the registry cannot be
    /// read: the records' metrics are then not checked.
    private let metrics: [MetricDescriptor?]?

    package init(metrics: [MetricDescriptor?]?) { self.metrics = metrics }

    /// What is wrong with a record read at `cursor` of lane `lane`, or nil; records are given lane
    /// by lane in cursor order, as a reader drains them.
    package mutating func problem(with record: RingRecord, at cursor: UInt64, lane: Int) -> String? {
        if let problem = Self.problem(with: record, at: cursor, metrics: metrics) { return problem }
        let slot = "record \(cursor)"
        if record.isExemplarPart {
            switch exemplars.take(record, at: cursor, lane: lane) {
            case .part, .complete, .unwanted: return nil
            case .stray: return "\(slot): an exemplar's record with no value before it"
            case .malformed: return "\(slot): the exemplar ending here is malformed"
            }
        }
        var problem: String?
        if let value = exemplars.lastPendingCursor(lane: lane) {
            problem = "\(slot): the exemplar of the value at \(value) stops before its bytes do"
        }
        _ = exemplars.abandon(lane: lane)
        if record.kind == UInt8(RS_KIND_HISTOGRAM.rawValue), record.carriesExemplar {
            _ = exemplars.begin(record, at: cursor, lane: lane, slot: nil)
        }
        return problem
    }

    /// What is wrong with a record read at `cursor`, alone, or nil.
    package static func problem(with record: RingRecord, at cursor: UInt64, metrics: [MetricDescriptor?]?) -> String? {
        let slot = "record \(cursor)"
        if let metrics, Int(record.metric) >= metrics.count {
            guard record.sequence == cursor else { return "\(slot): its sequence is \(record.sequence)" }
            return "\(slot): metric index \(record.metric) is not registered (the registry has \(metrics.count))"
        }
        let metric = metrics?[Int(record.metric)]
        guard let fault = record.fault(at: cursor, registeredAs: metric?.kind) else { return nil }
        let registered = metric.map { "metric \($0.index) (\($0.name)) is a \($0.kind)" } ?? ""
        switch fault {
        case .sequence: return "\(slot): its sequence is \(record.sequence)"
        case .unknownKind: return "\(slot): unknown kind \(record.kind)"
        case .counterRecord: return "\(slot): a counter's record (counters live in cells and write none)"
        case .kindMismatch where record.isExemplarPart: return "\(slot): an exemplar's record, but \(registered)"
        case .kindMismatch: return "\(slot): kind \(MetricKind(rawValue: record.kind)!) but \(registered)"
        case .exemplarPartFlags: return "\(slot): an exemplar's record with flags or a length"
        case .unknownFlags: return "\(slot): unknown flags 0x\(String(record.flags, radix: 16))"
        case .histogramFlags: return "\(slot): a span, exemplar or weight flag on a \(MetricKind(rawValue: record.kind)!)"
        case .exemplarLength: return "\(slot): an exemplar of \(record.exemplar_length) bytes (1 to \(RS_EXEMPLAR_MAX))"
        case .lengthWithoutExemplar: return "\(slot): an exemplar length of \(record.exemplar_length) without the exemplar flag"
        }
    }
}

/// Why a record is one no producer writes (RECORDS in ringside.h), decided in one place for every
/// reader: the drain counts it invalid, `RecordCheck` says it in words. Deciding allocates nothing.
@usableFromInline
package enum RecordFault: Sendable, Equatable {
    /// Its sequence is not the cursor it was read at.
    case sequence
    /// A kind the format has none of.
    case unknownKind
    /// A counter's record: counters live in cells and write none.
    case counterRecord
    /// A kind other than its metric's, as registered.
    case kindMismatch
    /// An exemplar's record with flags or a length.
    case exemplarPartFlags
    /// Flags the format has none of.
    case unknownFlags
    /// A span, exemplar or weight flag on a record that is no histogram's.
    case histogramFlags
    /// An exemplar's length out of 1...RS_EXEMPLAR_MAX.
    case exemplarLength
    /// An exemplar's length without the exemplar flag.
    case lengthWithoutExemplar
}

extension RingRecord {
    /// What makes this record, read at `cursor`, one no producer writes, or nil when it is sound;
    /// `registered` is its metric's kind in the registry (nil: not checked against it). An
    /// exemplar's record is checked alone; whether it follows its value is `ExemplarAssembler`'s.
    /// Inlined: the drain asks it of every record (a call of its own cost the drain a fifth).
    @inlinable @inline(__always)
    package func fault(at cursor: UInt64, registeredAs registered: MetricKind?) -> RecordFault? {
        guard sequence == cursor else { return .sequence }
        if isExemplarPart {
            if let registered, registered != .histogram { return .kindMismatch }
            return flags == 0 && exemplar_length == 0 ? nil : .exemplarPartFlags
        }
        guard let kind = MetricKind(rawValue: kind) else { return .unknownKind }
        guard kind != .counter else { return .counterRecord }
        if let registered, registered != kind { return .kindMismatch }
        guard flags & ~UInt8(RS_FLAG_SPAN | RS_FLAG_EXEMPLAR | RS_FLAG_WEIGHT_MASK) == 0 else { return .unknownFlags }
        if flags != 0 && kind != .histogram { return .histogramFlags }
        if carriesExemplar {
            guard exemplar_length >= 1 && exemplar_length <= UInt16(RS_EXEMPLAR_MAX) else { return .exemplarLength }
        } else if exemplar_length != 0 {
            return .lengthWithoutExemplar
        }
        return nil
    }
}

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

    /// The cursor of the last record lane `lane`'s half-read exemplar took (its value's or a
    /// part's), if one is half read.
    package func lastPendingCursor(lane: Int) -> UInt64? { lane < pending.count ? pending[lane].map { $0.nextCursor &- 1 } : nil }

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
