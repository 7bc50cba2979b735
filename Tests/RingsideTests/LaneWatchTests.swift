import CRingside
import Foundation
@testable import Ringside
import RingsideTestSupport
import Testing

@Suite("LaneWatch: every lane's write cursor and counter increments, in one loop")
struct LaneWatchTests {
    /// `markMoved` of `watch` over consumers as many as `count`: (moved, counted).
    private func look(_ watch: LaneWatch, _ count: Int) -> (moved: [Bool], counted: [Bool]) {
        var moved = [Bool](repeating: false, count: count), counted = moved
        watch.markMoved(&moved, counted: &counted)
        return (moved, counted)
    }

    @Test("a record moves its bot's lane, a counter's increment counts it; a rebuilt watch keeps what it had seen")
    func recordsAndIncrements() throws {
        try withRingDirectory { directory in
            let recording = try Bot.attach("recording", directory: directory.path)
            let counting = try Bot.attach("counting", directory: directory.path)
            let latency = try recording.histogram("latency"), orders = try counting.counter("orders")
            latency.record(1)
            orders.increment()
            let consumers = [try RingConsumer("recording", directory: directory), try RingConsumer("counting", directory: directory)]
            let watch = LaneWatch()
            watch.watch(consumers)
            // New to the watch: the record not drained moves its lane; the increment counts.
            #expect(look(watch, 2) == ([true, false], [false, true]))
            #expect(look(watch, 2) == ([false, false], [false, false]), "nothing since")
            orders.increment(by: 5)
            #expect(look(watch, 2) == ([false, false], [false, true]), "a counter writes no record, and is seen")
            // An increment between the last look and a rebuild still counts; one seen before does not.
            orders.increment()
            watch.watch(consumers)
            #expect(look(watch, 2).counted == [false, true])
            watch.watch(consumers.reversed())
            #expect(look(watch, 2).counted == [false, false], "the rebuilt watch knows each consumer's lanes by consumer")
        }
    }
}
