import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import RingsideCollector
import RingsideSystem
import RingsideTestSupport
import Synchronization
import Testing

/// A directory of the test's own (mode 0700 from mkdtemp), removed at the end.
func withLogTestDirectory<Result>(_ body: (String) throws -> Result) throws -> Result {
    let directory = try TemporaryDirectory("ringside-logdir-test")
    defer { directory.remove() }
    return try body(directory.path)
}

/// A file of root's (or the test's user's) outside the log directory, as a planted link's target,
/// and its bytes, to show it is never written.
struct LinkTarget {
    let path: String
    let bytes: Data

    init(in folder: String) throws {
        path = folder + "/target-outside"
        bytes = Data("the contents of a file the collector must never write\n".utf8)
        try bytes.write(to: URL(fileURLWithPath: path))
    }

    var isUnchanged: Bool { (try? Data(contentsOf: URL(fileURLWithPath: path))) == bytes }
}

/// The kind of entry at `path`, not following a link (`S_IFLNK`, `S_IFIFO`, ...); nil if none.
func entryKind(_ path: String) -> mode_t? {
    var info = stat()
    return lstat(path, &info) == 0 ? info.st_mode & S_IFMT : nil
}

func fileText(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

/// Runs `body`, which must not block on the FIFO at `fifo`. Should it still run after 5 s, a
/// reader opens the FIFO so a blocked open returns, and the test fails rather than hangs.
func expectNoBlock(on fifo: String, _ body: () throws -> Void) rethrows {
    final class Watch: Sendable {
        let done = Atomic<Bool>(false)
        let reader = Atomic<Int32>(-1)
    }
    let watch = Watch()
    DispatchQueue.global().asyncAfter(deadline: .now() + 5) {
        guard !watch.done.load(ordering: .acquiring) else { return }
        // Never closed: a writer let through may keep writing, and with no reader left SIGPIPE
        // would end the whole test process.
        watch.reader.store(open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC), ordering: .releasing)
    }
    try body()
    watch.done.store(true, ordering: .releasing)
    #expect(watch.reader.load(ordering: .acquiring) < 0, "the call blocked on the FIFO \(fifo) until a reader opened it")
}

@Suite("LogDirectory: the --hlog and --json-dump directory")
struct LogDirectoryTests {
    @Test("a symbolic link at PATH is neither moved, followed nor replaced; its target is untouched")
    func symbolicLink() throws {
        try withLogTestDirectory { folder in
            let target = try LinkTarget(in: folder)
            try FileManager.default.createDirectory(atPath: folder + "/logs", withIntermediateDirectories: false)
            let directory = try LogDirectory(path: folder + "/logs")
            #expect(symlink(target.path, folder + "/logs/l.hlog") == 0)
            let refusal = LogDirectoryError.notOurs(path: folder + "/logs/l.hlog", found: "a symbolic link")
            #expect(throws: refusal) { try directory.moveAside("l.hlog", to: "l.hlog.1") }
            #expect(throws: refusal) { try directory.create("l.hlog") }
            #expect(throws: refusal) { try directory.replace("l.hlog", with: "anything") }
            #expect(
                "\(refusal)" == "\(folder)/logs/l.hlog is a symbolic link, not a regular file of the collector's: "
                    + "left alone (remove it if it should not be there)")
            #expect(entryKind(folder + "/logs/l.hlog") == S_IFLNK && entryKind(folder + "/logs/l.hlog.1") == nil)
            #expect(target.isUnchanged)
        }
    }

    @Test("a FIFO at PATH is refused without blocking, and left alone")
    func fifo() throws {
        try withLogTestDirectory { folder in
            let fifo = folder + "/l.hlog"
            #expect(mkfifo(fifo, 0o666) == 0)
            let directory = try LogDirectory(path: folder)
            let refusal = LogDirectoryError.notOurs(path: fifo, found: "a FIFO (named pipe)")
            expectNoBlock(on: fifo) {
                #expect(throws: refusal) { try directory.moveAside("l.hlog", to: "l.hlog.1") }
                #expect(throws: refusal) { try directory.create("l.hlog") }
                #expect(throws: refusal) { try directory.replace("l.hlog", with: "anything") }
            }
            #expect(entryKind(fifo) == S_IFIFO)
        }
    }

    @Test("another user's file at PATH is refused, naming its owner, and left alone")
    func foreignFile() throws {
        guard try requiredRoot("making a file another user owns") else { return }
        try withLogTestDirectory { folder in
            let path = folder + "/l.hlog"
            try "theirs\n".write(toFile: path, atomically: false, encoding: .utf8)
            #expect(chown(path, 65534, 65534) == 0)
            let directory = try LogDirectory(path: folder)
            let refusal = LogDirectoryError.notOurs(path: path, found: "a file owned by uid 65534, not by the collector's uid 0")
            #expect(throws: refusal) { try directory.moveAside("l.hlog", to: "l.hlog.1") }
            #expect(throws: refusal) { try directory.replace("l.hlog", with: "anything") }
            #expect(fileText(path) == "theirs\n" && entryKind(path + ".1") == nil)
        }
    }

    @Test("a directory at PATH is refused and left alone")
    func directoryAtPath() throws {
        try withLogTestDirectory { folder in
            try FileManager.default.createDirectory(atPath: folder + "/l.hlog", withIntermediateDirectories: false)
            let directory = try LogDirectory(path: folder)
            let refusal = LogDirectoryError.notOurs(path: folder + "/l.hlog", found: "a directory")
            #expect(throws: refusal) { try directory.moveAside("l.hlog", to: "l.hlog.1") }
            #expect(throws: refusal) { try directory.create("l.hlog") }
            #expect(entryKind(folder + "/l.hlog") == S_IFDIR && entryKind(folder + "/l.hlog.1") == nil)
        }
    }

    @Test("a hard link at PATH (a file with another name) is refused, and neither name is touched")
    func hardLink() throws {
        try withLogTestDirectory { folder in
            let target = try LinkTarget(in: folder)
            #expect(link(target.path, folder + "/l.hlog") == 0)
            let directory = try LogDirectory(path: folder)
            let refusal = LogDirectoryError.notOurs(path: folder + "/l.hlog", found: "a file with 2 links (another name shares it)")
            #expect(throws: refusal) { try directory.moveAside("l.hlog", to: "l.hlog.1") }
            #expect(throws: refusal) { try directory.replace("l.hlog", with: "anything") }
            #expect(entryKind(folder + "/l.hlog.1") == nil && target.isUnchanged)
        }
    }

    @Test("rotation: a link planted between the move aside and the create makes the create fail; nothing is written through it")
    func plantedAtRotation() throws {
        try withLogTestDirectory { folder in
            let target = try LinkTarget(in: folder)
            let directory = try LogDirectory(path: folder)
            let first = try directory.create("l.hlog")
            _ = write(first, "first\n", 6)
            close(first)
            try directory.moveAside("l.hlog", to: "l.hlog.1")
            #expect(symlink(target.path, folder + "/l.hlog") == 0)  // the attacker's turn
            #expect(throws: LogDirectoryError.notOurs(path: folder + "/l.hlog", found: "a symbolic link")) {
                try directory.create("l.hlog")
            }
            #expect(target.isUnchanged && fileText(folder + "/l.hlog.1") == "first\n")
            #expect(entryKind(folder + "/l.hlog") == S_IFLNK)
        }
    }

    @Test("a file already at PATH, ours, empty or not, is moved aside, replacing PATH.1")
    func moveAside() throws {
        try withLogTestDirectory { folder in
            let directory = try LogDirectory(path: folder)
            try "".write(toFile: folder + "/l.hlog", atomically: false, encoding: .utf8)
            try "older\n".write(toFile: folder + "/l.hlog.1", atomically: false, encoding: .utf8)
            try directory.moveAside("l.hlog", to: "l.hlog.1")
            #expect(entryKind(folder + "/l.hlog") == nil && fileText(folder + "/l.hlog.1") == "")
            try directory.moveAside("l.hlog", to: "l.hlog.1")  // nothing there: nothing done
            #expect(fileText(folder + "/l.hlog.1") == "")
        }
    }

    @Test("a new file is a regular file of ours, mode 0644 less the umask; an existing name is never opened")
    func create() throws {
        try withLogTestDirectory { folder in
            let directory = try LogDirectory(path: folder)
            let descriptor = try directory.create("l.hlog")
            defer { close(descriptor) }
            var info = stat()
            #expect(fstat(descriptor, &info) == 0)
            // The umask, read without changing it (other tests' threads create files meanwhile).
            let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
            let mask = try #require(
                status.split(separator: "\n").first { $0.hasPrefix("Umask:") }
                    .flatMap { mode_t($0.dropFirst(6).trimmingCharacters(in: .whitespaces), radix: 8) })
            #expect(info.st_mode & S_IFMT == S_IFREG && info.st_uid == geteuid() && info.st_nlink == 1)
            #expect(info.st_mode & 0o777 == 0o644 & ~mask)
            #expect(throws: LogDirectoryError.failed(action: "create \(folder)/l.hlog", errno: .fileExists)) {
                try directory.create("l.hlog")
            }
            let temporary = try directory.createTemporary(for: "l.json")
            close(temporary.descriptor)
            #expect(temporary.name.hasPrefix("l.json.tmp.\(getpid()).") && temporary.name.count > "l.json.tmp.\(getpid()).".count + 8)
            #expect(try directory.createTemporary(for: "l.json").name != temporary.name)
        }
    }

    @Test("renameat replaces a link planted at the destination, it does not follow it")
    func renameReplacesLink() throws {
        try withLogTestDirectory { folder in
            let target = try LinkTarget(in: folder)
            let directory = try LogDirectory(path: folder)
            try "new\n".write(toFile: folder + "/l.json.tmp", atomically: false, encoding: .utf8)
            #expect(symlink(target.path, folder + "/l.json") == 0)
            try directory.rename("l.json.tmp", to: "l.json")
            #expect(entryKind(folder + "/l.json") == S_IFREG && fileText(folder + "/l.json") == "new\n")
            #expect(target.isUnchanged)
        }
    }

    @Test("PATH's own directory: one its group or others can write is refused unless sticky")
    func writableDirectory() throws {
        try withLogTestDirectory { folder in
            for (mode, who) in [(0o775, "its group"), (0o757, "others"), (0o777, "its group and others")] as [(mode_t, String)] {
                #expect(chmod(folder, mode) == 0)
                #expect(throws: LogDirectoryError.directoryWritable(path: folder, mode: mode)) { try LogDirectory(path: folder) }
                let message = "\(LogDirectoryError.directoryWritable(path: folder, mode: mode))"
                #expect(
                    message == "the directory \(folder) (mode 0\(String(mode, radix: 8))) is writable by \(who) and not sticky: "
                        + "they could rename the collector's files and plant links in their place; chmod go-w it, or chmod +t it as /tmp is"
                )
            }
            for mode: mode_t in [0o1777, 0o1770, 0o755, 0o700] {
                #expect(chmod(folder, mode) == 0)
                #expect(throws: Never.self, "mode \(String(mode, radix: 8))") { try LogDirectory(path: folder) }
            }
        }
    }

    @Test("PATH's own directory: a symbolic link, a missing one, a file, are refused")
    func unusableDirectory() throws {
        try withLogTestDirectory { folder in
            try FileManager.default.createDirectory(atPath: folder + "/real", withIntermediateDirectories: false)
            #expect(symlink(folder + "/real", folder + "/link") == 0)
            #expect(throws: LogDirectoryError.directoryIsLink(path: folder + "/link", target: folder + "/real")) {
                try LogDirectory(path: folder + "/link")
            }
            #expect(throws: LogDirectoryError.directoryIsLink(path: folder + "/link", target: folder + "/real")) {
                try LogDirectory(path: folder + "/link//")  // a trailing slash would have the kernel follow it
            }
            #expect(throws: LogDirectoryError.cannotOpenDirectory(path: folder + "/missing", errno: .noSuchFileOrDirectory)) {
                try LogDirectory(path: folder + "/missing")
            }
            #expect(
                "\(LogDirectoryError.cannotOpenDirectory(path: folder + "/missing", errno: .noSuchFileOrDirectory))"
                    == "cannot open the directory \(folder)/missing: No such file or directory (errno: 2)")
            try "".write(toFile: folder + "/file", atomically: false, encoding: .utf8)
            #expect(throws: LogDirectoryError.cannotOpenDirectory(path: folder + "/file", errno: .notDirectory)) {
                try LogDirectory(path: folder + "/file")
            }
            #expect(mkfifo(folder + "/fifo", 0o666) == 0)
            expectNoBlock(on: folder + "/fifo") {
                #expect(throws: LogDirectoryError.cannotOpenDirectory(path: folder + "/fifo", errno: .notDirectory)) {
                    try LogDirectory(path: folder + "/fifo")
                }
            }
        }
    }

    @Test("PATH's own directory: one owned by another user (not root) is refused")
    func foreignDirectory() throws {
        guard try requiredRoot("making a directory another user owns") else { return }
        try withLogTestDirectory { folder in
            #expect(chown(folder, 65534, 65534) == 0)
            #expect(throws: LogDirectoryError.directoryOwner(path: folder, owner: 65534, collector: 0)) { try LogDirectory(path: folder) }
            #expect(chown(folder, 0, 0) == 0)
            #expect(throws: Never.self) { try LogDirectory(path: folder) }
        }
    }

    @Test("a file's path is split into its directory (no trailing slash) and its name")
    func split() {
        #expect(LogDirectory.split("/var/log/a.hlog") == ("/var/log", "a.hlog"))
        #expect(LogDirectory.split("/var/log//a.hlog") == ("/var/log", "a.hlog"))
        #expect(LogDirectory.split("a.hlog") == (".", "a.hlog"))
        #expect(LogDirectory.split("/a.hlog") == ("/", "a.hlog"))
        #expect(LogDirectory.split("logs/a.hlog") == ("logs", "a.hlog"))
        for path in ["/var/log/", "/var/log/.", "..", "", "/"] { #expect(!LogDirectory.namesFile(path), "\(path)") }
        #expect(LogDirectory.namesFile("a") && LogDirectory.namesFile("/x/.a"))
    }
}
