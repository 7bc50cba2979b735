import Foundation

/// The burst of issue 27's sampling test and `ringside-bench burst`: recorded at 10 times the rate
/// its lane is drained, the drain driven step by step by the caller, so the outcome is the same
/// on every run. The values are seeded: a latency that is log-normal around a median that grows
/// through the burst (its service slows as it queues), so the part of a burst a lane keeps
/// decides the quantiles.
package enum BurstShape {
    /// A lane of the library's default size, a burst of 20 lanes' worth of calls, and the calls
    /// between two drain steps against the records a step drains: 10 times less.
    package static let laneCapacity = 1 << 16
    package static let calls = 20 * laneCapacity
    package static let callsPerStep = 640
    package static let drainedPerStep = 64
    package static let quantiles = [0.5, 0.99]

    /// The burst's `index`th latency, in ns: log-normal (sigma 0.25) around a median of 50 µs at
    /// its start and 150 µs at its end.
    package static func value(_ index: Int, _ random: inout SplitMix64) -> UInt64 {
        let u = Double(random.next() >> 11) * 0x1p-53 + 0x1p-54
        let v = Double(random.next() >> 11) * 0x1p-53
        let normal = (-2 * Foundation.log(u)).squareRoot() * Foundation.cos(2 * Double.pi * v)
        let median = 50_000 * (1 + 2 * Double(index) / Double(calls))
        return UInt64(median * Foundation.exp(0.25 * normal))
    }

    /// The nearest-rank quantiles of `sorted`.
    package static func trueQuantiles(_ sorted: [UInt64]) -> [UInt64] {
        quantiles.map { sorted[Int(($0 * Double(sorted.count)).rounded(.up)) - 1] }
    }
}
