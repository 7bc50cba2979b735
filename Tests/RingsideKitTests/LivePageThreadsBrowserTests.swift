import Foundation
import RingsideTestSupport
import Testing

/// The live page's thread-health table, in headless Chromium (LivePageBrowserTests renders the rest).
@Suite("the live page's thread table in a real browser")
struct LivePageThreadsBrowserTests {
    @Test(
        "under a bot's row: its process, and each lane thread's name, tid, CPU, run-queue wait, switches, last CPU and migrations",
        .timeLimit(.minutes(5)))
    func threadTable() throws {
        try withChromium { chromium, directory in
            // The burner pinned to a CPU: its last CPU and migrations (none) hold still between
            // /latest and the page, so both are known.
            let cpu = try lastAllowedCPU()
            let bot = try ChildProcess(
                testProducer: "sched-threads", ring: "sched", in: directory, ["--burn", "yes", "--cpu", "\(cpu)"], withInput: true)
            defer { bot.kill() }
            let words = try #require(bot.readLine()?.split(separator: " ").map(String.init))
            try #require(words.count == 8 && words[0] == "ready", "\(words)")
            let pid = words[1], burner = words[3], napper = words[5]
            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms", "--thread-sample-interval", "200ms"])
            defer { collector.kill() }
            // Until every lane thread has been read twice (its rates are there).
            let ready = try eventually(seconds: 30) { () -> Bool? in
                let latest = try jsonObject(httpGet(port: port, path: "/latest").body)
                let ring = (latest["rings"] as? [[String: Any]])?.first { $0["name"] as? String == "sched" }
                let threads = (ring?["lanes"] as? [[String: Any]] ?? []).compactMap { $0["thread"] as? [String: Any] }
                return threads.count == 3 && threads.allSatisfy { $0["cpu_ratio"] is Double } ? true : nil
            }
            try #require(ready == true, "/latest did not show the three lane threads with their rates within 30 s")

            let dom = try LivePageBrowserTests.renderedDOM(chromium, url: "http://127.0.0.1:\(port)/")
            // The bot's row, then its threads' row.
            let botRow = try #require(dom.range(of: "data-ring=\"sched\" data-state=\"live\""), "the bot's row")
            let threadsRow = try #require(dom.range(of: "data-threads-of=\"sched\""), "the bot's thread table")
            #expect(botRow.lowerBound < threadsRow.lowerBound)
            let table = dom[threadsRow.upperBound...].prefix(6000)
            #expect(table.contains("data-pid=\"\(pid)\">process \(pid): CPU "), "the process's line")
            for (name, tid) in [("burner", burner), ("napper", napper)] {
                #expect(table.contains("<tr data-tid=\"\(tid)\"><td>\(name)</td><td class=\"num\">\(tid)</td>"), "\(name)'s row")
            }
            let burnerRow = try #require(table.range(of: "<tr data-tid=\"\(burner)\">").map { table[$0.lowerBound...] })
            #expect(burnerRow.contains("data-stat=\"last_cpu\" data-value=\"\(cpu)\">\(cpu)</td>"), "pinned to CPU \(cpu)")
            #expect(burnerRow.contains("data-stat=\"migrations\" data-value=\"0\">0</td>"))
            // A burner uses most of a CPU: its CPU figure is a percentage, not "-".
            let used = burnerRow.range(of: "data-stat=\"cpu\" data-value=\"").map { burnerRow[$0.upperBound...].prefix { $0 != "\"" } }
            #expect((used.flatMap { Double($0) } ?? 0) > 0, "the burner's CPU: \(used ?? "none")")
        }
    }
}
