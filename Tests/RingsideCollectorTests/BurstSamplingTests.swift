import CRingside
import Foundation
import Ringside
import RingsideAggregation
import RingsideExport
@testable import RingsideCollector
import RingsideSnapshot
import RingsideTestSupport
import Testing

/// A burst (`BurstShape.rising`) recorded at 10 times the rate its lane is drained, the drain driven by the
/// test itself (the collector's aggregator, `limitPerLane` records a step), so the outcome is the
/// same on every run: no thread, no clock decides it.
///
/// The 1 % bound is statistical: the lane keeps about a tenth of the burst, and a quantile read
/// from n records is off by about sqrt(q(1 - q) / n) / (x f(x)) of itself. With this burst (20
/// lanes' worth, sigma 0.25) the p99 of 100 seeds was off by 0.25 % on average and 0.83 % at worst
/// (docs/benchmarks.md); a wider distribution, or a shorter burst, needs more records for 1 %.
struct Burst {
    static let shape = BurstShape.rising
    static let laneCapacity = shape.laneCapacity
    static let calls = shape.calls
    static let callsPerStep = shape.callsPerStep
    static let drainedPerStep = shape.drainedPerStep

    /// What the collector made of a burst, against the burst's own values.
    struct Outcome {
        var count: UInt64 = 0
        var dropped: UInt64 = 0
        var sampled: UInt64 = 0
        var drained = 0
        var trueQuantiles: [UInt64] = []
        var quantiles: [UInt64] = []
        /// |measured / true - 1| for each of `Burst.quantiles`.
        var errors: [Double] { zip(quantiles, trueQuantiles).map { abs(Double($0) / Double($1) - 1) } }

        var summary: String {
            let percents = errors.map { String(format: "%.2f %%", $0 * 100) }
            return "count \(count) of \(Burst.calls), dropped \(dropped), sampled \(sampled), records \(drained); "
                + "p50 \(quantiles[0]) ns against \(trueQuantiles[0]) (\(percents[0])), "
                + "p99 \(quantiles[1]) ns against \(trueQuantiles[1]) (\(percents[1]))"
        }
    }

    static let quantiles = [0.5, 0.99]

    /// The values' seed: 27, or RINGSIDE_BURST_SEED's, to sweep seeds (docs/benchmarks.md).
    static let seed = UInt64(ProcessInfo.processInfo.environment["RINGSIDE_BURST_SEED"] ?? "") ?? 27

    /// Records the burst into a lane of a bot that may sample past `sampleAbovePercent` (100: never),
    /// drained in steps by a collector's aggregator that reads gather cells; then the rest is drained
    /// (the thread keeps its lane: the calls it gathered last are counted all the same).
    static func run(sampleAbovePercent: Int, in directory: RingDirectory) throws -> Outcome {
        let burst = SteppedBurst(calls: calls, callsPerStep: callsPerStep, drainedPerStep: drainedPerStep, quantiles: quantiles)
        let drained = try burst.run(
            "burst-\(sampleAbovePercent)", options: .init(laneCapacity: laneCapacity, sampleAbovePercent: sampleAbovePercent),
            seed: seed, in: directory, value: shape.value)
        let series = drained.series
        let cumulative = try #require(series.cumulative)
        var outcome = Outcome()
        outcome.drained = drained.records
        outcome.count = series.cumulativeCount
        outcome.dropped = series.droppedRecords
        outcome.sampled = series.sampledRecords
        outcome.quantiles = cumulative.values(atQuantiles: quantiles)
        outcome.trueQuantiles = BurstShape.trueQuantiles(drained.sortedValues, quantiles)
        return outcome
    }
}

@Suite("Collector: a burst at 10 times the drain rate, sampled or dropped")
struct BurstSamplingTests {
    @Test("sampled, the burst's count is exact and its p50 and p99 within 1 % of the true ones; dropped, they are not")
    func burstAtTenTimesTheDrain() throws {
        try withRingDirectory { directory in
            let sampled = try Burst.run(sampleAbovePercent: 50, in: directory)
            let dropped = try Burst.run(sampleAbovePercent: 100, in: directory)
            print("burst (seed \(Burst.seed)), sampling on:  \(sampled.summary)")
            print("burst (seed \(Burst.seed)), sampling off: \(dropped.summary)")

            #expect(sampled.count == UInt64(Burst.calls) && sampled.dropped == 0, "\(sampled.summary)")
            #expect(sampled.sampled == UInt64(Burst.calls - sampled.drained), "every call not written was gathered")
            #expect(sampled.errors.allSatisfy { $0 < 0.01 }, "\(sampled.summary)")

            #expect(dropped.count + dropped.dropped == UInt64(Burst.calls) && dropped.sampled == 0, "\(dropped.summary)")
            #expect(dropped.count < UInt64(Burst.calls) / 5, "most of the burst dropped: \(dropped.summary)")
            // What a full lane keeps leans to the burst's start, when its latencies were lower.
            #expect(dropped.quantiles[0] < dropped.trueQuantiles[0] && dropped.errors[0] > 0.1, "\(dropped.summary)")
            #expect(dropped.quantiles[1] < dropped.trueQuantiles[1], "\(dropped.summary)")
        }
    }
}
