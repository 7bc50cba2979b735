import CRingside
import RingsideHTTP
import Synchronization

/// The collector's HTTP routes: `/metrics`, `/latest`, `/health` and `/`.
///
/// Called on the HTTP server's thread. It reads the collector's published snapshot; the renderers
/// keep each series' text until the series changes, so a scrape formats only what changed.
public final class CollectorEndpoints: Sendable {
    private let collector: Collector
    private let prometheus = PrometheusRenderer()
    private let latest = LatestRenderer()
    /// The last body of each route, by snapshot generation: repeated scrapes cost a copy.
    private let cache = Mutex<[String: (generation: UInt64, body: [UInt8])]>([:])

    public init(collector: Collector) {
        self.collector = collector
    }

    /// The drain loop counts as stalled when its last pass is older than this.
    var stallNanos: UInt64 { max(1_000_000_000, 10 * collector.options.pollNanos) }

    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        switch request.path {
        case "/metrics":
            return HTTPResponse(contentType: PrometheusExporter.contentType,
                                body: cached("metrics") { prometheus.render($0, process: ProcessMetrics.read()) })
        case "/latest":
            return HTTPResponse(contentType: JSONExporter.contentType, body: cached("latest", latest.render))
        case "/health":
            let snapshot = collector.snapshot
            let now = rs_clock_precise_ns()
            let last = collector.lastPassMonotonicNanos // the loop's own progress, not the last publish's
            let age = last == 0 ? Double.infinity : Double(now &- min(now, last)) / 1e9
            let healthy = last != 0 && now &- min(now, last) <= stallNanos
            return HTTPResponse(status: healthy ? 200 : 503, contentType: JSONExporter.contentType,
                                body: JSONExporter.health(snapshot, isHealthy: healthy, lastPassAgeSeconds: age))
        case "/":
            return HTTPResponse(text: Self.index)
        default:
            return HTTPResponse(status: 404, text: "not found: \(request.path)\n\n" + Self.index)
        }
    }

    private func cached(_ key: String, _ render: (Snapshot) -> [UInt8]) -> [UInt8] {
        let snapshot = collector.snapshot
        if let hit = cache.withLock({ $0[key] }), hit.generation == snapshot.generation { return hit.body }
        let body = render(snapshot)
        cache.withLock { $0[key] = (snapshot.generation, body) }
        return body
    }

    static let index = """
    ringside-collector: drains Ringside shared-memory rings and exports what they say.

      GET /metrics   Prometheus text format 0.0.4: windowed quantiles (summaries with a window
                     label), cumulative histogram buckets, counters, gauges, SLO states, self-metrics
      GET /latest    the latest snapshot as JSON (series, rings, SLOs, collector)
      GET /health    each ring's state; 200 while the drain loop makes progress, else 503
      GET /          this text

    """
}
