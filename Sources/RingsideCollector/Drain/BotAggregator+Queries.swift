import CRingside
import RingsideSnapshot
import Ringside
import RingsideAggregation

extension BotAggregator {
    // MARK: - Queries

    /// Merges window `window` (an index into the layout's windows) of every histogram series of
    /// unsigned values `include` accepts, in registration order, into `merged`, for the SLOs (an
    /// SLO's threshold is a latency or a size: a signed series is never one of its series).
    /// - Returns: how many series it merged.
    func mergeHistograms(
        window: Int, nowNanos now: UInt64, into merged: inout Histogram,
        where include: (MetricDescriptor) -> Bool
    ) -> Int {
        var count = 0
        for series in tables.histograms where include(series.metric) {
            merged.merge(series.windows.snapshot(window: window, nowNanos: now))
            count += 1
        }
        return count
    }

    /// Calls `body` with every counter series `include` accepts and its exact total, for the SLOs.
    func forEachCounter(where include: (MetricDescriptor) -> Bool, _ body: (MetricDescriptor, UInt64) -> Void) {
        for series in tables.counters where include(series.metric) { body(series.metric, series.cells.total) }
    }
}
