import Ringside
import RingsideAggregation

/// The upper bounds of the cumulative buckets exported for histograms, in a metric's own unit:
/// 1-2-5 steps, so Prometheus can merge one metric across bots and hosts with `histogram_quantile`.
enum ExportBuckets {
    /// From 100 ns to 10 s for times; from 1 to 10^9 for bytes and plain numbers.
    static func upperBounds(for unit: MetricUnit) -> [UInt64] {
        let nanosPerUnit = unit.nanoseconds ?? 1
        let (low, high): (UInt64, UInt64) = unit.nanoseconds == nil ? (1, 1_000_000_000) : (100, 10_000_000_000)
        var bounds: [UInt64] = []
        var decade: UInt64 = 1
        while decade <= high {
            for step: UInt64 in [1, 2, 5] where decade * step >= low && decade * step <= high {
                // In the metric's unit; a bound finer than the unit cannot be told apart.
                if (decade * step) % nanosPerUnit == 0 || unit.nanoseconds == nil {
                    bounds.append(unit.nanoseconds == nil ? decade * step : decade * step / nanosPerUnit)
                }
            }
            decade *= 10
        }
        return bounds
    }
}

extension TrackedRing {
    /// Every series' snapshot; series that saw nothing new and have empty windows reuse theirs.
    func seriesSnapshots(nowNanos now: UInt64, quantiles: [Double]) -> [SeriesSnapshot] {
        let ring = consumer.name
        let windows = aggregator.layout.windowNanos.indices
        var result: [SeriesSnapshot] = []
        for index in aggregator.histograms.indices {
            result.append(refresh(&aggregator.histograms[index]) { series in
                var snapshot = SeriesSnapshot(ring: ring, metric: series.metric, windows: [])
                for window in windows {
                    let histogram = series.windows.snapshot(window: window, nowNanos: now)
                    var stats = WindowStats()
                    stats.count = histogram.count
                    stats.sum = histogram.sum
                    stats.min = histogram.min
                    stats.max = histogram.max
                    stats.mean = histogram.mean
                    stats.quantileValues = histogram.isEmpty ? quantiles.map { _ in 0 } : histogram.values(atQuantiles: quantiles)
                    snapshot.windows.append(stats)
                }
                let cumulative = series.windows.cumulative
                snapshot.cumulativeBuckets = cumulative.cumulativeCounts(atUpperBounds: ExportBuckets.upperBounds(for: series.metric.unit))
                snapshot.cumulativeCount = cumulative.count
                snapshot.cumulativeSum = cumulative.sum
                return (snapshot, snapshot.windows.allSatisfy { $0.count == 0 })
            })
        }
        for index in aggregator.counters.indices {
            result.append(refresh(&aggregator.counters[index]) { series in
                var snapshot = SeriesSnapshot(ring: ring, metric: series.metric, windows: [])
                for window in windows {
                    var stats = WindowStats()
                    stats.increase = series.windows.sum(window: window, nowNanos: now)
                    stats.rate = series.windows.rate(window: window, nowNanos: now)
                    snapshot.windows.append(stats)
                }
                snapshot.cumulativeSum = series.windows.total
                return (snapshot, snapshot.windows.allSatisfy { $0.increase == 0 })
            })
        }
        for index in aggregator.gauges.indices {
            result.append(refresh(&aggregator.gauges[index]) { series in
                var snapshot = SeriesSnapshot(ring: ring, metric: series.metric, windows: [])
                for window in windows {
                    var stats = WindowStats()
                    if let range = series.windows.range(window: window, nowNanos: now) {
                        stats.gaugeMin = range.min
                        stats.gaugeMax = range.max
                    }
                    snapshot.windows.append(stats)
                }
                snapshot.lastValue = series.windows.last
                return (snapshot, snapshot.windows.allSatisfy { $0.gaugeMin == nil })
            })
        }
        return result
    }

    /// The series' snapshot: the cached one while it stays valid, else a new one from `make`.
    private func refresh<Windows>(_ series: inout RingAggregator.Series<Windows>,
                                  _ make: (RingAggregator.Series<Windows>) -> (SeriesSnapshot, Bool)) -> SeriesSnapshot {
        if !series.touched, series.windowsAreEmpty, let cached = series.cached { return cached }
        let (snapshot, empty) = make(series)
        series.cached = snapshot
        series.windowsAreEmpty = empty
        series.touched = false
        return snapshot
    }
}
