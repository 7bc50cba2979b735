import Ringside

/// The upper bounds of the cumulative buckets exported for histograms, in a metric's own unit:
/// 1-2-5 steps, so Prometheus can merge one metric across bots and hosts with `histogram_quantile`.
package enum ExportBuckets {
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
