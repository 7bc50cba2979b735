import Foundation

/// A seeded generator (SplitMix64) so that every randomized test sees the same data on every run.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A standard normal deviate (Box-Muller).
    mutating func normal() -> Double {
        let u = Double.random(in: Double.ulpOfOne ..< 1, using: &self)
        let v = Double.random(in: 0 ..< 1, using: &self)
        return (-2 * Foundation.log(u)).squareRoot() * Foundation.cos(2 * Double.pi * v)
    }

    /// A lognormal value like a latency in nanoseconds: median `e^mu`, spread `sigma`.
    mutating func lognormal(mu: Double, sigma: Double) -> UInt64 {
        let value = Foundation.exp(mu + sigma * normal())
        return value >= 1.8e19 ? UInt64.max : UInt64(value)
    }

    /// A value with a uniformly random bit length, so every octave of `UInt64` is exercised.
    mutating func anyMagnitude() -> UInt64 {
        let bits = Int.random(in: 0 ... 64, using: &self)
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
    return difference <= exact / 1024 // difference * 1024 <= exact, without overflow
}
