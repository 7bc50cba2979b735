import Ringside
import RingsideAggregation

/// What a series costs the collector's memory, charged against `--max-series-bytes` when the
/// series is admitted.
///
/// Three parts:
/// - its state: windows, snapshot and the renderers' per-series caches, measured per kind with
///   the standard windows and one value in them (`standardStateBytes`), scaled by the windows kept;
/// - its text as the pages that are kept hold it, which grows with its labels: a gzipped page is
///   about a twentieth of its text (zlib's level 1), kept for each format scraped with gzip (three
///   at most) and made again beside the one kept; `/latest` has the labels once, and what it holds
///   was measured (`latestHeld`). A plain `/metrics` page is not charged: a large one is written as it
///   is sent, a part at a time, and one is kept only up to a sixteenth of the budget
///   (`MetricsPages.keptPlainBytes(budget:)`), within the budget's last quarter;
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

    /// Of a page's text, the share its gzipped pages hold: three formats (text, OpenMetrics,
    /// protobuf), each kept and made again beside it, each about a twentieth of the text.
    static let gzippedShare = (formats: 3 * 2, divisor: 20)
    /// `/latest`'s text held once it was asked for, measured (RssAnon, release): each series'
    /// part kept for the next render (`LatestRenderer`), the page, both again while the next is
    /// made, and the heap they leave. 100,000 histograms of short labels: 3.9 KB a series more
    /// after two gzipped `/latest`s; 80,800 of 200-byte labels, polled while 307,200 registered
    /// (`ringside-bench attack`): 8.2 KB, about 9 times the 890 bytes of a series' part.
    static let latestHeld = 9

    /// A series' state with the standard three windows and one value in them, measured with
    /// 100,000 series of each kind (`ringside-bench scale --kind K`: RssAnon of the collector
    /// once they are drained, less its RssAnon with none; 2026-11-29).
    static func standardStateBytes(of kind: MetricKind) -> Int {
        switch kind {
        case .histogram: 1_600  // 1,504 to 1,558 B measured
        case .counter: 1_700  // 1,636 B
        case .gauge: 1_700  // 1,674 B
        }
    }

    /// The bytes `metric` is charged when admitted.
    func bytes(of metric: MetricDescriptor) -> Int {
        let windows = layout.windowNanos.count
        let state = Self.standardStateBytes(of: metric.kind) * (windows + 1) / 4
        let gzipped = pageBytes(metric, ring, windows, quantiles) * Self.gzippedShare.formats / Self.gzippedShare.divisor
        // /latest: the labels once, and about 140 bytes of figures per window.
        let json = metric.name.utf8.count + metric.encodedLabels.utf8.count + ring.utf8.count + 60 + 140 * windows
        return state + gzipped + Self.latestHeld * json
    }
}
