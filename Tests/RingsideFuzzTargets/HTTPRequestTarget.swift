import CRingside
import Foundation
import Ringside
import RingsideCollector
import RingsideHTTP

/// The HTTP request head, and what the routes make of it: the input is the bytes a client sends
/// on one connection, parsed by the server's `RequestParser` (its limits and POST routes as the
/// collector's), and each request it completes answered by the collector's routes
/// (`CollectorEndpoints.handle`: `/api/history`'s and `/api/capture`'s query strings, `Accept`
/// and `Accept-Encoding`, capture file names), over a collector holding a bot's series.
///
/// Checks: the parser says the same fed the bytes at once and one at a time (a client chooses how
/// its bytes are split); every answer has a status of 100 to 599 and headers without CR or LF.
enum HTTPRequestTarget {
    static let target = FuzzTarget(
        name: "http-request",
        covers: "a connection's bytes: the request head parser, then the collector's routes",
        run: run,
        seeds: { seeds })

    /// The routes, over a collector made once a process (its ring directory holds a dead bot's file).
    private static let endpoints = makeEndpoints()

    private static var limits: HTTPServerLimits {
        var limits = HTTPServerLimits()
        limits.postPaths = [CollectorEndpoints.reloadPath, "/api/capture"]
        return limits
    }

    static func run(_ bytes: [UInt8]) {
        func finding(_ what: String) -> Never { FuzzFinding.report("http-request", what) }
        let whole = outcomes(bytes, pieceBytes: max(1, bytes.count))
        let byByte = outcomes(bytes, pieceBytes: 1)
        if whole != byByte { finding("the parser says \(whole) fed the bytes at once, \(byByte) one at a time") }
        for case .request(let request, _) in whole {
            let response = endpoints.handle(request)
            if !(100...599).contains(response.status) { finding("status \(response.status) for \(request.target)") }
            for header in response.headers where (header.name + header.value).contains(where: { $0 == "\r" || $0 == "\n" }) {
                finding("a response header with a line break: \(header.name): \(header.value)")
            }
        }
    }

    /// What the parser says of `bytes` given `pieceBytes` at a time, as the server reads it: each
    /// request until one that closes the connection or a refusal.
    private static func outcomes(_ bytes: [UInt8], pieceBytes: Int) -> [ParseOutcome] {
        var parser = RequestParser(maxHeadBytes: limits.maxHeadBytes, postPaths: limits.postPaths)
        var said: [ParseOutcome] = []
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + pieceBytes)
            bytes[start..<end].withUnsafeBytes { parser.append($0) }
            start = end
            parsing: while true {
                let outcome = parser.next()
                guard outcome != .needMore else { break parsing }
                said.append(outcome)
                if case .request(_, keepAlive: true) = outcome { continue }
                return said
            }
        }
        return said
    }

    private static func makeEndpoints() -> CollectorEndpoints {
        func failed(_ what: String) -> Never { FuzzFinding.report("http-request", "cannot set up: \(what)") }
        let rings = FuzzScratch.path + "/rings", captures = FuzzScratch.path + "/captures"
        guard mkdir(rings, 0o700) == 0, mkdir(captures, 0o700) == 0 else { failed("mkdir in \(FuzzScratch.path)") }
        do {
            let bot = try Bot.attach("bot-a", directory: rings, options: .init(laneCapacity: 64, maxMetrics: 8, maxLanes: 2))
            let fill = try bot.histogram("fill_latency", unit: .nanoseconds, labels: ["symbol": "AAPL"])
            let orders = try bot.counter("orders", labels: ["side": "buy"])
            for value in 1...20 as ClosedRange<UInt64> {
                fill.record(value * 1_000)
                orders.increment()
            }
        } catch {
            failed("\(error)")
        }
        var options = CollectorOptions()
        options.directory = RingDirectory(rings)
        options.captureDirectory = captures
        options.threadSampleIntervalNanos = 0
        do {
            let collector = try Collector(options: options, log: CollectorLog { _ in })
            collector.runPass(nowNanos: rs_clock_precise_ns(), forcePublish: true)
            let endpoints = CollectorEndpoints(collector: collector)
            return endpoints
        } catch {
            failed("\(error)")
        }
    }

    static let seeds = [
        FuzzSeed(
            "get-metrics", "GET /metrics HTTP/1.1\r\nHost: localhost:9464\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n"),
        FuzzSeed(
            "prometheus-scrape",
            "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9464\r\nUser-Agent: Prometheus/2.42.0\r\n"
                + "Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,"
                + "text/plain;version=0.0.4;q=0.3,*/*;q=0.2\r\nAccept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n"),
        FuzzSeed(
            "history",
            "GET /api/history?ring=bot-a&metric=fill_latency&label=symbol:AAPL&from=-60&step=5 HTTP/1.1\r\nHost: h\r\n"
                + "Accept-Encoding: gzip, deflate\r\n\r\n"),
        FuzzSeed(
            "pipelined",
            "GET /health HTTP/1.1\r\nHost: h\r\n\r\nHEAD /latest HTTP/1.1\r\nHost: h\r\n\r\nGET /-/ready HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                + "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"),
        FuzzSeed("capture", "POST /api/capture?bot=bot-a&bot=b%20c HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"),
        FuzzSeed(
            "capture-file",
            "GET /api/captures/x.trace.json HTTP/1.1\r\nHost: h\r\n\r\nGET /captures/view?file=a.json HTTP/1.1\r\nHost: h\r\n\r\n"),
        FuzzSeed("absolute-form", "\r\nGET http://h:9464/api/captures?x HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, close\r\n\r\n"),
        FuzzSeed("refused", "DELETE /metrics HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"),
        FuzzSeed("tls-hello", [0x16, 0x03, 0x01, 0x00, 0xA5, 0x01, 0x00, 0x00, 0xA1, 0x03, 0x03]),
    ]
}
