import Ringside
@testable import RingsideCollector
import RingsideExport
import RingsideHTTP
import RingsideHTTPClient
import RingsideSnapshot
import RingsideTestSupport
import Testing

/// A GET of `target` as the server hands it over, asking for `format` (and gzip).
private func request(_ target: String, _ format: ExpositionFormat = .text, gzip: Bool = false) -> HTTPRequest {
    let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
    var headers = [HTTPHeader("Accept", format.contentType)]
    if gzip { headers.append(HTTPHeader("Accept-Encoding", "gzip")) }
    return HTTPRequest(
        method: "GET", target: target, path: parts[0], query: parts.count > 1 ? parts[1] : nil, minorVersion: 1, headers: headers)
}

/// The body as a scraper reads it (gunzipped when gzipped).
private func body(_ response: HTTPResponse) -> [UInt8] {
    let gzipped = response.headers.contains { $0.name == "Content-Encoding" && $0.value == "gzip" }
    return gzipped ? Zlib.decompress(response.body, .gzip) ?? [] : response.body
}

/// The sample lines of a text page (no comments).
private func samples(_ page: [UInt8]) -> [Substring] {
    String(decoding: page, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }
}

/// The families of the collector's own, which a per-bot page leaves to the whole page.
let collectorFamilyPrefixes = ["ringside_collector_", "ringside_slo_", "ringside_build_info", "process_"]

/// Two bots in one directory (`alpha`: a histogram and a counter; `beta`: a histogram), drained
/// by an in-process collector with an SLO, and its routes.
private func withTwoBots(_ body: (Collector, CollectorEndpoints) throws -> Void) throws {
    try withBot("alpha", options: .init(laneCapacity: 1024)) { directory, alpha in
        let beta = try Bot.attach("beta", directory: directory.path, options: .init(laneCapacity: 1024))
        try alpha.histogram("latency", unit: .nanoseconds, labels: ["side": "buy"]).record(1_500)
        try alpha.counter("orders").increment(by: 3)
        try beta.histogram("latency", unit: .nanoseconds, labels: ["side": "sell"]).record(2_500)
        let collector = try makeCollector(directory, slo: ["latency:p99<1ms@1m"], captured: CapturedLog())
        let endpoints = CollectorEndpoints(collector: collector)
        _ = pass(collector)
        try body(collector, endpoints)
        withExtendedLifetime(beta) {}
    }
}

@Suite("/metrics?ring= and /health?ring=: a page and a health of a few bots; every other query refused")
struct PerBotRouteTests {
    static let variants = ExpositionFormat.allCases.flatMap { [($0, false), ($0, true)] }

    @Test(
        "a bot's page in text and OpenMetrics is the whole page's lines of that bot, and none of the collector's own", arguments: variants)
    func botPageText(format: ExpositionFormat, gzip: Bool) throws {
        guard format != .protobuf else { return }
        try withTwoBots { _, endpoints in
            let page = endpoints.handle(request("/metrics?ring=alpha", format, gzip: gzip))
            #expect(page.status == 200 && page.contentType == format.contentType)
            let lines = samples(body(page))
            #expect(!lines.isEmpty && lines.allSatisfy { $0.contains("ring=\"alpha\"") }, "\(lines.filter { !$0.contains("alpha") })")
            for prefix in collectorFamilyPrefixes {
                #expect(!String(decoding: body(page), as: UTF8.self).contains("\n" + prefix), "\(prefix) is the whole page's")
            }
            #expect(lines.contains { $0.hasPrefix("latency_seconds_count{ring=\"alpha\",side=\"buy\"} 1") })
            #expect(lines.contains { $0.hasPrefix("ringside_ring_producer_alive{ring=\"alpha\"} 1") })
            if format == .openMetrics { #expect(String(decoding: body(page), as: UTF8.self).hasSuffix("# EOF\n")) }
            // The same lines as the whole page's of that bot.
            let whole = samples(body(endpoints.handle(request("/metrics", format))))
            #expect(Set(lines) == Set(whole.filter { $0.contains("ring=\"alpha\"") }))
            // Two bots: both, and still nothing else.
            let both = samples(body(endpoints.handle(request("/metrics?ring=beta&ring=alpha", format, gzip: gzip))))
            #expect(Set(both) == Set(whole.filter { $0.contains("ring=\"alpha\"") || $0.contains("ring=\"beta\"") }))
        }
    }

    @Test("a bot's page in protobuf: its families' every metric is that bot's, none of the collector's families", arguments: [false, true])
    func botPageProtobuf(gzip: Bool) throws {
        try withTwoBots { _, endpoints in
            let page = endpoints.handle(request("/metrics?ring=beta", .protobuf, gzip: gzip))
            #expect(page.status == 200 && page.contentType == ExpositionFormat.protobuf.contentType)
            let families = try protobufFamilies(body(page))
            #expect(families.keys.contains("latency_seconds") && families.keys.contains("ringside_ring_producer_alive"))
            #expect(!families.keys.contains { name in collectorFamilyPrefixes.contains { name.hasPrefix($0) } })
            for (name, rings) in families { #expect(rings.allSatisfy { $0 == "beta" }, "\(name): \(rings)") }
        }
    }

    @Test("a storm of distinct ring= values: a few pages kept, the whole page not rendered again, refusals counted")
    func storm() throws {
        try withTwoBots { _, endpoints in
            let whole = MetricsPages.Variant(.text, gzip: true)
            _ = endpoints.handle(request("/metrics", .text, gzip: true))
            let renders = endpoints.metricsPages.renders(of: whole)
            for number in 0..<1_000 {
                let (format, gzip) = Self.variants[number % Self.variants.count]
                let page = endpoints.handle(request("/metrics?ring=ghost-\(number)&ring=alpha", format, gzip: gzip))
                #expect(page.status == 200)
            }
            // A name asked twice of one snapshot is served from the page kept.
            _ = endpoints.handle(request("/metrics?ring=alpha&ring=ghost-999", .openMetrics, gzip: true))  // as ghost-999 was
            #expect(endpoints.handle(request("/metrics?foo=1")).status == 400)
            var snapshot = Snapshot()
            endpoints.queryFigures.apply(to: &snapshot)
            let figures = snapshot.collector.queries
            #expect(figures.botPagesRendered == 1_000 && figures.botPagesReused == 1)
            #expect(figures.botPagesKept <= BotPages.keptPages && figures.botPagesKeptBytes <= BotPages.keptBytes)
            #expect(figures.refused == ["/metrics": 1])
            _ = endpoints.handle(request("/metrics", .text, gzip: true))
            #expect(endpoints.metricsPages.renders(of: whole) == renders, "the whole page kept, not rendered again")
            let page = String(decoding: body(endpoints.handle(request("/metrics"))), as: UTF8.self)
            #expect(page.contains("ringside_collector_bot_pages_total{served=\"rendered\"} 1000\n"))
            #expect(page.contains("ringside_collector_queries_refused_total{route=\"/metrics\"} 1\n"))
        }
    }

    @Test(
        "query strings: what a route does not take, a bad value, a name that is no bot's is refused with 400 naming it",
        arguments: [
            ("/metrics?foo=1", "unknown parameter foo: /metrics takes ring"),
            ("/metrics?ring=bad/name", "ring=bad/name: not a bot's name"),
            ("/metrics?ring=alpha@123", "a worker's file is read as its bot's"),
            ("/metrics?ring=", "ring=: not a bot's name"),
            ("/metrics?ring", "ring: expected ring=VALUE"),
            ("/metrics?%ZZ=1", "bad percent-encoding"),
            ("/metrics?ring=%0A", "ring=\\n: not a bot's name"),
            ("/health?max_age=0", "max_age=0: not a duration"),
            ("/health?max_age=2d", "max_age=2d: not a duration"),
            ("/health?ring=alpha&bogus", "unknown parameter bogus: /health takes max_age, ring"),
            ("/latest?ring=alpha", "unknown parameter ring: /latest takes no parameter"),
            ("/-/ready?x=1", "unknown parameter x"), ("/-/healthy?x", "unknown parameter x"),
            ("/api/captures?x=1", "unknown parameter x"), ("/?ring=a", "unknown parameter ring: / takes window"),
            ("/metrics?" + (0...64).map { "ring=b\($0)" }.joined(separator: "&"), "more than 64 ring="),
        ])
    func refused(target: String, reason: String) throws {
        try withTwoBots { _, endpoints in
            let response = endpoints.handle(request(target))
            #expect(response.status == 400)
            let text = String(decoding: response.body, as: UTF8.self)
            #expect(text.hasPrefix("bad request: ") && text.contains(reason), "\(text)")
        }
    }

    @Test(
        "query strings each route takes are served",
        arguments: ["/?window=1m", "/metrics?ring=alpha&ring=alpha", "/health?max_age=30s", "/metrics?", "/health?ring=alpha&max_age=90"])
    func taken(target: String) throws {
        try withTwoBots { _, endpoints in
            #expect(endpoints.handle(request(target)).status == 200, "\(target)")
        }
    }

    @Test("/health?ring=: 200 while each bot named is alive, 503 naming the unknown one; /health counts the bots alive")
    func health() throws {
        try withTwoBots { _, endpoints in
            let both = endpoints.handle(request("/health?ring=alpha&ring=beta"))
            #expect(both.status == 200)
            let document = try jsonObject(String(decoding: both.body, as: UTF8.self))
            #expect(document["status"] as? String == "ok" && document["bots_alive"] as? Int == 2)
            let bots = try #require(document["bots"] as? [[String: Any]])
            #expect(bots.map { $0["name"] as? String } == ["alpha", "beta"] && bots.allSatisfy { $0["alive"] as? Bool == true })
            #expect((document["rings"] as? [[String: Any]])?.count == 2 && document["slos"] == nil)

            let unknown = endpoints.handle(request("/health?ring=alpha&ring=gamma"))
            #expect(unknown.status == 503)
            let answer = try jsonObject(String(decoding: unknown.body, as: UTF8.self))
            #expect(answer["status"] as? String == "unhealthy")
            let gamma = try #require((answer["bots"] as? [[String: Any]])?.last)
            #expect(gamma["state"] as? String == "unknown" && gamma["alive"] as? Bool == false)
            #expect((gamma["reason"] as? String)?.contains("no file ringside.gamma") == true)

            let plain = try jsonObject(String(decoding: endpoints.handle(request("/health")).body, as: UTF8.self))
            #expect(plain["bots_alive"] as? Int == 2 && plain["bots_known"] as? Int == 2 && plain["bots"] == nil)
            #expect((plain["slos"] as? [[String: Any]])?.count == 1)
        }
    }

    @Test("BotHealth: a bot's state from its files: alive, stale, stopped, dead, quarantined, skipped, unknown")
    func botHealthStates() {
        func ring(_ name: String, _ state: RingSnapshot.State, age: Double = 1, quarantined: Bool = false) -> RingSnapshot {
            let worker = name.split(separator: "@").dropFirst().first.flatMap { Int32($0) }
            var ring = RingSnapshot(
                name: name, bot: String(name.split(separator: "@")[0]), worker: worker, state: state,
                problem: state == .skipped ? "corrupt" : nil)
            ring.heartbeatAgeSeconds = age
            ring.quarantined = quarantined
            ring.producerPID = 42
            return ring
        }
        var snapshot = Snapshot()
        snapshot.generatedRealtimeNanos = 1_000_000_000_000
        snapshot.rings = [
            ring("live", .live), ring("old", .live, age: 50), ring("paused", .producerStopped), ring("gone", .producerDead),
            ring("bad", .live, quarantined: true), ring("broken", .skipped),
            // A dead parent whose worker lives: its telemetry is alive.
            ring("pool", .producerDead, age: 500), ring("pool@7", .live, age: 2),
        ]
        // 15 s after the snapshot was built: `old` wrote 65 s ago.
        let now = snapshot.generatedRealtimeNanos + 15_000_000_000
        func state(_ bot: String) -> BotHealth.State { BotHealth(bot: bot, in: snapshot, nowNanos: now, maxAgeSeconds: 60).state }
        #expect(state("live") == .alive && state("old") == .stale && state("paused") == .stopped && state("gone") == .dead)
        #expect(state("bad") == .quarantined && state("broken") == .skipped && state("nobody") == .unknown && state("pool") == .alive)
        #expect(BotHealth(bot: "old", in: snapshot, nowNanos: now, maxAgeSeconds: 120).state == .alive)
        #expect(BotHealth(bot: "pool", in: snapshot, nowNanos: now, maxAgeSeconds: 60).heartbeatAgeSeconds == 17)
        let all = BotHealth.all(in: snapshot, nowNanos: now, maxAgeSeconds: 60)
        #expect(all.map(\.name) == ["bad", "broken", "gone", "live", "old", "paused", "pool"] && all.count { $0.isAlive } == 2)
        let stale = BotHealth(bot: "old", in: snapshot, nowNanos: now, maxAgeSeconds: 60)
        #expect(stale.reason == "no record for 65.0 s, more than max_age 60.0 s (old: pid 42)")
    }
}

/// Each family of a delimited protobuf page, with the `ring` label of each of its metrics.
func protobufFamilies(_ page: [UInt8]) throws -> [String: [String]] {
    var families: [String: [String]] = [:]
    var reader = ProtobufReader(bytes: page)
    while !reader.atEnd {
        let length = Int(try reader.varint())
        var family = ProtobufReader(bytes: Array(page[reader.position..<reader.position + length]))
        reader.position += length
        var name = "", rings: [String] = []
        while !family.atEnd {
            let field = try family.field()
            if field.number == 1 { name = String(decoding: field.bytes, as: UTF8.self) }
            guard field.number == 4 else { continue }
            var metric = ProtobufReader(bytes: field.bytes)
            var ring = ""
            while !metric.atEnd {
                let label = try metric.field()
                guard label.number == 1 else { continue }
                var pair = ProtobufReader(bytes: label.bytes)
                var key = "", value = ""
                while !pair.atEnd {
                    let part = try pair.field()
                    if part.number == 1 { key = String(decoding: part.bytes, as: UTF8.self) }
                    if part.number == 2 { value = String(decoding: part.bytes, as: UTF8.self) }
                }
                if key == "ring" { ring = value }
            }
            rings.append(ring)
        }
        families[name] = rings
    }
    return families
}
