import Ringside
@testable import RingsideCollector
import RingsideHTTP
import RingsideTestSupport
import Testing

/// A GET of `target` as the server would hand it over.
private func request(_ target: String) -> HTTPRequest {
    let parts = target.split(separator: "?", maxSplits: 1).map(String.init)
    return HTTPRequest(
        method: "GET", target: target, path: parts[0], query: parts.count > 1 ? parts[1] : nil,
        minorVersion: 1, headers: [])
}

@Suite("CollectorEndpoints: which routes are quick, and the history's answers cached")
struct CollectorEndpointsTests {
    @Test("quick answers the probes, /health and 404s (on the server's loop) and leaves the pages to render (on its worker)")
    func quickRoutes() throws {
        try withRingDirectory { directory in
            let collector = try makeCollector(directory, captured: CapturedLog())
            let endpoints = CollectorEndpoints(collector: collector)
            pass(collector)
            for path in ["/-/healthy", "/-/ready", "/health"] {
                #expect(endpoints.quick(request(path))?.status == 200, "\(path)")
            }
            #expect(endpoints.quick(request("/nope"))?.status == 404)
            for path in ["/metrics", "/latest", "/api/history", "/"] {
                #expect(endpoints.quick(request(path)) == nil, "\(path) is a page")
                #expect(endpoints.render(request(path)).status == 200, "\(path)")
            }
        }
    }

    @Test("a repeated /api/history query is answered from one render until the history takes in a new snapshot")
    func historyAnswersCached() throws {
        try withBot("h", options: .init(laneCapacity: 1024)) { directory, bot in
            let latency = try bot.histogram("latency")
            latency.record(5)
            let collector = try makeCollector(directory, captured: CapturedLog())
            let endpoints = CollectorEndpoints(collector: collector)
            let history = try #require(endpoints.history)
            history.record(pass(collector))
            // Absolute times, so the query's key cannot change between two calls.
            let target = "/api/history?ring=h&from=1&to=4000000000"
            func count(_ body: [UInt8]) throws -> Int {
                let series = try #require(try jsonObject(String(decoding: body, as: UTF8.self))["series"] as? [[String: Any]])
                let points = try #require(series.first?["points"] as? [[Any]])
                return points.compactMap { $0[1] as? Int }.reduce(0, +)
            }

            let first = endpoints.render(request(target)).body
            let again = endpoints.render(request(target)).body
            #expect(try count(first) == 1)
            #expect(
                first.withUnsafeBufferPointer { $0.baseAddress } == again.withUnsafeBufferPointer { $0.baseAddress },
                "the same body, not a second render")
            latency.record(7)
            history.record(pass(collector, offset: 200_000_000))
            #expect(try count(endpoints.render(request(target)).body) == 2, "a new snapshot, a new answer")
        }
    }
}
