import Ringside
import RingsideTestSupport
import Testing

/// The producer-side doorbell hooks `ringside-bench wake` uses: whether the consumer's word is set,
/// and saying the process does not ring (DOORBELL in ringside.h).
@Suite("A bot's doorbell hooks")
struct BotDoorbellHooksTests {
    @Test("a bot sees its doorbell set while the consumer has it armed, and clear once it is rung or disarmed")
    func seesTheWord() throws {
        try withBot("hooks", options: .init(laneCapacity: 64)) { directory, bot in
            let values = try bot.histogram("values")
            values.record(1)
            let consumer = try RingConsumer("hooks", directory: directory)
            #expect(!bot.doorbellIsSet)
            consumer.armDoorbell()
            #expect(bot.doorbellIsSet)
            values.record(2)  // rings: clears the word
            #expect(!bot.doorbellIsSet && !consumer.doorbellIsSet)
            consumer.armDoorbell()
            consumer.disarmDoorbell()
            #expect(!bot.doorbellIsSet)
        }
    }

    @Test("a bot that says it does not ring stores 0 in rings_doorbell, which the consumer reads")
    func saysItDoesNotRing() throws {
        try withBot("quiet", options: .init(laneCapacity: 64)) { directory, bot in
            _ = try bot.histogram("values")
            let consumer = try RingConsumer("quiet", directory: directory)
            #expect(consumer.ringsDoorbell, "a C producer registers for the barrier and says it rings")
            bot.sayDoesNotRing()
            #expect(!consumer.ringsDoorbell)
        }
    }
}
