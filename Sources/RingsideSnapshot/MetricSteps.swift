import Ringside
import RingsideAggregation

// MARK: - A metric's steps in base units (VALUES in ringside.h): what the drain's exemplars
// and every export read

extension MetricDescriptor {
    /// The power of ten a step of this metric is in base units (seconds for times): its
    /// `scale`, less 9 for nanoseconds, 6 for microseconds, 3 for milliseconds.
    package var baseUnitExponent: Int {
        let unitExponent: Int
        switch unit.nanoseconds {
        case 1: unitExponent = -9
        case 1_000: unitExponent = -6
        case 1_000_000: unitExponent = -3
        default: unitExponent = 0
        }
        return Int(scale) + unitExponent
    }

    /// `steps` in base units, correctly rounded: divided by a power of ten rather than multiplied
    /// by its inexact inverse, so 4,999,999 ns is 0.004999999 s, and 35 hundredths 0.35.
    package func inBaseUnits(_ steps: Double) -> Double { Self.scaled(steps, exponent: baseUnitExponent) }

    /// `steps` in the metric's own unit (10^scale each).
    package func inOwnUnit(_ steps: Double) -> Double { Self.scaled(steps, exponent: Int(scale)) }

    private static func scaled(_ value: Double, exponent: Int) -> Double {
        exponent >= 0 ? value * powerOfTen(exponent) : value / powerOfTen(-exponent)
    }

    /// 10^n, exact up to 10^22.
    private static func powerOfTen(_ n: Int) -> Double {
        var result = 1.0
        for _ in 0..<n { result *= 10 }
        return result
    }
}

extension NativeBuckets {
    /// The native bucket of `schema` a value (in `metric`'s steps) falls in; `Int32.min` for the zero bucket.
    package static func index(of value: UInt64, metric: MetricDescriptor, schema: Int) -> Int32 {
        let scaled = metric.inBaseUnits(Double(value))
        return scaled > defaultZeroThreshold ? index(of: scaled, schema: schema) : .min
    }
}
