import Ringside
import RingsideAggregation

/// What a series costs the collector's memory, charged against `--max-series-bytes` when the
/// series is admitted.
///
/// Three parts:
/// - its state: windows, snapshot and the renderers' per-series caches, measured per kind with
///   the standard windows (`stateBytes`) and scaled by the windows kept;
/// - its text, which grows with its labels: every line of the Prometheus page repeats them
///   (53 lines for a histogram with the standard windows), and `/latest` has them once. The
///   collector may hold a page five times at once (the one uncompressed page `MetricsPages`
///   keeps, the next one its thread writes in slices and joins, an older one still being sent,
///   and the render worker's `/latest` or page written meanwhile: charged four times, the peak
///   passed the budget in the suite's runs), so the text is charged five times; gzipped pages,
///   kept for each format scraped with gzip, are a twentieth of it and fall within the budget's
///   last quarter;
/// - a histogram's counts, which grow with what it records (from nothing to about 1 MiB for a
///   busy series, see `WindowedHistogram`): not charged at admission but measured as they grow
///   (`BotAggregator.Usage.bytes`), and counted against the budget too.
struct SeriesCost {
    /// The bytes a metric's series take on the Prometheus page (`PrometheusExporter.pageBytes`),
    /// given its bot, windows and quantiles: handed to the drain by the daemon, so that the drain
    /// never imports the exporters.
    typealias PageBytes = @Sendable (_ metric: MetricDescriptor, _ ring: String, _ windows: Int, _ quantiles: Int) -> Int

    let ring: String
    let layout: WindowLayout
    let quantiles: Int
    let pageBytes: PageBytes

    /// Pages of one kind the collector may hold at once: one kept, one written in slices, one
    /// joined from them, one still being sent, and one the render worker writes meanwhile.
    static let pagesHeld = 5

    /// A series' state with the standard three windows and nothing recorded, measured with
    /// 100,000 series of each kind (RssAnon of the collector, less its RssAnon with none).
    static func standardStateBytes(of kind: MetricKind) -> Int {
        switch kind {
        case .histogram: 4_000
        case .counter: 2_300
        case .gauge: 2_600
        }
    }

    /// The bytes `metric` is charged when admitted.
    func bytes(of metric: MetricDescriptor) -> Int {
        let windows = layout.windowNanos.count
        let state = Self.standardStateBytes(of: metric.kind) * (windows + 1) / 4
        let page = pageBytes(metric, ring, windows, quantiles)
        // /latest: the labels once, and about 140 bytes of figures per window.
        let json = metric.name.utf8.count + metric.encodedLabels.utf8.count + ring.utf8.count + 60 + 140 * windows
        return state + Self.pagesHeld * (page + json)
    }
}
