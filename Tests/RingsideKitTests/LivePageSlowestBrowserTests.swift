import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

/// A kernel thread id, written by its thread before a semaphore it signals, read after.
private final class ThreadID: @unchecked Sendable {
    var value: Int32 = 0

    /// Names the calling thread in the kernel (as its lane will say) and takes its id
    /// (/proc/thread-self links to PID/task/TID): Glibc's calls for both are not visible to Swift.
    func nameAndRead(_ name: String) throws {
        try name.write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
        let link = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")
        value = Int32(link.split(separator: "/").last ?? "") ?? 0
    }
}

/// The live page's "Slowest in the last minute" table, rendered by headless Chromium.
@Suite("the live page's slowest table in a real browser")
struct LivePageSlowestBrowserTests {
    /// The rows of the table `id` in `dom`, each its HTML.
    static func rows(ofTable id: String, in dom: String) -> [Substring] {
        guard let start = dom.range(of: "<table id=\"\(id)\""), let end = dom[start.upperBound...].range(of: "</table>") else { return [] }
        return dom[start.upperBound..<end.lowerBound].components(separatedBy: "<tr").dropFirst(2).map { Substring($0) }
    }

    @Test(
        "the minute's slowest exemplars across bots and units, slowest first, with value, labels, pid and thread; sizes left out",
        .timeLimit(.minutes(5)))
    func slowestTable() throws {
        try withChromium { chromium, directory in
            let tag = "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            // A live bot's fills in us, recorded by a named thread that holds its lane until the
            // test ends: the slowest two with order ids, faster ones without.
            let bot = try Bot.attach("fills", directory: directory.path)
            defer { withExtendedLifetime(bot) {} }
            let fill = try bot.histogram("order_fill_latency", unit: .microseconds, labels: ["symbol": "AAPL"])
            let exemplars = [try Bot.Exemplar("order_id", "A-\(tag)"), try Bot.Exemplar("order_id", "B-\(tag)")]
            let recorded = DispatchSemaphore(value: 0), finish = DispatchSemaphore(value: 0)
            let threadID = ThreadID()
            let recorder = Thread {
                try? threadID.nameAndRead("fill-worker")  // before its first record claims the lane
                for value: UInt64 in [120, 340, 95] { fill.record(value) }
                fill.record(5_000, exemplar: exemplars[0])
                fill.record(3_000, exemplar: exemplars[1])
                recorded.signal()
                finish.wait()
            }
            recorder.start()
            defer { finish.signal() }
            recorded.wait()
            // A cron job's 2 s in seconds, and a message size, which is no latency, both with
            // exemplars, from ringside-emit (gone, with its thread, before the collector reads them).
            func emit(_ arguments: [String]) throws {
                let run = try runProcess("ringside-emit", ["--dir", directory.path] + arguments)
                try #require(run.status == 0, "ringside-emit \(arguments): \(run.errors)")
            }
            try emit(["--ring", "cron", "job_time", "--unit", "s", "--exemplar", "job_id=J-\(tag)", "2"])
            try emit(["--ring", "sizes", "message_size", "--unit", "bytes", "--exemplar", "msg=M-\(tag)", "1000000000"])

            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms"])
            defer { collector.kill() }
            let latest = try eventually(seconds: 30) { () -> [String: Any]? in
                let latest = try jsonObject(httpGet(port: port, path: "/latest").body)
                let minutes = (latest["series"] as? [[String: Any]] ?? []).compactMap { ($0["windows"] as? [String: [String: Any]])?["1m"] }
                return minutes.filter { $0["exemplars"] != nil }.count == 3 ? latest : nil
            }
            let series = try #require(latest?["series"] as? [[String: Any]], "/latest did not show the three series' exemplars within 30 s")
            let fillExemplar = try #require(
                series.first { $0["metric"] as? String == "order_fill_latency" }
                    .flatMap { ($0["windows"] as? [String: [String: Any]])?["1m"]?["exemplars"] as? [[String: Any]] }?.first)

            // The window the page shows elsewhere is 1 s: the table keeps to the minute's.
            let dom = try LivePageBrowserTests.renderedDOM(chromium, url: "http://127.0.0.1:\(port)/?window=1s")
            #expect(dom.contains("Slowest in the last <span id=\"slowest-window\">1m</span>"))
            let rows = Self.rows(ofTable: "slowest", in: dom)
            try #require(rows.count == 3, "the table's rows: \(rows)")
            // Slowest first across units: 2 s, then 5 ms and 3 ms; the size is not among them.
            #expect(rows[0].contains("job_id=\"J-\(tag)\"") && rows[0].contains(">2.000 s</td>"), "\(rows[0])")
            #expect(rows[1].contains("order_id=\"A-\(tag)\"") && rows[1].contains(">5.000 ms</td>"), "\(rows[1])")
            #expect(rows[2].contains("order_id=\"B-\(tag)\"") && rows[2].contains(">3.000 ms</td>"), "\(rows[2])")
            #expect(!dom.contains("M-\(tag)"), "a size is no latency")
            // Who recorded it: this process, the thread's name and id; a thread gone before the
            // collector read its record has no id to show.
            #expect(fillExemplar["pid"] as? Int == Int(getpid()) && fillExemplar["thread_id"] as? Int == Int(threadID.value))
            #expect(rows[1].contains("data-stat=\"pid\">\(getpid())</td>"), "\(rows[1])")
            #expect(
                rows[1].contains("data-stat=\"thread\">fill-worker <span class=\"muted\">tid \(threadID.value)</span></td>"), "\(rows[1])")
            #expect(rows[0].contains("data-stat=\"thread\">ringside-emit</td>"), "\(rows[0])")
            #expect(rows[1].contains("order_fill_latency <span class=\"muted\">on fills, symbol=\"AAPL\"</span>"), "\(rows[1])")
            // Its time of day in UTC, to the millisecond, as JavaScript's Date truncates it.
            let time = try #require(fillExemplar["time"] as? Double)
            let millis = Int64((time * 1000).rounded(.towardZero)) % 86_400_000
            let shown = String(
                format: "%02lld:%02lld:%02lld.%03lld", millis / 3_600_000, millis / 60_000 % 60, millis / 1000 % 60, millis % 1000)
            #expect(rows[1].contains("<td>\(shown)</td>"), "the time \(shown) in \(rows[1])")
        }
    }
}
