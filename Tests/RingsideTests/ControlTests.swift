import CRingside
import Foundation
@testable import Ringside
import RingsideTestSupport
import Testing

/// Issue 41, part 3: the operator's switches (CONTROL in ringside.h), written by the real
/// `ringside-dump control` while threads record, read back by a consumer that reads gather cells
/// as the collector does (`ExactDrain`).
@Suite("CONTROL: a running bot's metrics switched off, on and sampled by ringside-dump control")
struct ControlTests {
    /// Runs `body` on `threads` threads at once (each its own lane) and waits for them all.
    static func onThreads(_ threads: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let group = DispatchGroup()
        for index in 0..<threads {
            group.enter()
            Thread {
                body(index)
                group.leave()
            }.start()
        }
        group.wait()
    }

    /// Records written in every lane of `bot` so far.
    static func written(_ bot: String, in directory: RingDirectory) throws -> UInt64 {
        try RingInspector(bot, directory: directory).status().lanes.reduce(0) { $0 + $1.writeCursor }
    }

    static func control(_ directory: RingDirectory, _ arguments: [String]) throws {
        let run = try runProcess("ringside-dump", ["--dir", directory.path, "control"] + arguments)
        try #require(run.status == 0, "ringside-dump control \(arguments): \(run.errors)")
    }

    @Test(
        "sampling switched from 1 to 100 (1 in 128) and back while 4 threads record: every call counted, summed and its largest kept, switched at the next call"
    )
    func samplingSwitchedWhileRecording() throws {
        try withBot("ctl", options: .init(laneCapacity: 1 << 17)) { directory, bot in
            let fill = try bot.histogram("fill_ns", unit: .nanoseconds)
            let drain = ExactDrain(try RingConsumer("ctl", directory: directory, readsWeights: true))
            let threads = 4, perPhase = 10_000
            // Phase p's values: p * 1,000,000 + the thread * 100,000 + the call: every value known.
            func phase(_ p: Int) {
                Self.onThreads(threads) { thread in
                    for call in 1...perPhase { fill.record(UInt64(p * 1_000_000 + thread * 100_000 + call)) }
                }
            }
            phase(1)
            let afterFirst = try Self.written("ctl", in: directory)
            #expect(afterFirst == UInt64(threads * perPhase))
            try Self.control(directory, ["ctl", "--metric", "fill_ns", "--sample-every", "100"])
            phase(2)
            let afterSecond = try Self.written("ctl", in: directory)
            // 1 in 128 from each thread's first call after the switch: 10,000 calls write 78 records.
            #expect(
                afterSecond - afterFirst == UInt64(threads * (perPhase / 128)), "\(afterSecond - afterFirst) records written while sampled")
            try Self.control(directory, ["ctl", "--metric", "fill_ns", "--on"])
            phase(3)
            #expect(try Self.written("ctl", in: directory) - afterSecond == UInt64(threads * perPhase), "every call written again")
            try drain.drain()
            let histogram = drain.histogram(0)
            let calls = 3 * threads * perPhase
            #expect(histogram.count == UInt64(calls), "every call counted: records and gathered calls")
            var sum: UInt128 = 0
            for p in 1...3 {
                for thread in 0..<threads {
                    for call in 1...perPhase { sum += UInt128(p * 1_000_000 + thread * 100_000 + call) }
                }
            }
            #expect(histogram.exactSum == sum && histogram.max == UInt64(3_000_000 + 300_000 + perPhase))
            #expect(drain.gathered[0] == UInt64(threads * (perPhase - perPhase / 128)))
            #expect(drain.weightedRecords(metric: 0) == threads * (perPhase / 128), "each sampled record stands for 127 calls")
        }
    }

    @Test("a metric off, the bot off: nothing recorded or counted, then recorded again; a worker file takes the bot file's switches")
    func offAndOn() throws {
        try withBot("sw") { directory, bot in
            let fill = try bot.histogram("fill_ns", unit: .nanoseconds)
            let orders = try bot.counter("orders")
            let drain = ExactDrain(try RingConsumer("sw", directory: directory, readsWeights: true))
            try Self.control(directory, ["sw", "--metric", "fill_ns", "--off"])
            fill.record(5)
            orders.increment()
            try Self.control(directory, ["sw", "--bot-off"])
            orders.increment(by: 10)
            let late = try bot.counter("late_orders")  // registered while the bot is off: off too
            late.increment()
            // A worker of the bot, made now, takes the bot file's switches.
            let worker = try Bot.attach("sw", directory: directory.path, options: .init(worker: true))
            let workerFill = try worker.histogram("fill_ns", unit: .nanoseconds)
            workerFill.record(6)
            try drain.drain()
            #expect(drain.histogram(0).count == 0)
            let consumer = drain.consumer
            _ = try consumer.refreshMetrics()
            #expect(consumer.metrics.map(\.name) == ["fill_ns", "orders", "late_orders"])
            #expect(consumer.cells(of: consumer.metrics[1]).total == 1, "the increment before the bot was switched off")
            #expect(consumer.cells(of: consumer.metrics[2]).total == 0, "registered while the bot was off: off")
            try Self.control(directory, ["sw", "--bot-on"])
            try Self.control(directory, ["sw", "--metric", "fill_ns", "--on"])
            fill.record(7)
            orders.increment()
            late.increment()
            workerFill.record(8)
            try drain.drain()
            #expect(drain.histogram(0).count == 1 && drain.histogram(0).max == 7)
            #expect(consumer.cells(of: consumer.metrics[1]).total == 2 && consumer.cells(of: consumer.metrics[2]).total == 1)
            let workerName = try #require(directory.ringNames().first { $0.hasPrefix("sw@") })
            let workerDrain = ExactDrain(try RingConsumer(workerName, directory: directory, readsWeights: true))
            try workerDrain.drain()
            #expect(workerDrain.histogram(0).count == 1 && workerDrain.histogram(0).max == 8, "the worker's 6 was recorded off")
        }
    }
}
