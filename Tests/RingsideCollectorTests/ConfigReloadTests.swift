import Foundation
import Ringside
@testable import RingsideCollector
import RingsideCommandLine
import RingsideTestSupport
import Testing

@Suite("The configuration file (--config): read with the command line, reloaded on SIGHUP and POST /-/reload")
struct ConfigReloadTests {
    /// A configuration file in a directory of its own, removed by `remove()`.
    struct ConfigFile {
        let directory: TemporaryDirectory
        var path: String { directory.path + "/collector.yml" }

        init(_ text: String) throws {
            directory = try TemporaryDirectory("ringside-config")
            try write(text)
        }

        func write(_ text: String) throws { try text.write(toFile: path, atomically: true, encoding: .utf8) }
        func remove() { directory.remove() }
    }

    @Test("a file's options are read as flags; the command line overrides them; a list gives a flag that repeats")
    func fileAndCommandLine() throws {
        let file = try ConfigFile(
            """
            # the collector's options
            listen: 0.0.0.0:9500
            windows: [1s, 10s]
            quantiles:
              - 0.5
              - 0.99
            slo:
              - md:p99<10us@10s severity=P2
              - "orders_rejected/orders_total<0.05%@30d severity=P0"
            allow-uid: [1500, 1501]
            otlp-endpoint: http://127.0.0.1:4318
            otlp-header: ["Authorization=Bearer x"]
            web-enable-lifecycle: true
            recorder-seconds: 30
            recorder-max-bytes: 64M
            """)
        defer { file.remove() }
        let options = try #require(try CollectorOptions.parse(["--config", file.path, "--listen", "127.0.0.1:0", "--allow-uid", "7"]))
        #expect(options.listen == "127.0.0.1:0", "the command line wins")
        #expect(options.allowedUIDs == [7], "a repeated flag on the command line replaces the file's values")
        #expect(options.windowNanos == [1_000_000_000, 10_000_000_000] && options.quantiles == [0.5, 0.99])
        #expect(options.sloRules.map(\.severity) == ["P2", "P0"] && options.sloRules[1].isRatio)
        #expect(options.otlp?.headers.map(\.name) == ["Authorization"] && options.reloadEndpoint)
        #expect(options.recorderNanos == 30_000_000_000 && options.recorderMaxBytes == 64 << 20)
        #expect(options.configFile == file.path && options.commandLineArguments == ["--listen", "127.0.0.1:0", "--allow-uid", "7"])
        #expect(try options.reloaded() == options, "read again, the same")
    }

    @Test(
        "a file that does not read is refused with its line and reason",
        arguments: [
            ("listen: 127.0.0.1:0\nbogus: 3\n", "line 2: unknown option --bogus"),
            ("slo:\n  - md:p99<1ms@1s\n  - not a rule\n", "line 3: --slo 'not a rule'"),
            ("demo: true\n", "line 1: demo is given on the command line only"),
            ("listen:\n\tx: 1\n", "line 2: a tab"),
            ("windows: [1s]\nslo: [md:p99<1ms@5s]\n", "window 5s is not one of --windows 1s"),
            ("- listen\n", "line 1: expected a mapping of options"),
            ("slo: {a: b}\n", "line 1: slo takes a value or a list of values, not a mapping"),
            ("web-enable-lifecycle: maybe\n", "line 1: web-enable-lifecycle is true or false"),
            ("--listen: x\n", "line 1: write the option's name without dashes"),
            ("recorder-seconds: 5\nrecorder-max-bytes: lots\n", "line 2: --recorder-max-bytes lots: expected a number of bytes"),
        ])
    func badFiles(_ text: String, _ expected: String) throws {
        let file = try ConfigFile(text)
        defer { file.remove() }
        do {
            _ = try CollectorOptions.parse(["--config", file.path])
            Issue.record("accepted: \(text.debugDescription)")
        } catch {
            #expect(error.description.contains(expected), "\(error)")
            #expect(error.description.contains(file.path), "names the file: \(error)")
        }
        #expect(throws: UsageError.self) { try CollectorOptions.parse(["--config", file.path + ".missing"]) }
        #expect(throws: UsageError.self) { try CollectorOptions.parse(["--config", file.path, "--config", file.path]) }
    }

    @Test("SIGHUP applies a changed file to a running collector: new SLOs and a new listener; windows and counters go on")
    func reloadKeepsWindowsAndCounters() throws {
        try withRingDirectory { directory in
            let file = try ConfigFile("listen: 127.0.0.1:0\nslo:\n  - order_fill_latency:p99<100us@1m\n")
            defer { file.remove() }
            let bot = try ChildProcess(
                testProducer: "kit", ring: "bot", in: directory,
                ["--count", "2000", "--start", "1000", "--step", "1000", "--per-second", "200"])
            defer { bot.kill() }
            #expect(bot.readLine()?.hasPrefix("ready ") == true)
            // The file's listen, not startCollector's (the command line's would override it).
            let collector = try ChildProcess("ringside-collector", ["--config", file.path, "--dir", directory.path, "--poll", "20ms"])
            defer { collector.kill() }
            let port = try #require(listeningPort(collector), "the collector did not start")
            let before = try #require(
                try eventually(seconds: 10) { () -> [String: Any]? in
                    let latest = try jsonObject(httpGet(port: port, path: "/latest").body)
                    return fill(latest)?["total_count"] as? Int == 2000 ? latest : nil
                }, "the bot's 2,000 values never reached the collector")
            let ordersBefore = try #require(orders(before))

            try file.write(
                """
                listen: localhost:0
                windows: [1s, 10s, 1m]
                slo:
                  - order_fill_latency:p99<100us@1m
                  - "orders{side=\\"buy\\"}/orders<99%@1h severity=P0"
                """)
            collector.send(SIGHUP)
            let (reloadedPort, line) = reloadLines(collector)
            let newPort = try #require(reloadedPort, "no new listener: \(line ?? "the collector exited")")
            #expect(
                line?.contains("applied --listen, --slo") == true && line?.contains("--windows change at the next start") == true,
                "\(line ?? "")")
            let after = try #require(
                try eventually(seconds: 10) { () -> [String: Any]? in
                    let latest = try jsonObject(httpGet(port: newPort, path: "/latest").body)
                    return (latest["slos"] as? [[String: Any]])?.count == 2 ? latest : nil
                }, "the new SLO never came on the new port")
            let slos = try #require(after["slos"] as? [[String: Any]])
            #expect(slos[1]["severity"] as? String == "P0" && slos[1]["statistic"] as? String == "ratio")
            // The windows and counters of before the reload are the same series, not begun again.
            #expect(fill(after)?["total_count"] as? Int == 2000)
            let minute = (fill(after)?["windows"] as? [String: [String: Any]])?["1m"]
            #expect(minute?["count"] as? Int == 2000, "the 1m window still holds what came before the reload: \(minute ?? [:])")
            #expect(try #require(orders(after)) >= ordersBefore, "the counter's total goes on")
            // The old listener closes once the reload is done (a second later).
            let closed = eventually(seconds: 10) { (try? httpGet(port: port, path: "/-/healthy", timeoutSeconds: 1)) == nil ? true : nil }
            #expect(closed == true, "the old listener on port \(port) still answers")
        }
    }

    @Test("POST /-/reload reloads and answers; a bad file is refused with its line, 500, and the running configuration stays")
    func reloadEndpoint() throws {
        try withRingDirectory { directory in
            let file = try ConfigFile("slo: [order_fill_latency:p99<100us@1m]\nweb-enable-lifecycle: true\n")
            defer { file.remove() }
            let (collector, port) = try startCollector(["--config", file.path, "--dir", directory.path])
            defer { collector.kill() }
            #expect(try httpGet(port: port, path: "/-/reload").status == 405, "GET does not reload")

            try file.write(
                "slo:\n  - order_fill_latency:p99<100us@1m\n  - order_fill_latency:p999<1ms@1m severity=P2\nweb-enable-lifecycle: true\n")
            let good = try post(port: port, path: "/-/reload")
            #expect(good.status == 200 && good.text.contains("applied --slo"), "\(good.status) \(good.text)")
            let rules = try eventually(seconds: 10) { () -> [String]? in
                let slos = try jsonObject(httpGet(port: port, path: "/latest").body)["slos"] as? [[String: Any]]
                return slos?.count == 2 ? slos?.compactMap { $0["rule"] as? String } : nil
            }
            #expect(rules == ["order_fill_latency:p99<100us@1m", "order_fill_latency:p999<1ms@1m"])

            try file.write("slo:\n  - order_fill_latency:p99<100us@1m\n  - broken\n")
            let bad = try post(port: port, path: "/-/reload")
            #expect(bad.status == 500 && bad.text.contains("line 3"), "\(bad.status) \(bad.text)")
            #expect(collector.waitForErrorLine(containing: "reload refused")?.contains("the running configuration stays") == true)
            let slos = try jsonObject(httpGet(port: port, path: "/latest").body)["slos"] as? [[String: Any]]
            #expect(slos?.count == 2, "the running SLOs stay")

            // Without --config there is nothing to read again (another directory: one collector a directory).
            let other = try TemporaryRingDirectory()
            defer { other.remove() }
            let (plain, plainPort) = try startCollector(["--dir", other.path, "--web-enable-lifecycle"])
            defer { plain.kill() }
            let none = try post(port: plainPort, path: "/-/reload")
            #expect(none.status == 500 && none.text.contains("no --config file"), "\(none.text)")
        }
    }
}

/// The kit bot's histogram series in a `/latest` page.
private func fill(_ latest: [String: Any]) -> [String: Any]? {
    (latest["series"] as? [[String: Any]])?.first { $0["metric"] as? String == "order_fill_latency" }
}

/// The kit bot's counter total in a `/latest` page.
private func orders(_ latest: [String: Any]) -> Int? {
    (latest["series"] as? [[String: Any]])?.first { $0["metric"] as? String == "orders" }?["total"] as? Int
}

/// A `POST` with no body to 127.0.0.1:`port`.
private func post(port: Int, path: String) throws -> RawClient.Response {
    let client = try RawClient(port: port, timeoutSeconds: 15)
    try client.send("POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    return try client.readResponse()
}

/// Reads the collector's log until its reload's outcome ("reloaded" or "reload refused"): the
/// port of a new listener, if one came, and that line (nil: the collector exited).
private func reloadLines(_ collector: ChildProcess) -> (port: Int?, outcome: String?) {
    var port: Int?
    while let line = collector.readErrorLine() {
        if line.contains("listening on http"), let address = line.components(separatedBy: "://").last?.split(separator: " ").first {
            port = address.split(separator: ":").last.flatMap { Int($0) }
        }
        if line.contains("reloaded ") || line.contains("reload refused") { return (port, line) }
    }
    return (port, nil)
}

/// The port of the collector's next "listening on" line.
private func listeningPort(_ collector: ChildProcess) -> Int? {
    guard let line = collector.waitForErrorLine(containing: "listening on http"),
        let address = line.components(separatedBy: "://").last?.split(separator: " ").first
    else { return nil }
    return address.split(separator: ":").last.flatMap { Int($0) }
}
