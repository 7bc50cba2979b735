import CRingside
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
        /// A bot whose part before the lanes is larger than the directory fails to attach with
        /// `.noSpace` and leaves no file; a bot whose first lane does not fit fails the same way when
        /// a tool claims that lane at once. Then producer processes fill the directory with small rings
        /// until one gets `.noSpace` (an exit with status 2 and the message, never a signal), and each
        /// ring that got in holds every record written (its pages were reserved with
        /// `posix_fallocate`, the header part at attach and the lane when it was added: a write never
        /// finds a missing page); `ringside-emit` reports the full directory and leaves no file either.
        @Test("a full ring directory: attach fails with .noSpace and leaves no file; no process gets SIGBUS")
        func fullDirectory() throws {
            try withRingDirectory { directory in
                guard let small = try mountSmallTmpfs(in: directory.path) else { return }
                defer { umount2(small, Int32(MNT_DETACH)) }
                let smallDirectory = RingDirectory(small)

                // A registry of 4,096 entries (2 MiB) before any lane: larger than the whole directory.
                do throws(RingError) {
                    _ = try Bot.attach("big", directory: small, options: .init(maxMetrics: Int(RS_MAX_REGISTRY_CAPACITY)))
                    Issue.record("a bot of more than 2 MiB attached in a 1 MiB directory")
                } catch {
                    guard case let .noSpace(ring, path, bytes) = error else {
                        Issue.record("expected .noSpace, got \(error)")
                        return
                    }
                    #expect(ring == "big" && path == smallDirectory.filePath(for: "big"))
                    #expect("\(error)".contains("no space"))
                    // The size it needed: the part before the lanes.
                    let needed = Int(rs_geometry_of(RS_DEFAULT_LANE_CAPACITY_LOG2, RS_MAX_REGISTRY_CAPACITY).lanes_offset)
                    #expect(bytes == needed && !"\(error)".contains("(0 bytes)"), "\(error)")
                }
                #expect(smallDirectory.ringNames().isEmpty && access(smallDirectory.filePath(for: "big"), F_OK) != 0)

                // A bot of the default capacity: its header part fits, its 2 MiB lane does not. A tool
                // that claims its lane at once (ringside-emit) is told so, and the file goes.
                do throws(RingError) {
                    let wide = try Bot.attach("wide", directory: small)
                    _ = try wide.claimCurrentThreadLane()
                    Issue.record("a 2 MiB lane was added in a 1 MiB directory")
                } catch {
                    // Its header part fitted, its lane did not: .noSpace, with the lane's size.
                    guard case let .noSpace(_, _, bytes) = error else {
                        Issue.record("expected .noSpace, got \(error)")
                        return
                    }
                    #expect(bytes == Int(rs_geometry_of(RS_DEFAULT_LANE_CAPACITY_LOG2, RS_DEFAULT_REGISTRY_CAPACITY).lane_size), "\(error)")
                    #expect("\(error)".contains("No space left on device") || "\(error)".contains("no space"), "\(error)")
                }
                #expect(access(smallDirectory.filePath(for: "wide"), F_OK) != 0, "the failed claim left its file")
                try? smallDirectory.remove("wide")

                // Fill it with rings of 1,024 records (their header part and one lane), written in
                // full by producer processes.
                let layout = rs_geometry_of(10, RS_DEFAULT_REGISTRY_CAPACITY)
                let ringBytes = Int(layout.lanes_offset + layout.lane_size)
                let fitting = (1 << 20) / ringBytes
                var filled: [String] = []
                var refusal = ""
                for index in 0..<12 {
                    let name = "small-\(index)"
                    let producer = try ChildProcess(
                        testProducer: "sequence", ring: name, in: smallDirectory, ["--count", "1024", "--capacity", "1024"])
                    let output = producer.readLine()
                    let exit = producer.waitForExit()
                    if exit.status == 0 {
                        #expect(output == "wrote 1024 dropped 0")
                        filled.append(name)
                        continue
                    }
                    #expect(exit.status == 2, "\(name): status \(exit.status) (\(SIGBUS) would be SIGBUS): \(exit.standardError)")
                    refusal = exit.standardError
                    // Whether the last ring's header part fitted and its lane did not, or nothing
                    // fitted: the same .noSpace, and no file left behind.
                    #expect(exit.standardError.contains("ring \(name): no space for"), "\(exit.standardError)")
                    #expect(access(smallDirectory.filePath(for: name), F_OK) != 0, "\(name) left a file behind")
                    break
                }
                #expect(!refusal.isEmpty, "the directory never filled up")
                #expect(filled.count == fitting, "1 MiB holds \(fitting) rings of \(ringBytes) bytes; got \(filled.count)")
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
                #expect(exit.standardError.lowercased().contains("no space"), "ringside-emit: \(exit.standardError)")
                #expect(access(smallDirectory.filePath(for: "emitted"), F_OK) != 0)
            }
        }

        /// A bot whose header part fits but whose lane does not: the thread that records gets no
        /// lane. It must not get SIGBUS: its counter increments are kept exactly (the metric cell's
        /// `unlaned`), its histogram records are counted as dropped, the process says why once on
        /// stderr, and a reader sees all of it.
        /// A tmpfs with room for bytes but for no more files (4 inodes: the root and three files):
        /// the attach that cannot create its file says so (inodes, `df -i`), not "no space ...
        /// attach with a smaller capacity", which would send the operator the wrong way.
        @Test("a directory out of inodes: attach says the file cannot be created, and why")
        func outOfInodes() throws {
            try withRingDirectory { directory in
                guard let small = try mountSmallTmpfs(in: directory.path, options: "size=8m,nr_inodes=4") else { return }
                defer { umount2(small, Int32(MNT_DETACH)) }
                var made = 0
                while made < 8, open(small + "/filler\(made)", O_CREAT | O_WRONLY | O_CLOEXEC, 0o600) >= 0 { made += 1 }
                #expect(errno == ENOSPC && made < 8, "the tmpfs ran out of inodes")
                do throws(RingError) {
                    _ = try Bot.attach("late", directory: small)
                    Issue.record("a bot attached in a directory without inodes")
                } catch {
                    guard case let .noSpace(ring, _, bytes) = error else {
                        Issue.record("expected .noSpace, got \(error)")
                        return
                    }
                    #expect(ring == "late" && bytes == 0)
                    #expect(
                        "\(error)".contains("no free inodes") && "\(error)".contains("df -i")
                            && !"\(error)".contains("smaller capacity"), "\(error)")
                }
            }
        }

        @Test("a lane that cannot be added (directory full): counters stay exact, records counted as dropped, no SIGBUS")
        func laneCannotBeAdded() throws {
            try withRingDirectory { directory in
                guard let small = try mountSmallTmpfs(in: directory.path) else { return }
                defer { umount2(small, Int32(MNT_DETACH)) }
                let threads = 2, count = 1_000
                // Lanes of 65,536 records: 2 MiB each, in a 1 MiB directory; the header part is 140 KiB.
                let producer = try ChildProcess(
                    testProducer: "threads", ring: "laneless", in: RingDirectory(small),
                    ["--threads", "\(threads)", "--count", "\(count)", "--capacity", "65536"])
                let line = producer.readLine()
                let exit = producer.waitForExit()
                #expect(exit.status == 0, "status \(exit.status) (\(SIGBUS) would be SIGBUS): \(exit.standardError)")
                #expect(line == "lanes 0 written 0 dropped \(threads * count)", "\(line ?? "no output")")
                #expect(exit.standardError.contains("no space for lane 0"), "\(exit.standardError)")
                #expect(exit.standardError.components(separatedBy: "no space for lane").count == 2, "said once: \(exit.standardError)")

                let inspector = try RingInspector("laneless", directory: RingDirectory(small))
                let status = try inspector.status()
                #expect(status.lanes.isEmpty && status.writeCursor == 0)
                #expect(status.dropped == UInt64(threads * count) && status.unlanedDropped == UInt64(threads * count))
                let metrics = try inspector.metrics()
                let values = try #require(metrics.first { $0.name == "thread_values" })
                let increments = try #require(metrics.first { $0.name == "thread_increments" })
                #expect(try inspector.cells(of: increments).total == UInt64(threads * count), "every increment, exactly")
                #expect(try inspector.cells(of: values).dropped == UInt64(threads * count))
                // The file holds the header part only: no lane was half added, nothing can fault later.
                let attributes = try FileManager.default.attributesOfItem(atPath: RingDirectory(small).filePath(for: "laneless"))
                #expect(attributes[.size] as? Int == Int(rs_geometry_of(16, RS_DEFAULT_REGISTRY_CAPACITY).lanes_offset))
            }
        }
    }
}

/// Mounts a 1 MiB tmpfs at `<parent>/small`; nil (after saying why) when this process may not.
/// Under `CI=true` not being able to is a failure, not a skip.
private func mountSmallTmpfs(in parent: String, options: String = "size=1m") throws -> String? {
    let path = parent + "/small"
    guard mkdir(path, 0o700) == 0 else { throw TestSupportError("mkdir \(path): \(String(cString: strerror(errno)))") }
    let problem: String
    if geteuid() != 0 {
        problem = "this test needs root to mount a small tmpfs (it runs as uid \(geteuid()))"
    } else if mount("tmpfs", path, "tmpfs", 0, options + ",mode=0700") != 0 {
        problem = "mount -t tmpfs -o \(options) failed: \(String(cString: strerror(errno)))"
    } else {
        return path
    }
    if ProcessInfo.processInfo.environment["CI"] != nil { throw TestSupportError(problem + "; CI must run it") }
    print("skipping the full-directory test: \(problem)")
    return nil
}
