import RingsideSystem
import RingsideExport
import RingsideSnapshot
import CRingside
import RingsideHTTP
import RingsideText
import Synchronization
import RingsideHTTPClient

/// The collector's HTTP routes: `/metrics`, `/latest`, `/api/history`, `/health`, `/-/healthy`, `/-/ready`, `/`, and the
/// captures' (`/api/capture`, `/api/captures`, `/captures/view`).
///
/// Two kinds, for the server's two threads: `quick` answers the probes and 404s on the server's
/// loop thread, at once whatever else is asked; `render` answers the pages on its render worker.
/// Both read the collector's published snapshot (and its subscribers' figures), nothing else of
/// it. `/metrics` is served from pages rendered ahead on a thread of their own (`metricsPages`,
/// started with `startRendering`). Safe from any thread.
package final class CollectorEndpoints: Sendable {
    let published: PublishedSnapshot
    private let pollNanos: UInt64
    /// What the daemon's subscribers report of themselves, shown with each snapshot.
    let figures: SubscriberFigures
    /// The `/metrics` pages of the variants scraped, kept up to date by their own thread.
    package let metricsPages: MetricsPages
    /// The per-bot pages (`/metrics?ring=`) and the queries refused: shown on `/metrics`.
    let queryFigures = QueryFigures()
    private let latest = LatestRenderer()
    /// The bodies rendered of the latest snapshot, by route and variant: repeated scrapes cost a
    /// copy. A body of a newer snapshot (or of the same one with a newer thread sample) empties
    /// it, so it never keeps a page of a snapshot gone; it keeps one uncompressed body at most.
    private let cache = Locked<(version: PageVersion, bodies: [String: [UInt8]])>((PageVersion(), [:]))
    /// `/api/history` bodies of the history's current generation, by query and encoding, so
    /// clients polling the same view (a dashboard open in several places) cost one render per
    /// snapshot: 32 clients asking the same 10,200 series got 5 to 8 times the answers. Emptied
    /// when the generation moves; at most `historyCacheEntries` bodies (each at most
    /// `HistoryStore.maxPointsPerAnswer` points, 3.7 MB of JSON).
    private let historyCache = Locked<(generation: UInt64, bodies: [String: HistoryBody])>((0, [:]))
    /// An `/api/history` answer rendered: its body, and the CSV answer's figures as headers.
    struct HistoryBody: Sendable {
        var bytes: [UInt8]
        var headers: [HTTPHeader]
    }
    static let historyCacheEntries = 8

    /// The per-second history `/api/history` serves (nil with `--history 0`); the daemon loop feeds it.
    package let history: HistoryStore?

    /// Where `POST /api/capture` asks for a capture, and the directory the captures' files are
    /// served from (nil without `--capture-dir`).
    let captureDesk: CaptureDesk?
    let captureDirectory: LogDirectory?

    /// `POST /-/reload`'s requests, with `--web-enable-lifecycle` (nil: the route is not served).
    let reloadRequests: ReloadRequests?
    /// The route that reloads the configuration, as Prometheus'.
    package static let reloadPath = "/-/reload"

    package init(collector: Collector, reloadRequests: ReloadRequests? = nil) {
        self.reloadRequests = reloadRequests
        captureDesk = collector.captureDesk
        captureDirectory = collector.captureDirectory
        let published = collector.published
        self.published = published
        let options = collector.options
        pollNanos = options.pollNanos
        history =
            options.historySeconds > 0
            ? HistoryStore(retentionSeconds: options.historySeconds, maxSeries: options.historyMaxSeries) : nil
        let figures = SubscriberFigures()
        self.figures = figures
        let queryFigures = queryFigures
        metricsPages = MetricsPages(
            published: published,
            source: {
                var snapshot = published.snapshot
                figures.apply(to: &snapshot)
                queryFigures.apply(to: &snapshot)
                return snapshot
            }, keptPlainBytes: MetricsPages.keptPlainBytes(budget: options.maxSeriesBytes))
    }

    /// Starts the thread that renders the `/metrics` pages scraped ahead of their scrapes (until
    /// then, and after `stopRendering`, a scrape renders a page of a newer snapshot itself).
    package func startRendering() { metricsPages.start() }

    /// Stops that thread, once its render is done (the daemon's, after the server stopped).
    package func stopRendering() { metricsPages.stop() }

    /// The routes answered without a password under `--web-config-file`: the probes a service
    /// manager or load balancer sends, which tell nothing about the bots (`/-/ready` and the rest
    /// need one).
    package static let openPaths: Set<String> = ["/health", "/-/healthy"]

    /// The drain loop counts as stalled when its last pass is older than this.
    var stallNanos: UInt64 { DrainTiming.stallNanos(pollNanos: pollNanos) }

    /// The latest snapshot, with the subscribers' figures.
    func latestSnapshot() -> Snapshot {
        var snapshot = published.snapshot
        figures.apply(to: &snapshot)
        queryFigures.apply(to: &snapshot)
        return snapshot
    }

    /// Whether the drain loop makes progress (its last pass is at most `stallNanos` old), and
    /// the age of that pass in seconds (infinity before the first). What `/health` and `/-/ready` answer by.
    func drainProgress() -> (ready: Bool, lastPassAgeSeconds: Double) {
        let now = rs_clock_precise_ns()
        let last = published.lastPassMonotonicNanos  // the loop's own progress, not the last publish's
        guard last != 0 else { return (false, .infinity) }
        let age = now &- min(now, last)
        return (age <= stallNanos, Double(age) / 1e9)
    }

    /// How long ago `snapshot`'s figures were last known to hold, in seconds (0 for none yet, or
    /// a clock set back).
    static func age(of snapshot: Snapshot) -> Double {
        guard snapshot.currentRealtimeNanos != 0 else { return 0 }
        let now = rs_clock_realtime_ns()
        return Double(now &- min(now, snapshot.currentRealtimeNanos)) / 1e9
    }

    /// Answers what costs next to nothing and must answer under any load (`/-/healthy`,
    /// `/-/ready`, `/health`, 404s), on the HTTP server's loop thread; nil for a page, which
    /// `render` answers. The server's `quick`.
    package func quick(_ request: HTTPRequest) -> HTTPResponse? {
        if case let .refused(refusal) = checkedQuery(of: request) { return refusal }
        switch request.path {
        case "/metrics", "/latest", "/api/history", "/", Self.capturesPath, Self.timelinePath:
            return nil
        case Self.capturePath:
            return request.method == "POST" ? askForCapture(request) : HTTPResponse(status: 405, text: "use POST to ask for a capture\n")
        case "/health":
            guard case let .taken(query) = checkedQuery(of: request) else { return nil }
            return health(asking: query)
        case "/-/healthy":
            // The process serves: that is all liveness means (Prometheus's and node_exporter's convention).
            return HTTPResponse(text: "Healthy\n")
        case Self.reloadPath where reloadRequests != nil:
            // A reload waits for the daemon's loop: on the render worker, never on the server's loop.
            return request.method == "POST" ? nil : HTTPResponse(status: 405, text: "use POST to reload the configuration\n")
        case "/-/ready":
            let progress = drainProgress()
            guard !progress.ready else { return HTTPResponse(text: "Ready\n") }
            let age =
                progress.lastPassAgeSeconds.isFinite
                ? "its last pass was \(formatSeconds(progress.lastPassAgeSeconds)) ago" : "it has not made a pass yet"
            return HTTPResponse(status: 503, text: "Not ready: the drain loop makes no progress (\(age))\n")
        case let path where path.hasPrefix(Self.capturesPath + "/"):
            return nil
        default:
            return HTTPResponse(status: 404, text: "not found: \(request.path)\n\n" + Self.index)
        }
    }

    /// Answers any route, as one thread serving everything would: `quick`, else `render`.
    package func handle(_ request: HTTPRequest) -> HTTPResponse {
        quick(request) ?? render(request)
    }

    /// Renders the pages `quick` declines (`/metrics`, `/latest`, `/api/history`, `/`): they cost
    /// up to seconds and hundreds of MB for 100,000 series, so the server renders them one at a
    /// time on its render worker. The server's `handler`.
    package func render(_ request: HTTPRequest) -> HTTPResponse {
        switch request.path {
        case "/metrics":
            // Text, OpenMetrics or protobuf, as the scraper's Accept header prefers.
            let format = ExpositionFormat.negotiate(accept: request.header("Accept"))
            let gzip = acceptsGzip(request.header("Accept-Encoding"))
            let variant = MetricsPages.Variant(format, gzip: gzip)
            let parts: [[UInt8]]
            switch checkedQuery(of: request) {
            case let .refused(refusal): return refusal
            case let .taken(query) where !query.rings.isEmpty:
                let revision = published.revision  // before the snapshot: the page is at least as new
                parts = [queryFigures.botPages.page(bots: query.rings, variant: variant, revision: revision, source: latestSnapshot)]
            case .taken:
                // A plain page too large to keep is written as it is sent.
                if !gzip {
                    switch metricsPages.plainPage(format, minorVersion: request.minorVersion) {
                    case .kept: break
                    case let .streamed(stream):
                        return HTTPResponse(
                            contentType: format.contentType, stream: stream, headers: [HTTPHeader("Vary", "Accept-Encoding")])
                    case .tooManyStreams:
                        return HTTPResponse(
                            status: 503, text: "\(ResponseStream.maxOpen) large pages are being sent: retry, or ask for gzip\n",
                            headers: [HTTPHeader("Retry-After", "1")])
                    }
                }
                parts = metricsPages.page(for: variant).parts
            }
            let vary = HTTPHeader("Vary", "Accept-Encoding")
            return HTTPResponse(
                contentType: format.contentType, bodyParts: parts,
                headers: gzip ? [HTTPHeader("Content-Encoding", "gzip"), vary] : [vary])
        case "/latest":
            return compressible(request, contentType: JSONExporter.contentType, key: "latest", latest.render)
        case "/api/history":
            return historyPage(request)
        case Self.capturesPath:
            return HTTPResponse(contentType: JSONExporter.contentType, body: JSONExporter.captures(latestSnapshot()))
        case let path where path.hasPrefix(Self.capturesPath + "/"):
            return captureFile(named: String(path.dropFirst(Self.capturesPath.count + 1)))
        case "/":
            return compressible(request, contentType: LivePage.contentType, key: "live page") { _ in LivePage.bytes }
        case Self.timelinePath:
            // A static page: the capture it draws is named in its query and fetched by its script.
            return HTTPResponse(contentType: CaptureTimeline.contentType, body: CaptureTimeline.bytes)
        case Self.reloadPath where request.method == "POST":
            guard let outcome = reloadRequests?.ask() else {
                return HTTPResponse(status: 503, text: "the reload did not finish within 10 s\n")
            }
            return HTTPResponse(status: outcome.succeeded ? 200 : 500, text: outcome.message + "\n")
        default:
            return quick(request) ?? HTTPResponse.notFound(request)
        }
    }

    private func historyPage(_ request: HTTPRequest) -> HTTPResponse {
        guard let history else {
            return HTTPResponse(status: 404, text: "the history is disabled (--history 0)\n")
        }
        let now = Int64(rs_clock_realtime_ns() / 1_000_000_000)
        let query: HistoryQuery
        do { query = try HistoryQuery(parsing: request.query, nowSeconds: now) } catch {
            queryFigures.refuse(request.path)
            return HTTPResponse(status: 400, text: "bad request: \(error.reason)\n")
        }
        let gzip = acceptsGzip(request.header("Accept-Encoding"))
        // The query as sent, with its relative times resolved: the same key means the same answer
        // while the history's generation stands. Read before the query, so a snapshot recorded
        // meanwhile gives a newer body under an older generation, never the reverse.
        let key = "\(query.from) \(query.to) \(gzip) \(request.query ?? "")"
        let generation = history.generation
        func answer(_ body: HistoryBody) -> HTTPResponse {
            let vary = HTTPHeader("Vary", "Accept-Encoding")
            return HTTPResponse(
                contentType: query.format == .csv ? HistoryAnswer.csvContentType : JSONExporter.contentType, body: body.bytes,
                headers: (gzip ? [HTTPHeader("Content-Encoding", "gzip"), vary] : [vary]) + body.headers)
        }
        if let hit = historyCache.withLock({ $0.generation == generation ? $0.bodies[key] : nil }) { return answer(hit) }
        let found = history.query(query)
        let rendered = query.format == .csv ? found.csv : found.json
        let headers = query.format == .csv ? found.csvHeaders.map { HTTPHeader($0.name, $0.value) } : []
        let body = HistoryBody(bytes: gzip ? Zlib.compress(rendered, .gzip) : rendered, headers: headers)
        historyCache.withLock { cache in
            if cache.generation != generation || cache.bodies.count >= Self.historyCacheEntries {
                cache = (generation, [:])
            }
            cache.bodies[key] = body
        }
        return answer(body)
    }

    /// A rendered page, gzipped when the client takes gzip (as every scraper does): each variant is
    /// rendered and compressed once per snapshot. A gzipped page keeps only its compressed body:
    /// the page itself (1.4 GB for 100,000 series of 200-byte labels) is freed once compressed.
    private func compressible(
        _ request: HTTPRequest, contentType: String, key: String,
        _ render: (Snapshot) -> [UInt8]
    ) -> HTTPResponse {
        let vary = HTTPHeader("Vary", "Accept-Encoding")
        guard acceptsGzip(request.header("Accept-Encoding")) else {
            return HTTPResponse(contentType: contentType, body: cached(key, render), headers: [vary])
        }
        let body = cached(key + " gzip") { snapshot in
            Zlib.compress(cachedBody(key, version: PageVersion(snapshot)) ?? render(snapshot), .gzip)
        }
        return HTTPResponse(contentType: contentType, body: body, headers: [HTTPHeader("Content-Encoding", "gzip"), vary])
    }

    private func cachedBody(_ key: String, version: PageVersion) -> [UInt8]? {
        cache.withLock { $0.version == version ? $0.bodies[key] : nil }
    }

    private func cached(_ key: String, _ render: (Snapshot) -> [UInt8]) -> [UInt8] {
        let snapshot = latestSnapshot()
        let version = PageVersion(snapshot)
        if let hit = cachedBody(key, version: version) { return hit }
        let body = render(snapshot)
        // An uncompressed page too large to keep (as `/metrics`'s, see `MetricsPages.keptPlainBytes`)
        // is sent and let go: a `curl` of `/latest` for 100,000 series leaves nothing behind.
        if !key.hasSuffix(" gzip"), body.count > MetricsPages.keptPlainBytes { return body }
        cache.withLock { cache in
            guard !version.isOlder(than: cache.version) else { return }
            if version != cache.version { cache = (version, [:]) }
            // One uncompressed page at most (compressed ones are a fortieth of it).
            if !key.hasSuffix(" gzip") { cache.bodies = cache.bodies.filter { $0.key.hasSuffix(" gzip") } }
            cache.bodies[key] = body
        }
        return body
    }

    /// The routes and what each serves, for the index page and the 404 text.
    static let routes: [(path: String, description: String)] = [
        (
            "/metrics",
            "windowed quantiles, cumulative histogram buckets, counters, gauges, SLO states, the collector's "
                + "own metrics, build info and process metrics: Prometheus text 0.0.4, OpenMetrics 1.0.0 or protobuf "
                + "(with native histograms under --native-histograms) as the Accept header asks, gzipped when accepted; "
                + "?ring=NAME (repeatable): those bots' series and files alone"
        ),
        ("/latest", "the latest snapshot as JSON: series, rings and their lanes, SLOs, the collector"),
        (
            "/api/history",
            "per-second history of every series as JSON or CSV (--history, default the last hour; lost at a "
                + "restart): ?series=ID, ring=, metric=, label=KEY:VALUE, from=, to= (Unix seconds, or 0 or less: seconds "
                + "before now; default the last 5 minutes), step= (seconds per point), format=json (default) or csv"
        ),
        (
            "/api/captures",
            "the flight recorder's captures as JSON (--capture-dir): counts by trigger, the latest 100 and their files, "
                + "each served at /api/captures/FILE; POST /api/capture[?bot=NAME] asks for one"
        ),
        (
            "/captures/view",
            "?file=NAME.trace.json: a page that draws a capture's trace (a track per process and thread, slices, counters)"
        ),
        (
            "/health",
            "each ring's state and the bots alive as JSON; 200 while the drain loop makes progress, else 503; "
                + "?ring=NAME (repeatable; max_age=, default 60s): 200 while each bot named is alive and wrote within max_age, "
                + "else 503 with each one's state and reason"
        ),
        ("/-/healthy", "liveness: 200 whenever the process serves HTTP"),
        ("/-/ready", "readiness: 200 while the drain loop makes progress, else 503 (as /health)"),
    ]

    /// The text after a 404.
    static let index =
        "ringside-collector: drains Ringside shared-memory rings and exports what they say.\n\n"
        + routes.map { "  GET \($0.path)\(String(repeating: " ", count: max(1, 12 - $0.path.count)))\($0.description)\n" }.joined()
        + "  GET /           the live page: charts of every series, the bots and their lanes, SLOs\n"
}

/// What a page is rendered from: a snapshot's generation, and the thread sample it carries (which
/// comes on its own cadence). Both only grow.
private struct PageVersion: Equatable {
    var generation: UInt64 = 0
    var threadSample: UInt64 = 0

    init() {}

    init(_ snapshot: Snapshot) {
        generation = snapshot.generation
        threadSample = snapshot.threadHealth?.sequence ?? 0
    }

    /// Rendered from what came before `other`: a page of it must not replace one of `other`.
    func isOlder(than other: PageVersion) -> Bool {
        generation < other.generation || (generation == other.generation && threadSample < other.threadSample)
    }
}
