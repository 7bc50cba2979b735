import Foundation
import Ringside
@testable import RingsideCollector
@testable import RingsideExport
import RingsideTestSupport
import Testing

@Suite("ringside-collector as a process")
struct CollectorProcessTests {
    @Test("end to end: a producer process's values reach /latest and /metrics; SIGTERM stops it with a final dump")
    func endToEnd() throws {
        try withRingDirectory { directory in
            let producer = try ChildProcess(
                testProducer: "sequence", ring: "e2e", in: directory, ["--count", "20000", "--start", "1", "--capacity", "32768"])
            #expect(producer.readLine() == "wrote 20000 dropped 0")
            let dump = directory.path + "/dump.json"
            let (collector, port) = try startCollector(["--dir", directory.path, "--json-dump", dump, "--poll", "20ms"])

            let latest = try eventually { () -> [String: Any]? in
                let response = try httpGet(port: port, path: "/latest")
                let document = try jsonObject(response.body)
                let series = document["series"] as? [[String: Any]]
                return series?.isEmpty == false ? document : nil
            }
            let series = try #require((latest?["series"] as? [[String: Any]])?.first)
            let window = try #require((series["windows"] as? [String: [String: Any]])?["1m"])
            #expect(window["count"] as? Int == 20000)
            #expect(window["min"] as? Int == 1 && window["max"] as? Int == 20000)
            // Exact quantiles of 1...20000 are 10000, 19800, 19980 (nearest rank): within 1/1024.
            for (key, exact) in [("p50", 10000.0), ("p99", 19800.0), ("p999", 19980.0)] {
                let reported = try #require(window[key] as? Double)
                #expect(abs(reported - exact) / exact <= 1.0 / 1024, "\(key): \(reported)")
            }
            let metrics = try httpGet(port: port, path: "/metrics")
            #expect(metrics.status == 200)
            #expect(metrics.body.contains(#"sequence_count{ring="e2e",source="test"} 20000"#))
            let health = try httpGet(port: port, path: "/health")
            #expect(health.status == 200)
            // How old the figures served are: a snapshot of a few series is published within a poll.
            let age = try #require(try jsonObject(health.body)["snapshot_age_seconds"] as? Double)
            #expect(age >= 0 && age < 10, "the snapshot's age: \(age) s")
            let stamp = try #require(
                metrics.body.split(separator: "\n").first { $0.hasPrefix("ringside_collector_snapshot_timestamp_seconds ") }
                    .flatMap { Double($0.split(separator: " ")[1]) })
            #expect(abs(stamp - Date().timeIntervalSince1970) < 60, "when the page's figures held: \(stamp)")
            #expect(try httpGet(port: port, path: "/nowhere").status == 404)

            if let check = try promtoolCheckMetrics(metrics.body) {
                #expect(check.status == 0 && check.report.isEmpty, "promtool: \(check.report)")
            }

            let stopping = Date()
            collector.send(SIGTERM)
            let exit = collector.waitForExit()
            #expect(exit.status == 0, "stderr: \(exit.standardError)")
            #expect(Date().timeIntervalSince(stopping) < 10, "no long wait on SIGTERM (the poll, a scrape)")
            #expect(exit.standardError.contains("received SIGTERM") && exit.standardError.contains("ring e2e released"))
            let dumped = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dump))) as? [String: Any]
            #expect((dumped?["series"] as? [[String: Any]])?.count == 1)
            // The consumer lock went with the process: a new consumer may take the ring.
            _ = try RingInspector("e2e", directory: directory).status()
            #expect(try !RingInspector("e2e", directory: directory).status().consumerAlive)
        }
    }

    @Test(
        "a plain page past what is kept is sent as it is written: in chunks over HTTP/1.1, to the close over HTTP/1.0; every series on it, the gzipped page whole"
    )
    func plainPageSentAsWritten() throws {
        try withRingDirectory { directory in
            // A budget of 1 MiB keeps plain pages of 64 KiB at most: 60 histograms write some 250 KB.
            let bot = try Bot.attach("paged", directory: directory.path, options: .init(laneCapacity: 1024, maxMetrics: 64))
            for number in 0..<60 { try bot.histogram("fill_latency", unit: .nanoseconds, labels: ["n": String(number)]).record(1_000) }
            let (collector, port) = try startCollector(["--dir", directory.path, "--max-series-bytes", "1M", "--poll", "20ms"])
            defer { collector.kill() }
            #expect(try eventually { try httpGet(port: port, path: "/metrics").body.contains(#"n="59""#) })
            for version in ["1.1", "1.0"] {
                let client = try RawClient(port: port, timeoutSeconds: 30)
                try client.send("GET /metrics HTTP/\(version)\r\nHost: x\r\n\r\n")
                let page = try client.readResponse()
                #expect(page.status == 200)
                #expect(page.header("Content-Length") == nil, "HTTP/\(version): no length announced")
                #expect(page.header("Transfer-Encoding") == (version == "1.1" ? "chunked" : nil), "HTTP/\(version)")
                let text = String(decoding: page.body, as: UTF8.self)
                #expect(text.count > 64 * 1024, "HTTP/\(version): \(text.count) bytes")
                for number in 0..<60 { #expect(text.contains(#"fill_latency_seconds_count{ring="paged",n="\#(number)"} 1"#)) }
                #expect(text.hasSuffix("\n") && text.contains("ringside_collector_series_bytes_limit 1048576\n"))
            }
            let client = try RawClient(port: port, timeoutSeconds: 30)
            try client.send("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
            let gzipped = try client.readResponse()
            #expect(
                gzipped.status == 200 && gzipped.header("Content-Length") == String(gzipped.body.count), "gzipped: whole, its length said")
            _ = bot
        }
    }

    @Test("a producer stopped with SIGSTOP shows as producer_stopped, exported and logged; live again after SIGCONT")
    func stoppedProducer() throws {
        try withRingDirectory { directory in
            let producer = try ChildProcess(
                testProducer: "lanes", ring: "frozen", in: directory, ["--threads", "2", "--count", "10", "--hold"])
            #expect(producer.readLine()?.hasPrefix("ready ") == true)
            defer {
                producer.send(SIGCONT)
                producer.kill()
            }
            let (collector, port) = try startCollector(["--dir", directory.path])
            defer { collector.kill() }
            func state() -> String? { ringState(port: port, ring: "frozen") }
            #expect(eventually { state() == "live" ? true : nil } == true, "the producer first shows as live")

            producer.send(SIGSTOP)
            let stoppedAt = Date()
            #expect(eventually(seconds: 10) { state() == "producer_stopped" ? true : nil } == true, "stopped within 10 s")
            let seconds = Date().timeIntervalSince(stoppedAt)
            let metrics = try httpGet(port: port, path: "/metrics").body
            #expect(metrics.contains("ringside_ring_producer_stopped{ring=\"frozen\"} 1"))
            #expect(metrics.contains("ringside_ring_producer_alive{ring=\"frozen\"} 1"), "stopped is still alive")

            producer.send(SIGCONT)
            #expect(eventually(seconds: 10) { state() == "live" ? true : nil } == true, "live again after SIGCONT")
            #expect(try httpGet(port: port, path: "/metrics").body.contains("ringside_ring_producer_stopped{ring=\"frozen\"} 0"))
            collector.send(SIGTERM)
            let log = collector.waitForExit().standardError
            #expect(log.contains("ring frozen: producer pid \(producer.pid) is stopped (SIGSTOP or a debugger)"))
            #expect(log.contains("ring frozen: producer pid \(producer.pid) runs again"))
            print("stopped producer: seen stopped after \(Int(seconds * 1000)) ms")
        }
    }

    @Test("an idle producer's death is seen at once: the close of its file wakes the collector, which asks an idle ring only every 30 s")
    func idleProducerDeath() throws {
        try withRingDirectory { directory in
            // Registers a histogram and records nothing: idle from the start.
            let producer = try ChildProcess(testProducer: "hold", ring: "quiet", in: directory, ["--count", "0"])
            #expect(producer.readLine()?.hasPrefix("ready ") == true)
            defer { producer.kill() }
            let (collector, port) = try startCollector(["--dir", directory.path])
            defer { collector.kill() }
            #expect(eventually { ringState(port: port, ring: "quiet") == "live" ? true : nil } == true, "first live")
            // Past the second after attach in which a ring's liveness is asked four times a second.
            Thread.sleep(forTimeInterval: 1.5)
            producer.send(SIGKILL)
            let killedAt = Date()
            #expect(
                eventually(seconds: 15) { ringState(port: port, ring: "quiet") == "producer_dead" ? true : nil } == true,
                "seen dead within 15 s, not at the next look 30 s on")
            print("idle producer killed: seen dead after \(Int(Date().timeIntervalSince(killedAt) * 1000)) ms")
        }
    }

    @Test("the state letter of /proc/PID/stat, whatever the command's name holds")
    func statParsing() {
        #expect(ProcessStates.state(inStat: ArraySlice("1234 (a (b) c) T 1 2 3".utf8)) == UInt8(ascii: "T"))
        #expect(ProcessStates.state(inStat: ArraySlice("1 (bot) S 0".utf8)) == UInt8(ascii: "S"))
        #expect(ProcessStates.state(inStat: ArraySlice("garbage".utf8)) == nil)
        #expect(ProcessStates.state(inStat: ArraySlice("1 (x)".utf8)) == nil)
        var states = ProcessStates()
        #expect(states.isStopped(pid: getpid(), nowNanos: 1) == false, "this test runs")
        #expect(states.isStopped(pid: 0, nowNanos: 1) == nil)
    }

    @Test(
        "a bad flag is one line on stderr and exit status 2",
        arguments: [
            ["--bogus"], ["--windows", "5x"], ["--slo", "nonsense"], ["--poll"], ["--history", "2d"], ["--history", "1s"],
        ])
    func badFlags(arguments: [String]) throws {
        let collector = try ChildProcess("ringside-collector", arguments)
        let exit = collector.waitForExit()
        #expect(exit.status == 2)
        let lines = exit.standardError.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].hasPrefix("ringside-collector: "), "stderr: \(exit.standardError)")
    }

    @Test("--help prints the usage and exits 0")
    func help() throws {
        let collector = try ChildProcess("ringside-collector", ["--help"])
        var text = ""
        while let line = collector.readLine() { text += line + "\n" }
        #expect(collector.waitForExit().status == 0)
        #expect(text.contains("--listen HOST:PORT") && text.contains("--slo RULE"))
    }

    @Test("a port already in use is a clear error and exit status 1")
    func portInUse() throws {
        try withRingDirectory { directory in
            let other = try TemporaryRingDirectory()  // one collector per ring directory: the second's own
            defer { other.remove() }
            let (first, port) = try startCollector(["--dir", directory.path])
            let second = try ChildProcess("ringside-collector", ["--dir", other.path, "--listen", "127.0.0.1:\(port)"])
            let exit = second.waitForExit()
            #expect(exit.status == 1)
            #expect(
                exit.standardError.contains("address already in use") || exit.standardError.contains("in use"),
                "stderr: \(exit.standardError)")
            first.send(SIGINT)
            #expect(first.waitForExit().status == 0)
        }
    }
}

/// The state of `ring` in the collector's /health (live, producer_dead, producer_stopped, ...).
private func ringState(port: Int, ring: String) -> String? {
    guard let body = try? httpGet(port: port, path: "/health").body, let object = try? jsonObject(body) else { return nil }
    return (object["rings"] as? [[String: Any]])?.first { $0["name"] as? String == ring }?["state"] as? String
}
