import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

/// What the attacks on `--hlog` and `--json-dump` need: root (to be the collector that runs as
/// root, and to act as `nobody`), `setpriv`, and a shared directory as /tmp is (mode 1777, root's)
/// beside a root-only one holding the file the attacker aims at.
private struct Attack {
    /// The shared, sticky directory the collector writes in and `nobody` plants in.
    let shared: TemporaryDirectory
    /// Root's own directory (0700) holding `target`.
    private let privateDirectory: TemporaryDirectory
    /// A root-owned file (0600) outside the shared directory, and what it holds.
    let target: String
    private let targetBytes = Data("root's own file: the collector must never write here\n".utf8)
    private let setpriv: String

    /// Nil (the test skips, having said why) when not root or without setpriv, outside CI.
    static func prepare() throws -> Attack? {
        guard try requiredRoot("acting as user nobody (setpriv) against a collector that runs as root"),
            let setpriv = try requiredSystemTool("setpriv")
        else { return nil }
        return try Attack(setpriv: setpriv)
    }

    private init(setpriv: String) throws {
        self.setpriv = setpriv
        shared = try TemporaryDirectory("ringside-shared")
        privateDirectory = try TemporaryDirectory("ringside-root")
        guard chmod(shared.path, 0o1777) == 0 else { throw TestSupportError("chmod 1777 \(shared.path)") }
        target = privateDirectory.path + "/precious"
        try targetBytes.write(to: URL(fileURLWithPath: target))
        guard chmod(target, 0o600) == 0 else { throw TestSupportError("chmod 0600 \(target)") }
    }

    func remove() {
        shared.remove()
        privateDirectory.remove()
    }

    /// Whether `target` holds what it held, byte for byte.
    var targetIsUnchanged: Bool { (try? Data(contentsOf: URL(fileURLWithPath: target))) == targetBytes }

    /// `setpriv` arguments that run a program as nobody (uid and gid 65534, no other groups).
    var asNobody: [String] { ["--reuid=65534", "--regid=65534", "--clear-groups"] }

    /// Runs `arguments` as nobody to completion; throws unless it succeeds.
    func runAsNobody(_ arguments: [String]) throws {
        let run = try runProcess(setpriv, asNobody + arguments)
        guard run.status == 0 else { throw TestSupportError("as nobody, \(arguments): \(run.errors)") }
    }

    /// Starts `arguments` as nobody, running until killed.
    func startAsNobody(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(setpriv, asNobody + arguments)
    }

    /// The owner of the entry at `path` (not following a link).
    static func owner(_ path: String) -> uid_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_uid : nil
    }
}

/// `ringside_collector_hlog_errors_total` on the collector's `/metrics`, or nil.
private func hlogErrors(port: Int) throws -> Int? {
    let page = try httpGet(port: port, path: "/metrics").body
    return page.split(separator: "\n").first { $0.hasPrefix("ringside_collector_hlog_errors_total ") }
        .flatMap { Int($0.split(separator: " ").last ?? "") }
}

/// A producer writing histogram "blast" into `ring` `rate` times a second for two minutes (or until killed).
private func startProducer(_ directory: RingDirectory, ring: String, rate: Int = 5_000) throws -> ChildProcess {
    let producer = try ChildProcess(
        testProducer: "blast", ring: ring, in: directory, ["--seconds", "120", "--rate", "\(rate)", "--capacity", "65536"])
    guard producer.readLine()?.hasPrefix("attached ") == true else { throw TestSupportError("the producer did not start") }
    return producer
}

/// Sends SIGTERM and waits (10 s at most, else SIGKILL) for the exit; the status (nil if it had
/// to be killed) and standard error.
private func stop(_ collector: ChildProcess) -> (status: Int32?, standardError: String) {
    collector.send(SIGTERM)
    // A zombie still answers kill(pid, 0): /proc says whether it has exited.
    let exited = eventually(seconds: 10) {
        guard let stat = try? String(contentsOfFile: "/proc/\(collector.pid)/stat", encoding: .utf8) else { return true }
        return stat.split(separator: ")").last?.split(separator: " ").first == "Z"
    }
    if !exited { collector.kill() }
    let exit = collector.waitForExit()
    return (exited ? exit.status : nil, exit.standardError)
}

/// Lines of `text` holding every one of `parts`.
private func lines(_ text: String, _ parts: String...) -> [Substring] {
    text.split(separator: "\n").filter { line in parts.allSatisfy { line.contains($0) } }
}

@Suite("ringside-collector as root against another user in its --hlog and --json-dump directory")
struct LogDirectoryProcessTests {
    @Test("a link that nobody planted at PATH is refused and left alone: root's file it points to is unchanged")
    func plantedLink() throws {
        guard let attack = try Attack.prepare() else { return }
        defer { attack.remove() }
        try withRingDirectory { directory in
            let hlog = attack.shared.path + "/latency.hlog", dump = attack.shared.path + "/latest.json"
            try attack.runAsNobody(["ln", "-s", attack.target, hlog])
            try attack.runAsNobody(["ln", "-s", attack.target, dump])
            let producer = try startProducer(directory, ring: "linked")
            defer { producer.kill() }
            let (collector, port) = try startCollector([
                "--dir", directory.path, "--poll", "20ms", "--hlog", hlog,
                "--hlog-interval", "100ms", "--json-dump", dump, "--dump-interval", "100ms",
            ])
            // Each interval with lines tries again, and is refused and counted again.
            #expect(try eventually { try hlogErrors(port: port).map { $0 >= 5 } ?? false }, "errors counted")
            #expect(try httpGet(port: port, path: "/health").status == 200)
            let exit = stop(collector)
            #expect(exit.status == 0, "\(exit.standardError)")
            #expect(attack.targetIsUnchanged)
            #expect(entryKind(hlog) == S_IFLNK && entryKind(dump) == S_IFLNK && Attack.owner(hlog) == 65534)
            #expect(entryKind(hlog + ".1") == nil)
            #expect(
                lines(exit.standardError, "--hlog: \(hlog) is a symbolic link, not a regular file of the collector's: left alone").count
                    == 1,
                "said once: \(exit.standardError)")
            #expect(lines(exit.standardError, "cannot write the JSON dump: \(dump) is a symbolic link").count == 1, "\(exit.standardError)")
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: attack.shared.path).filter { $0.contains(".tmp.") }
            #expect(leftovers.isEmpty, "the refused dumps' temporary files are removed")
        }
    }

    @Test("a FIFO that nobody planted at PATH blocks nothing: /api/history and /health answer, SIGTERM stops the collector")
    func plantedFIFO() throws {
        guard let attack = try Attack.prepare() else { return }
        defer { attack.remove() }
        try withRingDirectory { directory in
            let hlog = attack.shared.path + "/latency.hlog", dump = attack.shared.path + "/latest.json"
            try attack.runAsNobody(["mkfifo", hlog])
            try attack.runAsNobody(["mkfifo", dump])
            let producer = try startProducer(directory, ring: "piped")
            defer { producer.kill() }
            let (collector, port) = try startCollector([
                "--dir", directory.path, "--poll", "20ms", "--hlog", hlog,
                "--hlog-interval", "100ms", "--json-dump", dump, "--dump-interval", "100ms",
            ])
            // The daemon's loop writes the log and feeds the history: both go on.
            #expect(try eventually { try hlogErrors(port: port).map { $0 >= 5 } ?? false }, "errors counted")
            let history = try eventually { () -> [String: Any]? in
                let response = try httpGet(port: port, path: "/api/history?ring=piped")
                guard response.status == 200 else { return nil }
                let answer = try jsonObject(response.body)
                let series = answer["series"] as? [[String: Any]] ?? []
                return series.contains { ($0["points"] as? [Any])?.isEmpty == false } ? answer : nil
            }
            #expect(history != nil, "/api/history has the producer's points")
            #expect(try httpGet(port: port, path: "/health").status == 200)
            let exit = stop(collector)
            #expect(exit.status == 0, "SIGTERM stops it: \(exit.standardError)")
            #expect(exit.standardError.contains("received SIGTERM"))
            #expect(lines(exit.standardError, "--hlog: \(hlog) is a FIFO (named pipe)", "left alone").count == 1, "\(exit.standardError)")
            #expect(lines(exit.standardError, "cannot write the JSON dump: \(dump) is a FIFO (named pipe)").count == 1)
            #expect(entryKind(hlog) == S_IFIFO && entryKind(dump) == S_IFIFO)
        }
    }

    @Test("links nobody plants at PATH over and over while the log rotates are never written through")
    func linksPlantedWhileRotating() throws {
        guard let attack = try Attack.prepare(), let perl = try requiredSystemTool("perl") else { return }
        defer { attack.remove() }
        try withRingDirectory { directory in
            let hlog = attack.shared.path + "/latency.hlog"
            // Six series, a line each an interval (about 110 bytes): the log rotates every half second or so.
            let producers = try (1...6).map { try startProducer(directory, ring: "rotated-\($0)", rate: 1_000) }
            defer { for producer in producers { producer.kill() } }
            let (collector, port) = try startCollector([
                "--dir", directory.path, "--poll", "20ms", "--hlog", hlog,
                "--hlog-interval", "100ms", "--hlog-max-bytes", "4096",
            ])
            #expect(eventually(seconds: 30) { entryKind(hlog + ".1") == S_IFREG }, "the log rotates")
            // nobody tries symlink(2) at PATH without pause: it takes only when PATH is gone, between
            // the collector's rename of PATH to PATH.1 and its create of the next PATH.
            // Killed below, or on release (a process is killed and reaped once, never twice: its pid could be reused).
            let planter = try attack.startAsNobody([perl, "-e", "while (1) { symlink($ARGV[0], $ARGV[1]) }", attack.target, hlog])
            var rotationsSeen = 0
            var lastPrevious: ino_t = 0
            let won = eventually(seconds: 30) {
                var info = stat()
                if lstat(hlog + ".1", &info) == 0, info.st_ino != lastPrevious {
                    (rotationsSeen, lastPrevious) = (rotationsSeen + 1, info.st_ino)
                }
                return entryKind(hlog) == S_IFLNK
            }
            if !won {
                // Not once in 30 s: take PATH away as an operator might, so the next rotation meets
                // the link all the same (the collector writes on into the open file meanwhile).
                print("the planter did not win the race in 30 s (\(rotationsSeen) rotations seen); PATH removed for it")
                unlink(hlog)
                #expect(eventually(seconds: 10) { entryKind(hlog) == S_IFLNK })
            } else {
                print("the planter won the race at PATH after \(rotationsSeen) rotations seen")
            }
            // Refused at the next rotation and each interval after, counted.
            #expect(try eventually(seconds: 30) { try hlogErrors(port: port).map { $0 >= 3 } ?? false }, "errors counted")
            planter.kill()
            let exit = stop(collector)
            #expect(exit.status == 0, "\(exit.standardError)")
            #expect(attack.targetIsUnchanged)
            #expect(entryKind(hlog) == S_IFLNK && Attack.owner(hlog) == 65534, "left alone")
            #expect(
                lines(exit.standardError, "--hlog: \(hlog) is a symbolic link, not a regular file of the collector's").count == 1,
                "\(exit.standardError)")
            // What the collector wrote is its own: PATH.1 is a regular file of root's holding a log.
            var info = stat()
            #expect(lstat(hlog + ".1", &info) == 0 && info.st_mode & S_IFMT == S_IFREG && info.st_uid == 0 && info.st_nlink == 1)
            #expect(fileText(hlog + ".1")?.hasPrefix("#[Logged with ringside-collector") == true)
        }
    }

    @Test("a directory its group can write without the sticky bit, or one another user owns, stops the start with a clear error")
    func refusedDirectories() throws {
        guard try requiredRoot("making a directory another user owns") else { return }
        let folder = try TemporaryDirectory("ringside-refused")
        defer { folder.remove() }
        try withRingDirectory { directory in
            let groupWritable = folder.path + "/group-writable", theirs = folder.path + "/theirs"
            #expect(mkdir(groupWritable, 0o755) == 0 && chmod(groupWritable, 0o775) == 0)
            #expect(mkdir(theirs, 0o755) == 0 && chown(theirs, 65534, 65534) == 0)
            let cases = [
                ("--hlog", groupWritable, "the directory \(groupWritable) (mode 0775) is writable by its group and not sticky"),
                ("--json-dump", groupWritable, "the directory \(groupWritable) (mode 0775) is writable by its group and not sticky"),
                ("--hlog", theirs, "the directory \(theirs) is owned by uid 65534, not by the collector's uid 0 or root"),
                ("--json-dump", theirs, "the directory \(theirs) is owned by uid 65534, not by the collector's uid 0 or root"),
            ]
            for (flag, parent, reason) in cases {
                let run = try runProcess(
                    "ringside-collector", ["--dir", directory.path, "--listen", "127.0.0.1:0", flag, parent + "/file"],
                    timeoutSeconds: 30)
                #expect(run.status == 1, "\(flag) \(parent): \(run.errors)")
                #expect(lines(run.errors, "\(flag) \(parent)/file: \(reason)", "; not starting").count == 1, "\(run.errors)")
                #expect(!run.errors.contains("listening on"), "refused before anything is served")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: groupWritable).isEmpty)
            #expect(try FileManager.default.contentsOfDirectory(atPath: theirs).isEmpty)
        }
    }
}
