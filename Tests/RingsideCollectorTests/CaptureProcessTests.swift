import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

@Suite("Captures by the real ringside-collector: POST /api/capture and ringside-dump capture, bots that die or stop, bounds")
struct CaptureProcessTests {
    static let fill = "order_fill_latency{symbol=\"AAPL\"}"

    /// Runs `body` with a collector over a fresh ring directory, capturing into a fresh directory.
    func withCapturingCollector<T>(
        _ extra: [String] = [], _ body: (_ collector: ChildProcess, _ port: Int, _ directory: RingDirectory, _ captures: String) throws -> T
    ) throws -> T {
        let captures = try TemporaryDirectory("ringside-captures")
        defer { captures.remove() }
        return try withRingDirectory { directory in
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "10ms", "--capture-dir", captures.path] + extra)
            defer { collector.kill() }
            return try body(collector, port, directory, captures.path)
        }
    }

    /// Waits until the collector has drained the `count` fills of kit bot `ring`.
    func waitForFills(_ ring: String, count: Int, port: Int) throws {
        let drained = try eventually(seconds: 30) {
            try CaptureProbe.totalCount(port: port, ring: ring, metric: "order_fill_latency") == count
        }
        try #require(drained, "the collector did not drain the \(count) fills of \(ring)")
    }

    @Test(
        "POST /api/capture: 202 with an id, then the capture is listed written with its three files, served as written and holding the bot's records; a second within --capture-min-interval: 429 with Retry-After, counted by trigger"
    )
    func askedForOverHTTP() throws {
        try withCapturingCollector(["--capture-after", "200ms", "--capture-min-interval", "1h"]) { _, port, directory, captures in
            let (count, start, step) = (300, 10_000, 7)
            let bot = try CaptureProbe.kitBot("asked-bot", in: directory, count: count, start: start, step: step)
            defer { bot.kill() }
            try waitForFills("asked-bot", count: count, port: port)

            let accepted = try CaptureProbe.post(port: port, path: "/api/capture?bot=asked-bot")
            try #require(accepted.status == 202, "\(accepted.status) \(accepted.text)")
            let answer = try jsonObject(accepted.text)
            let id = try #require(answer["id"] as? Int)
            #expect(answer["status"] as? String == "pending" && answer["list"] as? String == "/api/captures")

            let capture = try #require(try CaptureProbe.finished(port: port, trigger: "request"), "no capture was written")
            #expect(capture["id"] as? Int == id && capture["status"] as? String == "written", "\(capture)")
            #expect(capture["bots"] as? [String] == ["asked-bot"])
            #expect(capture["after_seconds"] as? Double == 0.2)
            let files = try #require(capture["files"] as? [String])
            #expect(
                files.count == 3 && [".trace.json", ".pftrace", ".hlog"].allSatisfy { suffix in files.contains { $0.hasSuffix(suffix) } })
            #expect(files.allSatisfy { $0.hasPrefix("capture-") && $0.contains("-\(id)-request.") }, "\(files)")
            var bytes = 0
            for name in files {
                let onDisk = try Data(contentsOf: URL(fileURLWithPath: captures + "/" + name))
                bytes += onDisk.count
                let served = try httpGetWithHeaders(port: port, path: "/api/captures/" + name, timeoutSeconds: 30)
                #expect(served.status == 200 && Data(served.body) == onDisk, "\(name): \(served.status), \(served.body.count) bytes")
            }
            #expect(capture["bytes"] as? Int == bytes)
            #expect((capture["records"] as? Int ?? 0) >= count)

            // The trace holds the bot's records of the seconds before: every fill, once, as a slice of its duration.
            let trace = try CapturedTrace(capture, in: captures)
            #expect(trace.durations(Self.fill) == CaptureProbe.kitValues(count: count, start: start, step: step))
            #expect(trace.processNames == ["bot asked-bot (pid \(bot.pid))"], "\(trace.processNames)")

            let refused = try CaptureProbe.post(port: port)
            #expect(refused.status == 429 && refused.text.contains("--capture-min-interval"), "\(refused.status) \(refused.text)")
            let retryAfter = try #require(refused.header("Retry-After").flatMap { Int($0) }, "\(refused.headers)")
            #expect(retryAfter > 3000 && retryAfter <= 3600, "an hour's interval, less the seconds since: \(retryAfter)")
            #expect(
                eventually { (try? CaptureProbe.metric(port: port, "ringside_captures_suppressed_total{trigger=\"request\"}")) == 1 })
            #expect(try CaptureProbe.metric(port: port, "ringside_captures_total{trigger=\"request\"}") == 1)
            #expect(try CaptureProbe.count(port: port, "suppressed", trigger: "request") == 1)
            #expect(try CaptureProbe.captures(port: port).count == 1, "the refused request made none")

            // What the routes refuse.
            #expect(try httpGet(port: port, path: "/api/capture").status == 405)
            let unknown = try CaptureProbe.post(port: port, path: "/api/capture?ring=asked-bot")
            #expect(unknown.status == 400 && unknown.text.contains("bot=NAME"), "\(unknown.text)")
            #expect(try httpGet(port: port, path: "/api/captures/capture-none.trace.json").status == 404)
        }
    }

    @Test(
        "ringside-dump capture asks a real collector for a capture of a bot, which it writes; a second within the interval fails with the collector's 429"
    )
    func askedForByTheTool() throws {
        try withCapturingCollector(["--capture-after", "0", "--capture-min-interval", "1h"]) { _, port, directory, captures in
            let (count, start, step) = (100, 20_000, 3)
            let bot = try CaptureProbe.kitBot("tool-bot", in: directory, count: count, start: start, step: step)
            defer { bot.kill() }
            try waitForFills("tool-bot", count: count, port: port)
            let run = try runProcess("ringside-dump", ["capture", "tool-bot", "--collector", "127.0.0.1:\(port)"])
            #expect(run.status == 0 && run.output.contains("capture asked for of bot tool-bot"), "\(run.output)\(run.errors)")
            let capture = try #require(try CaptureProbe.finished(port: port, trigger: "request"), "no capture was written")
            #expect(capture["status"] as? String == "written" && capture["bots"] as? [String] == ["tool-bot"], "\(capture)")
            #expect(
                try CapturedTrace(capture, in: captures).durations(Self.fill)
                    == CaptureProbe.kitValues(count: count, start: start, step: step))

            let again = try runProcess("ringside-dump", ["capture", "--collector", "127.0.0.1:\(port)"])
            #expect(again.status == 1 && again.errors.contains("answered 429"), "\(again.output)\(again.errors)")
        }
    }

    @Test(
        "without --capture-dir: POST /api/capture is 404 saying so, /api/captures says captures are off, ringside-dump capture fails saying why"
    )
    func capturesOff() throws {
        try withRingDirectory { directory in
            let (collector, port) = try startCollector(["--dir", directory.path])
            defer { collector.kill() }
            let response = try CaptureProbe.post(port: port)
            #expect(
                response.status == 404 && response.text.contains("captures are off") && response.text.contains("--capture-dir"),
                "\(response.text)")
            #expect(try CaptureProbe.list(port: port)["enabled"] as? Bool == false)
            let run = try runProcess("ringside-dump", ["capture", "--collector", "127.0.0.1:\(port)"])
            #expect(run.status == 1 && run.errors.contains("404") && run.errors.contains("--capture-dir"), "\(run.errors)")
            #expect(try !httpGet(port: port, path: "/metrics").body.contains("ringside_captures_total"))
        }
    }

    @Test(
        "behind --web-config-file's basic auth: POST /api/capture without a password or with a wrong one is 401; ringside-dump capture --user with the password file is let in"
    )
    func behindBasicAuth() throws {
        guard let htpasswd = try requiredSystemTool("htpasswd") else { return }
        let files = try TemporaryDirectory("ringside-capture-auth")
        defer { files.remove() }
        let hashed = try runProcess(htpasswd, ["-nbBC", "6", "", "capture-me"])
        let hash = hashed.output.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst()  // ":$2y$06$..."
        try #require(hashed.status == 0 && hash.hasPrefix("$2"), "\(hashed.output)\(hashed.errors)")
        try "basic_auth_users:\n  ops: \(hash)\n".write(toFile: files.path + "/web.yml", atomically: true, encoding: .utf8)
        try "capture-me\n".write(toFile: files.path + "/password", atomically: true, encoding: .utf8)
        try withCapturingCollector(["--web-config-file", files.path + "/web.yml", "--capture-after", "0", "--capture-min-interval", "1h"]) {
            _, port, _, _ in
            let bare = try CaptureProbe.post(port: port)
            #expect(bare.status == 401 && bare.header("WWW-Authenticate")?.hasPrefix("Basic") == true, "\(bare.status)")
            let wrong = try CaptureProbe.post(port: port, headers: ["Authorization: Basic " + Data("ops:guess".utf8).base64EncodedString()])
            #expect(wrong.status == 401)
            let refused = try runProcess("ringside-dump", ["capture", "--collector", "127.0.0.1:\(port)"])
            #expect(refused.status == 1 && refused.errors.contains("401"), "\(refused.errors)")
            #expect(try httpGet(port: port, path: "/api/captures").status == 401, "the list is behind the password too")

            let run = try runProcess(
                "ringside-dump",
                ["capture", "--collector", "127.0.0.1:\(port)", "--user", "ops", "--password-file", files.path + "/password"])
            #expect(run.status == 0 && run.output.contains("capture asked for of every bot"), "\(run.output)\(run.errors)")
            // Let in, and so rate-limited: the tool's request was the one accepted.
            let second = try CaptureProbe.post(
                port: port, headers: ["Authorization: Basic " + Data("ops:capture-me".utf8).base64EncodedString()])
            #expect(second.status == 429, "\(second.status) \(second.text)")
        }
    }

    @Test("a bot SIGKILLed: one bot_died capture of that bot, its span ending at the death, holding its last records")
    func botKilled() throws {
        try withCapturingCollector(["--recorder-seconds", "1m"]) { _, port, directory, captures in
            let (count, start, step) = (500, 30_000, 11)
            let bot = try CaptureProbe.kitBot("died-bot", in: directory, count: count, start: start, step: step)
            defer { bot.kill() }
            let quiet = try CaptureProbe.kitBot("quiet-bot", in: directory, count: 10, start: 1_000, step: 1)
            defer { quiet.kill() }
            try waitForFills("died-bot", count: count, port: port)
            try waitForFills("quiet-bot", count: 10, port: port)
            bot.send(SIGKILL)
            #expect(bot.waitForExit().status == SIGKILL)

            let capture = try #require(try CaptureProbe.finished(port: port, trigger: "bot_died"), "no bot_died capture was written")
            #expect(capture["status"] as? String == "written", "\(capture)")
            #expect(capture["detail"] as? String == "died-bot" && capture["bots"] as? [String] == ["died-bot"])
            #expect(capture["after_seconds"] as? Double == 0, "nothing comes after a death")
            let trace = try CapturedTrace(capture, in: captures)
            #expect(trace.processNames == ["bot died-bot (pid \(bot.pid))"], "only the dead bot: \(trace.processNames)")
            #expect(trace.durations(Self.fill) == CaptureProbe.kitValues(count: count, start: start, step: step))
            #expect(trace.slices.allSatisfy { trace.thread(of: $0) != nil }, "each slice on a named thread")
            #expect(!(trace.counters["gross_exposure"] ?? []).isEmpty, "its gauge's last values, to its death")
            let all = try CaptureProbe.captures(port: port)
            #expect(all.count == 1, "the other bot made none: \(all)")
        }
    }

    @Test("a bot SIGSTOPped: one bot_stopped capture of that bot, holding its records")
    func botStopped() throws {
        try withCapturingCollector(["--recorder-seconds", "1m", "--capture-after", "500ms"]) { _, port, directory, captures in
            let (count, start, step) = (200, 40_000, 13)
            let bot = try CaptureProbe.kitBot("stop-bot", in: directory, count: count, start: start, step: step)
            defer { bot.kill() }
            try waitForFills("stop-bot", count: count, port: port)
            bot.send(SIGSTOP)
            defer { bot.send(SIGCONT) }
            let capture = try #require(try CaptureProbe.finished(port: port, trigger: "bot_stopped"), "no bot_stopped capture was written")
            #expect(capture["status"] as? String == "written" && capture["bots"] as? [String] == ["stop-bot"], "\(capture)")
            let trace = try CapturedTrace(capture, in: captures)
            #expect(trace.durations(Self.fill) == CaptureProbe.kitValues(count: count, start: start, step: step))
            #expect(try CaptureProbe.captures(port: port).count == 1)
        }
    }

    @Test(
        "--capture-when: a bound no value passes makes nothing; a bot whose values go above it makes one threshold capture of that bot alone, not again while they stay above"
    )
    func valueAboveABound() throws {
        let bound = "order_fill_latency{symbol=\"AAPL\"}>50us"
        try withCapturingCollector(["--capture-when", bound, "--capture-after", "200ms", "--capture-min-interval", "1h"]) {
            _, port, directory, captures in
            let low = try CaptureProbe.kitBot("low-bot", in: directory, count: 100, start: 1_000, step: 10)
            defer { low.kill() }
            try waitForFills("low-bot", count: 100, port: port)
            #expect(try CaptureProbe.captures(port: port).isEmpty)
            let (count, start, step) = (50, 100_000, 1_000)
            let high = try CaptureProbe.kitBot("high-bot", in: directory, count: count, start: start, step: step)
            defer { high.kill() }
            let capture = try #require(try CaptureProbe.finished(port: port, trigger: "threshold"), "no threshold capture was written")
            #expect(capture["status"] as? String == "written" && capture["detail"] as? String == bound, "\(capture)")
            #expect(capture["bots"] as? [String] == ["high-bot"], "the bots above it only: \(capture)")
            let trace = try CapturedTrace(capture, in: captures)
            #expect(trace.durations(Self.fill) == CaptureProbe.kitValues(count: count, start: start, step: step))
            #expect(trace.processNames == ["bot high-bot (pid \(high.pid))"], "\(trace.processNames)")
            // The values stay above for a second (the shortest window); judged above at each snapshot
            // meanwhile, they ask for no second capture (one the rate limit would count as suppressed).
            let emptied = try eventually(seconds: 30) {
                let series = try jsonObject(httpGet(port: port, path: "/latest").body)["series"] as? [[String: Any]] ?? []
                let window = series.first { $0["ring"] as? String == "high-bot" }.flatMap {
                    ($0["windows"] as? [String: Any])?["1s"] as? [String: Any]
                }
                return window?["count"] as? Int == 0
            }
            #expect(emptied, "high-bot's values left the 1s window")
            #expect(try CaptureProbe.count(port: port, "suppressed", trigger: "threshold") == 0)
            #expect(try CaptureProbe.captures(port: port, trigger: "threshold").count == 1)
        }
    }
}
