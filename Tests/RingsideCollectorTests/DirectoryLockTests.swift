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

    /// Round four's attack: every name the lock was tried at (`ringside-collector.lock`, `.1` to
    /// `.7`) planted by another user (links, a FIFO, a directory, files of theirs) let a second
    /// collector start on the directory, and 151 to 153 of 300 worker increments were lost.
    @Test("whatever another user plants at any lock name, a second collector process is refused and the first started")
    func plantedLockFilesPassedOver() throws {
        guard try requiredRoot("planting files as user nobody (setpriv)"), let setpriv = try requiredSystemTool("setpriv") else { return }
        try withRingDirectory { directory in
            // A directory anyone may write in, as /dev/shm is.
            try #require(chmod(directory.path, 0o1777) == 0)
            let nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"]
            let base = directory.path + "/ringside-collector.lock"
            let plants = [
                ["ln", "-s", "/etc/hostname", base], ["mkfifo", base + ".1"], ["mkdir", base + ".2"],
                ["ln", "-s", base + ".9", base + ".3"], ["sh", "-c", "for n in 4 5 6 7 $(seq 100 400); do : > \(base).$n; done"],
            ]
            for plant in plants {
                let run = try runProcess(setpriv, nobody + plant)
                try #require(run.status == 0, "\(plant): \(run.errors)")
            }
            let hostname = try String(contentsOfFile: "/etc/hostname", encoding: .utf8)

            let (first, port) = try startCollector(["--dir", directory.path])
            defer { first.kill() }
            // Healthy once its first pass has run.
            #expect(try eventually { try httpGet(port: port, path: "/health").status == 200 })
            let second = try ChildProcess("ringside-collector", ["--dir", directory.path, "--listen", "127.0.0.1:0"])
            let exit = second.waitForExit()
            #expect(exit.status == 1 && exit.standardError.contains("collector pid \(first.pid) already collects this directory"))
            #expect(!exit.standardError.contains("listening on"), "it never served: \(exit.standardError)")

            // The lock is a file of root's (the collector's) at a name no one could guess.
            let ours = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { name in
                var info = stat()
                return name.hasPrefix("ringside-collector.lock") && lstat(directory.path + "/" + name, &info) == 0 && info.st_uid == 0
            }
            #expect(ours.count == 1 && ours[0].count > "ringside-collector.lock.".count + 8, "\(ours)")
            #expect(try String(contentsOfFile: "/etc/hostname", encoding: .utf8) == hostname, "nothing written through the link")
            var info = stat()
            #expect(lstat(base, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK, "left where it is")
        }
    }

    @Test("two collectors started at once, the first name planted: exactly one serves, ten times over")
    func twoAtOnceOneServes() throws {
        guard try requiredRoot("planting a file as user nobody (setpriv)"), let setpriv = try requiredSystemTool("setpriv") else { return }
        for _ in 0..<10 {
            try withRingDirectory { directory in
                try #require(chmod(directory.path, 0o1777) == 0)
                let plant = try runProcess(
                    setpriv, ["--reuid=65534", "--regid=65534", "--clear-groups", "mkfifo", directory.path + "/ringside-collector.lock"])
                try #require(plant.status == 0, "\(plant.errors)")
                let arguments = ["--dir", directory.path, "--listen", "127.0.0.1:0"]
                let pair = [try ChildProcess("ringside-collector", arguments), try ChildProcess("ringside-collector", arguments)]
                defer { pair.forEach { $0.kill() } }
                // Each says it listens, or exits refused.
                let served = pair.map { $0.waitForErrorLine(containing: "listening on http") != nil }
                #expect(served.filter { $0 }.count == 1, "\(served)")
            }
        }
    }
}
