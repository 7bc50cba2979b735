import Ringside
import RingsideAggregation
import RingsideExport

/// Hands out series ids and versions: increasing across the whole collector.
struct VersionCounter {
    private(set) var last: UInt64 = 0
    mutating func next() -> UInt64 {
        last += 1
        return last
    }
}

extension TrackedRing {
    /// Every series' snapshot. A window's statistics are recomputed only when records arrived
    /// or the window slid (its slice rotated); otherwise the last ones are reused, so thousands of
    /// quiet series cost little to publish.
    func seriesSnapshots(nowNanos now: UInt64, quantiles: [Double], nativeSchema: Int?,
                         versions: inout VersionCounter, capture: inout HistogramCapture?) -> [SeriesSnapshot] {
        let ring = consumer.name
        let layout = aggregator.layout
        var result: [SeriesSnapshot] = []
        result.reserveCapacity(aggregator.metricCount)
        for index in aggregator.histograms.indices {
            result.append(refresh(&aggregator.histograms[index], layout: layout, now: now, versions: &versions,
                                  window: { series, window in
                let histogram = series.windows.snapshot(window: window, nowNanos: now)
                var stats = WindowStats()
                stats.count = histogram.count
                stats.sum = histogram.sum
                stats.min = histogram.min
                stats.max = histogram.max
                stats.mean = histogram.mean
                stats.quantileValues = histogram.isEmpty ? quantiles.map { _ in 0 } : histogram.values(atQuantiles: quantiles)
                // Over the span covered, as a counter's rate is, so both read alike.
                let covered = max(series.windows.coveredNanos(window: window, nowNanos: now), layout.tickNanos)
                stats.rate = Double(histogram.count) * 1e9 / Double(covered)
                return stats
            }, whole: { series, snapshot in
                let cumulative = series.windows.cumulative
                snapshot.cumulativeBuckets = cumulative.cumulativeCounts(atUpperBounds: ExportBuckets.upperBounds(for: series.metric.unit))
                if let nativeSchema {
                    let nanosPerUnit = series.metric.unit.nanoseconds
                    snapshot.nativeBuckets = NativeBuckets(cumulative, schema: nativeSchema,
                                                           baseUnitsPerValue: nanosPerUnit.map { Double($0) / 1e9 } ?? 1)
                }
                snapshot.cumulativeCount = cumulative.count
                snapshot.cumulativeSum = cumulative.sum
                snapshot.cumulativeExactSum = cumulative.exactSum
                snapshot.droppedRecords = series.cells.dropped
            }, ring: ring))
            // --hlog: the all-time histogram of a series that recorded something since the last capture.
            if capture != nil, case let count = aggregator.histograms[index].windows.cumulativeCount,
               count != aggregator.histograms[index].capturedCount, let id = result.last?.id {
                aggregator.histograms[index].capturedCount = count
                // Shares the series' all-time histogram: its next change copies it, once per interval.
                capture?.series[id] = HistogramCapture.Series(ring: ring, metric: aggregator.histograms[index].metric,
                                                              cumulative: aggregator.histograms[index].windows.cumulative)
            }
        }
        for index in aggregator.counters.indices {
            result.append(refresh(&aggregator.counters[index], layout: layout, now: now, versions: &versions,
                                  window: { series, window in
                var stats = WindowStats()
                stats.increase = series.windows.sum(window: window, nowNanos: now)
                stats.rate = series.windows.rate(window: window, nowNanos: now)
                return stats
            }, whole: { series, snapshot in
                snapshot.cumulativeSum = Double(series.cells.total)
                snapshot.cumulativeExactSum = UInt128(series.cells.total)
            }, ring: ring))
        }
        for index in aggregator.gauges.indices {
            result.append(refresh(&aggregator.gauges[index], layout: layout, now: now, versions: &versions,
                                  window: { series, window in
                var stats = WindowStats()
                if let range = series.windows.range(window: window, nowNanos: now) {
                    stats.gaugeMin = range.min
                    stats.gaugeMax = range.max
                }
                return stats
            }, whole: { series, snapshot in
                // The cell holds the last value set by any thread, exact even when records dropped.
                snapshot.lastValue = series.cells.lastValue ?? series.windows.last
                snapshot.droppedRecords = series.cells.dropped
            }, ring: ring))
        }
        return result
    }

    /// The series' snapshot, recomputing only the windows that may have changed (all of them,
    /// and the whole-series figures, when records arrived).
    private func refresh<Windows>(_ series: inout RingAggregator.Series<Windows>, layout: WindowLayout, now: UInt64,
                                  versions: inout VersionCounter,
                                  window: (RingAggregator.Series<Windows>, Int) -> WindowStats,
                                  whole: (RingAggregator.Series<Windows>, inout SeriesSnapshot) -> Void,
                                  ring: String) -> SeriesSnapshot {
        var snapshot = series.cached ?? SeriesSnapshot(ring: ring, metric: series.metric, id: versions.next(), windows: [])
        if series.computedSlices.count != layout.windowNanos.count {
            series.computedSlices = Array(repeating: .max, count: layout.windowNanos.count)
            snapshot.windows = Array(repeating: WindowStats(), count: layout.windowNanos.count)
        }
        var windowsChanged = series.touched || series.cached == nil
        for index in layout.windowNanos.indices {
            let slice = now / layout.sliceNanos[index]
            guard series.touched || slice != series.computedSlices[index] else { continue }
            series.computedSlices[index] = slice
            let stats = window(series, index)
            // An empty window that stays empty changes nothing.
            if stats.isEmpty && snapshot.windows[index].isEmpty && !series.touched { continue }
            snapshot.windows[index] = stats
            windowsChanged = true
        }
        if series.touched || series.cached == nil {
            whole(series, &snapshot)
            snapshot.wholeVersion = versions.next()
        }
        if windowsChanged { snapshot.version = versions.next() }
        series.cached = snapshot
        series.touched = false
        return snapshot
    }
}

extension WindowStats {
    /// Nothing fell in the window.
    var isEmpty: Bool { count == 0 && increase == 0 && gaugeMin == nil }
}
