import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
@testable import RingsideCollector
import RingsideTestSupport
import Testing

/// Issue 45, attack 1: two collectors folding one directory overwrote each other's totals. One
/// collector per ring directory now: the second is refused at start (`DirectoryLock`).
@Suite("One collector per ring directory: a second is refused, the lock dies with its holder")
struct DirectoryLockTests {
    @Test(
        "a second collector process is refused before it serves, naming the directory and the holder's pid; after SIGKILL of the first a new one starts"
    )
    func secondProcessRefused() throws {
        try withRingDirectory { directory in
            let (first, port) = try startCollector(["--dir", directory.path, "--poll", "20ms"])
            defer { first.kill() }
            #expect(try httpGet(port: port, path: "/metrics").status == 200)

            let second = try ChildProcess("ringside-collector", ["--dir", directory.path, "--listen", "127.0.0.1:0"])
            let exit = second.waitForExit()
            #expect(exit.status == 1)
            #expect(!exit.standardError.contains("listening on"), "it never served: \(exit.standardError)")
            #expect(exit.standardError.contains("ring directory \(directory.path)"), "\(exit.standardError)")
            #expect(exit.standardError.contains("collector pid \(first.pid) already collects this directory"), "\(exit.standardError)")
            #expect(exit.standardError.contains("not starting"), "\(exit.standardError)")

            // The kernel lets go of the lock with the process, SIGKILL or not.
            first.kill()
            let (third, thirdPort) = try startCollector(["--dir", directory.path])
            defer { third.kill() }
            #expect(try httpGet(port: thirdPort, path: "/metrics").status == 200)
        }
    }

    @Test("a second Collector in the same process is refused too; the first's stop, or its end, lets the next take the directory")
    func secondCollectorInProcessRefused() throws {
        try withRingDirectory { directory in
            let first = try makeCollector(directory, captured: CapturedLog())
            #expect(throws: CollectorError.self) { try makeCollector(directory, captured: CapturedLog()) }
            do {
                _ = try makeCollector(directory, captured: CapturedLog())
            } catch {
                #expect("\(error)".contains("collector pid \(getpid()) already collects this directory"), "\(error)")
            }
            first.start()
            first.stop()
            do {
                let second = try makeCollector(directory, captured: CapturedLog())
                _ = second
            }
            // The second went at the end of its scope, and its lock with it.
            #expect((try? makeCollector(directory, captured: CapturedLog())) != nil)
        }
    }

    @Test("lock files planted by another user are passed over: the collector locks the next name, and a second is still refused")
    func plantedLockFilesPassedOver() throws {
        guard try requiredRoot("planting files as user nobody (setpriv)"), let setpriv = try requiredSystemTool("setpriv") else { return }
        try withRingDirectory { directory in
            // A directory anyone may write in, as /dev/shm is.
            try #require(chmod(directory.path, 0o1777) == 0)
            let nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"]
            // A link to a file of root's at the first name, a FIFO at the second.
            let link = try runProcess(setpriv, nobody + ["ln", "-s", "/etc/hostname", directory.path + "/ringside-collector.lock"])
            let fifo = try runProcess(setpriv, nobody + ["mkfifo", directory.path + "/ringside-collector.lock.1"])
            try #require(link.status == 0 && fifo.status == 0, "\(link.errors) \(fifo.errors)")
            let hostname = try String(contentsOfFile: "/etc/hostname", encoding: .utf8)

            let captured = CapturedLog()
            let first = try makeCollector(directory, captured: captured)
            #expect(FileManager.default.fileExists(atPath: directory.path + "/ringside-collector.lock.2"), "the next name holds the lock")
            #expect(throws: CollectorError.self) { try makeCollector(directory, captured: CapturedLog()) }
            #expect(try String(contentsOfFile: "/etc/hostname", encoding: .utf8) == hostname, "nothing written through the link")
            var info = stat()
            #expect(lstat(directory.path + "/ringside-collector.lock", &info) == 0 && info.st_mode & S_IFMT == S_IFLNK, "left where it is")
            _ = first
        }
    }
}
