import Ringside
import RingsideAggregation
import Synchronization

/// What the drain thread hands the interval log (`--hlog`): the all-time histograms of the
/// series that recorded something since the last capture, as of a publish. The log writer
/// subtracts each series' previous capture to get the interval's histogram.
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

/// The hand-over: the drain thread delivers captures, the log writer takes them. A capture not
/// taken yet is merged with the next (the newer histogram of a series wins: they are all-time
/// histograms), so a slow writer makes longer intervals, never lost records.
final class HistogramCaptureFeed: Sendable {
    private let pending = Mutex<HistogramCapture?>(nil)

    func deliver(_ capture: HistogramCapture) {
        pending.withLock { current in
            guard var merged = current else {
                current = capture
                return
            }
            merged.realtimeNanos = capture.realtimeNanos
            for (id, series) in capture.series { merged.series[id] = series }
            current = merged
        }
    }

    /// The captures delivered since the last call, merged; nil if none.
    func take() -> HistogramCapture? {
        pending.withLock { current in
            defer { current = nil }
            return current
        }
    }
}
