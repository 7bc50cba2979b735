import Ringside
import RingsideCollector
import RingsideExport
import RingsideHTTP
import RingsideHTTPClient

/// Query strings and the values of heads and flags, each through its parser: the input, as text,
/// is `/api/history`'s query (`HistoryQuery`), the query of every route that takes a few
/// parameters or none (`RouteQuery`: `/metrics?ring=`, `/health?ring=&max_age=`, ...), an
/// `Accept` header (`ExpositionFormat.negotiate`), an `Accept-Encoding` header (`acceptsGzip`)
/// and an OTLP endpoint (`HTTPURL`, `--otlp-endpoint`).
///
/// Checks: a history query taken asks for times from 0 with `from` at most `to` and a step of
/// 1 s to an hour; a route's query taken names only bots' valid names, each once, at most
/// `RouteQuery.maxRings`, and a `max_age` from 1 s to a day, and only on the routes that take
/// them; a URL taken is written (`description`) as one that reads back the same, and the request
/// head the client writes to it is read by the server's parser as the same target.
enum QueryTarget {
    static let target = FuzzTarget(
        name: "query",
        covers: "text: /api/history's query, the routes' queries (ring=, max_age=), Accept, Accept-Encoding, an OTLP endpoint URL",
        run: run,
        seeds: { seeds })

    static func run(_ bytes: [UInt8]) {
        func finding(_ what: String) -> Never { FuzzFinding.report("query", what) }
        // Bytes as the server makes a head's text of them (it has refused control bytes already).
        let text = String(decoding: bytes, as: UTF8.self)
        if let query = try? HistoryQuery(parsing: text, nowSeconds: 1_800_000_000) {
            if query.from < 0 || query.from > query.to || !(1...HistoryQuery.maxStep).contains(query.step) {
                finding("a history query of from \(query.from), to \(query.to), step \(query.step) from \(text)")
            }
        }
        for path in ["/metrics", "/health", "/latest", "/"] {
            guard let query = try? RouteQuery(parsing: text, path: path) else { continue }
            checkRouteQuery(query, path: path, text: text, finding: finding)
        }
        _ = ExpositionFormat.negotiate(accept: text)
        _ = acceptsGzip(text)
        if let url = try? HTTPURL(parsing: text) {
            guard let again = try? HTTPURL(parsing: url.description), again == url else {
                finding("the URL \(text) is written \(url.description), which reads back otherwise")
            }
            checkRequest(to: url, finding: finding)
        }
    }

    /// A route's query taken holds only what the route takes, each value as its checks allow.
    private static func checkRouteQuery(_ query: RouteQuery, path: String, text: String, finding: (String) -> Never) {
        let taken = RouteQuery.parameters[path] ?? []
        if !query.rings.isEmpty, !taken.contains("ring") { finding("\(path) took ring= from \(text)") }
        if query.maxAgeSeconds != nil, !taken.contains("max_age") { finding("\(path) took max_age= from \(text)") }
        if query.rings.count > RouteQuery.maxRings || Set(query.rings).count != query.rings.count {
            finding("\(query.rings.count) rings, some twice, from \(text)")
        }
        for ring in query.rings where (try? RingDirectory.validate(name: ring)) == nil {
            finding("ring=\(ring) taken from \(text), which is no bot's name")
        }
        if let age = query.maxAgeSeconds, !RouteQuery.maxAgeRange.contains(age) { finding("max_age \(age) s taken from \(text)") }
    }

    /// The head the client writes to `url` must be one a strict server (the collector's) reads
    /// as a request for the same path and query.
    private static func checkRequest(to url: HTTPURL, finding: (String) -> Never) {
        let head = HTTPClientRequest(method: "POST", url: url, headers: [], body: []).head()
        let path = url.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? "/"
        var parser = RequestParser(maxHeadBytes: 1 << 20, postPaths: [path])
        head.withUnsafeBytes { parser.append($0) }
        guard case .request(let request, _) = parser.next() else {
            finding("the client's request to \(url) is not one a server reads: \(String(decoding: head, as: UTF8.self))")
        }
        let sent = url.path.isEmpty ? "/" : url.path
        if request.path + (request.query.map { "?" + $0 } ?? "") != sent {
            finding("the client's request to \(url) reads as path \(request.path), query \(request.query ?? "none")")
        }
    }

    static let seeds = [
        FuzzSeed("history", "ring=bot-a&metric=fill_latency&label=symbol:AAPL&label=venue:X%3AY&from=-600&to=0&step=10"),
        FuzzSeed("history-series", "series=1&series=18446744073709551615&from=1700000000&to=1700000300"),
        FuzzSeed("history-encoded", "metric=a%20b+c&ring=%E2%9C%93&label=k%3Av"),
        FuzzSeed(
            "accept",
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,"
                + "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"),
        FuzzSeed("accept-encoding", "gzip;q=0, x-gzip;q=0.5, *;q=0.1, identity"),
        FuzzSeed("url", "http://otel-collector:4318/v1/metrics?tenant=a"),
        FuzzSeed("url-ipv6", "http://[::1]:4318"),
        FuzzSeed("empty", ""),
        FuzzSeed("bots", "ring=live-bot&ring=b.1_x-2&ring=live-bot"),
        FuzzSeed("bot-health", "ring=order-router&max_age=30s&ring=md%2Dfeed"),
        FuzzSeed("bot-health-seconds", "max_age=1.5&ring=a"),
        FuzzSeed("bot-worker", "ring=pool%404242"),
        FuzzSeed("live-page", "window=1m"),
        FuzzSeed("bots-many", (0...64).map { "ring=b\($0)" }.joined(separator: "&")),
    ]
}
