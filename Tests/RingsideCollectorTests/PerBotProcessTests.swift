import Foundation
import Ringside
import RingsideCollector
import RingsideExport
import RingsideTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A GET of `path` asking for `accept` (and gzip), on its own connection.
private func get(_ port: Int, _ path: String, accept: String? = nil, gzip: Bool = false) throws -> RawClient.Response {
    let client = try RawClient(port: port, timeoutSeconds: 10)
    var head = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    if let accept { head += "Accept: \(accept)\r\n" }
    if gzip { head += "Accept-Encoding: gzip\r\n" }
    try client.send(head + "\r\n")
    var response = try client.readResponse()
    if response.header("Content-Encoding") == "gzip" { response.body = Zlib.decompress(response.body, .gzip) ?? [] }
    return response
}

/// `/health?QUERY`'s status, and its bots by name.
private func health(_ port: Int, _ query: String) throws -> (status: Int, bots: [String: [String: Any]]) {
    let response = try get(port, "/health?" + query)
    let bots = try jsonObject(response.text)["bots"] as? [[String: Any]] ?? []
    return (response.status, Dictionary(uniqueKeysWithValues: bots.map { ($0["name"] as? String ?? "", $0) }))
}

@Suite("ringside-collector as a process: per-bot pages and health of real producers")
struct PerBotProcessTests {
    @Test("/health?ring=: 200 for a live bot, 503 with the reason for a killed, a stopped, a quiet one; /metrics?ring= per format")
    func liveAndKilled() throws {
        try withRingDirectory { directory in
            let live = try ChildProcess(
                testProducer: "blast", ring: "live-bot", in: directory, ["--seconds", "120", "--rate", "200"])
            #expect(live.readLine()?.hasPrefix("attached ") == true)
            defer { live.kill() }
            var holds: [String: ChildProcess] = [:]
            for name in ["doomed", "quiet"] {
                let hold = try ChildProcess(testProducer: "hold", ring: name, in: directory, ["--count", "5"])
                #expect(hold.readLine()?.hasPrefix("ready ") == true)
                holds[name] = hold
            }
            // Busy, so that its stop is seen within a second (an idle bot's within 30 s).
            holds["paused"] = try ChildProcess(testProducer: "blast", ring: "paused", in: directory, ["--seconds", "120", "--rate", "50"])
            #expect(holds["paused"]!.readLine()?.hasPrefix("attached ") == true)
            defer { for hold in holds.values { hold.kill() } }
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms"])
            defer { collector.kill() }
            let everyone = "ring=live-bot&ring=doomed&ring=paused&ring=quiet"
            #expect(eventually { (try? health(port, everyone))?.status == 200 }, "every bot alive at first")

            // Attached is alive; its series show from the snapshot after their first records.
            #expect(eventually { (try? get(port, "/metrics?ring=live-bot"))?.text.contains("blast_count{") == true })
            try checkPages(port: port)

            holds["doomed"]!.send(SIGKILL)
            holds["paused"]!.send(SIGSTOP)
            defer { holds["paused"]!.send(SIGCONT) }
            let settled = try eventually(seconds: 15) { () -> [String: [String: Any]]? in
                let answer = try health(port, everyone)
                let states = answer.bots.mapValues { $0["state"] as? String }
                return answer.status == 503 && states["doomed"] == "dead" && states["paused"] == "stopped" ? answer.bots : nil
            }
            let bots = try #require(settled, "the killed bot seen dead, the stopped one stopped")
            #expect(bots["live-bot"]?["alive"] as? Bool == true && bots["quiet"]?["alive"] as? Bool == true)
            #expect((bots["doomed"]?["reason"] as? String)?.contains("its producer is dead") == true, "\(bots["doomed"] ?? [:])")
            #expect((bots["paused"]?["reason"] as? String)?.contains("stopped") == true)
            #expect(try health(port, "ring=live-bot").status == 200)
            #expect(try health(port, "ring=doomed").status == 503)

            // A bot that wrote nothing since it attached (1 s ago at least) is stale past max_age=1s.
            let quiet = try eventually(seconds: 10) { () -> [String: Any]? in
                let answer = try health(port, "ring=quiet&max_age=1s")
                return answer.status == 503 ? answer.bots["quiet"] : nil
            }
            #expect(quiet?["state"] as? String == "stale" && (quiet?["reason"] as? String)?.contains("max_age 1.0 s") == true)
            #expect(try health(port, "ring=live-bot&max_age=5s").status == 200, "the live one writes 200 a second")

            let plain = try get(port, "/health")
            let document = try jsonObject(plain.text)
            #expect(plain.status == 200, "/health keeps its meaning: the drain loop makes progress")
            #expect(document["bots_known"] as? Int == 4 && document["bots_alive"] as? Int == 2, "\(plain.text)")

            let unknown = try health(port, "ring=nobody")
            #expect(unknown.status == 503 && unknown.bots["nobody"]?["state"] as? String == "unknown")
            let refused = try get(port, "/health?ring=live-bot@1234")
            #expect(refused.status == 400 && refused.text.contains("ring=live-bot@1234: not a bot's name"))
            #expect(try get(port, "/metrics?rings=live-bot").status == 400)
            let page = try get(port, "/metrics").text
            #expect(page.contains("ringside_collector_queries_refused_total{route=\"/health\"} 1\n"), "the refusals counted")
        }
    }

    /// The live bot's page in each format and encoding: its series and files alone.
    private func checkPages(port: Int) throws {
        let formats: [ExpositionFormat] = [.text, .openMetrics, .protobuf]
        for format in formats {
            for gzip in [false, true] {
                let response = try get(port, "/metrics?ring=live-bot", accept: format.contentType, gzip: gzip)
                #expect(response.status == 200 && response.header("Content-Type") == format.contentType)
                if format == .protobuf {
                    let families = try protobufFamilies(response.body)
                    #expect(families["blast"]?.allSatisfy { $0 == "live-bot" } == true, "\(families.keys.sorted())")
                    #expect(families.values.allSatisfy { $0.allSatisfy { $0 == "live-bot" } })
                    #expect(!families.keys.contains { name in collectorFamilyPrefixes.contains { name.hasPrefix($0) } })
                    continue
                }
                let lines = response.text.split(separator: "\n").filter { !$0.hasPrefix("#") }
                #expect(lines.contains { $0.hasPrefix("blast_count{ring=\"live-bot\",source=\"test\"} ") }, "\(lines.prefix(5))")
                #expect(lines.allSatisfy { $0.contains("ring=\"live-bot\"") }, "\(lines.filter { !$0.contains("live-bot") })")
                #expect(!lines.contains { line in collectorFamilyPrefixes.contains { line.hasPrefix($0) } })
                if format == .openMetrics { #expect(response.text.hasSuffix("# EOF\n")) }
                if format == .text, !gzip, let check = try promtoolCheckMetrics(response.text) {
                    #expect(check.status == 0 && check.report.isEmpty, "promtool: \(check.report)")
                }
            }
        }
    }

    @Test("a storm of 3,000 distinct ring= values keeps the collector's memory bounded and refuses nothing it may serve")
    func stormKeepsMemoryBounded() throws {
        try withRingDirectory { directory in
            let producer = try ChildProcess(
                testProducer: "many-metrics", ring: "real", in: directory, ["--count", "100", "--metrics", "30"])
            #expect(producer.readLine()?.hasPrefix("wrote ") == true)
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms"])
            defer { collector.kill() }
            #expect(eventually { (try? get(port, "/metrics?ring=real"))?.text.contains("ring=\"real\"") == true })
            let client = try RawClient(port: port, timeoutSeconds: 10)
            let accepts = [ExpositionFormat.text, .openMetrics, .protobuf].map(\.contentType)
            // Requests sent 25 at a time on one connection, then their answers read.
            func ask(_ count: Int, from start: Int) throws {
                for batch in stride(from: start, to: start + count, by: 25) {
                    var heads = ""
                    for number in batch..<min(batch + 25, start + count) {
                        let gzip = number % 2 == 0 ? "Accept-Encoding: gzip\r\n" : ""
                        // Names nobody has, and now and then with a bot's: pages of series kept too.
                        let rings = "ring=storm-\(number)" + (number % 100 == 0 ? "&ring=real" : "")
                        heads += "GET /metrics?\(rings) HTTP/1.1\r\nHost: x\r\nAccept: \(accepts[number % 3])\r\n\(gzip)\r\n"
                    }
                    try client.send(heads)
                    for _ in batch..<min(batch + 25, start + count) {
                        let status = try client.readResponseSkippingBody().status
                        if status != 200 { Issue.record("a per-bot page answered \(status)") }
                    }
                }
            }
            try ask(500, from: 0)  // warm: the allocator's arenas and the kept pages filled
            let before = try #require(residentKiB(of: collector.pid)).total
            let started = monotonicSeconds()
            try ask(3_000, from: 500)
            let seconds = monotonicSeconds() - started
            let after = try #require(residentKiB(of: collector.pid)).total
            print("3,000 distinct ring= values in \(seconds) s: resident \(before) KiB before, \(after) KiB after")
            #expect(after - before < 64 * 1024, "resident memory grew \(after - before) KiB")
            let page = try get(port, "/metrics").text
            let kept = page.split(separator: "\n").first { $0.hasPrefix("ringside_collector_bot_pages_kept ") }
            #expect(kept.flatMap { Int($0.split(separator: " ")[1]) }.map { $0 <= BotPages.keptPages } == true, "\(kept ?? "none")")
            let rendered = page.split(separator: "\n").first { $0.hasPrefix("ringside_collector_bot_pages_total{served=\"rendered\"} ") }
            #expect(rendered.flatMap { Int($0.split(separator: " ")[1]) }.map { $0 >= 3_500 } == true, "\(rendered ?? "none")")
        }
    }
}
