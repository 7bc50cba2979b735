import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideCollector
import RingsideSnapshot
import RingsideTestSupport
import Testing

extension ReliabilityTests {
    @Suite("producers killed with SIGKILL")
    struct ProducerKillTests {
        /// Twenty producer processes in turn write one ring at 200,000 records a second, each
        /// SIGKILLed after a random 0 to 300 ms (so some die while starting or attaching, most
        /// mid-stream), while a collector drains it on its own thread.
        ///
        /// Every record carries its cursor + 1 as its value, so over all lives the values must be
        /// exactly 1...N with N the ring's write cursor. After each death the collector must
        /// report the producer dead (polled up to 10 s: the close of its file wakes the collector at
        /// once, and without that event an active ring is asked only each second, an idle one every
        /// 30 s; the delays seen are printed, not judged: under a loaded CI a second is not a
        /// promise a test can keep), drain the ring to
        /// its write cursor, and still serve the series; the next process re-attaches the same
        /// name and carries on from the cursor. At the end, the series holds exactly N records,
        /// min 1, max N and sum N(N+1)/2 (an exact 128-bit sum), none rejected: every published
        /// record was aggregated once and no torn one (a wrong sequence, metric or kind) got in.
        @Test(
            "a producer SIGKILLed at 20 random points: each published record drained once, none torn; death seen; a new process carries on"
        )
        func producerKilledAtRandomPoints() throws {
            try withRingDirectory { directory in
                let captured = CapturedLog()
                // The long window spans the whole test.
                let collector = try makeCollector(
                    directory, windows: [1_000_000_000, 600_000_000_000], pollNanos: 10_000_000, captured: captured)
                collector.start()
                defer { collector.stop() }

                var published: UInt64 = 0
                var deathDelays: [Double] = []
                for life in 0..<20 {
                    let producer = try ChildProcess(
                        testProducer: "blast", ring: "victim", in: directory, ["--seconds", "60", "--rate", "200000", "--capacity", "4096"])
                    let delay = UInt32.random(in: 0...300_000)
                    usleep(delay)
                    producer.kill()
                    let killed = Date()
                    // The ring's own count of what was published, read without a lock.
                    guard let status = try? RingInspector("victim", directory: directory).status() else {
                        continue  // killed before the ring existed: nothing published
                    }
                    #expect(status.writeCursor >= published, "life \(life): the write cursor went back")
                    published = status.writeCursor
                    // Each life takes over the one lane (retired at attach): never a second lane, and
                    // the lane's figures are the bot's.
                    #expect(status.lanes.count <= 1, "life \(life): \(status.lanes.count) lanes")
                    if let lane = status.lanes.first {
                        #expect(
                            lane.writeCursor == status.writeCursor && lane.dropped == status.dropped
                                && lane.writeCursor == lane.readCursor + lane.backlog, "life \(life): lane 0's figures")
                        #expect(lane.claims <= status.producerAttaches, "life \(life): more claims than attaches")
                    }
                    if status.producerPID == producer.pid {
                        // It attached: the collector must say it died.
                        let reported = eventually(seconds: 10) { () -> Bool? in
                            let ring = collector.snapshot.ring("victim")
                            return ring?.state == .producerDead && ring?.producerPID == producer.pid ? true : nil
                        }
                        #expect(reported == true, "life \(life): producer \(producer.pid) not reported dead within 10 s")
                        deathDelays.append(Date().timeIntervalSince(killed))
                    }
                    // Everything it published is drained and still served.
                    let drained = eventually { () -> Bool? in
                        let snapshot = collector.snapshot
                        guard let ring = snapshot.ring("victim"), ring.drainedTotal == published, ring.backlog == 0 else { return nil }
                        return published == 0 || snapshot.series("blast")?.cumulativeCount == published ? true : nil
                    }
                    #expect(drained == true, "life \(life) (killed after \(delay / 1000) ms): not drained to \(published)")
                }

                // The last process lives its life out and says what it did.
                let survivor = try startBlast(directory, ring: "victim", rate: 200_000)
                usleep(200_000)
                let counts = try stopBlast(survivor)
                let total = try RingInspector("victim", directory: directory).status()
                #expect(total.writeCursor == published + counts.written, "the new process carried on from the cursor")
                #expect(counts.attempts == counts.written + counts.dropped)
                // Per lane and summed: one lane, whose cursors and drops are the bot's.
                #expect(
                    total.lanes.count == 1 && total.lanes[0].writeCursor == total.writeCursor
                        && total.lanes[0].dropped == total.dropped && total.unlanedDropped == 0)
                let drained = eventually { () -> Snapshot? in
                    let snapshot = collector.snapshot
                    return snapshot.ring("victim")?.drainedTotal == total.writeCursor ? snapshot : nil
                }
                let snapshot = try #require(drained, "the collector did not drain \(total.writeCursor) records")
                let ring = try #require(snapshot.ring("victim"))
                let series = try #require(snapshot.series("blast"))
                let whole = try #require(series.windows.last)
                let n = total.writeCursor
                #expect(ring.rejectedTotal == 0, "no torn or invalid record was rejected")
                #expect(series.cumulativeCount == n && whole.count == n)
                #expect(
                    whole.min == 1 && whole.max == Int128(n),
                    "values 1...\(n): min \(String(describing: whole.min)), max \(String(describing: whole.max))")
                #expect(series.cumulativeSum == Double(n) * Double(n + 1) / 2, "each value exactly once")
                // A producer killed before a pass saw it alive is reported dead without a log line;
                // the survivor's exit is one more.
                let deathLines = captured.all.filter { $0.contains("ring victim: producer pid") && $0.contains("died") }.count
                #expect(deathLines >= 1 && deathLines <= deathDelays.count + 1)
                print(
                    "producer kills: 20 SIGKILLs, \(deathDelays.count) after attaching; \(n) records published, "
                        + "all drained once; death reported after at most \(Int((deathDelays.max() ?? 0) * 1000)) ms")
            }
        }
    }
}

extension Snapshot {
    func ring(_ name: String) -> RingSnapshot? { rings.first { $0.name == name } }
    func series(_ metric: String) -> SeriesSnapshot? { series.first { $0.metric.name == metric } }
}
