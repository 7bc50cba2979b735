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

    /// A bot's file is taken up before any thread of it records; its first lane comes later (a
    /// thread's first record, after a warm-up): the watch moves its consumer, which then has work
    /// and maps the lane as it drains. Before, only a look at the producer found it (every 30 s
    /// for a quiet ring, when inotify's event for the lane was missed).
    @Test("a lane added after the watch was built moves its consumer, which then maps and drains it")
    func laneAddedLater() throws {
        try withRingDirectory { directory in
            let bot = try Bot.attach("late", directory: directory.path)
            let latency = try bot.histogram("latency")
            let consumer = try RingConsumer("late", directory: directory)
            let watch = LaneWatch()
            watch.watch([consumer])
            var moved = [false]
            watch.markLanesAdded(&moved)
            #expect(moved == [false] && consumer.laneCount == 0 && !consumer.hasWork, "no lane, nothing to drain")
            latency.record(7)  // the first record takes the bot's first lane
            #expect(look(watch, 1).moved == [false], "a lane the watch does not hold moves no cursor it looks at")
            #expect(!consumer.hasWork, "nor does a consumer look at its file's header for it")
            watch.markLanesAdded(&moved)
            #expect(moved == [true])
            #expect(consumer.hasWork, "the lane the watch saw added is mapped by the next drain")
            var values: [UInt64] = []
            #expect(try consumer.drain { records, _, _ in values += records.map(\.value) } == 1)
            #expect(values == [7] && consumer.laneCount == 1)
            watch.watch([consumer])
            moved = [false]
            watch.markLanesAdded(&moved)
            #expect(moved == [false] && look(watch, 1).moved == [false], "rebuilt with the lane: nothing new")
        }
    }
}
