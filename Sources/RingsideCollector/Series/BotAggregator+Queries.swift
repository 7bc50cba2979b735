import CRingside
import RingsideSnapshot
import Ringside
import RingsideAggregation

extension BotAggregator {
    // MARK: - Queries, for the SLOs

    /// Calls `body` with the metric of every series named `name`, of every kind: what an SLO's
    /// selector meets, judged or not.
    func forEachMetric(named name: String, _ body: (MetricDescriptor) -> Void) {
        for series in tables.histograms where series.metric.name == name { body(series.metric) }
        for series in tables.signedHistograms where series.metric.name == name { body(series.metric) }
        for series in tables.gauges where series.metric.name == name { body(series.metric) }
        for series in tables.counters where series.metric.name == name { body(series.metric) }
    }

    /// Merges window `window` (an index into the layout's windows) of every histogram series of
    /// `table` (`\.histograms`, of unsigned values, or `\.signedHistograms`) that `include`
    /// accepts, in registration order, into `merged`.
    /// - Returns: how many series it merged.
    func mergeHistograms<Slice: WindowedHistogramSlice>(
        _ table: KeyPath<SeriesTables, [Series<Windowed<Slice>>]>,
        window: Int, nowNanos now: UInt64, into merged: inout Slice,
        where include: (MetricDescriptor) -> Bool
    ) -> Int {
        var count = 0
        for series in tables[keyPath: table] where include(series.metric) {
            merged.merge(series.windows.snapshot(window: window, nowNanos: now))
            count += 1
        }
        return count
    }

    /// Calls `body` with every gauge series `include` accepts: its windows, and the value it
    /// holds as the snapshots show it (nil before the first set).
    func forEachGauge(where include: (MetricDescriptor) -> Bool, _ body: (MetricDescriptor, WindowedGauge, Double?) -> Void) {
        for series in tables.gauges where include(series.metric) {
            body(series.metric, series.windows, series.cells.lastValue ?? series.windows.last)
        }
    }

    /// Calls `body` with every counter series `include` accepts and its exact total.
    func forEachCounter(where include: (MetricDescriptor) -> Bool, _ body: (MetricDescriptor, UInt64) -> Void) {
        for series in tables.counters where include(series.metric) { body(series.metric, series.cells.total) }
    }
}
