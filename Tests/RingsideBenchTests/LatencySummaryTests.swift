import Testing
@testable import RingsideBench

@Suite("Percentiles and summaries")
struct LatencySummaryTests {
    @Test("the nearest-rank percentile is the smallest sample with p of the samples at or below it")
    func nearestRank() {
        let samples = (1...1000).map(Double.init)
        #expect(Percentiles.value(at: 0.5, sorted: samples) == 500)
        #expect(Percentiles.value(at: 0.9, sorted: samples) == 900)
        #expect(Percentiles.value(at: 0.99, sorted: samples) == 990)
        #expect(Percentiles.value(at: 0.999, sorted: samples) == 999)
        #expect(Percentiles.value(at: 1, sorted: samples) == 1000)
        #expect(Percentiles.value(at: 0, sorted: samples) == 1)
        #expect(Percentiles.value(at: 0.5, sorted: [Double]()) == 0)
        #expect(Percentiles.value(at: 0.5, sorted: [7.0]) == 7)
        #expect(Percentiles.value(at: 0.5, sorted: [UInt64](1...4)) == 2)
    }

    @Test("per-call times are batch times less the timer, divided by the batch size, never negative")
    func batchesBecomePerCallTimes() {
        // Batches of 16 calls, the timer costing 20 ns: 100 batches of 100 ns and one of 1620 ns.
        let batches = [UInt32](repeating: 100, count: 100) + [1620] + [10]
        let summary = LatencySummary(
            name: "row", batchNanos: batches, batchSize: 16, timerNanos: 20,
            callsPerSecond: 1e8, dropped: 3)
        #expect(summary.samples == 102)
        #expect(summary.p50 == 5)
        #expect(summary.p99 == 5)
        #expect(summary.max == 100)
        #expect(summary.curve.first?.nanoseconds == 0)  // the batch faster than the timer counts as zero
        #expect(abs(summary.mean - (100 * 5 + 100 + 0) / 102) < 1e-9)
        #expect(summary.dropped == 3)
    }

    @Test("rounds: p50 is the median of the rounds' p50s, the ratio the median of per-round ratios; the rest pooled")
    func roundsSummary() throws {
        // Batches of 16 calls, timer 20 ns: rounds whose per-call p50s are 5, 20 and 10 ns.
        func round(_ perCall: UInt32, _ count: Int) -> RoundSample {
            RoundSample(
                batchNanos: [UInt32](repeating: perCall * 16 + 20, count: count), calls: 1_000,
                elapsedNanos: 1_000_000, dropped: 2)
        }
        let rounds = [round(5, 10), round(20, 10), round(10, 10)]
        // c.floor ran at 5, 5 and 10 ns in the same rounds: ratios 1, 4, 1.
        let summary = LatencySummary(name: "row", rounds: rounds, batchSize: 16, timerNanos: 20, floorRoundP50s: [5, 5, 10])
        #expect(summary.roundP50s == [5, 20, 10])
        #expect(summary.p50 == 10)
        #expect(summary.floorRatio == 1)
        #expect(summary.max == 20 && summary.samples == 30)
        #expect(summary.callsPerSecond == 1e6 && summary.dropped == 6)
        // Without c.floor, or with a round count that does not match, there is no ratio.
        #expect(LatencySummary(name: "row", rounds: rounds, batchSize: 16, timerNanos: 20, floorRoundP50s: nil).floorRatio == nil)
        #expect(LatencySummary(name: "row", rounds: rounds, batchSize: 16, timerNanos: 20, floorRoundP50s: [5]).floorRatio == nil)
        // Threads measured at once: their samples pool and their calls add up over the longest run.
        let both = RoundSample.concurrent([round(5, 3), RoundSample(batchNanos: [100], calls: 500, elapsedNanos: 2_000_000, dropped: 1)])
        #expect(both.batchNanos.count == 4 && both.calls == 1_500 && both.elapsedNanos == 2_000_000 && both.dropped == 3)
    }

    @Test("the curve rises with the percentile and spans as many nines as the samples resolve")
    func curveIsMonotonic() {
        let samples = (0..<10_000).map { Double($0 % 977) }.sorted()
        let curve = Percentiles.curve(sorted: samples)
        #expect(curve.first?.percentile == 0)
        #expect(abs(Percentiles.nines(curve.last!.percentile) - 4) < 1e-9)
        #expect(zip(curve, curve.dropFirst()).allSatisfy { $0.nanoseconds <= $1.nanoseconds && $0.percentile < $1.percentile })
        #expect(abs(Percentiles.nines(0.999) - 3) < 1e-9)
    }
}
