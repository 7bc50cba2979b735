import CRingside
import Dispatch
import Foundation
@testable import Ringside
import RingsideTestSupport
import Testing

// A Timing holds the C bot's address but no reference to the bot (so a span counts no
// reference); these tests stop timings whose bot has gone.
@Suite("Timing: a span does not keep its bot attached")
struct TimingLifetimeTests {
    /// Attaches `name` again once its last attachment has let go of its lock. Tried for a while:
    /// a child another test spawns at that moment shares the lock's open file until its exec
    /// closes it (O_CLOEXEC), which a loaded machine can make last; a bot never detached stays
    /// refused, and the attach's error is thrown.
    static func attachAgain(_ name: String, _ directory: RingDirectory) throws -> Bot {
        let attach = { try Bot.attach(name, directory: directory.path, options: .init(laneCapacity: 16)) }
        if let bot = eventually(seconds: 20, { try? attach() }) { return bot }
        return try attach()
    }

    @Test("a span stopped after its bot detached records nothing, and nothing into the bot attached after it")
    func stopAfterDetach() throws {
        try withRingDirectory { directory in
            let stale: Bot.Histogram.Timing
            do {
                let bot = try Bot.attach("detached", directory: directory.path, options: .init(laneCapacity: 16))
                let latency = try bot.histogram("latency", unit: .nanoseconds)
                latency.startTiming().stop()
                stale = latency.startTiming()
            }
            // The bot's last reference went with the scope: attaching it again in this process
            // succeeds only once it has detached (its lock is gone).
            let again = try Self.attachAgain("detached", directory)
            let next = try Bot.attach("next", directory: directory.path, options: .init(laneCapacity: 16))
            let latency = try next.histogram("latency", unit: .nanoseconds)
            latency.record(7)
            stale.stop()  // reads the kept memory of a detached bot, or the bot now in its slot
            stale.stop()
            #expect(try drainAll(RingConsumer("detached", directory: directory)).count == 1)
            #expect(try drainAll(RingConsumer("next", directory: directory)).map(\.record.value) == [7])
            withExtendedLifetime(again) {}
        }
    }

    @Test("a thread that recorded while the bot was attached records nothing through a span stopped after it detached")
    func stopOnALivingThreadAfterDetach() throws {
        try withRingDirectory { directory in
            let recorded = DispatchSemaphore(value: 0), detached = DispatchSemaphore(value: 0)
            let finished = DispatchSemaphore(value: 0)
            do {
                let bot = try Bot.attach("threads", directory: directory.path, options: .init(laneCapacity: 16))
                let timing = try bot.histogram("latency", unit: .nanoseconds).startTiming()
                // The thread keeps its lane entry for the bot while it lives; it holds only the timing.
                let thread = Thread {
                    timing.stop()
                    recorded.signal()
                    detached.wait()
                    timing.stop()
                    finished.signal()
                }
                thread.start()
                recorded.wait()
            }
            // Attaching it again succeeds only once it has detached (its lock is gone); the new
            // attachment most likely takes the same slot, which the stale span must not write.
            let again = try Self.attachAgain("threads", directory)
            detached.signal()
            finished.wait()
            #expect(try drainAll(RingConsumer("threads", directory: directory)).count == 1)
            withExtendedLifetime(again) {}
        }
    }
}
