import Ringside
import RingsideAggregation

/// What the interval log (`--hlog`) writes at the end of an interval: the all-time histograms of
/// the series that recorded something since the last, as of a published snapshot. The log
/// writer subtracts each series' previous capture to get the interval's histogram.
struct HistogramCapture: Sendable {
    struct Series: Sendable {
        var ring: String
        var metric: MetricDescriptor
        var cumulative: Histogram
    }

    /// CLOCK_REALTIME when the publish that took it began.
    var realtimeNanos: UInt64
    /// By series id (``SeriesSnapshot/id``).
    var series: [UInt64: Series] = [:]
}
