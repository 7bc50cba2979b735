import CRingside
import Foundation
import Ringside
@testable import RingsideCollector
import RingsideSnapshot
import RingsideTestSupport
import Testing

// Worker files are named by pid (`<bot>@<pid>`), so another user who can write the ring directory
// (/dev/shm is everyone's) can plant files under the names a bot's next children will want.
@Suite("Collector: worker files of another user")
struct WorkerNameAttackTests {
    @Test(
        "nobody's files planted for the next pids and 256 dead ones: 20 forked workers of root's bot take other names, every count kept"
    )
    func plantedWorkerNames() throws {
        guard try requiredRoot("planting files as user nobody (setpriv) against root's bot"),
            let setpriv = try requiredSystemTool("setpriv")
        else { return }
        try withRingDirectory { directory in
            // Shared as /dev/shm is: sticky, everyone may create.
            try #require(chmod(directory.path, 0o1777) == 0)
            let next = try #require(Int(String(contentsOfFile: "/proc/sys/kernel/ns_last_pid", encoding: .utf8).trimmed))
            let pidMax = try #require(Int(String(contentsOfFile: "/proc/sys/kernel/pid_max", encoding: .utf8).trimmed))
            let upcoming = Set((next + 1)...min(next + 3_000, pidMax))
            // Pids no process has (from the top of the range down): the bound's 256 worker files.
            let dead = stride(from: pidMax, to: 300, by: -1).lazy.filter { kill(pid_t($0), 0) != 0 && errno == ESRCH }.prefix(256)
            let names = (upcoming.sorted() + dead).map { "\(directory.path)/ringside.pool@\($0)" }
            let plant = try runProcess(
                setpriv, ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/touch"] + names, timeoutSeconds: 120)
            try #require(plant.status == 0, "planting as nobody: \(plant.errors)")

            let count: UInt64 = 100, children = 20
            let run = try runTestProducer("fork-pool", ring: "pool", in: directory, ["--count", "\(count)", "--children", "\(children)"])
            try #require(run.status == 0, "\(run.output) \(run.errors)")
            // "children PID... statuses STATUS..."
            let words = run.output.split(whereSeparator: \.isWhitespace).map(String.init)
            let statusesAt = try #require(words.firstIndex(of: "statuses"))
            let pids = words[1..<statusesAt].compactMap { Int32($0) }
            #expect(pids.count == children && words[(statusesAt + 1)...].allSatisfy { $0 == "0" }, "\(run.output) \(run.errors)")

            let snapshot = pass(try makeCollector(directory, captured: CapturedLog()))
            #expect(
                snapshot.series("pool_increments")?.cumulativeExactSum == UInt128(1 + UInt64(children) * count),
                "the parent's increment and every child's")
            #expect(snapshot.series("pool_values")?.cumulativeCount == 1 + UInt64(children) * count)
            // Each child whose pid nobody had planted took a random name in its place, of root's.
            let workers = snapshot.rings.filter { $0.state != .skipped }.compactMap { WorkerRing($0.name) }
            #expect(Set(workers.map(\.pid)) == Set(pids))
            for worker in workers {
                #expect((worker.suffix != nil) == upcoming.contains(Int(worker.pid)), "\(worker)")
            }
            #expect(workers.contains { $0.suffix != nil }, "no child's pid was among the planted ones")
        }
    }
}

extension WorkerNameAttackTests {
    @Test("under --allow-uid, another user's file in a bot shows its owner: /latest, the page's data, a uid label, the dump's list")
    func anotherUsersFileShowsItsOwner() throws {
        guard try requiredRoot("writing a worker file as user nobody (setpriv)"),
            let setpriv = try requiredSystemTool("setpriv")
        else { return }
        try withRingDirectory { directory in
            try #require(chmod(directory.path, 0o1777) == 0)
            let emit = ["--dir", directory.path, "orders", "--kind", "counter"]
            let root = try runProcess("ringside-emit", ["--ring", "bot"] + emit + ["100"])
            try #require(root.status == 0, "\(root.errors)")
            // Nobody's file, renamed to a worker's name of root's bot (emit attaches bots, not workers).
            let asNobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
            let nobody = try runProcess(
                asNobody[0],
                Array(asNobody.dropFirst()) + [try builtExecutable("ringside-emit"), "--ring", "theirs"] + emit + ["2000000000000"])
            try #require(nobody.status == 0, "\(nobody.errors)")
            let moved = try runProcess(
                asNobody[0],
                Array(asNobody.dropFirst()) + ["/usr/bin/mv", directory.filePath(for: "theirs"), directory.filePath(for: "bot@99999")])
            try #require(moved.status == 0, "\(moved.errors)")
            // Its producer byte held, as a live worker's is: a file whose producer is gone is
            // folded into the bot and removed (its totals kept), maybe before the test looks.
            let held = open(directory.filePath(for: "bot@99999"), O_RDWR | O_CLOEXEC)
            try #require(held >= 0 && rs_lock_byte(held, RS_LOCK_BYTE_PRODUCER) == 0, "cannot hold the worker's file")
            defer { close(held) }

            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms", "--allow-uid", "65534"])
            defer { collector.kill() }
            let metrics = try eventually(seconds: 10) { () -> String? in
                let body = try httpGet(port: port, path: "/metrics").body
                return body.contains(#"orders_total{ring="bot"} 2000000000100"#) ? body : nil
            }
            // Merged, as --allow-uid asks, but never anonymously.
            let page = try #require(metrics, "the two files' counters never merged")
            #expect(page.contains(#"ringside_ring_producer_alive{ring="bot",uid="0"}"#))
            #expect(page.contains(#"ringside_ring_producer_alive{ring="bot",worker="99999",uid="65534"}"#))
            let latest = try #require(
                JSONSerialization.jsonObject(with: Data(httpGet(port: port, path: "/latest").body.utf8)) as? [String: Any])
            let rings = try #require(latest["rings"] as? [[String: Any]])
            #expect(rings.first { $0["name"] as? String == "bot@99999" }?["uid"] as? Int == 65534)
            #expect(rings.first { $0["name"] as? String == "bot" }?["uid"] as? Int == 0)
            #expect((latest["collector"] as? [String: Any])?["uid"] as? Int == 0, "the page tells another user's file by it")

            let list = try runProcess("ringside-dump", ["--dir", directory.path, "--allow-uid", "65534", "list"])
            let row = list.output.split(separator: "\n").first { $0.hasPrefix("bot@99999 ") }
            #expect(row?.split(separator: " ").dropFirst().first == "65534", "\(list.output)")
        }
    }
}

extension String {
    fileprivate var trimmed: String { trimmingCharacters(in: .whitespacesAndNewlines) }
}
