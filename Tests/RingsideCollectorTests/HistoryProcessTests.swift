import Foundation
import RingsideTestSupport
import Testing

/// `GET /api/history` of a running collector, as a JSON object.
private func history(_ port: Int, _ query: String = "") throws -> [String: Any]? {
    let response = try httpGet(port: port, path: "/api/history" + (query.isEmpty ? "" : "?" + query))
    guard response.status == 200 else { return nil }
    return try jsonObject(response.body)
}

/// The answer's series, and each one's points as rows of numbers (null as nil).
private func seriesList(_ answer: [String: Any]?) -> [[String: Any]] {
    answer?["series"] as? [[String: Any]] ?? []
}

private func rows(_ series: [String: Any]) -> [[Int?]] {
    (series["points"] as? [[Any]] ?? []).map { $0.map { $0 as? Int } }
}

@Suite("ringside-collector's /api/history, end to end")
struct HistoryProcessTests {
    @Test("/api/history: its per-second counts add up to the total the producer wrote, and a counter's increases to its total")
    func countsAddUp() throws {
        try withRingDirectory { directory in
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms", "--history", "2m"])
            defer { collector.kill() }
            // 5,000 values a second for 3 seconds, into histogram "blast" {source="test"}.
            let blast = try ChildProcess(
                testProducer: "blast", ring: "history-blast", in: directory, ["--seconds", "3", "--rate", "5000", "--capacity", "65536"])
            #expect(blast.readLine()?.hasPrefix("attached ") == true)
            // 1,000 fill latencies at once, then counter "orders" 200 times a second until killed.
            let kit = try ChildProcess(testProducer: "kit", ring: "history-kit", in: directory, ["--count", "1000", "--per-second", "200"])
            defer { kit.kill() }
            #expect(kit.readLine()?.hasPrefix("ready ") == true)
            let summary = try #require(blast.readLine())
            let counts = try #require(BlastCounts(summary), "\(summary)")
            #expect(counts.dropped == 0, "\(counts)")
            let written = Int(counts.written)
            #expect(written > 0)

            // The history takes the snapshots in as they come: wait until the counts reach the total.
            let blastSeries = try eventually(seconds: 30) { () -> [String: Any]? in
                guard let series = seriesList(try history(port, "ring=history-blast&metric=blast")).first,
                    rows(series).compactMap({ $0[1] }).reduce(0, +) == written
                else { return nil }
                return series
            }
            let blastRows = rows(try #require(blastSeries, "the blast series' counts never added up to \(written)"))
            #expect(blastSeries?["kind"] as? String == "histogram")
            #expect(blastSeries?["columns"] as? [String] == ["t", "count", "p50", "p99", "p999", "max"])
            #expect((blastSeries?["labels"] as? [String: String]) == ["source": "test"])
            // Written over seconds: several points, on whole increasing Unix seconds, none past the largest value.
            #expect(blastRows.filter { ($0[1] ?? 0) > 0 }.count >= 2)
            let seconds = blastRows.compactMap { $0[0] }
            #expect(seconds == seconds.sorted() && Set(seconds).count == seconds.count && seconds.allSatisfy { $0 > 1_600_000_000 })
            #expect(blastRows.allSatisfy { ($0[5] ?? 0) <= written })

            // The kit's histogram: 1,000 values; its counter: the increases add up to the last total.
            let fill = try eventually(seconds: 30) { () -> [[Int?]]? in
                guard let series = seriesList(try history(port, "metric=order_fill_latency&label=symbol:AAPL")).first else { return nil }
                let points = rows(series)
                return points.compactMap { $0[1] }.reduce(0, +) == 1000 ? points : nil
            }
            #expect(fill != nil, "the fill latencies' counts never added up to 1000")
            let orders = try eventually(seconds: 30) { () -> [[Int?]]? in
                guard let series = seriesList(try history(port, "ring=history-kit&metric=orders&label=side:buy")).first,
                    series["columns"] as? [String] == ["t", "increase", "total"]
                else { return nil }
                let points = rows(series)
                return points.count >= 2 ? points : nil
            }
            let counter = try #require(orders)
            #expect(counter.compactMap { $0[1] }.reduce(0, +) == counter.last?[2])
            #expect((counter.last?[2] ?? 0) > 0)

            // Without parameters: every series the collector has (as /latest lists them), and the range it covers.
            let latest = try jsonObject(httpGet(port: port, path: "/latest").body)
            let latestNames = Set(seriesList(latest).map { "\($0["ring"]!) \($0["metric"]!)" })
            let everything = try #require(try history(port))
            let names = Set(seriesList(everything).map { "\($0["ring"]!) \($0["metric"]!)" })
            #expect(names == latestNames && names.count == 4, "\(names)")
            #expect(everything["step"] as? Int == 1 && everything["retention_seconds"] as? Int == 120)
            #expect(everything["series_total"] as? Int == 4 && everything["series_refused"] as? Int == 0)
            #expect(everything["truncated"] as? Bool == false)
            let from = try #require(everything["from"] as? Int), to = try #require(everything["to"] as? Int)
            #expect(to - from == 300)
            #expect(seriesList(everything).allSatisfy { rows($0).allSatisfy { ($0[0] ?? 0) >= from && ($0[0] ?? 0) <= to } })

            // A coarser step keeps the sum.
            let coarse = seriesList(try history(port, "ring=history-blast&step=10")).first
            #expect(rows(try #require(coarse)).compactMap { $0[1] }.reduce(0, +) == written)
        }
    }

    @Test(
        "/api/history: bad parameters get 400 with a one-line reason; the route is listed",
        arguments: [
            "step=0", "step=lots", "from=yesterday", "from=-10&to=-20", "series=abc", "label=nolabel", "colour=red", "ring",
        ])
    func badParameters(query: String) throws {
        try withRingDirectory { directory in
            let (collector, port) = try startCollector(["--dir", directory.path])
            defer { collector.kill() }
            let response = try httpGet(port: port, path: "/api/history?" + query)
            #expect(response.status == 400)
            #expect(response.body.hasPrefix("bad request: ") && response.body.split(separator: "\n").count == 1, "\(response.body)")
            #expect(try httpGet(port: port, path: "/").body.contains("/api/history"))
            #expect(try httpGet(port: port, path: "/nowhere").body.contains("GET /api/history"))
        }
    }

    @Test("--history 0 disables the history: /api/history is 404 and says so")
    func disabled() throws {
        try withRingDirectory { directory in
            let (collector, port) = try startCollector(["--dir", directory.path, "--history", "0"])
            defer { collector.kill() }
            let response = try httpGet(port: port, path: "/api/history")
            #expect(response.status == 404 && response.body.contains("disabled (--history 0)"))
        }
    }

    @Test("--history-max-series: series past the cap are refused and counted in the answer and in /metrics")
    func cap() throws {
        try withRingDirectory { directory in
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms", "--history-max-series", "1"])
            defer { collector.kill() }
            let kit = try ChildProcess(testProducer: "kit", ring: "history-cap", in: directory, ["--count", "10", "--per-second", "100"])
            defer { kit.kill() }
            #expect(kit.readLine()?.hasPrefix("ready ") == true)
            // The kit's three series: one kept, two refused.
            let answer = try eventually(seconds: 30) { () -> [String: Any]? in
                let answer = try history(port)
                return answer?["series_refused"] as? Int == 2 ? answer : nil
            }
            #expect(answer?["series_total"] as? Int == 1 && answer?["series_cap"] as? Int == 1)
            #expect(seriesList(answer).count == 1)
            // And where an operator alerts: /metrics.
            let metrics = try eventually(seconds: 30) { () -> String? in
                let body = try httpGet(port: port, path: "/metrics").body
                return body.contains("ringside_collector_history_series_refused 2\n") ? body : nil
            }
            #expect(metrics?.contains("ringside_collector_history_series 1\n") == true)
            #expect(metrics?.contains("ringside_collector_history_series_limit 1\n") == true)
            // The memory it holds, in /metrics and /latest alike: some, and far less than a series might at most.
            let line = metrics?.split(separator: "\n").first { $0.hasPrefix("ringside_collector_history_bytes ") }
            let bytes = line.flatMap { Double($0.split(separator: " ")[1]) }
            #expect(bytes.map { $0 > 0 && $0 < 100_000 } == true, "\(line ?? "no ringside_collector_history_bytes")")
            let latest = try jsonObject(httpGet(port: port, path: "/latest").body)
            #expect(((latest["collector"] as? [String: Any])?["history_bytes"] as? Int).map { $0 > 0 } == true)
        }
    }
}
