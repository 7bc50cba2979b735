import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import Ringside
import RingsideTestSupport
import Testing

extension ReliabilityTests {
    @Suite("a full ring directory")
    struct FullDirectoryTests {
        /// A 1 MiB tmpfs mounted inside the test's ring directory (root only: without root the test
        /// says so and skips, and under `CI=true` it fails, so CI cannot pass by skipping).
        ///
        /// A ring larger than the directory fails to attach with `.noSpace` and leaves no file; then
        /// producer processes fill it with small rings until one gets `.noSpace` (an exit with
        /// status 2 and the message, never a signal), and each ring that got in holds every record
        /// written (its pages were reserved with `posix_fallocate` at attach: a write never finds a
        /// missing page); `ringside-emit` reports the full directory and leaves no file either.
        @Test("a full ring directory: attach fails with .noSpace and leaves no file; no process gets SIGBUS")
        func fullDirectory() throws {
            try withRingDirectory { directory in
                guard let small = try mountSmallTmpfs(in: directory.path) else { return }
                defer { umount2(small, Int32(MNT_DETACH)) }
                let smallDirectory = RingDirectory(small)

                // Larger than the whole directory.
                do throws(RingError) {
                    _ = try Ring.attach("big", directory: small)
                    Issue.record("a 4 MiB ring attached in a 1 MiB directory")
                } catch {
                    guard case let .noSpace(ring, path, _) = error else {
                        Issue.record("expected .noSpace, got \(error)")
                        return
                    }
                    #expect(ring == "big" && path == smallDirectory.filePath(for: "big"))
                    #expect("\(error)".contains("no space"))
                }
                #expect(smallDirectory.ringNames().isEmpty && access(smallDirectory.filePath(for: "big"), F_OK) != 0)

                // Fill it with rings of 1,024 records (164 KiB each), written in full by producer processes.
                var filled: [String] = []
                for index in 0..<12 {
                    let name = "small-\(index)"
                    let producer = try ChildProcess("ringside-test-producer", [
                        "sequence", "--dir", small, "--ring", name, "--count", "1024", "--capacity", "1024",
                    ])
                    let output = producer.readLine()
                    let exit = producer.waitForExit()
                    if exit.status == 0 {
                        #expect(output == "wrote 1024 dropped 0")
                        filled.append(name)
                        continue
                    }
                    #expect(exit.status == 2, "\(name): status \(exit.status) (\(SIGBUS) would be SIGBUS): \(exit.standardError)")
                    #expect(exit.standardError.contains("ring \(name): no space for"), "\(exit.standardError)")
                    #expect(access(smallDirectory.filePath(for: name), F_OK) != 0, "\(name) left a file behind")
                    break
                }
                #expect(filled.count == 6, "1 MiB holds six 164 KiB rings; got \(filled.count)")
                #expect(smallDirectory.ringNames() == filled.sorted())

                // Every record written into the full directory's rings is there.
                for name in filled {
                    let consumer = try RingConsumer(name, directory: smallDirectory)
                    var values: [UInt64] = []
                    try consumer.drain { records, _ in values += records.map(\.value) }
                    #expect(values == Array(0..<1024), "\(name): the records read back")
                }

                // The operator's tool says the same and leaves nothing behind.
                let emit = try ChildProcess("ringside-emit", ["--dir", small, "--ring", "emitted", "sizes", "--capacity", "4096", "42"])
                let exit = emit.waitForExit()
                #expect(exit.status != 0 && exit.status != SIGBUS)
                #expect(exit.standardError.contains("no space"), "ringside-emit: \(exit.standardError)")
                #expect(access(smallDirectory.filePath(for: "emitted"), F_OK) != 0)
            }
        }
    }
}

/// Mounts a 1 MiB tmpfs at `<parent>/small`; nil (after saying why) when this process may not.
/// Under `CI=true` not being able to is a failure, not a skip.
private func mountSmallTmpfs(in parent: String) throws -> String? {
    let path = parent + "/small"
    guard mkdir(path, 0o700) == 0 else { throw TestSupportError("mkdir \(path): \(String(cString: strerror(errno)))") }
    let problem: String
    if geteuid() != 0 {
        problem = "this test needs root to mount a small tmpfs (it runs as uid \(geteuid()))"
    } else if mount("tmpfs", path, "tmpfs", 0, "size=1m,mode=0700") != 0 {
        problem = "mount -t tmpfs -o size=1m failed: \(String(cString: strerror(errno)))"
    } else {
        return path
    }
    if ProcessInfo.processInfo.environment["CI"] != nil { throw TestSupportError(problem + "; CI must run it") }
    print("skipping the full-directory test: \(problem)")
    return nil
}
