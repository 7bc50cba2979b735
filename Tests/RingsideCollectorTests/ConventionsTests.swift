import Foundation
import Ringside
@testable import RingsideCollector
@testable import RingsideExport
import RingsideSnapshot
import RingsideCommandLine
import RingsideHTTP
import RingsideTestSupport
import Testing

/// The value of the sample line `name value` (no labels) on a /metrics page.
private func sample(_ name: String, in page: String) -> Double? {
    for line in page.split(separator: "\n") where line.hasPrefix(name + " ") {
        return Double(line.dropFirst(name.count + 1))
    }
    return nil
}

@Suite("The exporter conventions: --version, build and process metrics, /-/healthy, /-/ready, JSON logs, the index page")
struct ConventionsTests {
    // MARK: - --version

    @Test(
        "--version prints one line, the version and the revision, and exits 0",
        arguments: [
            ("ringside-collector", ["--version"]),
            ("ringside-collector", ["--dir", "/nonexistent", "--version"]),
            ("ringside-dump", ["--version"]),
            ("ringside-dump", ["list", "--version"]),
            ("ringside-emit", ["--version"]),
            ("ringside-bench", ["--version"]),
        ])
    func version(tool: String, arguments: [String]) throws {
        let child = try ChildProcess(tool, arguments)
        let line = child.readLine()
        let rest = child.readLine()
        let (status, errors) = child.waitForExit()
        #expect(status == 0, "\(tool) \(arguments): exit \(status): \(errors)")
        #expect(errors.isEmpty, "no usage error: \(errors)")
        #expect(line == "\(tool) \(RingsideVersion.version) (revision \(RingsideVersion.revision))")
        #expect(line == RingsideVersion.line(program: tool))
        #expect(rest == nil, "one line only, then: \(rest ?? "")")
    }

    @Test("the revision is a commit of this repository (or \"unknown\" outside one), never a made-up value")
    func revision() throws {
        #expect(
            RingsideVersion.version.split(separator: ".").count == 3
                && RingsideVersion.version.split(separator: ".").allSatisfy { UInt($0) != nil })
        let revision = RingsideVersion.revision
        let git = systemTool("git")
        let top = git.flatMap { try? runProcess($0, ["-C", packageRoot, "rev-parse", "--show-toplevel"]) }
        let isRepositoryTop =
            top.map {
                $0.status == 0
                    && URL(fileURLWithPath: $0.output.trimmingCharacters(in: .whitespacesAndNewlines)).resolvingSymlinksInPath().path
                        == URL(fileURLWithPath: packageRoot).resolvingSymlinksInPath().path
            } ?? false
        guard let git, isRepositoryTop else {
            print("skipping: \(packageRoot) is not the top of a git repository (revision \(revision))")
            return
        }
        #expect(revision != "unknown", "the sources are a git checkout: the build should have recorded its commit")
        #expect(revision.count >= 4 && revision.allSatisfy { $0.isHexDigit && !$0.isUppercase }, "\(revision)")
        // A commit that exists here (HEAD may have moved on since the build: any commit will do).
        #expect(
            try runProcess(git, ["-C", packageRoot, "cat-file", "-e", revision + "^{commit}"]).status == 0,
            "\(revision) is not a commit of \(packageRoot)")
    }

    // MARK: - /metrics

    @Test("/metrics has ringside_build_info and the process metrics with sane values, and promtool accepts it")
    func buildAndProcessMetrics() throws {
        try withRingDirectory { directory in
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms"])
            defer { collector.kill() }
            let page = try httpGet(port: port, path: "/metrics").body
            let now = Date().timeIntervalSince1970

            let info = "ringside_build_info{version=\"\(RingsideVersion.version)\",revision=\"\(RingsideVersion.revision)\"} 1"
            #expect(page.contains("\n" + info + "\n"), "no \(info)")
            #expect(page.contains("# TYPE ringside_build_info gauge\n"))
            // HELP and TYPE as the client libraries write them.
            for (name, type, help) in [
                ("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds."),
                ("process_max_fds", "gauge", "Maximum number of open file descriptors."),
                ("process_open_fds", "gauge", "Number of open file descriptors."),
                ("process_resident_memory_bytes", "gauge", "Resident memory size in bytes."),
                ("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds."),
                ("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes."),
            ] {
                #expect(page.contains("# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) "), "\(name)'s HELP, TYPE and sample")
            }
            let cpu = try #require(sample("process_cpu_seconds_total", in: page))
            let resident = try #require(sample("process_resident_memory_bytes", in: page))
            let virtual = try #require(sample("process_virtual_memory_bytes", in: page))
            let open = try #require(sample("process_open_fds", in: page))
            let max = try #require(sample("process_max_fds", in: page))
            let start = try #require(sample("process_start_time_seconds", in: page))
            #expect(cpu >= 0 && cpu.isFinite)
            #expect(resident > 0 && virtual >= resident, "resident \(resident), virtual \(virtual)")
            #expect(open >= 3 && open <= max, "open fds \(open), max \(max)")
            #expect(abs(now - start) < 60, "started at \(start), now \(now)")

            guard let check = try promtoolCheckMetrics(page) else { return }
            #expect(check.status == 0 && check.report.isEmpty, "promtool: \(check.report)")
        }
    }

    @Test("/proc/self/stat is read past a command name with spaces and parentheses; /proc/stat's btime")
    func procParsing() throws {
        // Fields 3 to 24 after the name; utime 14, stime 15, starttime 22, vsize 23, rss 24.
        let after = (3...52).map { field -> String in
            switch field {
            case 3: return "S"
            case 14: return "250"
            case 15: return "50"
            case 22: return "12345"
            case 23: return "987654321"
            case 24: return "4321"
            default: return "0"
            }
        }
        let stat = "4242 (a (b) c)) " + after.joined(separator: " ") + "\n"
        #expect(
            ProcessMetrics.statFields(stat)
                == ProcessMetrics.StatFields(utime: 250, stime: 50, starttime: 12345, vsize: 987_654_321, rss: 4321))
        #expect(ProcessMetrics.statFields("4242 (truncated) S 1 2") == nil)
        #expect(ProcessMetrics.bootTime(inProcStat: "cpu  1 2 3\nintr 5\nbtime 1795370000\nprocesses 9\n") == 1_795_370_000)
        #expect(ProcessMetrics.bootTime(inProcStat: "cpu 1\n") == nil)

        let now = try #require(ProcessMetrics.read())
        #expect(now.residentMemoryBytes > 0 && now.openFDs >= 3 && now.openFDs <= now.maxFDs)
        #expect(abs(Date().timeIntervalSince1970 - now.startTimeSeconds) < 24 * 3600, "a test process is young")
        // A page rendered with them has them once each; without them, none.
        let families = now.families().map(\.name)
        #expect(families == families.sorted() && families.count == 6)
        let with = String(decoding: PrometheusExporter.render(Snapshot(), process: now), as: UTF8.self)
        let without = String(decoding: PrometheusExporter.render(Snapshot()), as: UTF8.self)
        for name in families {
            #expect(with.components(separatedBy: "# TYPE \(name) ").count == 2)
            #expect(!without.contains(name))
        }
        #expect(without.contains("ringside_build_info{"), "build info is in every page")
    }

    // MARK: - /-/healthy and /-/ready

    @Test("/-/healthy is 200 while serving; /-/ready is 503 before the first pass and once the loop stalls, as /health")
    func healthyAndReady() throws {
        try withRingDirectory { directory in
            let collector = try makeCollector(directory, captured: CapturedLog())
            let endpoints = CollectorEndpoints(collector: collector)
            func get(_ path: String) -> HTTPResponse {
                endpoints.handle(HTTPRequest(method: "GET", target: path, path: path, query: nil, minorVersion: 1, headers: []))
            }
            func text(_ response: HTTPResponse) -> String { String(decoding: response.body, as: UTF8.self) }
            #expect(get("/-/healthy").status == 200 && text(get("/-/healthy")) == "Healthy\n")
            #expect(get("/-/ready").status == 503 && get("/health").status == 503, "no pass yet")
            #expect(text(get("/-/ready")).contains("not made a pass"))
            pass(collector)
            #expect(get("/-/ready").status == 200 && text(get("/-/ready")) == "Ready\n")
            #expect(get("/health").status == 200)
            usleep(2_500_000)  // no pass for longer than the 2 s stall bound: the loop has stalled
            #expect(get("/-/ready").status == 503 && get("/health").status == 503)
            #expect(text(get("/-/ready")).contains("last pass was"))
            #expect(get("/-/healthy").status == 200, "liveness does not depend on the drain loop")
            pass(collector)
            #expect(get("/-/ready").status == 200)
        }
    }

    @Test("the real collector serves /-/healthy and /-/ready, and / as an HTML page linking every endpoint")
    func endpointsOfTheRealCollector() throws {
        try withRingDirectory { directory in
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms"])
            defer { collector.kill() }
            let healthy = try httpGet(port: port, path: "/-/healthy")
            #expect(healthy.status == 200 && healthy.body == "Healthy\n")
            let ready = eventually(seconds: 10) { (try? httpGet(port: port, path: "/-/ready")).flatMap { $0.status == 200 ? $0 : nil } }
            #expect(ready?.body == "Ready\n")

            let index = try httpGetWithHeaders(port: port, path: "/")
            #expect(index.status == 200)
            #expect(index.header("Content-Type") == "text/html; charset=utf-8")
            #expect(index.text.hasPrefix("<!DOCTYPE html>") && index.text.contains("</html>"))
            for path in ["/metrics", "/latest", "/health", "/-/healthy", "/-/ready"] {
                #expect(index.text.contains("<a href=\"\(path)\">"), "no link to \(path)")
                #expect(try httpGet(port: port, path: path).status == 200, "\(path) answers")
            }
            #expect(
                !index.text.contains("http://") && !index.text.contains("https://") && !index.text.contains(" src="),
                "no external assets")
            #expect(try httpGet(port: port, path: "/nope").status == 404)
        }
    }

    // MARK: - --log-format

    @Test("--log-format json: every line the real collector writes is one JSON object with time, level and msg")
    func jsonLog() throws {
        try withRingDirectory { directory in
            // A ring directory whose name needs escaping: a quote, a backslash and a tab.
            let awkward = directory.path + "/a\"b\\c\td"
            try FileManager.default.createDirectory(atPath: awkward, withIntermediateDirectories: false)
            let collector = try ChildProcess(
                "ringside-collector",
                [
                    "--listen", "127.0.0.1:0", "--dir", awkward,
                    "--log-format", "json",
                ])
            var lines: [String] = []
            while let line = collector.readErrorLine() {
                lines.append(line)
                if line.contains("listening on http://") { break }
            }
            collector.send(SIGTERM)
            let (status, rest) = collector.waitForExit()
            #expect(status == 0, "\(rest)")
            lines += rest.split(separator: "\n").map(String.init)
            #expect(lines.count >= 3, "listening, received SIGTERM, stopped: \(lines)")
            var messages: [String] = []
            for line in lines {
                let object = try jsonObject(line)
                #expect(Set(object.keys) == ["time", "level", "msg"], "\(line)")
                let time = try #require(object["time"] as? String)
                #expect(time.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression) != nil, "\(time)")
                #expect(["info", "warn", "error"].contains(object["level"] as? String ?? ""), "\(line)")
                messages.append(try #require(object["msg"] as? String))
            }
            let listening = try #require(messages.first { $0.hasPrefix("listening on http://127.0.0.1:") })
            #expect(listening.hasSuffix("ring directory " + awkward), "the path read back exactly: \(listening)")
            #expect(messages.contains("stopped"))
        }
    }

    @Test("a JSON log line escapes what JSON requires; the text format is the time and the message")
    func logLines() throws {
        let message = "quote \" backslash \\ newline \n tab \t bell \u{7} caf\u{E9}"
        let json = CollectorLog.line(message, level: .warn, format: .json, time: "2026-11-22T20:45:00.123Z")
        #expect(!json.contains("\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: String])
        #expect(object == ["time": "2026-11-22T20:45:00.123Z", "level": "warn", "msg": message])
        #expect(json.hasPrefix(#"{"time":"2026-11-22T20:45:00.123Z","level":"warn","msg":"#))
        #expect(
            CollectorLog.line("ring a attached", level: .error, format: .text, time: "2026-11-22T20:45:00.123Z")
                == "2026-11-22T20:45:00.123Z ring a attached")
    }

    @Test("--log-format with a bad value is a usage error naming the flag and the choices: exit 2")
    func badLogFormat() throws {
        for value in ["xml", "JSON", ""] {
            let child = try ChildProcess("ringside-collector", ["--listen", "127.0.0.1:0", "--log-format", value])
            let output = child.readLine()
            let (status, errors) = child.waitForExit()
            #expect(status == 2 && output == nil)
            let lines = errors.split(separator: "\n")
            #expect(
                lines.count == 1 && errors.contains("--log-format") && errors.contains("text") && errors.contains("json"),
                "\(errors)")
        }
        #expect(try CollectorOptions.parse(["--log-format", "json"])?.logFormat == .json)
        #expect(try CollectorOptions.parse(["--log-format=text"])?.logFormat == .text)
        #expect(try CollectorOptions.parse([])?.logFormat == .text)
        #expect(CollectorOptions.usage.contains("--log-format"))
    }
}
