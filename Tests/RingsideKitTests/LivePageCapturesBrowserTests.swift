import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

/// The live page's Captures section and the capture timeline, in headless Chromium driven as a
/// person would: a click on "Capture now", the capture listed, its timeline opened from the list,
/// a slice clicked for its arguments.
@Suite("the live page's captures and the capture timeline in a real browser")
struct LivePageCapturesBrowserTests {
    /// A JSON value of the page's, as a string literal for a script.
    static func literal(_ text: String) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: [text]), as: UTF8.self).dropFirst().dropLast().description
    }

    @Test(
        "Capture now: the id, then the capture written with its files and timeline; a second click's 429; the timeline draws every slice and a clicked one's exemplar",
        .timeLimit(.minutes(5)))
    func captureNowAndTimeline() throws {
        try withChromium { chromium, directory in
            let captures = try TemporaryDirectory("ringside-captures")
            defer { captures.remove() }
            let tag = "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            // A bot's fills in us from a named thread that holds its lane until the test ends: the
            // slowest two with order ids; and a gauge, whose sets are a counter track.
            let bot = try Bot.attach("desk", directory: directory.path)
            defer { withExtendedLifetime(bot) {} }
            let fill = try bot.histogram("order_fill_latency", unit: .microseconds, labels: ["symbol": "AAPL"])
            let exposure = try bot.gauge("exposure")
            let exemplars = [try Bot.Exemplar("order_id", "A-\(tag)"), try Bot.Exemplar("order_id", "B-\(tag)")]
            let recorded = DispatchSemaphore(value: 0), finish = DispatchSemaphore(value: 0)
            let recorder = Thread {
                try? nameCurrentThread("fill-worker")  // before its first record claims the lane
                for value: UInt64 in [120, 340, 95] { fill.record(value) }
                fill.record(5_000, exemplar: exemplars[0])
                fill.record(3_000, exemplar: exemplars[1])
                for value in [1.5, 2.5, 4.0] { exposure.set(value) }
                recorded.signal()
                finish.wait()
            }
            recorder.start()
            defer { finish.signal() }
            recorded.wait()

            // Captures hold the recorder's last 5 minutes and nothing after; one an hour at most.
            let (collector, port) = try startCollector([
                "--dir", directory.path, "--poll", "20ms", "--capture-dir", captures.path, "--recorder-seconds", "5m",
                "--capture-after", "0", "--capture-min-interval", "1h",
            ])
            defer { collector.kill() }
            let drained = try eventually(seconds: 30) { () -> Bool? in
                let latest = try jsonObject(httpGet(port: port, path: "/latest").body)
                let series = (latest["series"] as? [[String: Any]] ?? []).first { $0["metric"] as? String == "order_fill_latency" }
                return (series?["total_count"] as? Int ?? 0) >= 5 ? true : nil
            }
            try #require(drained == true, "/latest did not count the 5 fills within 30 s")

            let browser = try HeadlessBrowser(chromium)
            defer { browser.close() }
            try browser.open("http://127.0.0.1:\(port)/")
            let enabled = try browser.waitFor("!document.querySelector('#capture-now').disabled", seconds: 60)
            try #require(enabled != nil, "the Capture now button was not enabled within 60 s")
            try browser.click("#capture-now")
            let answer = try browser.waitFor(
                "document.querySelector('#capture-answer').dataset.status && document.querySelector('#capture-answer').textContent",
                seconds: 30)
            #expect((answer as? String)?.hasPrefix("capture 1 asked for: pending") == true, "\(answer ?? "no answer")")

            // The capture as /api/captures lists it once written, then as the page shows it.
            let listed = try eventually(seconds: 60) { () -> [String: Any]? in
                let list = try jsonObject(httpGet(port: port, path: "/api/captures").body)
                let capture = (list["captures"] as? [[String: Any]])?.first { $0["id"] as? Int == 1 }
                return capture?["status"] as? String == "written" ? capture : nil
            }
            let capture = try #require(listed, "capture 1 was not written within 60 s")
            let files = try #require(capture["files"] as? [String])
            let traceName = try #require(files.first { $0.hasSuffix(".trace.json") }, "\(files)")
            let row = "#captures tr[data-capture=\"1\"][data-status=\"written\"]"
            let cells = try browser.waitFor(
                "(() => { const row = document.querySelector(\(try Self.literal(row))); return row && [...row.cells].map((c) => c.textContent); })()",
                seconds: 30)
            let shown = try #require(cells as? [String], "the page did not list capture 1 as written within 30 s")
            try #require(shown.count == 8, "\(shown)")
            #expect(shown[1] == "request" && shown[2] == "all" && shown[4] == "written", "\(shown)")
            #expect(
                shown[5] == "\(capture["records"] as? Int ?? -1)",
                "records: \(shown[5]) on the page, \(capture["records"] ?? "none") listed")
            #expect(shown[3] == "-300 s to +0 s", "\(shown[3])")
            let links = try browser.evaluate(
                "[...document.querySelectorAll(\(try Self.literal(row + " td.files a")))].map((a) => a.getAttribute('href'))")
            #expect(
                links as? [String] == ["/captures/view?file=\(traceName)"] + files.map { "/api/captures/\($0)" },
                "\(links ?? "no links")")
            for file in files { #expect(try httpGet(port: port, path: "/api/captures/\(file)").status == 200, "\(file)") }
            let written = try browser.waitFor("document.querySelector('#capture-counts [data-counts=written]').textContent", seconds: 10)
            #expect(written as? String == "written: request 1")

            // A second click within --capture-min-interval: the 429's reason, and the count.
            try browser.click("#capture-now")
            let refused = try browser.waitFor(
                "document.querySelector('#capture-answer').dataset.status === '429' && document.querySelector('#capture-answer').textContent",
                seconds: 30)
            #expect(
                (refused as? String)?.hasPrefix("a capture was asked for less than --capture-min-interval ago: retry in ") == true,
                "\(refused ?? "no answer")")
            let suppressed = try browser.waitFor(
                "(document.querySelector('#capture-counts [data-counts=suppressed]') || {}).textContent === 'suppressed: request 1'",
                seconds: 30)
            #expect(suppressed != nil, "the suppressed request was not counted on the page within 30 s")

            // The trace as the file holds it: its slices ("X", in order), each thread's count, the counters'.
            let trace = try jsonObject(httpGet(port: port, path: "/api/captures/\(traceName)").body)
            let events = try #require(trace["traceEvents"] as? [[String: Any]])
            let slices = events.filter { $0["ph"] as? String == "X" }
            var perThread: [String: Int] = [:], perCounter: [String: Int] = [:]
            for slice in slices { perThread["\(slice["pid"] ?? "")/\(slice["tid"] ?? "")", default: 0] += 1 }
            for sample in events where sample["ph"] as? String == "C" {
                perCounter["\(sample["pid"] ?? "")/\(sample["name"] ?? "")", default: 0] += 1
            }
            #expect(slices.count == 5, "the capture's slices: \(slices)")
            #expect(perCounter.contains { $0.key.hasSuffix("/exposure") && $0.value == 3 }, "\(perCounter)")
            let known = try #require(
                slices.firstIndex { ($0["args"] as? [String: Any])?["exemplar.order_id"] as? String == "A-\(tag)" },
                "no slice with order A-\(tag): \(slices)")
            let knownArgs = try #require(slices[known]["args"] as? [String: String])

            // The timeline, opened from the list: every slice placed on its thread, every counter sample.
            try browser.click(row + " a[data-timeline]")
            let loaded = try browser.waitFor(
                "window.timeline && (timeline.ready || timeline.error) && [timeline.ready, timeline.error]", seconds: 60)
            let outcome = try #require(loaded as? [Any], "the timeline did not draw the trace within 60 s")
            try #require(outcome.first as? Bool == true, "the timeline's error: \(outcome.last ?? "none")")
            #expect(try browser.evaluate("location.pathname + location.search") as? String == "/captures/view?file=\(traceName)")
            let source = try browser.evaluate("document.querySelector('#source').textContent") as? String
            #expect(source == "\(traceName) (capture 1, request at \(capture["at"] as? String ?? "?"))", "\(source ?? "none")")
            #expect(try browser.evaluate("timeline.model.slices.length") as? Int == slices.count)
            #expect(try browser.evaluate("timeline.lastDraw.visible") as? Int == slices.count, "the whole trace is in view at first")
            let threads = try browser.evaluate(
                "timeline.model.rows.filter((r) => r.kind === 'thread').map((r) => [r.process.pid + '/' + r.thread.tid, r.thread.slices.length])"
            )
            let drawnPerThread = Dictionary(uniqueKeysWithValues: (threads as? [[Any]] ?? []).map { ("\($0[0])", $0[1] as? Int ?? -1) })
            #expect(drawnPerThread == perThread, "the page's threads \(drawnPerThread), the file's \(perThread)")
            let counters = try browser.evaluate(
                "timeline.model.rows.filter((r) => r.kind === 'counter').map((r) => [r.process.pid + '/' + r.track.name, r.track.points.length])"
            )
            let drawnPerCounter = Dictionary(uniqueKeysWithValues: (counters as? [[Any]] ?? []).map { ("\($0[0])", $0[1] as? Int ?? -1) })
            #expect(drawnPerCounter == perCounter, "the page's counter tracks \(drawnPerCounter), the file's \(perCounter)")
            // Its thread's row: the thread's name, or `NAME #k` when the slice overlaps another without
            // nesting (a record delayed past a longer one's start, as a preempted thread's can be).
            let threadName = try browser.evaluate("timeline.model.slices[\(known)].row.label") as? String ?? ""
            #expect(threadName.contains(/^fill-worker( #[0-9]+)?$/), "\(threadName)")

            // The known slice, brought into view and clicked: its arguments in the side panel.
            let box = try #require(
                try browser.evaluate("timeline.reveal(\(known)); timeline.select(null); timeline.boxOf(\(known))") as? [String: Double])
            try browser.click(x: box["x"]! + box["width"]! / 2, y: box["y"]! + box["height"]! / 2)
            let selected = try browser.waitFor("document.querySelector('#details h2[data-slice]')?.dataset.slice", seconds: 10)
            #expect(selected as? String == "\(known)", "the click selected \(selected ?? "nothing")")
            let args = try browser.evaluate(
                "Object.fromEntries([...document.querySelectorAll('#args tr[data-arg]')].map((r) => [r.dataset.arg, r.querySelector('td').textContent]))"
            )
            #expect(args as? [String: String] == knownArgs, "the panel's args \(args ?? "none"), the file's \(knownArgs)")
            #expect(knownArgs["exemplar.order_id"] == "A-\(tag)" && knownArgs["value"] == "5000 us", "\(knownArgs)")
            #expect(browser.pageErrors.isEmpty, "the pages' errors: \(browser.pageErrors)")
        }
    }

    @Test(
        "without --capture-dir the section says how to turn captures on and the button is disabled; a timeline of no file says why",
        .timeLimit(.minutes(5)))
    func capturesOff() throws {
        try withChromium { chromium, directory in
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms"])
            defer { collector.kill() }
            let browser = try HeadlessBrowser(chromium)
            defer { browser.close() }
            try browser.open("http://127.0.0.1:\(port)/")
            // Hidden until /api/captures has answered that captures are off.
            let off = try browser.waitFor(
                "!document.querySelector('#captures-off').hidden && document.querySelector('#captures-off').textContent", seconds: 60)
            #expect(
                (off as? String)?.hasPrefix("Captures are off: start the collector with --capture-dir DIR") == true, "\(off ?? "not shown")"
            )
            #expect(try browser.evaluate("document.querySelector('#capture-now').disabled") as? Bool == true)
            #expect(try browser.evaluate("document.querySelector('#captures').hidden") as? Bool == true)

            try browser.open("http://127.0.0.1:\(port)/captures/view?file=nothing.trace.json")
            let error = try browser.waitFor("window.timeline && timeline.error", seconds: 60)
            #expect(
                (error as? String)?.hasPrefix(
                    "GET /api/captures/nothing.trace.json: HTTP 404: not found: no capture file nothing.trace.json")
                    == true, "\(error ?? "no error shown")")
            #expect(try browser.evaluate("document.querySelector('#message').textContent") as? String == error as? String)
            #expect(browser.pageErrors.isEmpty, "the pages' errors: \(browser.pageErrors)")
        }
    }
}
