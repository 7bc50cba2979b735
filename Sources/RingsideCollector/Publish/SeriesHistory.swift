import Ringside
import RingsideSnapshot

/// The null of a point's integer fields.
let historyNull = UInt64.max
/// The null of a gauge's fields (non-finite: written as null).
let historyNullDouble = Double.nan.bitPattern

/// One series' points: the newest as numbers (the snapshots of its second still merge into it),
/// the older ones in `HistoryBlock`s of 64 seconds over one byte stream, a block let go of when
/// all its seconds are older than the retention. What a series holds grows with what changes:
/// an idle one, a block's two bitmaps (24 bytes a minute or so; a counter's or gauge's total or
/// value once a block besides), a busy one what moved, at most `HistoryBlock.maxPointBytes` a second.
struct SeriesHistory {
    private(set) var id: UInt64
    private(set) var ring: String
    private(set) var metric: MetricDescriptor
    /// Where the series was in the last snapshot it was in: where the store looks first.
    var position: Int
    private let retentionSeconds: Int64
    /// The all-time total at the last snapshot: the next increase counts from it.
    private var baseline: UInt128 = 0
    private(set) var lastSecond: Int64 = 0
    private(set) var seenGeneration: UInt64 = 0
    /// The point of `lastSecond` (once there is one).
    private var newest: HistoryValues
    /// The last point written into the last block: the next is written against it.
    private var written: HistoryValues
    private var blocks: [HistoryBlock] = []
    /// The blocks' points, block after block (see `HistoryBlock`).
    private var bytes: [UInt8] = []

    init(_ series: SeriesSnapshot, position: Int, retentionSeconds: Int) {
        id = series.id
        ring = series.ring
        metric = series.metric
        self.position = position
        self.retentionSeconds = Int64(retentionSeconds)
        newest = HistoryBlock.empty(series.metric.kind)
        written = newest
    }

    /// The memory its points take: its arrays as allocated, each with Swift's 32-byte header.
    var heldBytes: Int {
        (blocks.capacity == 0 ? 0 : 32 + blocks.capacity * MemoryLayout<HistoryBlock>.stride)
            + (bytes.capacity == 0 ? 0 : 32 + bytes.capacity)
    }

    /// The most `heldBytes` may be with `retentionSeconds` of points that each change every
    /// column every second: the blocks hold up to 63 seconds more than the retention, and the
    /// stream has room for up to a block's points more than it holds (`HistoryBlock.makeRoom`),
    /// and for the allocator's rounding.
    static func maxHeldBytes(retentionSeconds: Int, kind: MetricKind) -> Int {
        64 + maxBlocks(retentionSeconds) * MemoryLayout<HistoryBlock>.stride
            + (retentionSeconds + 2 * Int(HistoryBlock.seconds)) * HistoryBlock.maxPointBytes(kind) + 16
    }

    /// Blocks a series may hold: those the retention spans, and the one it starts in.
    private static func maxBlocks(_ retentionSeconds: Int) -> Int { (retentionSeconds + 62) / Int(HistoryBlock.seconds) + 2 }

    mutating func update(_ series: SeriesSnapshot, second realSecond: Int64, generation: UInt64, positions: [Int?]) {
        let second = max(realSecond, lastSecond)
        seenGeneration = generation
        if second != lastSecond {
            if lastSecond > 0 { seal() }
            lastSecond = second
            newest = HistoryBlock.empty(metric.kind)
            dropAgedBlocks()
        }
        let window = series.windows.first
        switch metric.kind {
        case .histogram, .counter:
            let total = metric.kind == .histogram ? UInt128(series.cumulativeCount) : series.cumulativeExactSum
            // A total never falls within a series; if it did, count from zero again.
            let increase = total >= baseline ? total - baseline : total
            baseline = total
            newest[0] = saturatingAdd(newest[0], UInt64(clamping: increase))
            if metric.kind == .counter {
                newest[1] = UInt64(clamping: total)
            } else if let window, window.count > 0 {
                for (offset, position) in positions.enumerated() {
                    if let position, position < window.quantileValues.count {
                        newest[1 + offset] = Self.stored(window.quantileValues[position], signed: metric.isSigned)
                    }
                }
                let high = Self.stored(window.max, signed: metric.isSigned)
                newest[4] = newest[4] == historyNull ? high : max(newest[4], high)
            }
        case .gauge:
            if let value = series.lastValue { newest[0] = value.bitPattern }
            if let low = window?.gaugeMin {
                let old = Double(bitPattern: newest[1])
                newest[1] = (old.isNaN ? low : min(old, low)).bitPattern
            }
            if let high = window?.gaugeMax {
                let old = Double(bitPattern: newest[2])
                newest[2] = (old.isNaN ? high : max(old, high)).bitPattern
            }
        }
    }

    /// Writes the newest point into its block: a later second came.
    private mutating func seal() {
        let kind = metric.kind
        if blocks.last?.index != UInt32(lastSecond / HistoryBlock.seconds) {
            if blocks.count == blocks.capacity {
                blocks.reserveCapacity(max(blocks.count + 1, min(2 * blocks.count, Self.maxBlocks(Int(retentionSeconds)))))
            }
            blocks.append(HistoryBlock(containing: lastSecond))
            written = HistoryBlock.empty(kind)
        }
        blocks[blocks.count - 1].append(newest, at: lastSecond, after: written, kind: kind, to: &bytes)
        written = newest
    }

    /// Lets go of the blocks whose every second is older than the retention before `lastSecond`.
    private mutating func dropAgedBlocks() {
        let oldest = lastSecond - retentionSeconds + 1
        var aged = 0, agedBytes = 0
        while aged < blocks.count, blocks[aged].start + HistoryBlock.seconds <= oldest {
            agedBytes += Int(blocks[aged].byteCount)
            aged += 1
        }
        guard aged > 0 else { return }
        blocks.removeFirst(aged)
        bytes.removeFirst(agedBytes)
        // A series that was busy and is now idle gives back what it held.
        let slack = HistoryBlock.slack(bytes.count, kind: metric.kind)
        if bytes.capacity > bytes.count + 2 * slack { HistoryBlock.resize(&bytes, to: bytes.count + slack) }
    }

    /// Calls `body` with each point from `from` to `to` (Unix seconds), in order; stops when it
    /// returns false.
    private func forEachPoint(from: Int64, to: Int64, _ body: (Int64, HistoryValues) -> Bool) {
        var offset = 0
        for block in blocks {
            defer { offset += Int(block.byteCount) }
            guard block.start + HistoryBlock.seconds > from else { continue }
            guard block.start <= to else { return }
            let going = block.forEachPoint(kind: metric.kind, bytes: bytes, offset: offset) { second, point in
                second > to ? false : second < from || body(second, point)
            }
            guard going else { return }
        }
        if lastSecond > 0, lastSecond >= from, lastSecond <= to { _ = body(lastSecond, newest) }
    }

    /// A histogram's value as a point keeps it: a signed one in offset binary (VALUES in
    /// ringside.h), so that the larger of two points is still `max`, and short of `historyNull`.
    static func stored(_ value: Int128, signed: Bool) -> UInt64 {
        guard signed else { return min(UInt64(clamping: value), historyNull - 1) }
        return min(UInt64(bitPattern: Int64(clamping: value)) ^ (1 << 63), historyNull - 1)
    }

    /// A value `stored` keeps, in steps.
    static func value(stored: UInt64, signed: Bool) -> Int128 {
        signed ? Int128(OffsetBinary.value(stored)) : Int128(stored)
    }

    /// The points from `from` to `to` (Unix seconds), `step` seconds each, as `[t, v1, ...]` rows
    /// flattened, the row width being the kind's column count.
    func points(from: Int64, to: Int64, step: Int64, budget: inout Int, truncated: inout Bool) -> [UInt64] {
        let width = HistoryAnswer.columns(metric.kind).count
        var rows: [UInt64] = []
        var bucket: Int64 = -1
        var row = [UInt64](repeating: 0, count: width)
        func flush() {
            guard bucket >= 0 else { return }
            rows.append(contentsOf: row)
            budget -= 1
        }
        forEachPoint(from: max(from, lastSecond - retentionSeconds + 1), to: min(to, lastSecond)) { second, values in
            let start = second - second % step
            if start != bucket {
                flush()
                if budget <= 0 {
                    bucket = -1
                    truncated = true
                    return false
                }
                bucket = start
                row[0] = UInt64(start)
                for column in 1..<width { row[column] = values[column - 1] }
                return true
            }
            // Another second of the same step.
            switch metric.kind {
            case .histogram:
                row[1] = saturatingAdd(row[1], values[0])
                for column in 2...5 where values[column - 1] != historyNull {
                    row[column] = row[column] == historyNull ? values[column - 1] : max(row[column], values[column - 1])
                }
            case .counter:
                row[1] = saturatingAdd(row[1], values[0])
                row[2] = values[1]
            case .gauge:
                let value = Double(bitPattern: values[0]), low = Double(bitPattern: values[1])
                let high = Double(bitPattern: values[2])
                if !value.isNaN { row[1] = values[0] }
                let oldLow = Double(bitPattern: row[2]), oldHigh = Double(bitPattern: row[3])
                if !low.isNaN { row[2] = (oldLow.isNaN ? low : min(oldLow, low)).bitPattern }
                if !high.isNaN { row[3] = (oldHigh.isNaN ? high : max(oldHigh, high)).bitPattern }
            }
            return true
        }
        flush()
        return rows
    }
}

private func saturatingAdd(_ a: UInt64, _ b: UInt64) -> UInt64 {
    let (sum, overflow) = a.addingReportingOverflow(b)
    return overflow ? .max : sum
}
