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

    /// Base units (seconds for times) in one of `unit`.
    private static func baseUnits(per unit: MetricUnit) -> Double { unit.nanoseconds.map { Double($0) / 1e9 } ?? 1 }

    /// The latest of `exemplars` (of values of `metric`, unsigned) in each classic bucket that has
    /// one, by the bucket's index in its bounds (`classic(of:)`; their count: the +Inf bucket).
    package static func latestExemplars(_ exemplars: [KeptExemplar], of metric: MetricDescriptor) -> [Int: KeptExemplar] {
        let upper = metric.hasSteps ? stepBounds(signed: false).map { UInt64($0) } : bounds[metric.unit] ?? upperBounds(for: metric.unit)
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

extension ExportBuckets {
    /// The classic bounds of a metric with steps (signed, or a step other than its unit, see
    /// `MetricDescriptor.hasSteps`), in steps: 1-2-5 from one step to 5 * 10^12 of them, and for
    /// a signed one their negatives below and 0 between. In the metric's unit, basis points to a
    /// hundredth: -5e10 ... -0.01, 0, 0.01 ... 5e10.
    package static func stepBounds(signed: Bool) -> [Int64] { signed ? signedStepBounds : unsignedStepBounds }

    private static let unsignedStepBounds: [Int64] = {
        var bounds: [Int64] = []
        var decade: Int64 = 1
        for _ in 0...12 {
            bounds += [decade, 2 * decade, 5 * decade]
            decade *= 10
        }
        return bounds
    }()
    private static let signedStepBounds: [Int64] = unsignedStepBounds.reversed().map { -$0 } + [0] + unsignedStepBounds

    /// A series' classic buckets: the upper bounds in the metric's steps (nil: `upperBounds(for:)`
    /// of its unit, in its unit) and the count at or below each (the +Inf bucket is its count).
    /// Computed once per all-time histogram and kept with the series' figures.
    package static func classic(of series: SeriesSnapshot) -> (stepBounds: [Int64]?, counts: CompactCumulativeCounts) {
        let metric = series.metric
        if let signed = series.signedCumulative {
            let bounds = stepBounds(signed: true)
            return (bounds, series.classicCounts { signed.cumulativeCounts(atUpperBounds: bounds) })
        }
        guard let histogram = series.cumulative else {
            return (metric.hasSteps ? stepBounds(signed: false) : nil, CompactCumulativeCounts([]))
        }
        guard metric.hasSteps else {
            return (nil, series.classicCounts { cumulativeCounts(histogram, unit: metric.unit) })
        }
        let bounds = stepBounds(signed: false)
        return (bounds, series.classicCounts { histogram.cumulativeCounts(atUpperBounds: bounds.map { UInt64($0) }) })
    }

    /// A series' all-time histogram, signed or not, in Prometheus's native buckets of `schema`,
    /// in base units; nil when it has none.
    package static func native(of series: SeriesSnapshot, schema: Int) -> NativeBuckets? {
        let perStep = series.metric.inBaseUnits(1)
        if let signed = series.signedCumulative { return NativeBuckets(signed, schema: schema, baseUnitsPerValue: perStep) }
        return series.cumulative.map { NativeBuckets($0, schema: schema, baseUnitsPerValue: perStep) }
    }
}

extension ExportBuckets {
    /// `histogram` (of values in `unit`) in OTLP's exponential buckets of `scale` (-4 to 8), in base units.
    package static func exponential(_ histogram: Histogram, unit: MetricUnit, scale: Int) -> ExponentialBuckets {
        ExponentialBuckets(native(histogram, unit: unit, schema: scale))
    }

    /// A series' all-time histogram, signed or not, in OTLP's exponential buckets of `scale`, in base units.
    package static func exponential(of series: SeriesSnapshot, scale: Int) -> ExponentialBuckets {
        ExponentialBuckets(native(of: series, schema: scale) ?? native(Histogram(), unit: series.metric.unit, schema: scale))
    }
}
