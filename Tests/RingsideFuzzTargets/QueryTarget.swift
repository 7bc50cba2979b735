import RingsideCollector
import RingsideExport
import RingsideHTTP
import RingsideHTTPClient

/// Query strings and the values of heads and flags, each through its parser: the input, as text,
/// is `/api/history`'s query (`HistoryQuery`), an `Accept` header (`ExpositionFormat.negotiate`),
/// an `Accept-Encoding` header (`acceptsGzip`) and an OTLP endpoint (`HTTPURL`, `--otlp-endpoint`).
///
/// Checks: a history query taken asks for times from 0 with `from` at most `to` and a step of
/// 1 s to an hour; a URL taken is written (`description`) as one that reads back the same, and
/// the request head the client writes to it is read by the server's parser as the same target.
enum QueryTarget {
    static let target = FuzzTarget(
        name: "query",
        covers: "text: /api/history's query, Accept, Accept-Encoding, an OTLP endpoint URL",
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
        _ = ExpositionFormat.negotiate(accept: text)
        _ = acceptsGzip(text)
        if let url = try? HTTPURL(parsing: text) {
            guard let again = try? HTTPURL(parsing: url.description), again == url else {
                finding("the URL \(text) is written \(url.description), which reads back otherwise")
            }
            checkRequest(to: url, finding: finding)
        }
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
    ]
}
