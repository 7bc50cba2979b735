import Ringside
import RingsideAggregation
import RingsideSnapshot

/// The upper bounds of the cumulative buckets exported for histograms, in a metric's own unit:
/// 1-2-5 steps, so Prometheus can merge one metric across bots and hosts with `histogram_quantile`.
/// Computed when a page is rendered, from the all-time histogram a snapshot carries.
package enum ExportBuckets {
    /// Counts at or below each of `upperBounds(for: unit)`, in `histogram` (of values in `unit`).
    package static func cumulativeCounts(_ histogram: Histogram, unit: MetricUnit) -> [UInt64] {
        histogram.cumulativeCounts(atUpperBounds: bounds[unit] ?? upperBounds(for: unit))
    }

    /// `histogram` (of values in `unit`) in Prometheus's native buckets of `schema`, in base units.
    package static func native(_ histogram: Histogram, unit: MetricUnit, schema: Int) -> NativeBuckets {
        NativeBuckets(histogram, schema: schema, baseUnitsPerValue: baseUnits(per: unit))
    }

    /// The native bucket of `schema` a value (in `unit`) falls in; `Int32.min` for the zero bucket.
    package static func nativeIndex(of value: UInt64, unit: MetricUnit, schema: Int) -> Int32 {
        let scaled = Double(value) * baseUnits(per: unit)
        return scaled > NativeBuckets.defaultZeroThreshold ? NativeBuckets.index(of: scaled, schema: schema) : .min
    }

    /// Base units (seconds for times) in one of `unit`.
    private static func baseUnits(per unit: MetricUnit) -> Double { unit.nanoseconds.map { Double($0) / 1e9 } ?? 1 }

    /// `value` (in `unit`) in base units (seconds for times), divided by a power of ten, so that
    /// 4,999,999 ns is 0.004999999 s and not a neighbour of it.
    package static func inBaseUnits(_ value: UInt64, unit: MetricUnit) -> Double {
        unit.nanoseconds.map { Double(value) / (1e9 / Double($0)) } ?? Double(value)
    }

    /// The latest of `exemplars` (of values in `unit`) in each classic bucket that has one, by the
    /// bucket's index in `upperBounds(for: unit)` (its count: the +Inf bucket).
    package static func latestExemplars(_ exemplars: [KeptExemplar], unit: MetricUnit) -> [Int: KeptExemplar] {
        let upper = bounds[unit] ?? upperBounds(for: unit)
        var latest: [Int: KeptExemplar] = [:]
        for exemplar in exemplars {
            // The first bound at or above the value: the bucket `le` holds it.
            var low = 0, high = upper.count
            while low < high {
                let middle = (low + high) / 2
                if upper[middle] < exemplar.value { low = middle + 1 } else { high = middle }
            }
            if let held = latest[low], held.wallTimeNanos >= exemplar.wallTimeNanos { continue }
            latest[low] = exemplar
        }
        return latest
    }

    /// Every unit's bounds, computed once.
    private static let bounds = Dictionary(uniqueKeysWithValues: MetricUnit.allCases.map { ($0, upperBounds(for: $0)) })

    /// From 100 ns to 10 s for times; from 1 to 10^9 for bytes and plain numbers.
    package static func upperBounds(for unit: MetricUnit) -> [UInt64] {
        let nanosPerUnit = unit.nanoseconds ?? 1
        let (low, high): (UInt64, UInt64) = unit.nanoseconds == nil ? (1, 1_000_000_000) : (100, 10_000_000_000)
        var bounds: [UInt64] = []
        var decade: UInt64 = 1
        while decade <= high {
            for step: UInt64 in [1, 2, 5] where decade * step >= low && decade * step <= high {
                // In the metric's unit; a bound finer than the unit cannot be told apart.
                if (decade * step) % nanosPerUnit == 0 { bounds.append(decade * step / nanosPerUnit) }
            }
            decade *= 10
        }
        return bounds
    }
}

extension AllTimeHistogram {
    /// `ExportBuckets.cumulativeCounts(histogram, unit:)`, computed once (a series' unit never changes).
    package func classicCounts(unit: MetricUnit) -> [UInt64] {
        classicCounts { ExportBuckets.cumulativeCounts($0, unit: unit) }
    }
}
