import Foundation
import RingsideTestSupport

/// A seeded generator (SplitMix64, shared with the other suites) so that every randomized test
/// sees the same data on every run.
struct SeededRandom: RandomNumberGenerator {
    private var generator: SplitMix64

    init(seed: UInt64) { generator = SplitMix64(seed: seed) }

    mutating func next() -> UInt64 { generator.next() }

    /// A standard normal deviate (Box-Muller).
    mutating func normal() -> Double {
        let u = Double.random(in: Double.ulpOfOne..<1, using: &self)
        let v = Double.random(in: 0..<1, using: &self)
        return (-2 * Foundation.log(u)).squareRoot() * Foundation.cos(2 * Double.pi * v)
    }

    /// A lognormal value like a latency in nanoseconds: median `e^mu`, spread `sigma`.
    mutating func lognormal(mu: Double, sigma: Double) -> UInt64 {
        let value = Foundation.exp(mu + sigma * normal())
        return value >= 1.8e19 ? UInt64.max : UInt64(value)
    }

    /// A value with a uniformly random bit length, so every octave of `UInt64` is exercised.
    mutating func anyMagnitude() -> UInt64 {
        let bits = Int.random(in: 0...64, using: &self)
        return bits == 0 ? 0 : next() >> UInt64(64 - bits)
    }
}

/// The nearest-rank quantile of sorted values: the `ceil(q * n)`-th smallest, as the histogram defines it.
func exactQuantile(_ sorted: [UInt64], _ q: Double) -> UInt64 {
    let rank = Int((q * Double(sorted.count)).rounded(.up))
    return sorted[min(max(rank, 1), sorted.count) - 1]
}

/// Whether `reported` is within the histogram's relative error bound of `exact`.
func isWithinErrorBound(_ reported: UInt64, of exact: UInt64) -> Bool {
    let difference = reported > exact ? reported - exact : exact - reported
    return difference <= exact / 1024  // difference * 1024 <= exact, without overflow
}
