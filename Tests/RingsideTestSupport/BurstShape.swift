import Foundation

/// A burst recorded at 10 times the rate its lane is drained, the drain driven step by step by
/// the caller, so the outcome is the same on every run: the bursts of the sampling tests and of
/// `ringside-bench burst`. The values are seeded latencies, log-normal (sigma 0.25) around a
/// median that moves through the burst, so the part of a burst a lane keeps decides the quantiles.
package struct BurstShape: Sendable {
    /// How the median moves through the burst.
    package enum Median: Sendable {
        /// From `from` to `to` ns, evenly with the call's index.
        case drifting(from: Double, to: Double)
        /// `base` ns, but for the last `tailPercent` % of the calls, `tail` ns: the tail comes in one block.
        case tailInABlock(base: Double, tail: Double, tailPercent: Int)
    }

    package var name: String
    package var laneCapacity: Int
    package var calls: Int
    package var callsPerStep: Int
    package var drainedPerStep: Int
    package var median: Median

    /// Issue 27's: a lane of the library's default size, a burst of 20 lanes' worth of calls, 640
    /// calls between two drains of 64 records; the median rising from 50 to 150 µs (its service
    /// slows as it queues).
    package static let rising = BurstShape(
        name: "rising", laneCapacity: 1 << 16, calls: 20 << 16, callsPerStep: 640, drainedPerStep: 64,
        median: .drifting(from: 50_000, to: 150_000))

    /// Issue 70's: a lane of 32 records, 320 calls between two drains of 32, the median moving
    /// from 20 to 200 µs across `calls`.
    package static func drifting(calls: Int) -> BurstShape {
        BurstShape(
            name: "drifting", laneCapacity: 32, calls: calls, callsPerStep: 320, drainedPerStep: 32,
            median: .drifting(from: 20_000, to: 200_000))
    }

    /// Issue 70's other: the same lane and pace, the median 50 µs but for the last 3 % of the
    /// calls, at 500 µs: p99 lies inside the block.
    package static func tailInABlock(calls: Int) -> BurstShape {
        BurstShape(
            name: "tail-in-a-block", laneCapacity: 32, calls: calls, callsPerStep: 320, drainedPerStep: 32,
            median: .tailInABlock(base: 50_000, tail: 500_000, tailPercent: 3))
    }

    /// The burst's `index`th latency, in ns.
    package func value(_ index: Int, _ random: inout SplitMix64) -> UInt64 {
        let u = Double(random.next() >> 11) * 0x1p-53 + 0x1p-54
        let v = Double(random.next() >> 11) * 0x1p-53
        let normal = (-2 * Foundation.log(u)).squareRoot() * Foundation.cos(2 * Double.pi * v)
        let median: Double
        switch self.median {
        case let .drifting(from, to): median = from + (to - from) * Double(index) / Double(calls)
        case let .tailInABlock(base, tail, tailPercent): median = index >= calls / 100 * (100 - tailPercent) ? tail : base
        }
        return UInt64(median * Foundation.exp(0.25 * normal))
    }

    /// The nearest-rank quantiles `quantiles` of `sorted`.
    package static func trueQuantiles(_ sorted: [UInt64], _ quantiles: [Double]) -> [UInt64] {
        quantiles.map { sorted[Int(($0 * Double(sorted.count)).rounded(.up)) - 1] }
    }
}
