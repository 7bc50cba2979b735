import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

/// A figure of the collector's own on its `/metrics` (a sample without labels), or nil.
private func collectorFigure(_ name: String, port: Int) -> Double? {
    let page = (try? httpGet(port: port, path: "/metrics", timeoutSeconds: 30))?.body ?? ""
    return page.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
}

/// `setpriv` arguments that run a program as nobody (uid and gid 65534, no other groups).
private let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups"]

/// Makes `count` bogus ring files `ringside.PREFIX-NNNNNN` of `bytes` bytes (0: empty) in
/// `directory`, as this user or, with `setpriv`, as nobody.
private func makeBogusFiles(_ directory: RingDirectory, prefix: String, count: Int, bytes: Int = 0, setpriv: String? = nil) throws {
    let arguments = ["bogus-files", "--dir", directory.path, "--ring", prefix, "--count", String(count), "--bytes", String(bytes)]
    let run =
        try setpriv.map { try runProcess($0, asNobody + [try builtExecutable("ringside-test-producer")] + arguments) }
        ?? runTestProducer("bogus-files", ring: prefix, in: directory, Array(arguments.dropFirst(5)))
    guard run.status == 0, run.output.hasPrefix("made \(count)") else { throw TestSupportError("bogus-files: \(run.output) \(run.errors)") }
}

/// The honest bot: `ringside-test-producer blast` at 20,000 records a second into lanes of 4,096
/// records for `seconds`: 205 ms of room, where the sizing rule asks for what it writes in 2 ms
/// and a burst (a millisecond's 20 records), so what it drops is the drain's doing, not its size.
/// Returns its counts; drops after the bot itself stalled half its lane's room (two cores shared
/// with other tests) are the machine's (`BlastCounts.producerStalled`).
private func runHonestBot(_ directory: RingDirectory, seconds: Int) throws -> BlastCounts {
    let blast = try ChildProcess(
        testProducer: "blast", ring: "honest", in: directory, ["--seconds", String(seconds), "--rate", "20000", "--capacity", "4096"])
    let attached = blast.readLine() ?? ""
    guard attached.hasPrefix("attached ") else { throw TestSupportError("the honest bot did not attach: \(attached)") }
    let counts = blast.readLine() ?? ""
    let exit = blast.waitForExit()
    guard exit.status == 0, let parsed = BlastCounts(counts) else {
        throw TestSupportError("the honest bot said \(counts): \(exit.standardError)")
    }
    return parsed
}

/// Whether the honest bot lost nothing the collector could have kept.
private func keptEverything(_ honest: BlastCounts) -> Bool {
    honest.dropped == 0 || honest.producerStalled(rate: 20_000, capacity: 4096)
}

/// Attack 7 of issue 45: a directory full of files named as rings that no producer wrote. The
/// collector finds rings on a thread of its own (below every other), looks at a file with `lstat`
/// before it opens it, never opens a refused file again until it changes, and its watch does
/// not see its own opens: the honest bot beside them loses nothing.
@Suite("Bogus ring files: finding rings costs the drain nothing", .serialized)
struct BogusFileTests {
    @Test("an honest bot drops nothing beside 100,000 empty and invalid ring files; none is opened twice, an empty one never")
    func filesThatStay() throws {
        try withRingDirectory { directory in
            try makeBogusFiles(directory, prefix: "empty", count: 90_000)
            try makeBogusFiles(directory, prefix: "junk", count: 10_000, bytes: 64)
            let (collector, port) = try startCollector(["--dir", directory.path])
            defer { collector.kill() }
            // At once, while discovery looks at the 100,000.
            let honest = try runHonestBot(directory, seconds: 5)
            // Discovery takes a quarter of a core at most: on a loaded machine, a debug build looks
            // at 100,000 files in tens of seconds.
            let refused = eventually(seconds: 240) { collectorFigure("ringside_collector_ring_files_refused", port: port) == 100_000 }
            let opens = collectorFigure("ringside_collector_discovery_opens_total", port: port) ?? -1
            let rescans = collectorFigure("ringside_collector_discovery_rescans_total", port: port) ?? -1
            print(
                "100,000 bogus files: the honest bot dropped \(honest.dropped) of \(honest.attempts); \(opens) opens, \(rescans) listings")
            #expect(honest.attempts >= 90_000 && keptEverything(honest), "the honest bot: \(honest)")
            #expect(refused, "ringside_collector_ring_files_refused reached 100,000")
            // The junk files once each, the honest bot's a few times while it was being made.
            #expect(opens >= 10_001 && opens < 10_100, "files opened: \(opens)")
            let skipped = (try? httpGet(port: port, path: "/metrics").body)?.split(separator: "\n").count {
                $0.hasPrefix("ringside_ring_skipped{")
            }
            #expect(skipped == 1_000, "the first 1,000 invalid files are listed as skipped rings: \(skipped ?? -1)")
        }
    }

    @Test("an honest bot drops nothing beside 200,000 ring files that user nobody makes and removes as it runs")
    func filesThatComeAndGo() throws {
        guard try requiredRoot("acting as user nobody (setpriv) beside a collector that runs as root"),
            let setpriv = try requiredSystemTool("setpriv")
        else { return }
        try withRingDirectory { directory in
            guard chmod(directory.path, 0o1777) == 0 else { throw TestSupportError("chmod 1777 \(directory.path)") }
            let (collector, port) = try startCollector(["--dir", directory.path])
            defer { collector.kill() }
            // 40,000 files a second, 1,000 standing at once: 200,000 in 5 s.
            let churn = try ChildProcess(
                setpriv,
                asNobody + [
                    try builtExecutable("ringside-test-producer"), "bogus-files", "--dir", directory.path, "--ring", "churn",
                    "--count", "1000", "--rate", "40000", "--total", "200000",
                ])
            defer { churn.kill() }
            guard churn.readLine()?.hasPrefix("churning ") == true else { throw TestSupportError("the churn did not start") }
            let honest = try runHonestBot(directory, seconds: 5)
            let churned = churn.readLine() ?? ""
            _ = churn.waitForExit()
            print("200,000 files churned: the honest bot dropped \(honest.dropped) of \(honest.attempts); \(churned)")
            #expect(honest.attempts >= 90_000 && keptEverything(honest), "the honest bot: \(honest)")
            #expect(churned == "churned 200000", "the churn: \(churned)")
            // Gone files are forgotten: what stays is at most the churn's last, being removed.
            let forgotten = eventually(seconds: 120) { collectorFigure("ringside_collector_ring_files_refused", port: port) == 0 }
            #expect(forgotten, "files removed are forgotten")
        }
    }

    @Test("an honest bot drops nothing beside 100,000 ring files of user nobody, refused by their owner without an open")
    func anotherUsersFiles() throws {
        guard try requiredRoot("acting as user nobody (setpriv) beside a collector that runs as root"),
            let setpriv = try requiredSystemTool("setpriv")
        else { return }
        try withRingDirectory { directory in
            guard chmod(directory.path, 0o1777) == 0 else { throw TestSupportError("chmod 1777 \(directory.path)") }
            try makeBogusFiles(directory, prefix: "theirs", count: 100_000, bytes: 64, setpriv: setpriv)
            let (collector, port) = try startCollector(["--dir", directory.path])
            defer { collector.kill() }
            let honest = try runHonestBot(directory, seconds: 5)
            let refused = eventually(seconds: 240) { collectorFigure("ringside_collector_ring_files_refused", port: port) == 100_000 }
            let opens = collectorFigure("ringside_collector_discovery_opens_total", port: port) ?? -1
            print("100,000 files of nobody: the honest bot dropped \(honest.dropped) of \(honest.attempts); \(opens) opens")
            #expect(honest.attempts >= 90_000 && keptEverything(honest), "the honest bot: \(honest)")
            #expect(refused, "ringside_collector_ring_files_refused reached 100,000")
            #expect(opens >= 1 && opens < 100, "only the honest bot's file is opened: \(opens) opens")
            let health = (try? httpGet(port: port, path: "/health").body) ?? ""
            #expect(health.contains("owned by uid 65534"), "/health says why they are skipped")
        }
    }

    @Test(
        "idle beside 10,000 bogus files, the collector opens none of them again and does not list the directory over and over; a file changed is looked at alone"
    )
    func idleBesideBogusFiles() throws {
        try withRingDirectory { directory in
            try makeBogusFiles(directory, prefix: "empty", count: 5_000)
            try makeBogusFiles(directory, prefix: "junk", count: 5_000, bytes: 64)
            let (collector, port) = try startCollector(["--dir", directory.path])
            defer { collector.kill() }
            let found = eventually(seconds: 120) { collectorFigure("ringside_collector_ring_files_refused", port: port) == 10_000 }
            try #require(found, "the collector found the 10,000 files")
            let rescans = collectorFigure("ringside_collector_discovery_rescans_total", port: port) ?? -1
            let opens = collectorFigure("ringside_collector_discovery_opens_total", port: port)
            #expect(opens == 5_000, "each junk file opened once, no empty one: \(opens ?? -1)")
            let cpuBefore = cpuSeconds(of: collector.pid)
            sleep(3)  // idle: nothing changes, so nothing is opened again, and no listing leads to another
            let cpu = (cpuSeconds(of: collector.pid) ?? 0) - (cpuBefore ?? 0)
            // A listing every 30 s is the fallback (it opens nothing); a loop would list without end.
            let listings = (collectorFigure("ringside_collector_discovery_rescans_total", port: port) ?? -1) - rescans
            #expect(listings >= 0 && listings <= 1, "listings while idle: \(listings)")
            #expect(collectorFigure("ringside_collector_discovery_opens_total", port: port) == opens, "no open while idle")
            // One file written to: its event has it looked at (and opened) again, alone.
            let changed = open(directory.filePath(for: "junk-000007"), O_WRONLY | O_APPEND)
            try #require(changed >= 0)
            _ = write(changed, "x", 1)
            close(changed)
            let lookedAgain = eventually(seconds: 60) {
                collectorFigure("ringside_collector_discovery_opens_total", port: port) == (opens ?? 0) + 1
            }
            #expect(lookedAgain, "the changed file is opened again, and only it")

            print("idle beside 10,000 bogus files: \(String(format: "%.3f", cpu)) s of CPU in 3 s")
        }
    }
}

/// A process's CPU time so far (user + system) in seconds, from /proc/PID/stat.
private func cpuSeconds(of pid: Int32) -> Double? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = text.lastIndex(of: ")") else {
        return nil
    }
    // Fields after "(comm)": state is field 3; utime and stime are fields 14 and 15.
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}
