import Ringside
@testable import RingsideCollector
import Testing

/// xorshift64: the same numbers every run.
struct TestRandom {
    private var state: UInt64
    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 | 1 }
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }
}

/// Numbers a column may hold, the awkward ones often: 0, nulls, the largest, offset binary's
/// zero and negatives, NaNs of every kind, whole and fractional doubles, and any at all.
private func number(_ kind: MetricKind, _ random: inout TestRandom, near previous: UInt64) -> UInt64 {
    let doubles: [Double] = [0, -0.0, 1, -1, 1_353_991, 0.1, 187.23, .infinity, -.infinity, .greatestFiniteMagnitude]
    switch random.below(10) {
    case 0: return previous  // the same again
    case 1: return random.pick([0, 1, UInt64.max, UInt64.max - 1, 1 << 63, (1 << 63) - 5, (1 << 63) + 5])
    case 2: return random.pick([Double.nan.bitPattern, (-Double.nan).bitPattern, 0x7FF0_0000_0000_0001, 0xFFF7_FFFF_FFFF_FFFF])
    case 3: return 0x7FF0_0000_0000_0000 | random.next()  // a NaN (or an infinity) with any payload
    case 4: return random.pick(doubles).bitPattern
    case 5: return Double(bitPattern: previous).isFinite ? (Double(bitPattern: previous) + 3).bitPattern : random.next()
    case 6: return previous &+ UInt64(random.below(300))  // a little more
    case 7: return previous &- UInt64(random.below(300))  // a little less, wrapping past 0
    default: return kind == .gauge && random.chance(50) ? Double(Int(random.next() % 100_000)).bitPattern : random.next()
    }
}

/// Points of `kind` at `seconds`, each from the one before.
private func points(_ kind: MetricKind, count: Int, _ random: inout TestRandom) -> [HistoryValues] {
    var previous = HistoryBlock.empty(kind)
    var result: [HistoryValues] = []
    for _ in 0..<count {
        var point = HistoryBlock.empty(kind)
        for column in 0..<HistoryBlock.columns(kind) { point[column] = number(kind, &random, near: previous[column]) }
        // A counter's total often grows by its increase, as it does (and then nothing is written of it).
        if kind == .counter, random.chance(50) { point[1] = previous[1] &+ point[0] }
        result.append(point)
        previous = point
    }
    return result
}

private func same(_ a: HistoryValues, _ b: HistoryValues) -> Bool { (0..<5).allSatisfy { a[$0] == b[$0] } }

/// Writes `points` at `seconds` into blocks over one stream, as a series does.
private func write(_ points: [HistoryValues], at seconds: [Int64], kind: MetricKind) -> (blocks: [HistoryBlock], bytes: [UInt8]) {
    var blocks: [HistoryBlock] = []
    var bytes: [UInt8] = []
    var previous = HistoryBlock.empty(kind)
    for (point, second) in zip(points, seconds) {
        if blocks.last?.index != UInt32(second / HistoryBlock.seconds) {
            blocks.append(HistoryBlock(containing: second))
            previous = HistoryBlock.empty(kind)
        }
        blocks[blocks.count - 1].append(point, at: second, after: previous, kind: kind, to: &bytes)
        previous = point
    }
    return (blocks, bytes)
}

/// What the blocks hold, read back.
private func read(_ blocks: [HistoryBlock], _ bytes: [UInt8], kind: MetricKind) -> [(Int64, HistoryValues)] {
    var result: [(Int64, HistoryValues)] = []
    var offset = 0
    for block in blocks {
        _ = block.forEachPoint(kind: kind, bytes: bytes, offset: offset) { second, point in
            result.append((second, point))
            return true
        }
        offset += Int(block.byteCount)
    }
    #expect(offset == bytes.count, "the blocks' lengths add up to the stream")
    return result
}

@Suite("HistoryBlock: a series' points, compactly, read back exactly")
struct HistoryBlockTests {
    @Test("every kind's points round-trip bit for bit: zeros, nulls, the largest, offset binary's negatives, NaNs", arguments: 0..<40)
    func roundTrips(seed: UInt64) {
        var random = TestRandom(seed: seed)
        for kind in [MetricKind.histogram, .counter, .gauge] {
            // Seconds with gaps, across several blocks, from a random start.
            var second = Int64(1_800_000_000 + random.below(1000))
            var seconds: [Int64] = []
            for _ in 0..<300 {
                seconds.append(second)
                second += random.chance(80) ? 1 : Int64(1 + random.below(90))
            }
            let written = points(kind, count: seconds.count, &random)
            let (blocks, bytes) = write(written, at: seconds, kind: kind)
            let back = read(blocks, bytes, kind: kind)
            #expect(back.map(\.0) == seconds)
            #expect(zip(back.map(\.1), written).allSatisfy(same), "\(kind), seed \(seed)")
            #expect(bytes.count <= seconds.count * HistoryBlock.maxPointBytes(kind))
        }
    }

    @Test("the most a point takes is what a second took before (44 bytes), and random numbers come close to it")
    func worstCase() {
        #expect(HistoryBlock.maxPointBytes(.histogram) == 43)
        #expect(HistoryBlock.maxPointBytes(.counter) == 17 && HistoryBlock.maxPointBytes(.gauge) == 26)
        var random = TestRandom(seed: 7)
        let seconds = (0..<64).map { Int64(1_800_000_000 / 64 * 64) + $0 }
        let written = seconds.map { _ in
            var point = HistoryValues(repeating: 0)
            for column in 0..<5 { point[column] = random.next() | 1 << 63 }
            return point
        }
        let (blocks, bytes) = write(written, at: seconds, kind: .histogram)
        #expect(blocks.count == 1 && bytes.count <= 64 * 43 && bytes.count > 64 * 38)
    }

    @Test("what stays writes nothing: an idle histogram, a gauge that stays, a counter counting steadily")
    func idleWritesNothing() {
        let seconds = (0..<64).map { Int64(1_800_000_000 / 64 * 64) + $0 }
        let idle = [HistoryValues](repeating: HistoryBlock.empty(.histogram), count: 64)
        #expect(write(idle, at: seconds, kind: .histogram).bytes.isEmpty)
        var gauge = HistoryBlock.empty(.gauge)
        gauge[0] = (1_353_991.0).bitPattern
        let gauges = write([HistoryValues](repeating: gauge, count: 64), at: seconds, kind: .gauge)
        #expect(gauges.bytes.count <= 1 + 2 + 3, "the first point only (its value's upper bytes)")
        let counters = (0..<64).map { index -> HistoryValues in
            [100, 5_000_000 + 100 * UInt64(index), 0, 0, 0]
        }
        let steady = write(counters, at: seconds, kind: .counter)
        #expect(steady.bytes.count <= 1 + 1 + 3, "the first point only")
        #expect(steady.blocks[0].changed == 1)
        #expect(zip(read(steady.blocks, steady.bytes, kind: .counter).map(\.1), counters).allSatisfy(same))
    }

    @Test("a gauge's whole number moving a little takes a byte or two: its low 32 bits stay 0")
    func wholeNumbers() {
        let seconds = (0..<2).map { Int64(1_800_000_000 / 64 * 64) + $0 }
        var first = HistoryBlock.empty(.gauge), second = first
        first[0] = (1_353_991.0).bitPattern
        second[0] = (1_353_995.0).bitPattern
        let (blocks, bytes) = write([first, second], at: seconds, kind: .gauge)
        let firstLength = write([first], at: [seconds[0]], kind: .gauge).bytes.count
        #expect(bytes.count - firstLength <= 2 + 1)
        #expect(read(blocks, bytes, kind: .gauge)[1].1[0] == second[0])
    }
}
