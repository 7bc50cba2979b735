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

    /// A doorbell settled by a look that found its lanes unmoved stays set across the drain's wakes:
    /// looks pass its lanes over while the word holds the 1, and a record (which takes the 1),
    /// another writer's clear, or the drain's own unsettling has them looked at again.
    @Test("a settled doorbell's lanes are passed over while it holds; a record, a planted clear, or unsettling brings them back")
    func settledDoorbells() throws {
        try withRingDirectory { directory in
            let bots = try ["quiet", "busy"].map { try Bot.attach($0, directory: directory.path) }
            let values = try bots.map { try $0.histogram("latency") }
            for histogram in values { histogram.record(1) }
            let (quietValues, busyValues) = (values[0], values[1])
            let consumers = try bots.map { try RingConsumer($0.name, directory: directory) }
            for consumer in consumers {
                consumer.lookForNewLanes()
                try consumer.drain { _, _ in }
            }
            let watch = LaneWatch()
            watch.watch(consumers)
            #expect(look(watch, 2).moved == [false, false], "drained before the watch")
            #expect(watch.armDoorbells([0, 1]) == 2 && consumers.allSatisfy(\.doorbellIsSet))
            #expect(!watch.anyMoved())
            watch.settleDoorbells()
            // Settled: set again without a store, and the addresses the waiters take stay.
            #expect(watch.armDoorbells([0, 1]) == 0 && watch.armedDoorbellAddresses == consumers.map(\.doorbellAddress))
            busyValues.record(2)  // takes the busy bot's 1: it rang
            #expect(!consumers[1].doorbellIsSet && consumers[0].doorbellIsSet)
            #expect(look(watch, 2).moved == [false, true], "the rung doorbell's lane is looked at")
            #expect(watch.armDoorbells([0, 1]) == 1, "set anew: the rung one only")
            #expect(!watch.anyMoved())
            watch.settleDoorbells()
            // Another writer clears the quiet bot's word without a record: looked at, found unmoved.
            consumers[0].disarmDoorbell()
            #expect(look(watch, 2).moved == [false, false])
            #expect(watch.armDoorbells([0, 1]) == 1)
            watch.settleDoorbells()
            // A planted 1 after a record hides the lane while it holds; unsettling brings it back.
            quietValues.record(3)
            consumers[0].armDoorbell()
            #expect(look(watch, 2).moved == [false, false], "hidden while the 1 holds")
            watch.unsettleDoorbells()
            #expect(watch.anyMoved() && look(watch, 2).moved == [true, false])
            // Not wanted any more, or not watched any more: cleared.
            #expect(watch.armDoorbells([1]) == 1 && !consumers[0].doorbellIsSet && consumers[1].doorbellIsSet)
            watch.settleDoorbells()
            watch.watch(consumers.reversed())
            #expect(consumers[1].doorbellIsSet && watch.armDoorbells([0]) == 0, "a rebuilt watch keeps a consumer's doorbell")
            watch.watch([consumers[0]])
            #expect(!consumers[1].doorbellIsSet && watch.armedDoorbellAddresses.isEmpty, "one left out of the watch is cleared")
        }
    }
}
