import CRingside
import Foundation
import Ringside
@testable import RingsideCollector
@testable import RingsideExport
import RingsideTestSupport
import Testing

private func latest(_ port: Int) throws -> [String: Any] {
    let response = try httpGet(port: port, path: "/latest")
    return try jsonObject(response.body)
}

private func series(_ document: [String: Any], _ metric: String) -> [String: Any]? {
    (document["series"] as? [[String: Any]])?.first { $0["metric"] as? String == metric }
}

@Suite("One bot, many threads: per-thread lanes, exact cells, one bot in the collector")
struct ManyThreadsTests {
    @Test("8 threads x 1 M records through one Bot into a real collector: every record aggregated once, counters exact")
    func eightThreadsIntoACollector() throws {
        try withRingDirectory { directory in
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "10ms"])
            defer { collector.kill() }
            let threads = 8, count = 1_000_000
            let producer = try ChildProcess(
                testProducer: "threads", ring: "many", in: directory,
                ["--threads", "\(threads)", "--count", "\(count)", "--capacity", "\(1 << 20)", "--sample-above", "50"])
            // "lanes L written W dropped D"
            let report = try #require(producer.readLine()).split(separator: " ")
            #expect(producer.waitForExit().status == 0)
            let lanes = try #require(Int(report[1])), written = try #require(Int(report[3])), dropped = try #require(Int(report[5]))
            #expect(lanes == threads, "a lane a thread: each holds its lane before any records")
            // 1 M records a thread into lanes of 2^20: sampling uses at most a lane's top 1/32 (SAMPLING in
            // ringside.h), so every call is written as it is, whatever the collector's pace.
            #expect(written == threads * count && dropped == 0)

            // 8 M records on a loaded 2-core machine: allow far more than the default 10 s (a
            // bound on a wait that ends as soon as all are counted; 30 s ran out under a load of 8).
            let document = try #require(
                try eventually(seconds: 120) { () -> [String: Any]? in
                    let document = try latest(port)
                    // Every call counted once: a record, a call gathered, or a drop.
                    guard let values = series(document, "thread_values"),
                        (values["total_count"] as? Int ?? 0) + (values["dropped_records"] as? Int ?? 0) == threads * count,
                        let increments = series(document, "thread_increments"), increments["total"] as? Int == threads * count
                    else { return nil }
                    // The producer's exit is seen too (within a second), so its lanes' last states are read.
                    let ring = (document["rings"] as? [[String: Any]])?.first { $0["name"] as? String == "many" }
                    return ring?["alive"] as? Bool == false ? document : nil
                }, "the collector never counted \(threads * count) calls and increments and the producer gone")
            let values = try #require(series(document, "thread_values"))
            #expect(values["dropped_records"] as? Int == dropped)
            #expect(values["sampled_records"] as? Int == 0, "no call gathered")
            #expect(values["total_count"] as? Int == written)
            // Each value t*N+i written once: the sum of 1 ... T*N, exactly, and its largest.
            let total = threads * count
            #expect(values["total_sum"] as? Int == total * (total + 1) / 2)
            #expect(values["total_max"] as? Int == total)
            // One bot: one series per metric, its lanes listed under the one ring.
            #expect((document["series"] as? [[String: Any]])?.count == 2)
            let ring = try #require((document["rings"] as? [[String: Any]])?.first { $0["name"] as? String == "many" })
            let laneList = try #require(ring["lanes"] as? [[String: Any]])
            #expect(laneList.count == lanes)
            let recordsTotal = try #require(ring["records_total"] as? Int), consumed = try #require(ring["consumed_total"] as? Int)
            let ringDropped = try #require(ring["dropped_total"] as? Int), backlog = try #require(ring["backlog"] as? Int)
            #expect(recordsTotal == written && ringDropped == dropped)
            #expect(recordsTotal + ringDropped == consumed + ringDropped + backlog)
            for lane in laneList {
                let (w, c, b) = (lane["records_total"] as? Int ?? -1, lane["consumed_total"] as? Int ?? -2, lane["backlog"] as? Int ?? -3)
                #expect(w == c + b, "lane \(lane)")
                // A thread retires its lane as it exits; the process may exit before the last
                // thread's exit has run, leaving that lane marked active in a dead producer's file.
                #expect(["retired", "active"].contains(lane["state"] as? String), "\(lane)")
            }
            let metrics = try httpGet(port: port, path: "/metrics").body
            #expect(metrics.contains(#"thread_increments_total{ring="many",source="test"} 8000000"#))
            #expect(metrics.contains(#"ringside_lane_records_written_total{ring="many",lane="0"}"#))
        }
    }

    @Test("a burst far past the drain, then idle, then SIGKILLed: the real collector's count, sum and largest are exact throughout")
    func burstIdleThenKilled() throws {
        try withRingDirectory { directory in
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "10ms"])
            defer { collector.kill() }
            let calls: UInt64 = 2_000_000
            let producer = try ChildProcess(
                testProducer: "burst-idle", ring: "idle", in: directory,
                ["--count", "\(calls)", "--capacity", "256", "--sample-above", "50"], withInput: true)
            defer { producer.kill() }
            #expect(producer.readLine()?.hasPrefix("attached ") == true)
            // The values burst-idle records (ringside-test-producer): their count, sum and largest.
            var sum: UInt64 = 0, largest: UInt64 = 0
            for index in 0..<calls {
                let value = 1 + (index &* 2_654_435_761) % 1_000_000
                sum += value
                largest = max(largest, value)
            }
            producer.write("go\n")
            #expect(producer.readLine() == "done")
            // Every call a record, a call gathered, or a drop, with the drops' sum and largest kept.
            func exact(_ document: [String: Any]) -> [String: Any]? {
                guard let burst = series(document, "burst"), let count = burst["total_count"] as? Int,
                    let dropped = burst["dropped_records"] as? Int, count + dropped == Int(calls),
                    let total = burst["total_sum"] as? Int, let droppedSum = burst["dropped_sum"] as? Int,
                    total + droppedSum == Int(sum)
                else { return nil }
                return burst
            }
            let idle = try #require(try eventually(seconds: 30) { try exact(latest(port)) }, "the idle bot's calls never all counted")
            #expect(idle["sampled_records"] as? Int ?? 0 > 0, "the lane was sampled: \(idle)")
            #expect(max(idle["total_max"] as? Int ?? 0, idle["dropped_max"] as? Int ?? 0) == Int(largest))
            producer.kill()
            _ = producer.waitForExit()
            let killed = try #require(
                try eventually(seconds: 30) { () -> [String: Any]? in
                    let document = try latest(port)
                    let ring = (document["rings"] as? [[String: Any]])?.first { $0["name"] as? String == "idle" }
                    return ring?["alive"] as? Bool == false ? exact(document) : nil
                }, "the collector never saw the producer die with every call counted")
            #expect(killed["total_count"] as? Int == idle["total_count"] as? Int, "nothing more, nothing less after the kill")
            #expect(max(killed["total_max"] as? Int ?? 0, killed["dropped_max"] as? Int ?? 0) == Int(largest))
        }
    }

    @Test("a counter incremented 1 M times beside a histogram into a ring full most of the time: exact total, drops per metric")
    func exactCounterIntoAFullRing() throws {
        try withRingDirectory { directory in
            let captured = CapturedLog()
            let collector = try makeCollector(directory, captured: captured)
            let bot = try Bot.attach("tiny", directory: directory.path, options: .init(laneCapacity: 16))
            let orders = try bot.counter("orders")
            let fills = try bot.histogram("fills")
            let level = try bot.gauge("level")
            for value in 1...1_000_000 {
                orders.increment()
                fills.record(UInt64(value))
                if value % 1000 == 0 { level.set(Double(value)) }
            }
            let snapshot = pass(collector)
            #expect(try #require(snapshot.series("orders")).cumulativeSum == 1_000_000)
            let fillSeries = try #require(snapshot.series("fills"))
            #expect(fillSeries.cumulativeCount == 16 && fillSeries.droppedRecords == 1_000_000 - 16)
            // The gauge's records were dropped too (the ring was full), its last value was not.
            let levelSeries = try #require(snapshot.series("level"))
            #expect(levelSeries.lastValue == 1_000_000 && levelSeries.droppedRecords == 1_000)
            let ringSnapshot = try #require(snapshot.ring("tiny"))
            #expect(ringSnapshot.droppedTotal == 1_000_000 - 16 + 1_000)
            #expect(
                ringSnapshot.recordsTotal + ringSnapshot.droppedTotal
                    == ringSnapshot.consumedTotal + ringSnapshot.droppedTotal + ringSnapshot.backlog)
            let page = String(decoding: PrometheusExporter.render(snapshot), as: UTF8.self)
            #expect(page.contains(#"ringside_metric_records_dropped_total{ring="tiny",metric="fills",labels=""} 999984"#))
        }
    }

    @Test("threads beyond the bot's lanes keep counters and gauges exact and count their records as dropped")
    func moreThreadsThanLanes() throws {
        try withRingDirectory { directory in
            let collector = try makeCollector(directory, captured: CapturedLog())
            let bot = try Bot.attach("crowd", directory: directory.path, options: .init(laneCapacity: 1 << 16, maxLanes: 2))
            let hits = try bot.counter("hits")
            let values = try bot.histogram("values")
            let start = DispatchSemaphore(value: 0), done = DispatchGroup(), allWrote = DispatchGroup()
            for _ in 0..<8 { allWrote.enter() }
            for _ in 0..<8 {
                done.enter()
                Thread {
                    start.wait()
                    // A thread holds its lane until it exits: none exits before all eight have
                    // recorded, so six of them recorded with no lane, however the threads ran.
                    hits.increment()
                    values.record(1)
                    allWrote.leave()
                    allWrote.wait()
                    for value in 2...10_000 {
                        hits.increment()
                        values.record(UInt64(value))
                    }
                    done.leave()
                }.start()
            }
            for _ in 0..<8 { start.signal() }
            done.wait()
            // A pass takes at most `passRecordLimit` records from a ring: pass until none wait.
            var snapshot = pass(collector)
            for _ in 0..<10 where snapshot.ring("crowd")?.backlog != 0 { snapshot = pass(collector) }
            #expect(try #require(snapshot.series("hits")).cumulativeSum == 80_000)
            let valueSeries = try #require(snapshot.series("values"))
            #expect(valueSeries.cumulativeCount + valueSeries.droppedRecords == 80_000)
            let ring = try #require(snapshot.ring("crowd"))
            #expect(ring.lanes.count <= 2 && ring.unlanedDropped > 0)
            #expect(ring.recordsTotal + ring.droppedTotal == 80_000)
        }
    }

    /// 1,500 finished bots under a limit of 1,024 open files: the first 896 are attached (the rest of
    /// the limit is HTTP's), the others wait, listed and counted; each finished bot, once drained, gives
    /// its descriptor back, so in the end every one is collected.
    @Test("a collector with 1,500 rings under a limit of 1,024 open files keeps answering /health, says why once, and collects them all")
    func descriptorLimit() throws {
        try withRingDirectory { directory in
            for index in 0..<1_500 {
                _ = try Bot.attach("r\(index)", directory: directory.path, options: .init(laneCapacity: 16, maxMetrics: 1))
            }
            // Under a hard limit of 1,024 (it cannot raise it), logging to a file: a full pipe would stall it.
            let logPath = directory.path + "/collector.log"
            let binary = try builtExecutable("ringside-collector")
            let collector = try ChildProcess(
                "/bin/sh",
                [
                    "-c", "ulimit -n 1024 && exec \"$0\" --listen 127.0.0.1:0 --dir \"$1\" 2>\"$2\"",
                    binary, directory.path, logPath,
                ])
            defer { collector.kill() }
            func log() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
            let listening = try #require(eventually { log().contains("listening on http://") ? log() : nil })
            let address = try #require(listening.components(separatedBy: "http://").last?.split(separator: " ").first)
            let port = try #require(address.split(separator: ":").last.flatMap { Int($0) })
            #expect(eventually { log().contains("cannot attach ") ? true : nil } == true)
            // The first pass attaches hundreds of rings: /health is 200 once it is done, and stays so.
            #expect(try eventually { try httpGet(port: port, path: "/health").status == 200 ? true : nil } == true)
            for _ in 0..<10 {
                #expect(try httpGet(port: port, path: "/health").status == 200)
                #expect(try httpGet(port: port, path: "/metrics").status == 200)
                usleep(100_000)
            }
            // The collector's own figures are brought up to date between snapshots, so the wait
            // reaching 0 can be seen while the snapshot under way still lists the rings it began with.
            // Asked twice a second: pages of 1,500 rings, asked every 10 ms, take the cores its drain needs.
            var ringsListed = 0
            let collected = eventually(seconds: 60, every: 0.5) { () -> Bool? in
                guard let metrics = try? httpGet(port: port, path: "/metrics").body,
                    let latest = try? jsonObject(try httpGet(port: port, path: "/latest").body)
                else { return nil }
                ringsListed = (latest["rings"] as? [Any])?.count ?? 0
                return metrics.contains("\nringside_collector_rings_waiting 0\n")
                    && !metrics.contains("ringside_ring_skipped{") && ringsListed == 1_500 ? true : nil
            }
            #expect(collected == true, "some rings still wait for a descriptor; \(ringsListed) of 1,500 listed")
            #expect(ringsListed == 1_500)
            collector.send(SIGTERM)
            #expect(collector.waitForExit().status == 0)
            #expect(log().components(separatedBy: "cannot attach ").count == 2, "said once")
            #expect(log().components(separatedBy: "every ring found is attached again").count == 2, "said once")
        }
    }

    @Test("a new bot's first burst is collected: the collector wakes on the new file (inotify)")
    func newBotIsAttachedAtOnce() throws {
        try withRingDirectory { directory in
            let captured = CapturedLog()
            // A poll of a minute: only inotify can wake it before then (the bound below is a third
            // of that, so a loaded machine's slowness is not taken for a missed event).
            let collector = try makeCollector(directory, pollNanos: 60_000_000_000, captured: captured)
            collector.start()
            defer { collector.stop() }
            usleep(100_000)  // the first pass, which starts the watch
            let bot = try Bot.attach("burst", directory: directory.path, options: .init(laneCapacity: 1 << 16))
            let values = try bot.histogram("values")
            let attached = Date()
            #expect(eventually(seconds: 20) { captured.contains("ring burst attached") }, "attached before a poll of 60 s only by inotify")
            print("new bot: attached after \(Int(Date().timeIntervalSince(attached) * 1000)) ms")
            for value in 1...1_000 { values.record(UInt64(value)) }
        }
    }
}
