import CRingside
import Foundation
import Ringside
@testable import RingsideCollector
import RingsideTestSupport
import Testing

@Suite("Passes cut short: a snapshot waits for a whole pass, unless they have been cut short a while (overloaded)")
struct OverloadedPublishTests {
    @Test(
        "passes cut short long after the last whole one publish nothing until they have been cut short a while of their own time, then publish while still cut short"
    )
    func cutShortForASecond() throws {
        try withBot("flood", options: .init(laneCapacity: 32_768)) { directory, bot in
            let fill = try bot.histogram("fill")
            let options = CollectorOptions(directory: directory)
            let collector = try Collector(options: options, log: CapturedLog().log)
            var now = rs_clock_precise_ns()
            for _ in 0..<1_000 where collector.snapshot.generation == 0 { collector.runPass(nowNanos: now) }
            let shown = collector.snapshot.generation
            try #require(shown > 0)

            // A ring not yet proven is drained 1,024 records a visit, and a pass that leaves it
            // records is cut short (deterministically: no time budget is involved), until 4,096
            // have proven it: four passes cut short, then a whole one.
            for value in 0..<20_000 { fill.record(UInt64(value + 1)) }
            now += 2_000_000_000  // two seconds after the last whole pass
            for _ in 0..<2 { collector.runPass(nowNanos: now) }
            #expect(collector.snapshot.generation == shown, "cut short for no time yet: no snapshot shows the ring half drained")

            // Passes cut short for `overloadedPublishNanos`: the drain is overloaded, and a snapshot
            // begins all the same.
            now += DrainTiming.overloadedPublishNanos
            let before = rs_clock_realtime_ns()
            collector.runPass(nowNanos: now)
            let after = rs_clock_realtime_ns()
            for _ in 0..<1_000 where collector.snapshot.generation == shown { collector.runPass(nowNanos: now) }
            let page = collector.snapshot
            #expect(page.generation > shown)
            #expect(
                (before...after).contains(page.generatedRealtimeNanos), "begun in the third pass cut short, not in the whole one after")

            // Every record drained by the whole passes after, and counted exactly.
            now += 1_000_000_000
            for _ in 0..<10 { collector.runPass(nowNanos: now) }
            collector.runPass(nowNanos: now + 1_000_000, forcePublish: true)
            #expect(collector.snapshot.series("fill", ring: "flood")?.cumulativeCount == 20_000)
        }
    }
}
