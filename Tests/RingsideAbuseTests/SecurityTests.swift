import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

/// A ring written by the test producer process, which has exited: histogram "sequence" holding
/// 1...count.
private func makeRing(_ directory: RingDirectory, _ name: String, count: Int = 100) throws {
    let child = try ChildProcess(
        testProducer: "sequence", ring: name, in: directory, ["--count", "\(count)", "--start", "1", "--capacity", "1024"])
    guard child.readLine() != nil, child.waitForExit().status == 0 else { throw TestSupportError("the test producer failed") }
}

private func fileMode(_ path: String) -> mode_t? {
    var info = stat()
    guard lstat(path, &info) == 0 else { return nil }
    return info.st_mode & 0o7777
}

/// The `sequence` series' count in the collector's /metrics, once it is there.
private func sequenceCount(port: Int, ring: String) throws -> Int? {
    let body = try httpGet(port: port, path: "/metrics").body
    let prefix = "sequence_count{ring=\"\(ring)\""
    guard let line = body.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return nil }
    return Int(line.split(separator: " ").last ?? "")
}

@Suite("Security: private rings, refused owners, no links followed, names validated, loopback by default")
struct SecurityTests {
    @Test("rings are created 0600, by the library and by ringside-emit, whatever the umask")
    func ringsArePrivate() throws {
        try withRingDirectory { directory in
            _ = try Bot.attach("lib", directory: directory.path, options: .init(laneCapacity: 16, maxMetrics: 1))
            #expect(fileMode(directory.filePath(for: "lib")) == 0o600)
            let run = try runProcess("ringside-emit", ["--ring", "tool", "--dir", directory.path, "m", "1"])
            #expect(run.status == 0, "\(run.errors)")
            #expect(fileMode(directory.filePath(for: "tool")) == 0o600)
        }
    }

    @Test("a ring owned by another user is refused with its owner named; --allow-uid collects it")
    func foreignOwner() throws {
        guard geteuid() == 0 else {
            print("skipping: chown to another user needs root")
            return
        }
        try withRingDirectory { directory in
            try makeRing(directory, "theirs")
            try makeRing(directory, "ours")
            #expect(chown(directory.filePath(for: "theirs"), 4242, 4242) == 0)

            let (refusing, port) = try startCollector(["--dir", directory.path, "--poll", "20ms"])
            let line = refusing.waitForErrorLine(containing: "skipping ring theirs:")
            #expect(line?.contains("owned by uid 4242") == true, "\(line ?? "no line")")
            #expect(try eventually { try sequenceCount(port: port, ring: "ours") } == 100)
            #expect(try sequenceCount(port: port, ring: "theirs") == nil)
            // Discovery shows the skipped ring in a later snapshot than the one "ours" reached 100 in.
            let skippedShown = try eventually { try httpGet(port: port, path: "/latest").body.contains("owned by uid 4242") }
            #expect(skippedShown, "the skipped ring and why are in /latest")
            refusing.kill()

            let dumpRefused = try runProcess("ringside-dump", ["info", "theirs", "--dir", directory.path])
            #expect(dumpRefused.status == 1 && dumpRefused.errors.contains("owned by uid 4242"), "\(dumpRefused.errors)")
            let dumpAllowed = try runProcess(
                "ringside-dump",
                [
                    "records", "theirs", "--last", "1", "--allow-uid", "4242",
                    "--dir", directory.path,
                ])
            #expect(dumpAllowed.status == 0 && dumpAllowed.output.contains("100"), "\(dumpAllowed.errors)")

            let (allowing, allowedPort) = try startCollector(["--dir", directory.path, "--poll", "20ms", "--allow-uid", "4242"])
            defer { allowing.kill() }
            #expect(allowing.waitForErrorLine(containing: "ring theirs attached") != nil)
            #expect(try eventually { try sequenceCount(port: allowedPort, ring: "theirs") } == 100)
        }
    }

    @Test("a symbolic link named like a ring is never followed: collector, dump, emit and clean refuse it")
    func symbolicLinks() throws {
        try withRingDirectory { directory in
            try makeRing(directory, "real")
            // A link to a real ring, and a link to a file outside the directory.
            let outside = directory.path + "/secret.txt"
            try "do not touch\n".write(toFile: outside, atomically: false, encoding: .utf8)
            #expect(symlink(directory.filePath(for: "real"), directory.filePath(for: "alias")) == 0)
            #expect(symlink(outside, directory.filePath(for: "evil")) == 0)

            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms"])
            var skipped: [String: String] = [:]
            while skipped.count < 2, let line = collector.readErrorLine() {
                for name in ["alias", "evil"] where line.contains("skipping ring \(name):") { skipped[name] = line }
            }
            for name in ["alias", "evil"] {
                #expect(skipped[name]?.contains("symbolic link") == true, "\(skipped[name] ?? "no line for \(name)")")
            }
            #expect(try eventually { try sequenceCount(port: port, ring: "real") } == 100)
            #expect(try sequenceCount(port: port, ring: "alias") == nil)
            collector.kill()

            for name in ["alias", "evil"] {
                for command in [["info", name], ["records", name], ["check", name]] {
                    let run = try runProcess("ringside-dump", command + ["--dir", directory.path])
                    #expect(
                        run.status == 1 && run.errors.contains("symbolic link") || run.output.contains("symbolic link"),
                        "\(command): \(run.output) \(run.errors)")
                }
            }
            let check = try runProcess("ringside-dump", ["check", "--all", "--dir", directory.path])
            #expect(check.status == 1 && check.output.contains("ring evil:") && check.output.contains("ring real: ok"), "\(check.output)")
            let emit = try runProcess("ringside-emit", ["--ring", "evil", "--dir", directory.path, "m", "1"])
            #expect(emit.status == 1 && emit.errors.contains("symbolic link"), "\(emit.errors)")
            let clean = try runProcess("ringside-dump", ["clean", "--force", "--dir", directory.path])
            #expect(clean.status != nil)
            // The links and what they point to are untouched.
            #expect(try String(contentsOfFile: outside, encoding: .utf8) == "do not touch\n")
            var info = stat()
            #expect(lstat(directory.filePath(for: "evil"), &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK)
        }
    }

    @Test("a FIFO or a directory named like a ring is refused at once: nothing blocks on it")
    func specialFiles() throws {
        try withRingDirectory { directory in
            try makeRing(directory, "real")
            #expect(mkfifo(directory.filePath(for: "pipe"), 0o600) == 0)
            #expect(mkdir(directory.filePath(for: "folder"), 0o700) == 0)
            for command in [["check", "--all"], ["list"], ["info", "pipe"], ["records", "pipe"], ["watch", "--count", "1"]] {
                let run = try runProcess("ringside-dump", command + ["--dir", directory.path], timeoutSeconds: 10)
                #expect(run.status != nil, "ringside-dump \(command) hung or crashed")
            }
            let check = try runProcess("ringside-dump", ["check", "--all", "--dir", directory.path], timeoutSeconds: 10)
            #expect(check.output.contains("ring pipe:") && check.output.contains("not a regular file"), "\(check.output)")
            let emit = try runProcess("ringside-emit", ["--ring", "pipe", "--dir", directory.path, "m", "1"], timeoutSeconds: 10)
            #expect(emit.status == 1 && emit.errors.contains("not a regular file"), "\(emit.errors)")
            // A socket's file cannot be opened at all (ENXIO): said the same way.
            try bindSocketFile(directory.filePath(for: "socket"))
            let socketCheck = try runProcess("ringside-dump", ["check", "socket", "--dir", directory.path], timeoutSeconds: 10)
            #expect(
                socketCheck.status == 1
                    && socketCheck.output
                        == "ring socket: \(directory.filePath(for: "socket")): a socket owned by uid \(geteuid()), not a regular file\n",
                "\(socketCheck.output)")

            let (collector, port) = try startCollector(["--dir", directory.path, "--poll", "20ms"])
            defer { collector.kill() }
            #expect(collector.waitForErrorLine(containing: "skipping ring pipe:")?.contains("not a regular file") == true)
            #expect(try eventually { try sequenceCount(port: port, ring: "real") } == 100)
        }
    }

    @Test("names with a path in them are refused before anything is opened", arguments: ["../x", "../../etc/passwd", "a/b", "/abs"])
    func pathTraversal(name: String) throws {
        try withRingDirectory { directory in
            let runs = [
                try runProcess("ringside-collector", ["--dir", directory.path, "--ring", name]),
                try runProcess("ringside-dump", ["info", name, "--dir", directory.path]),
                try runProcess("ringside-emit", ["--ring", name, "--dir", directory.path, "m", "1"]),
            ]
            for run in runs {
                #expect(run.status == 2 && run.errors.contains("invalid ring name"), "\(run.errors)")
            }
            #expect(throws: RingError.self) { try Bot.attach(name, directory: directory.path) }
            // Nothing was created, here or one level up.
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
            #expect(!FileManager.default.fileExists(atPath: directory.path + "/../ringside.x"))
        }
    }

    @Test("the HTTP server binds 127.0.0.1 unless told otherwise; another address is logged as a warning")
    func loopbackByDefault() throws {
        try withRingDirectory { directory in
            // No --listen: the default address, 127.0.0.1:9464 (or a clear error if the port is taken).
            let collector = try ChildProcess("ringside-collector", ["--dir", directory.path])
            let first = collector.readErrorLine() ?? ""
            if first.contains("listening on") {
                #expect(first.contains("listening on http://127.0.0.1:9464 "), "\(first)")
                collector.send(SIGTERM)
                let rest = collector.waitForExit()
                #expect(!rest.standardError.contains("warning"), "\(rest.standardError)")
            } else {
                #expect(first.contains("127.0.0.1:9464"), "\(first)")
                #expect(collector.waitForExit().status == 1)
            }

            let (loopback, _) = try startCollector(["--dir", directory.path])
            loopback.send(SIGTERM)
            #expect(!loopback.waitForExit().standardError.contains("warning"))

            let (open, _) = try startCollector(["--dir", directory.path], listen: "0.0.0.0:0")
            let warning = open.waitForErrorLine(containing: "warning")
            #expect(warning?.contains("is not a loopback address") == true, "\(warning ?? "no warning")")
            open.send(SIGTERM)
            #expect(open.waitForExit().status == 0)
        }
    }
}
