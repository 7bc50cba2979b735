import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

extension ReliabilityTests {
    @Suite("the collector killed with SIGKILL")
    struct CollectorKillTests {
        /// The real `ringside-collector` is SIGKILLed at a random point 20 times (0 to 500 ms after
        /// it starts, or after its first dump: some lives die before attaching, others mid-drain)
        /// and started again, while one producer writes 100,000 records a second into a
        /// 4,096-record ring, so drops happen while no collector runs.
        ///
        /// What "drained" means, exactly: a record is drained when the read cursor in the ring moves
        /// past it, and only the collector moves that cursor. So "drained over all the collector's
        /// lives" is the sum of each life's advance of the read cursor, read from the ring (without a
        /// lock) before the life starts and after it is dead; between lives nothing moves it. That
        /// gives the issue's equation by the ring's own counters, exactly:
        ///
        ///     producer attempts == written + dropped                     (the producer's own count)
        ///     written           == drained over all lives + still in ring
        ///
        /// "Nothing drained twice": the producer writes its cursor + 1 as each value, and each life
        /// dumps its `/latest` every 100 ms (`--json-dump`). Any dump of life i must show that life's
        /// records as exactly the values R_i + 1 ... R_i + count, with R_i the read cursor when it
        /// started, count == its `drained_total`, and R_i + count <= the cursor it left behind: it
        /// began at the stored cursor, skipped nothing, repeated nothing, and never exported a
        /// record whose slot it had not freed (so no record is exported by two lives). The read
        /// cursor never goes back. A last life, stopped with SIGTERM, drains the ring empty.
        @Test(
            "the collector SIGKILLed at 20 random points: written == drained over all lives + dropped + in ring, exactly; nothing drained twice"
        )
        func collectorKilledAtRandomPoints() throws {
            try withRingDirectory { directory in
                let producer = try startBlast(directory, ring: "steady", rate: 100_000, capacity: 4096)
                var advances: [UInt64] = []
                var exportedLives = 0
                func readCursor() throws -> UInt64 { try RingInspector("steady", directory: directory).status().readCursor }

                func life(_ index: Int, killAfterMicroseconds delay: UInt32?) throws {
                    let before = try readCursor()
                    let dump = directory.path + "/life-\(index).json"
                    let collector = try ChildProcess(
                        "ringside-collector",
                        [
                            "--dir", directory.path, "--ring", "steady", "--listen", "127.0.0.1:0", "--poll", "10ms",
                            "--windows", "1s,10m", "--json-dump", dump, "--dump-interval", "100ms",
                        ])
                    if let delay {
                        // Even lives die anywhere from their start; odd ones after their first dump, mid-run.
                        if index % 2 == 1 { _ = eventually { FileManager.default.fileExists(atPath: dump) ? true : nil } }
                        usleep(delay)
                        collector.kill()
                    } else {
                        // The last life: let it drain what is left, then stop it in order.
                        _ = eventually { () -> Bool? in
                            guard let status = try? RingInspector("steady", directory: directory).status() else { return nil }
                            return status.backlog == 0 ? true : nil
                        }
                        collector.send(SIGTERM)
                        #expect(collector.waitForExit().status == 0)
                    }
                    let after = try readCursor()
                    #expect(after >= before, "life \(index): the read cursor went back from \(before) to \(after)")
                    advances.append(after - before)
                    // What this life exported, if it lived to write a dump.
                    guard let document = readJSON(dump), let ring = ringEntry(document, "steady"),
                        let drained = uint(ring["drained_total"]), drained > 0
                    else { return }
                    exportedLives += 1
                    let window = try #require(windowEntry(document, metric: "blast", window: "10m"))
                    #expect(uint(window["count"]) == drained, "life \(index): series count and drained_total differ")
                    #expect(
                        uint(window["min"]) == before + 1,
                        "life \(index): began at value \(String(describing: window["min"])), the stored cursor was \(before)")
                    #expect(uint(window["max"]) == before + drained, "life \(index): values not contiguous")
                    #expect(before + drained <= after, "life \(index): exported \(drained) records past the cursor it freed")
                    // What this life showed of the lane agrees with itself: written == consumed + backlog.
                    for lane in ring["lanes"] as? [[String: Any]] ?? [] {
                        #expect(
                            uint(lane["records_total"])
                                == uint(lane["consumed_total"]).flatMap { consumed in
                                    uint(lane["backlog"]).map { consumed + $0 }
                                }, "life \(index): lane \(lane)")
                    }
                }

                for index in 0..<20 { try life(index, killAfterMicroseconds: UInt32.random(in: 0...500_000)) }
                let counts = try stopBlast(producer)
                try life(20, killAfterMicroseconds: nil)

                let ring = try RingInspector("steady", directory: directory).status()
                let drainedOverAllLives = advances.reduce(0, +)
                #expect(counts.attempts == counts.written + counts.dropped, "the producer's own count")
                #expect(ring.writeCursor == counts.written && ring.dropped == counts.dropped, "the ring's counters")
                #expect(ring.writeCursor == drainedOverAllLives + ring.backlog, "written == drained + still in ring")
                #expect(counts.attempts == drainedOverAllLives + ring.dropped + ring.backlog)
                #expect(ring.backlog == 0, "the last life drained the ring")
                // The same identities per lane (the producer's one lane), and the bot's figures its sums.
                #expect(ring.lanes.count == 1 && ring.unlanedDropped == 0)
                for lane in ring.lanes {
                    #expect(lane.writeCursor == lane.readCursor + lane.backlog, "lane \(lane.index): written == consumed + backlog")
                    #expect(lane.writeCursor + lane.dropped == counts.attempts, "lane \(lane.index): attempts == written + dropped")
                }
                #expect(
                    ring.writeCursor == ring.lanes.reduce(0) { $0 + $1.writeCursor }
                        && ring.readCursor == ring.lanes.reduce(0) { $0 + $1.readCursor }
                        && ring.dropped == ring.lanes.reduce(0) { $0 + $1.dropped })
                #expect(exportedLives >= 1, "no life lived long enough to dump")
                print(
                    "collector kills: 20 SIGKILLs and a SIGTERM; \(counts.attempts) attempts = \(drainedOverAllLives) drained "
                        + "+ \(ring.dropped) dropped + \(ring.backlog) in the ring; \(exportedLives) lives checked by their dumps")
            }
        }
    }
}
