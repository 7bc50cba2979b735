import CRingside
import Foundation
import Ringside
import RingsideCollector
import RingsideExport
import RingsideHTTP
import RingsideSystem
import RingsideTestSupport
import RingsideText
#if canImport(Glibc)
import Glibc
#endif

/// `ringside-bench scrape`: how long `GET /metrics` takes with 10,000 series, from request to
/// last byte, against the same HTTP server sending a fixed page of the same size; the pages
/// are rendered ahead by the collector's renderer thread, as `ringside-collector` runs it.
package enum ScrapeBenchmark {
    package static let rings = 5
    package static let metricsPerRing = 2_000

    package static func run(_ settings: BenchSettings, progress: (String) -> Void = { _ in }) throws(BenchError) -> ScrapeReport {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let directory = try scratch.subdirectory("scrape")
        let scrapes = max(5, min(100, Int(settings.seconds * 10)))

        progress("scrape: registering \(rings * metricsPerRing) series")
        let bots = try (0..<rings).map { number throws(BenchError) in try ScrapeBot(number: number, directory: directory) }
        for bot in bots { bot.writeEveryMetric(values: 20) }

        let collector = try CollectorBenchmark.collector(CollectorBenchmark.options(directory: directory))
        let endpoints = CollectorEndpoints(collector: collector)
        let server: HTTPServer
        do {
            server = try HTTPServer(listen: "127.0.0.1:0", quick: endpoints.quick, handler: endpoints.render)
            try server.start()
        } catch { throw BenchError("starting the HTTP server: \(error)") }
        defer { server.stop() }
        collector.start()
        defer { collector.stop() }
        endpoints.startRendering()
        defer { endpoints.stopRendering() }
        let variant = MetricsPages.Variant(.text, gzip: false)
        try waitFor("the collector to drain all \(rings * metricsPerRing) series") {
            let snapshot = collector.snapshot
            return snapshot.series.count == rings * metricsPerRing && snapshot.rings.allSatisfy { $0.backlog == 0 }
        }

        var rows: [ScrapeReport.Row] = []
        progress("scrape: first, quiet")
        let first = try scrape(server.boundPort, after: collector)
        rows.append(
            .init(
                name: "scrape.first", millis: [first.millis],
                detail: "the first scrape: nothing rendered or allocated before"))
        // A second scrape: the variant is polled (as by Prometheus), so kept up to date from here.
        _ = try get(port: server.boundPort)
        // Quiet: no record since the bots' first values; the windows slide (every publish
        // changes some series), and the scrapes come at once, one after the other.
        var renders = endpoints.metricsPages.renders(of: variant)
        var quietMillis: [Double] = []
        for _ in 0..<scrapes {
            quietMillis.append(try get(port: server.boundPort).millis)
            System.nanosleep(20_000_000)
        }
        rows.append(
            .init(
                name: "scrape.quiet", millis: quietMillis,
                detail: "nothing recorded since the first values; the page is the renderer's latest "
                    + "(it rendered \(endpoints.metricsPages.renders(of: variant) - renders) meanwhile)"))

        // The same, gzipped, as Prometheus asks for it (Accept-Encoding: gzip): the page kept is
        // the gzipped one. Two scrapes first make that variant polled too.
        let gzipVariant = MetricsPages.Variant(.text, gzip: true)
        _ = try get(port: server.boundPort, gzip: true)
        _ = try get(port: server.boundPort, gzip: true)
        var gzipRenders = endpoints.metricsPages.renders(of: gzipVariant)
        var quietGzip: [(millis: Double, bytes: Int)] = []
        for _ in 0..<scrapes {
            quietGzip.append(try get(port: server.boundPort, gzip: true))
            System.nanosleep(20_000_000)
        }
        rows.append(
            .init(
                name: "scrape.quiet.gzip", millis: quietGzip.map(\.millis),
                detail: "as scrape.quiet, with Accept-Encoding: gzip (\(quietGzip.last?.bytes ?? 0) bytes; it rendered "
                    + "\(endpoints.metricsPages.renders(of: gzipVariant) - gzipRenders) meanwhile)"))

        progress("scrape: busy")
        let stop = StopFlag()
        let writer = try BackgroundThread(name: "bench-scrape-bots", cpu: -1) { () throws(BenchError) -> (() -> UInt64) in
            return {
                // Every metric of every ring gets a value every 100 ms: each scrape sees every series changed.
                var sweeps: UInt64 = 0
                while !stop.isSet {
                    for bot in bots { bot.writeEveryMetric(values: 1) }
                    sweeps += 1
                    System.nanosleep(100_000_000)
                }
                return sweeps
            }
        }
        writer.start()
        renders = endpoints.metricsPages.renders(of: variant)
        let busyStart = rs_clock_precise_ns()
        let busy = try (0..<scrapes).map { _ throws(BenchError) in try scrape(server.boundPort, after: collector) }
        let busySeconds = Double(rs_clock_precise_ns() - busyStart) / 1e9
        gzipRenders = endpoints.metricsPages.renders(of: gzipVariant)
        let busyGzipStart = rs_clock_precise_ns()
        let busyGzip = try (0..<scrapes).map { _ throws(BenchError) in try scrape(server.boundPort, after: collector, gzip: true) }
        let busyGzipSeconds = Double(rs_clock_precise_ns() - busyGzipStart) / 1e9
        stop.set()
        _ = try writer.join()
        rows.append(
            .init(
                name: "scrape.busy", millis: busy.map(\.millis),
                detail: "every series changed since the last scrape; bots writing 100 k values/s; "
                    + "\(oneDecimal(Double(endpoints.metricsPages.renders(of: variant) - renders) / busySeconds)) renders/s"))
        rows.append(
            .init(
                name: "scrape.busy.gzip", millis: busyGzip.map(\.millis),
                detail: "as scrape.busy, gzipped (\(busyGzip.last?.bytes ?? 0) bytes), after it, so both variants are kept "
                    + "rendered; \(oneDecimal(Double(endpoints.metricsPages.renders(of: gzipVariant) - gzipRenders) / busyGzipSeconds)) "
                    + "gzipped renders/s"))

        progress("scrape: render, fixed page")
        var snapshot = collector.snapshot
        let renderer = PrometheusRenderer()
        rows.append(
            .init(
                name: "render",
                millis: (0..<scrapes).map { _ in
                    // As when every series changes: a new version, so nothing of the last page is kept.
                    snapshot.series[0].wholeVersion &+= 1_000_000_000
                    let start = rs_clock_precise_ns()
                    let page = renderer.render(snapshot)
                    precondition(!page.isEmpty)
                    return Double(rs_clock_precise_ns() - start) / 1e6
                }, detail: "PrometheusRenderer.render alone, on this thread"))
        rows.append(
            .init(
                name: "render.own",
                millis: (0..<scrapes).map { _ in
                    let start = rs_clock_precise_ns()
                    let sections = renderer.renderSections(snapshot, series: nil, threads: 1)
                    precondition(sections?.own.isEmpty == false)
                    return Double(rs_clock_precise_ns() - start) / 1e6
                }, detail: "the collector's own section alone (no series changed), on one thread"))

        rows.append(
            try fixedPageRow(
                "fixed.page", bytes: busy.last?.bytes ?? 0, scrapes: scrapes,
                detail: "the same server sending a ready page of the same size: the transport"))
        rows.append(
            try fixedPageRow(
                "fixed.page.gzip", bytes: busyGzip.last?.bytes ?? 0, scrapes: scrapes,
                detail: "the same, a ready page of the gzipped page's size"))

        let method =
            "\(rings) rings x \(metricsPerRing) metrics (histograms in ns, counters and gauges in turn, two "
            + "labels each) in one Collector with its HTTP server, as ringside-collector runs them; the default "
            + "windows, quantiles and poll. Each scrape is GET /metrics on a new loopback connection from this "
            + "process, timed from connect to the last body byte (CLOCK_MONOTONIC); busy scrapes each wait for "
            + "a snapshot newer than the last scrape's; the .gzip rows ask Accept-Encoding: gzip, as Prometheus "
            + "does, and run after the plain ones; \(scrapes) scrapes a row."
        return ScrapeReport(
            machine: Machine.current(pinned: false), method: method, series: rings * metricsPerRing,
            pageBytes: busy.last?.bytes ?? first.bytes, rows: rows)
    }

    /// The transport's row: `scrapes` scrapes of an HTTP server of the collector's kind sending a
    /// ready page of `bytes` bytes.
    static func fixedPageRow(_ name: String, bytes: Int, scrapes: Int, detail: String) throws(BenchError) -> ScrapeReport.Row {
        let page = [UInt8](repeating: UInt8(ascii: "x"), count: bytes)
        let server: HTTPServer
        do {
            server = try HTTPServer(listen: "127.0.0.1:0") { _ in HTTPResponse(body: page) }
            try server.start()
        } catch { throw BenchError("starting the fixed-page server: \(error)") }
        defer { server.stop() }
        let millis = try (0..<scrapes).map { _ throws(BenchError) in try get(port: server.boundPort).millis }
        return ScrapeReport.Row(name: name, millis: millis, detail: detail)
    }

    /// Waits for a snapshot newer than the last one served, then scrapes.
    static func scrape(_ port: Int, after collector: Collector, gzip: Bool = false) throws(BenchError) -> (millis: Double, bytes: Int) {
        let served = collector.snapshot.generation
        try waitFor("a new snapshot") { collector.snapshot.generation > served }
        return try get(port: port, gzip: gzip)
    }

    static func waitFor(_ what: String, seconds: Double = 30, _ condition: () -> Bool) throws(BenchError) {
        let deadline = rs_clock_precise_ns() + UInt64(seconds * 1e9)
        while !condition() {
            guard rs_clock_precise_ns() < deadline else {
                throw BenchError("gave up waiting for \(what) after \(Int(seconds)) s")
            }
            System.nanosleep(1_000_000)
        }
    }

    /// `GET /metrics` on a new connection; the time to the last byte of a 200 response, and its
    /// body's size. `gzip`: asks for it, and checks the response is gzipped; `accept`: the format asked for.
    static func get(
        port: Int, gzip: Bool = false, accept: String? = nil, timeoutSeconds: Int = 10
    ) throws(BenchError) -> (millis: Double, bytes: Int) {
        let start = rs_clock_precise_ns()
        let client: RawClient
        do {
            client = try RawClient(port: port, timeoutSeconds: timeoutSeconds)
            try client.send(
                "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\(gzip ? "Accept-Encoding: gzip\r\n" : "")"
                    + (accept.map { "Accept: \($0)\r\n" } ?? "") + "Connection: close\r\n\r\n")
        } catch { throw BenchError("GET /metrics: \(error)") }
        let fd = client.fd
        // Reads the head, then counts body bytes until Content-Length of them have come; a
        // chunked body (a plain page too large to keep) is read to the end of the connection.
        var head: [UInt8] = []
        var bodyBytes = 0
        var expected: Int?
        var chunked: [UInt8]?
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while expected.map({ bodyBytes < $0 }) ?? true {
            let received: Int
            do {
                received = try chunk.withUnsafeMutableBytes { buffer in
                    Result { () throws(Errno) in try System.recv(fd, into: buffer, flags: 0) }
                }.get()
            } catch {
                throw BenchError("GET /metrics: receiving after \(bodyBytes) body bytes: \(error)")
            }
            if chunked != nil {
                guard received > 0 else { return (Double(rs_clock_precise_ns() - start) / 1e6, try chunkedLength(chunked!)) }
                chunked! += chunk[..<received]
                continue
            }
            guard received > 0 else { throw BenchError("the response ended after \(bodyBytes) body bytes") }
            if expected != nil {
                bodyBytes += received
                continue
            }
            head += chunk[..<received]
            guard let end = head.firstRange(of: Array("\r\n\r\n".utf8)) else { continue }
            let text = String(decoding: head[..<end.lowerBound], as: UTF8.self)
            guard text.hasPrefix("HTTP/1.1 200") else { throw BenchError("GET /metrics: \(text.prefix(80))") }
            let gzipped = text.lowercased().contains("\r\ncontent-encoding: gzip")
            guard gzipped == gzip else { throw BenchError("GET /metrics: asked \(gzip ? "for" : "without") gzip, got \(text)") }
            if text.lowercased().contains("\r\ntransfer-encoding: chunked") {
                chunked = Array(head[end.upperBound...])
                continue
            }
            let length = text.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            guard let length, let value = Int(length.dropFirst(15).trimmingCharacters(in: .whitespaces)) else {
                throw BenchError("GET /metrics: no Content-Length")
            }
            expected = value
            bodyBytes = head.count - end.upperBound
        }
        return (Double(rs_clock_precise_ns() - start) / 1e6, bodyBytes)
    }

    /// The bytes a chunked body carries (its chunks' data), checked to its last chunk.
    static func chunkedLength(_ body: [UInt8]) throws(BenchError) -> Int {
        var position = 0
        var total = 0
        while let lineEnd = body[position...].firstRange(of: [13, 10]) {
            guard let size = Int(String(decoding: body[position..<lineEnd.lowerBound], as: UTF8.self), radix: 16) else { break }
            if size == 0 { return total }
            total += size
            position = lineEnd.upperBound + size + 2
            guard position <= body.count else { break }
        }
        throw BenchError("GET /metrics: a chunked body cut short after \(total) bytes")
    }
}

/// One bot's ring with `ScrapeBenchmark.metricsPerRing` metrics: histograms (ns), counters and
/// gauges in turn, each with its own `series` label and one of eight symbols.
final class ScrapeBot: @unchecked Sendable {
    // @unchecked: after set-up one thread at a time writes (the main thread, then the writer).
    private let ring: Bot
    private let histograms: [Bot.Histogram]
    private let counters: [Bot.Counter]
    private let gauges: [Bot.Gauge]
    private var random: UInt64

    init(number: Int, directory: String) throws(BenchError) {
        random = UInt64(number + 1) &* 0x9E37_79B9_7F4A_7C15
        do {
            ring = try Bot.attach(
                "scrape\(number)", directory: directory,
                options: .init(laneCapacity: 1 << 16, maxMetrics: ScrapeBenchmark.metricsPerRing))
            var histograms: [Bot.Histogram] = [], counters: [Bot.Counter] = [], gauges: [Bot.Gauge] = []
            for index in 0..<ScrapeBenchmark.metricsPerRing {
                let labels = ["series": String(index), "symbol": "SYM\(index % 8)"]
                switch index % 3 {
                case 0: histograms.append(try ring.histogram("scrape_latency", unit: .nanoseconds, labels: labels))
                case 1: counters.append(try ring.counter("scrape_orders", labels: labels))
                default: gauges.append(try ring.gauge("scrape_depth", labels: labels))
                }
            }
            self.histograms = histograms
            self.counters = counters
            self.gauges = gauges
        } catch { throw BenchError("setting up ring scrape\(number) in \(directory): \(error)") }
    }

    /// `values` values for every metric: latencies spread from 1 µs to 100 ms, as a bot's are.
    func writeEveryMetric(values: Int) {
        for _ in 0..<values {
            for histogram in histograms { histogram.record(UInt64(exp(Double(nextRandom() % 11_500) / 1_000)) * 1_000) }
            for counter in counters { counter.increment(by: 1 + nextRandom() % 4) }
            for gauge in gauges { gauge.set(Double(nextRandom() % 1_000)) }
        }
    }

    private func nextRandom() -> UInt64 {
        random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return random >> 33
    }
}
