import Foundation
import Ringside
import RingsideTestSupport
import Testing

/// docs/development.md's table of the collector's threads against a running collector's.
@Suite("The collector's threads are the ones docs/development.md lists")
struct ThreadListTests {
    /// The thread names in the first column of the table under "The collector's threads".
    static func documentedThreads() throws -> Set<String> {
        let text = try String(contentsOfFile: packageRoot + "/docs/development.md", encoding: .utf8)
        guard let section = text.components(separatedBy: "## The collector's threads").dropFirst().first else {
            throw TestSupportError("docs/development.md has no section \"The collector's threads\"")
        }
        let body = section.components(separatedBy: "\n## ").first ?? section
        return Set(
            body.split(separator: "\n").compactMap { line in
                line.firstMatch(of: /^\| `(ringside-[a-z-]+)` \|/).map { String($0.1) }
            })
    }

    /// The names of a process's threads (`/proc/PID/task/TID/comm`), one each.
    static func threadNames(of pid: Int32) -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap { task in
            (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    @Test(
        "a collector with its parts on (HTTP, OTLP, the sampler, the state, a capture) runs the documented threads and no other; only the main thread carries the program's name"
    )
    func threadsAsDocumented() throws {
        let documented = try Self.documentedThreads()
        try #require(documented.count >= 10, "the table lists \(documented.sorted())")
        let captures = try TemporaryDirectory("ringside-threads")
        defer { captures.remove() }
        try withRingDirectory { directory in
            let bot = try Bot.attach("threads", directory: directory.path)
            let fill = try bot.histogram("order_fill_latency", unit: .microseconds)
            for value: UInt64 in 1...100 { fill.record(value) }
            // Nothing listens at the OTLP endpoint: the pusher's thread keeps trying.
            let (collector, port) = try startCollector([
                "--dir", directory.path, "--poll", "10ms", "--capture-dir", captures.path, "--capture-after", "0",
                "--otlp-endpoint", "http://127.0.0.1:\(try freeLoopbackPort())", "--otlp-interval", "1s",
            ])
            defer { collector.kill() }
            let accepted = try CaptureProbe.post(port: port, path: "/api/capture?bot=threads")
            try #require(accepted.status == 202, "\(accepted.status) \(accepted.text)")
            _ = try CaptureProbe.finished(port: port, trigger: "request")
            let always: Set = [
                "ringside-collec", "ringside-drain", "ringside-bell", "ringside-find", "ringside-render", "ringside-http",
                "ringside-answer",
                "ringside-sample", "ringside-state", "ringside-otlp", "ringside-traces",
            ]
            #expect(always.isSubset(of: documented), "undocumented: \(always.subtracting(documented).sorted())")
            let names = eventually(seconds: 10) { () -> [String]? in
                let names = Self.threadNames(of: collector.pid)
                return always.isSubset(of: Set(names)) ? names : nil
            }
            let seen = try #require(names, "threads: \(Self.threadNames(of: collector.pid).sorted())")
            #expect(Set(seen).subtracting(documented).isEmpty, "threads not in docs/development.md: \(seen.sorted())")
            #expect(seen.filter { $0 == "ringside-collec" }.count == 1, "a thread not started as a PartThread: \(seen.sorted())")
            withExtendedLifetime(bot) {}
        }
    }
}
