import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RingsideTestSupport
import Testing

extension ReliabilityTests {
    /// Issue 44's attack: 75 bots of 4,096 series with 200-byte labels each, against a collector
    /// that already serves honest bots. The budget (here `--max-series-bytes 16M`, a small one so
    /// that the test stays quick; the default is 1 GiB) refuses series past it, bot by bot:
    /// what was kept before is never touched.
    @Suite("a cardinality attack")
    struct CardinalityAttackTests {
        static let attackBots = 75, seriesPerBot = 4_096

        @Test(
            "75 bots of 4,096 series of 200-byte labels: honest bots keep every series and count exactly; the attack is refused, counted and named; /health answers every probe"
        )
        func attack() throws {
            try withRingDirectory { directory in
                let (collector, port) = try startCollector([
                    "--dir", directory.path, "--history", "0", "--max-series-bytes", "16M",
                ])
                defer { collector.kill() }
                #expect(try eventually { try httpGet(port: port, path: "/-/ready").status == 200 })

                // The honest bots, paced, a histogram and a counter each, before the attack.
                let honestNames = (0..<3).map { "honest-\($0)" }
                let honest = try honestNames.map { try startBlast(directory, ring: $0, rate: 2_000, counter: true) }
                defer { for producer in honest { producer.kill() } }
                let seen = eventually(seconds: 30) { () -> Bool in
                    let series = latestSeries(port: port)
                    return honestNames.allSatisfy { name in series.filter { $0["ring"] as? String == name }.count == 2 }
                }
                try #require(seen, "the honest bots' series did not show")

                // /health asked every 50 ms from now to the end.
                let probes = HealthProbes(port: port)
                Thread.detachNewThread { probes.run() }
                defer { _ = probes.stop() }

                // The attack: two processes (one holds at most 64 bots).
                let attackers = try [("attack-a", 38), ("attack-b", Self.attackBots - 38)].map { ring, bots in
                    let producer = try ChildProcess(
                        testProducer: "wide-series", ring: ring, in: directory,
                        ["--rings", String(bots), "--metrics", String(Self.seriesPerBot), "--label-bytes", "200"])
                    let ready = producer.readLine()
                    try #require(ready?.hasPrefix("ready") == true, "\(ready ?? "no line"): \(producer.waitForExit().standardError)")
                    return producer
                }
                defer {
                    for producer in attackers {
                        producer.send(SIGKILL)
                        producer.waitForExit()
                    }
                }

                // Every attacking series is either kept (a series in /latest) or counted as refused.
                let attackTotal = Self.attackBots * Self.seriesPerBot
                func isAttack(_ name: Any?) -> Bool { (name as? String)?.hasPrefix("attack-") == true }
                let accounted = eventually(seconds: 120) { () -> [String: Any]? in
                    guard let document = latestDocument(port: port), let rings = document["rings"] as? [[String: Any]] else { return nil }
                    let attack = rings.filter { isAttack($0["name"]) }
                    let registered = attack.reduce(0) { $0 + Int(uint($1["metrics"]) ?? 0) }
                    let refused = attack.reduce(0) { $0 + Int(uint($1["series_refused"]) ?? 0) }
                    let kept = (document["series"] as? [[String: Any]] ?? []).filter { isAttack($0["ring"]) }.count
                    return attack.count == Self.attackBots && registered == attackTotal && kept + refused == attackTotal ? document : nil
                }
                let document = try #require(accounted, "the collector did not account for the attack's \(attackTotal) series")
                let rings = document["rings"] as? [[String: Any]] ?? []
                let attack = rings.filter { isAttack($0["name"]) }
                let kept = (document["series"] as? [[String: Any]] ?? []).filter { isAttack($0["ring"]) }.count
                #expect(kept > 500 && kept < attackTotal / 10, "\(kept) of the attack's series kept within 16 MiB")
                let refusing = Set(attack.compactMap { $0["series_refused_by"] as? String })
                #expect(refusing == ["--max-series-bytes"], "the attack's bots name the cap that refused them: \(refusing)")
                let series = document["series"] as? [[String: Any]] ?? []
                for name in honestNames {
                    let ring = rings.first { $0["name"] as? String == name }
                    #expect(series.filter { $0["ring"] as? String == name }.count == 2, "\(name) keeps its two series")
                    #expect(uint(ring?["series_refused"]) == 0 && ring?["series_refused_by"] == nil, "\(name) was refused nothing")
                }

                // Two scrapes, as Prometheus makes them, while the honest bots keep writing.
                for _ in 0..<2 {
                    let client = try RawClient(port: port, timeoutSeconds: 60)
                    try client.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n")
                    #expect(try client.readResponse().status == 200)
                }

                // The honest bots stop; what they counted is what the collector shows.
                let counts = try honest.map { try stopBlast($0) }
                let exact = eventually(seconds: 30) { () -> Bool in
                    let series = latestSeries(port: port)
                    return zip(honestNames, counts).allSatisfy { name, counts in
                        let own = series.filter { $0["ring"] as? String == name }
                        let histogram = own.first { $0["kind"] as? String == "histogram" }
                        let counter = own.first { $0["kind"] as? String == "counter" }
                        return uint(histogram?["total_count"]) == counts.written
                            && uint(histogram?["dropped_records"]) ?? 0 == counts.dropped
                            && uint(counter?["total"]) == counts.increments
                    }
                }
                #expect(exact, "the honest bots' counts: \(counts)")
                for counts in counts { #expect(counts.attempts == counts.written + counts.dropped) }

                let answers = probes.stop()
                let unanswered = answers.filter { $0.status == nil }.count
                let refused = answers.filter { $0.status == 503 }.count
                #expect(answers.count > 20 && unanswered == 0, "\(unanswered) of \(answers.count) /health probes unanswered")
                let rss = residentKiB(of: collector.pid)
                print(
                    "cardinality attack: \(kept) of \(attackTotal) attacking series kept, the rest refused (--max-series-bytes 16M); "
                        + "3 honest bots exact (\(counts.map(\.written).reduce(0, +)) records); /health: \(answers.count) probes, "
                        + "\(refused) answered 503 (a drain pass over a second), slowest "
                        + String(format: "%.1f ms", answers.compactMap(\.millis).max() ?? 0)
                        + "; collector RssAnon \((rss?.anonymous ?? 0) >> 10) MiB after two scrapes")
                collector.send(SIGTERM)
                #expect(collector.waitForExit().standardError.contains("(--max-series-bytes) is reached"), "the log says which cap")
            }
        }
    }
}

/// `/latest`'s series (none when it does not answer).
private func latestSeries(port: Int) -> [[String: Any]] {
    latestDocument(port: port)?["series"] as? [[String: Any]] ?? []
}
