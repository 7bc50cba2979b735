import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import Ringside
import RingsideCollector
import RingsideSnapshot
import RingsideTestSupport
import Testing

extension ReliabilityTests {
    /// Ring files truncated or removed under the processes that have them mapped. A truncated
    /// shared mapping raises SIGBUS on its next access past the new end; the SIGBUS guard
    /// (`ringside.h`) turns that into zero pages and a `.truncated` error.
    @Suite("files truncated or removed under their readers and writers")
    struct TruncationTests {
        private func isTruncated(_ error: any Error, expected: Int) -> Bool {
            guard case let .corrupt(_, _, .truncated(fileSize: _, expected: layoutSize))? = error as? RingError else { return false }
            return layoutSize == expected
        }

        /// Cut to nothing, or to 8 KiB (the header page survives, the registry, cells and lane
        /// do not), with the consumer at the start of its lane or partway through it.
        @Test(
            "a consumer and an inspector of a file truncated under them get .truncated, not SIGBUS",
            arguments: [0, 8192], [0, 100])
        func truncatedUnderReaders(size: Int, drainedFirst: Int) throws {
            try withRingDirectory { directory in
                let producer = try ChildProcess(
                    testProducer: "sequence", ring: "cut", in: directory, ["--count", "500", "--capacity", "1024"])
                #expect(producer.readLine() == "wrote 500 dropped 0")
                let consumer = try RingConsumer("cut", directory: directory)
                let inspector = try RingInspector("cut", directory: directory)
                let fileSize = try inspector.status().fileSize
                #expect(try consumer.drain(limitPerLane: drainedFirst) { _, _, _ in } == drainedFirst)
                let faultsBefore = rs_guard_faults_absorbed()
                // Touch the records' pages first, so that the truncation takes pages we had mapped.
                #expect(try inspector.peek().count == 500 - drainedFirst)
                try truncateFile(directory.filePath(for: "cut"), to: size)

                if drainedFirst == 0 {
                    // The lane's cursors now read as zeros, and zero is where this consumer stands:
                    // drain has nothing to hand over, and says why all the same.
                    #expect(throws: RingError.self) { try consumer.drain { _, _, _ in Issue.record("records handed over") } }
                } else {
                    #expect(throws: RingError.self) { try consumer.drain { _, _, _ in Issue.record("records handed over") } }
                    do { try consumer.drain { _, _, _ in } } catch { #expect(isTruncated(error, expected: fileSize), "\(error)") }
                }
                do {
                    _ = try inspector.peek()
                    Issue.record("peek of a truncated ring succeeded")
                } catch {
                    #expect(isTruncated(error, expected: fileSize), "\(error)")
                    #expect("\(error)".contains("ring cut: ") && "\(error)".contains("truncated"))
                }
                // Once a page was lost, every reader's answer is .truncated, including the header's.
                do {
                    _ = try inspector.status()
                    Issue.record("status of a truncated ring succeeded")
                } catch {
                    #expect(isTruncated(error, expected: fileSize), "\(error)")
                }
                // The consumer's status says so too (it reads the lane's cursors, which faulted).
                do {
                    _ = try consumer.status()
                    Issue.record("the consumer's status of a truncated ring succeeded")
                } catch {
                    #expect(isTruncated(error, expected: fileSize), "\(error)")
                }
                #expect(rs_guard_faults_absorbed() > faultsBefore, "the guard absorbed the faults")
            }
        }

        @Test("a producer whose file is truncated under it keeps running: no SIGBUS, its records go nowhere")
        func truncatedUnderProducer() throws {
            try withRingDirectory { directory in
                let producer = try startBlast(directory, ring: "bot", rate: 100_000, capacity: 1024)
                usleep(50_000)
                try truncateFile(directory.filePath(for: "bot"), to: 0)
                usleep(100_000)
                let counts = try stopBlast(producer)  // exit status 0: it was not killed by SIGBUS
                // Its counters went with the file's pages: only its survival and the guard's count are checked.
                #expect(counts.faults > 0, "the producer's guard absorbed the faults")
            }
        }

        /// The collector drains a live ring whose file is then truncated: it logs
        /// "ring doomed: ... truncated", detaches it, and goes on draining its neighbour. Another
        /// ring's file is removed: the collector detaches that one too. Neither producer dies.
        @Test("a ring truncated or removed under a running collector is detached with a clear log line; no crash")
        func truncatedAndRemovedUnderCollector() throws {
            try withRingDirectory { directory in
                let captured = CapturedLog()
                let collector = try makeCollector(directory, pollNanos: 10_000_000, captured: captured)
                let doomed = try startBlast(directory, ring: "doomed", rate: 50_000, capacity: 1024)
                let removed = try startBlast(directory, ring: "removed", rate: 50_000, capacity: 1024)
                let bystander = try startBlast(directory, ring: "bystander", rate: 50_000, capacity: 1024)
                collector.start()
                defer { collector.stop() }
                let attached = eventually { () -> Bool? in
                    let rings = collector.snapshot.rings.filter { $0.state == .live && $0.drainedTotal > 0 }
                    return rings.count == 3 ? true : nil
                }
                try #require(attached == true, "the collector did not drain all three rings: \(captured.all)")

                try truncateFile(directory.filePath(for: "doomed"), to: 0)
                try directory.remove("removed")
                let logged = eventually { () -> Bool? in
                    captured.contains("ring doomed: ", "truncated") && captured.contains("ring removed detached: its file was removed")
                        ? true : nil
                }
                #expect(logged == true, "log: \(captured.all)")
                let skipped = eventually { () -> RingSnapshot? in
                    collector.snapshot.ring("doomed").flatMap { $0.state == .skipped ? $0 : nil }
                }
                #expect(skipped?.problem?.contains("truncated") == true)
                #expect(eventually { collector.snapshot.ring("removed") == nil ? true : nil } == true)

                // The neighbour is still drained.
                let before = collector.snapshot.ring("bystander")?.drainedTotal ?? 0
                let after = eventually { () -> UInt64? in
                    let now = collector.snapshot.ring("bystander")?.drainedTotal ?? 0
                    return now > before ? now : nil
                }
                #expect(after != nil, "the bystander ring is no longer drained")
                let doomedCounts = try stopBlast(doomed)
                #expect(doomedCounts.faults > 0)
                #expect(try stopBlast(removed).faults == 0, "a removed file keeps its pages: nothing to absorb")
                let bystanderCounts = try stopBlast(bystander)
                let drained = eventually { () -> Bool? in
                    collector.snapshot.ring("bystander")?.drainedTotal == bystanderCounts.written ? true : nil
                }
                #expect(drained == true, "the bystander's records were all drained")
            }
        }

        /// `ringside-dump watch` reads the ring every 100 ms while the file is cut to 8 KiB and
        /// then removed; it keeps going, shows the problem, and exits normally.
        @Test("ringside-dump watching a ring that is truncated, then removed, reports it and keeps running")
        func truncatedUnderDump() throws {
            try withRingDirectory { directory in
                let producer = try startBlast(directory, ring: "watched", rate: 50_000, capacity: 1024)
                let watch = try ChildProcess(
                    "ringside-dump",
                    [
                        "watch", "watched", "--dir", directory.path, "--interval", "100ms", "--count", "12",
                    ])
                usleep(300_000)
                try truncateFile(directory.filePath(for: "watched"), to: 8192)
                usleep(400_000)
                try directory.remove("watched")
                var output = ""
                while let line = watch.readLine() { output += line + "\n" }
                let exit = watch.waitForExit()
                #expect(exit.status == 0, "watch ended with \(exit.status): \(exit.standardError)")
                #expect(output.contains("truncated"), "watch output: \(output)")
                _ = try stopBlast(producer)

                // A one-shot look at a truncated file says what is wrong, too.
                let cut = try startBlast(directory, ring: "cut", rate: 50_000, capacity: 1024)
                try truncateFile(directory.filePath(for: "cut"), to: 8192)
                let check = try ChildProcess("ringside-dump", ["check", "cut", "--dir", directory.path])
                var checked = ""
                while let line = check.readLine() { checked += line + "\n" }
                let checkExit = check.waitForExit()
                #expect(
                    checkExit.status == 1 && (checked + checkExit.standardError).contains("truncated"),
                    "check: \(checked) \(checkExit.standardError)")
                _ = try stopBlast(cut)
            }
        }
    }
}
