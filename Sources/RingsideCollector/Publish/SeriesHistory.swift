import Ringside
import RingsideAggregation
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
struct SeriesHistory: HistoryPointSource {
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
            newest[0] = newest[0].saturatingAdd(UInt64(clamping: increase))
            if metric.kind == .counter {
                newest[1] = UInt64(clamping: total)
            } else if let window, let values = window.quantileValues, let largest = window.max {
                for (offset, position) in positions.enumerated() {
                    if let position, position < values.count {
                        newest[1 + offset] = Self.stored(values[position], signed: metric.isSigned)
                    }
                }
                let high = Self.stored(largest, signed: metric.isSigned)
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
    /// returns false. The blocks may hold up to 63 seconds older than the retention: not those.
    func forEachPoint(from: Int64, to: Int64, _ body: (Int64, HistoryValues) -> Bool) {
        let from = max(from, lastSecond - retentionSeconds + 1), to = min(to, lastSecond)
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
}
