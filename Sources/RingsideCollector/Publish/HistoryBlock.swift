import Ringside

/// A point's numbers besides its second, by kind (see `HistoryStore`); those a kind does not
/// use stay 0.
typealias HistoryValues = InlineArray<5, UInt64>

/// Up to 64 consecutive seconds of one series' points, written compactly: which seconds have a
/// point (`present`), which of those points differ from the point before them (`changed`), and,
/// for those only, what changed, in the byte stream the series keeps (a block knows its length
/// in it, `byteCount`: a series' blocks share one array, the cheapest for an idle series).
///
/// A changed point is written as a nibble per column of its kind, two to a byte, then the bytes
/// they announce, column by column. What is written of a column is its *residual*, how it differs
/// from what was expected of it:
///
/// - integers (a histogram's columns, a counter's): the wrapping difference from the point
///   before (a counter's total: from the total before plus this point's increase, so a counter
///   counting steadily writes nothing), zig-zagged so that a fall is as small as a rise; a null
///   (`historyNull`, `UInt64.max`) next to a value wraps to a small difference too;
/// - a gauge's doubles: their bits XOR those of the point before (0 when they stay).
///
/// A nibble of 0: the column is as expected; 1...8: the residual's low bytes, that many; 9...12:
/// its low 32 bits are 0 (a gauge's whole number moving a little), and 1...4 bytes above them.
/// So a point takes at most `maxPointBytes`: 43 bytes for a histogram, whose second and 5
/// numbers took 44 before these blocks. The first point of a block is written against the
/// kind's `empty` point, so a block is read without those before it and let go of whole.
struct HistoryBlock {
    /// Seconds a block covers; its first is a multiple of it.
    static let seconds: Int64 = 64

    /// Bit i: the block's second i has a point.
    private(set) var present: UInt64 = 0
    /// Bit i: that point is not what the one before it (for the first, `empty`) foretells: only those are written.
    private(set) var changed: UInt64 = 0
    /// The block's first second over `seconds` (a Unix second fits in 32 bits, so this does).
    let index: UInt32
    /// The length of its points in the series' byte stream.
    private(set) var byteCount: UInt32 = 0

    init(containing second: Int64) {
        index = UInt32(second / Self.seconds)
    }

    /// Its first second.
    var start: Int64 { Int64(index) * Self.seconds }

    /// The point a new second starts from, and what a block's first point is written against:
    /// no count and null quantiles (histograms), nothing (counters), null values (gauges).
    static func empty(_ kind: MetricKind) -> HistoryValues {
        switch kind {
        case .histogram: [0, historyNull, historyNull, historyNull, historyNull]
        case .counter: [0, 0, 0, 0, 0]
        case .gauge: [historyNullDouble, historyNullDouble, historyNullDouble, 0, 0]
        }
    }

    /// The columns a kind uses, first ones first.
    static func columns(_ kind: MetricKind) -> Int {
        switch kind {
        case .histogram: 5
        case .counter: 2
        case .gauge: 3
        }
    }

    /// The most bytes one point of `kind` takes: its nibbles and 8 bytes a column.
    static func maxPointBytes(_ kind: MetricKind) -> Int { nibbleBytes(kind) + 8 * columns(kind) }

    /// The bytes of a written point's nibbles, two to a byte.
    private static func nibbleBytes(_ kind: MetricKind) -> Int { (columns(kind) + 1) / 2 }

    /// Writes `point`, at `second` (in this block, after its last point), against `previous`
    /// (the block's last point, or `empty` for its first), at the end of `bytes`.
    mutating func append(
        _ point: HistoryValues, at second: Int64, after previous: HistoryValues, kind: MetricKind, to bytes: inout [UInt8]
    ) {
        let bit = UInt64(1) << UInt64(second - start)
        present |= bit
        let columns = Self.columns(kind)
        var residuals = HistoryValues(repeating: 0)
        var any: UInt64 = 0
        for column in 0..<columns {
            residuals[column] = Self.residual(point[column], expected: Self.expected(column, previous: previous, point: point, kind), kind)
            any |= residuals[column]
        }
        guard any != 0 else { return }
        changed |= bit
        var nibbles = InlineArray<5, UInt8>(repeating: 0)
        var size = Self.nibbleBytes(kind)
        for column in 0..<columns {
            nibbles[column] = Self.nibble(residuals[column])
            size += Self.length(nibbles[column])
        }
        Self.makeRoom(for: size, in: &bytes, kind: kind)
        let headerAt = bytes.count
        for _ in 0..<Self.nibbleBytes(kind) { bytes.append(0) }
        for column in 0..<columns {
            let nibble = nibbles[column]
            bytes[headerAt + column / 2] |= nibble << (4 * UInt8(column % 2))
            var value = nibble > 8 ? residuals[column] >> 32 : residuals[column]
            for _ in 0..<Self.length(nibble) {
                bytes.append(UInt8(truncatingIfNeeded: value))
                value >>= 8
            }
        }
        byteCount += UInt32(size)
    }

    /// Room for `count` more bytes at the end of a series' stream: it grows by an eighth (at most
    /// a block's points) past what it needs, where Swift's doubling would leave up to half empty.
    static func makeRoom(for count: Int, in bytes: inout [UInt8], kind: MetricKind) {
        guard bytes.count + count > bytes.capacity else { return }
        resize(&bytes, to: bytes.count + count + slack(bytes.count, kind: kind))
    }

    /// The room a stream of `count` bytes is given past what it needs.
    static func slack(_ count: Int, kind: MetricKind) -> Int { min(count / 8, Int(seconds) * maxPointBytes(kind)) }

    /// `bytes` again, in an array of `capacity` (rounded up by the allocator).
    static func resize(_ bytes: inout [UInt8], to capacity: Int) {
        var resized: [UInt8] = []
        resized.reserveCapacity(capacity)
        resized.append(contentsOf: bytes)
        bytes = resized
    }

    /// Calls `body` with each of its points in order, its second and its numbers; `bytes[offset...]`
    /// holds its points. Stops when `body` returns false, and returns false then.
    func forEachPoint(kind: MetricKind, bytes: [UInt8], offset: Int, _ body: (Int64, HistoryValues) -> Bool) -> Bool {
        let columns = Self.columns(kind)
        var point = Self.empty(kind)
        var cursor = offset
        var left = present
        while left != 0 {
            let bit = left.trailingZeroBitCount
            left &= left - 1
            // A point not written is as expected: the same, but a counter's total, which grows by the increase.
            let written = changed & (UInt64(1) << UInt64(bit)) != 0
            let headerAt = cursor
            if written { cursor += Self.nibbleBytes(kind) }
            let previous = point
            for column in 0..<columns {
                let nibble = written ? bytes[headerAt + column / 2] >> (4 * UInt8(column % 2)) & 0xF : 0
                var residual: UInt64 = 0
                for byte in 0..<Self.length(nibble) {
                    residual |= UInt64(bytes[cursor]) << UInt64(8 * byte)
                    cursor += 1
                }
                if nibble > 8 { residual <<= 32 }
                // `point` has this point's columns before `column`: a counter's total wants its increase.
                point[column] = Self.value(residual, expected: Self.expected(column, previous: previous, point: point, kind), kind)
            }
            guard body(start + Int64(bit), point) else { return false }
        }
        return true
    }

    /// What a column is expected to be: as it was, but a counter's total, which grows by the increase.
    private static func expected(_ column: Int, previous: HistoryValues, point: HistoryValues, _ kind: MetricKind) -> UInt64 {
        kind == .counter && column == 1 ? previous[1] &+ point[0] : previous[column]
    }

    private static func residual(_ value: UInt64, expected: UInt64, _ kind: MetricKind) -> UInt64 {
        if kind == .gauge { return value ^ expected }
        let difference = Int64(bitPattern: value &- expected)
        return UInt64(bitPattern: (difference << 1) ^ (difference >> 63))  // zig-zag: -1 is 1, 1 is 2
    }

    private static func value(_ residual: UInt64, expected: UInt64, _ kind: MetricKind) -> UInt64 {
        if kind == .gauge { return residual ^ expected }
        let difference = Int64(bitPattern: residual >> 1) ^ -Int64(bitPattern: residual & 1)
        return expected &+ UInt64(bitPattern: difference)
    }

    /// 0 for nothing; the bytes a residual needs; or 8 more than those it needs above 32 zero bits.
    private static func nibble(_ residual: UInt64) -> UInt8 {
        guard residual != 0 else { return 0 }
        let shifted = residual & 0xFFFF_FFFF == 0
        let significant = shifted ? residual >> 32 : residual
        let bytes = UInt8((64 - significant.leadingZeroBitCount + 7) / 8)
        return shifted ? 8 + bytes : bytes
    }

    /// The bytes a nibble announces.
    private static func length(_ nibble: UInt8) -> Int { Int(nibble > 8 ? nibble - 8 : nibble) }
}
