import Ringside
@testable import RingsideCollector
import RingsideSnapshot
import Testing

/// One series of a scenario: what it is, and its all-time total so far.
private struct ModelSeries {
    var id: UInt64
    var ring: String
    var metric: MetricDescriptor
    var total: UInt128 = 0
}

/// Random snapshots for the store and the reference alike: series coming, going, moving in the
/// snapshot; seconds repeating, skipped, jumping past the retention and stepping back;
/// generations repeated; every number from the awkward ones.
private struct Scenario {
    var random: TestRandom
    var pool: [ModelSeries] = []
    var generation: UInt64 = 0
    var second: UInt64 = 1_800_000_000
    /// The series of the last snapshot, by their place in `pool`, in its order.
    var shown: [Int] = []

    init(seed: UInt64, poolSize: Int) {
        random = TestRandom(seed: seed)
        for id in 1...UInt64(poolSize) {
            let kind = random.pick([MetricKind.histogram, .histogram, .counter, .gauge])
            let signed = kind == .histogram && random.chance(30)
            let scale: Int8 = random.chance(20) ? 2 : 0
            let labels = random.pick(["", "side=buy", "side=sell\nsymbol=AAPL", "symbol=MSFT"])
            let metric = MetricDescriptor(
                index: UInt32(id), name: random.pick(["latency", "orders", "level"]), kind: kind, unit: .nanoseconds,
                encodedLabels: labels, help: "", sampleEvery: 1, isSigned: signed, scale: kind == .gauge ? 0 : scale)
            pool.append(ModelSeries(id: id * 7 + 3, ring: random.pick(["a", "b", "c"]), metric: metric))
        }
    }

    /// A quantile's or maximum's value: small, large, past what a point keeps, or negative.
    mutating func value() -> Int128 {
        switch random.below(8) {
        case 0: return 0
        case 1: return Int128(random.below(1000))
        case 2: return -Int128(random.below(1000))
        case 3: return Int128(UInt64.max) - Int128(random.below(3))
        case 4: return Int128.max - Int128(random.below(3))
        case 5: return Int128(Int64.min) - Int128(random.below(3))
        default: return Int128(random.next() >> UInt64(random.below(64)))
        }
    }

    mutating func double() -> Double? {
        switch random.below(9) {
        case 0: return nil
        case 1: return .nan
        case 2: return Double(bitPattern: 0x7FF0_0000_0000_0000 | random.next())
        case 3: return random.pick([Double.infinity, -.infinity, -0.0, 0])
        case 4: return Double(random.below(2_000_000)) - 1_000_000
        default: return Double(bitPattern: random.next() >> 2) * (random.chance(50) ? 1 : -1)
        }
    }

    /// The next figures of series `index`.
    mutating func seriesSnapshot(of index: Int) -> SeriesSnapshot {
        var model = pool[index]
        var window = WindowStats()
        switch model.metric.kind {
        case .histogram:
            if random.chance(60) {
                window.count = UInt64(1 + random.below(5000))
                window.quantileValues = (0..<4).map { _ in value() }
                window.max = value()
            }
        case .counter: break
        case .gauge:
            window.gaugeMin = double()
            window.gaugeMax = double()
        }
        // Totals grow, stay, jump, saturate, and now and then fall (a series never does; the store must not care).
        switch random.below(10) {
        case 0..<3: break
        case 3: model.total = UInt128(random.next())
        case 4: model.total = random.chance(50) ? UInt128(UInt64.max) : UInt128.max - UInt128(random.below(2))
        case 5: model.total /= 2
        default: model.total &+= UInt128(random.below(100_000))
        }
        if model.metric.kind == .histogram { model.total = min(model.total, UInt128(UInt64.max)) }
        pool[index] = model
        var series = SeriesSnapshot(
            ring: model.ring, metric: model.metric, id: model.id, windows: random.chance(3) ? [] : [window, WindowStats()])
        series.cumulativeCount = UInt64(clamping: model.total)
        series.cumulativeExactSum = model.total
        series.lastValue = model.metric.kind == .gauge ? double() : nil
        return series
    }

    /// The next snapshot: mostly the same series in the same order, a second later.
    mutating func next() -> Snapshot {
        switch random.below(20) {
        case 0: break  // another snapshot in the same second
        case 1: second += UInt64(2 + random.below(8))  // a gap
        case 2: second += UInt64(random.below(400))  // maybe past the retention
        case 3: second -= UInt64(random.below(4))  // the clock steps back
        default: second += 1
        }
        var order = shown
        if order.isEmpty || random.chance(10) {
            order = []
            for index in pool.indices where random.chance(60) { order.append(index) }
        } else if random.chance(10) {
            order.shuffle(using: &random)
        } else if random.chance(10) {
            // Some come, at the end: the others stay in place.
            for index in pool.indices where random.chance(5) && !order.contains(index) { order.append(index) }
        } else if random.chance(10) {
            // Some go, some come (at the end), the others in their order.
            var kept: [Int] = []
            for index in order where random.chance(90) { kept.append(index) }
            for index in pool.indices where random.chance(5) && !kept.contains(index) { kept.append(index) }
            order = kept
        }
        shown = order
        if !random.chance(3) { generation += 1 }  // else the same generation again: ignored
        var snapshot = Snapshot()
        snapshot.generation = generation
        snapshot.generatedRealtimeNanos = second * 1_000_000_000 + UInt64(random.below(1_000_000_000))
        snapshot.quantiles = random.chance(90) ? [0.5, 0.9, 0.99, 0.999] : [0.99, 0.5]
        for index in order { snapshot.series.append(seriesSnapshot(of: index)) }
        return snapshot
    }

    /// A query of any range, step and filter, about the scenario's seconds.
    mutating func query() -> HistoryQuery {
        let from = Int64(second) - Int64(random.below(600)), to = from + Int64(random.below(800))
        var query = HistoryQuery(from: max(0, from), to: max(0, to))
        query.step = random.pick([1, 1, 2, 3, 7, 60, 3600])
        if random.chance(20) { query.ids = [pool[random.below(pool.count)].id] }
        if random.chance(20) { query.ring = random.pick(["a", "b"]) }
        if random.chance(20) { query.labels = ["side": random.pick(["buy", "sell"])] }
        return query
    }
}

extension TestRandom: RandomNumberGenerator {}

/// The answer's numbers and flags, as JSON: what a client gets.
private func text(_ answer: HistoryAnswer) -> String { String(decoding: answer.json, as: UTF8.self) }

/// Records an issue naming where two answers first differ, with a little of each around it.
private func expectSame(_ have: String, _ want: String, _ context: String) -> Bool {
    guard have != want else { return true }
    let at = zip(have, want).prefix { $0 == $1 }.count
    func around(_ text: String) -> String { String(text.dropFirst(max(0, at - 150)).prefix(300)) }
    Issue.record("\(context): the answers differ at character \(at):\n have ...\(around(have))...\n want ...\(around(want))...")
    return false
}

@Suite("HistoryStore against the ring buffers it replaced: the same answers")
struct HistoryModelTests {
    @Test(
        "random snapshots and queries: the same counts, points, nulls, gaps, steps, refusals and sweeps as the reference's",
        arguments: 0..<16)
    func sameAnswers(seed: UInt64) {
        let retention = [10, 64, 100, 300][Int(seed % 4)]
        let cap = [3, 8, 40][Int(seed % 3)]
        var scenario = Scenario(seed: seed, poolSize: seed % 2 == 0 ? cap * 2 + 5 : cap + 2)  // full, or now and then not
        let store = HistoryStore(retentionSeconds: retention, maxSeries: cap)
        let reference = ReferenceHistoryStore(retentionSeconds: retention, maxSeries: cap)
        for round in 0..<500 {
            let snapshot = scenario.next()
            store.record(snapshot)
            reference.record(snapshot)
            #expect(store.counts == reference.counts, "seed \(seed), round \(round)")
            guard round % 5 == 0 else { continue }
            for query in [HistoryQuery(from: 0, to: Int64(UInt32.max)), scenario.query()] {
                guard expectSame(text(store.query(query)), text(reference.query(query)), "seed \(seed), round \(round), \(query)") else {
                    return
                }
            }
        }
    }

    @Test("a truncated answer (past 100,000 points) holds the same series and points as the reference's")
    func truncatedAlike() {
        var scenario = Scenario(seed: 99, poolSize: 220)
        let store = HistoryStore(retentionSeconds: 1000, maxSeries: 220)
        let reference = ReferenceHistoryStore(retentionSeconds: 1000, maxSeries: 220)
        var snapshot = Snapshot()
        for second in 0..<460 {  // 101,200 points
            snapshot.generation = UInt64(second + 1)
            snapshot.generatedRealtimeNanos = (1_800_000_000 + UInt64(second)) * 1_000_000_000
            snapshot.quantiles = [0.5, 0.9, 0.99, 0.999]
            snapshot.series = []
            for index in 0..<220 { snapshot.series.append(scenario.seriesSnapshot(of: index)) }
            store.record(snapshot)
            reference.record(snapshot)
        }
        for step in [1, 2] {
            var query = HistoryQuery(from: 0, to: Int64(UInt32.max))
            query.step = step
            let answer = store.query(query)
            #expect(answer.truncated == (step == 1))
            _ = expectSame(text(answer), text(reference.query(query)), "step \(step)")
        }
    }
}
