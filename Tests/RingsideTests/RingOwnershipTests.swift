import Foundation
@testable import Ringside
import RingsideTestSupport
import Testing

@Suite("Ownership: one producer, one consumer, and what survives a SIGKILL")
struct RingOwnershipTests {
    @Test("a second producer is refused while the first lives, even in the same process")
    func secondProducerInProcess() throws {
        try withRingDirectory { directory in
            let first = try Bot.attach("solo", directory: directory.path, options: .init(laneCapacity: 16))
            #expect(throws: RingError.producerAlive(ring: "solo", pid: getpid())) {
                try Bot.attach("solo", directory: directory.path, options: .init(laneCapacity: 16))
            }
            withExtendedLifetime(first) {}
        }
    }

    @Test("a second producer process is refused while the first lives and accepted after SIGKILL; what it published is readable")
    func producerKilled() throws {
        try withRingDirectory { directory in
            let child = try ChildProcess(testProducer: "hold", ring: "held", in: directory, ["--count", "1000", "--capacity", "1024"])
            #expect(child.readLine() == "ready \(child.pid)")
            #expect(throws: RingError.producerAlive(ring: "held", pid: child.pid)) {
                try Bot.attach("held", directory: directory.path, options: .init(laneCapacity: 1024))
            }
            // The any-thread face is refused the same way: a bot has one process.
            #expect(throws: RingError.producerAlive(ring: "held", pid: child.pid)) {
                try Bot.attach("held", directory: directory.path)
            }
            // So is another process, which says who holds the bot and exits cleanly.
            let second = try ChildProcess(testProducer: "threads", ring: "held", in: directory, ["--threads", "2", "--count", "10"])
            let refused = second.waitForExit()
            #expect(refused.status == 2)
            #expect(refused.standardError.contains("another producer is attached (pid \(child.pid))"), "\(refused.standardError)")

            let inspector = try RingInspector("held", directory: directory)
            let alive = try inspector.status()
            #expect(alive.producerAlive && alive.producerPID == child.pid)
            // The holder's one lane is active, owned by one of its threads.
            #expect(alive.lanes.count == 1 && alive.lanes[0].state == .active && alive.lanes[0].ownerTID != 0)
            #expect(alive.lanes[0].writeCursor == 1000 && alive.lanes[0].claims == 1)

            child.kill()
            let dead = try inspector.status()
            #expect(!dead.producerAlive)
            // Nobody retired the lane: the lock, not the lane's state, is the process's liveness.
            #expect(dead.lanes[0].state == .active)
            let bot = try Bot.attach("held", directory: directory.path, options: .init(laneCapacity: 1024))
            // The new producer finds the old metric again and carries on after the old records,
            // in the same lane (retired at attach, then claimed again): no lane is added.
            let sequence = try bot.histogram("sequence", labels: ["source": "test"])
            sequence.record(1000)
            let consumer = try RingConsumer("held", directory: directory)
            let drained = try drainAll(consumer)
            #expect(drained.map(\.record.value) == Array(0...1000))
            #expect(drained.allSatisfy { $0.lane == 0 && $0.record.sequence == $0.cursor })
            let status = try consumer.status()
            #expect(status.producerAttaches == 2 && status.producerPID == getpid())
            #expect(status.lanes.count == 1 && status.lanes[0].claims == 2 && status.lanes[0].state == .active)
            #expect(status.lanes[0].ownerTID == currentThreadID())
        }
    }

    @Test("a second consumer is refused while the first lives, accepted once it closes")
    func secondConsumer() throws {
        try withBot("shared", options: .init(laneCapacity: 16)) { directory, bot in
            var first: RingConsumer? = try RingConsumer("shared", directory: directory)
            #expect(throws: RingError.consumerAlive(ring: "shared", pid: getpid())) {
                try RingConsumer("shared", directory: directory)
            }
            #expect(try RingInspector("shared", directory: directory).status().consumerAlive)
            first = nil
            _ = try RingConsumer("shared", directory: directory)
            withExtendedLifetime((bot, first)) {}
        }
    }

    @Test("a restarted producer re-attaches, keeping unconsumed records, counters and metrics")
    func reattachKeepsState() throws {
        try withRingDirectory { directory in
            for round in 0..<3 {
                let child = try ChildProcess(
                    testProducer: "sequence", ring: "restart", in: directory,
                    ["--count", "100", "--start", "\(round * 100)", "--capacity", "256"])
                _ = child.readLine()
                #expect(child.waitForExit().status == 0)
            }
            let consumer = try RingConsumer("restart", directory: directory)
            let status = try consumer.status()
            #expect(status.writeCursor == 256 && status.dropped == 44)
            // One lane, taken over by each process in turn, with its cursors and drop count.
            #expect(status.lanes.count == 1 && status.lanes[0].claims == 3 && status.lanes[0].state == .retired)
            #expect(status.producerAttaches == 3)
            #expect(consumer.metrics.count == 1)
            #expect(consumer.cells(of: consumer.metrics[0]).dropped == 44)
            #expect(try drainAll(consumer).map(\.record.value) == Array(0..<256))
        }
    }

    @Test(
        "a bot SIGKILLed mid-count: its counter total (lane cell), gauge (metric cell), records and metrics carry over to the next process")
    func killedBotKeepsCells() throws {
        try withRingDirectory { directory in
            let child = try ChildProcess(
                testProducer: "kit", ring: "kit", in: directory,
                ["--count", "100", "--start", "1000", "--step", "10", "--per-second", "100000"])
            #expect(child.readLine() == "ready \(child.pid)")
            let inspector = try RingInspector("kit", directory: directory)
            let orders = try metric(inspector.metrics(), "orders"), exposure = try metric(inspector.metrics(), "gross_exposure")
            // Let it count a while, then kill it mid-stream.
            let counting = try eventually { try inspector.cells(of: orders).total > 1_000 ? true : nil }
            #expect(counting == true, "the bot never counted")
            child.kill()
            let total = try inspector.cells(of: orders).total
            let level = try #require(try inspector.cells(of: exposure).lastValue)
            #expect(level > 0 && level <= Double(total), "the gauge is the count at its last set: \(level) of \(total)")
            let status = try inspector.status()
            #expect(!status.producerAlive && status.lanes.count == 1)

            // The next process: same metrics, the counter carries on from the dead one's total.
            let bot = try Bot.attach("kit", directory: directory.path)
            let counter = try bot.counter("orders", labels: ["side": "buy"])
            #expect(counter.target.metric.index == orders.index && bot.registeredMetrics.count == 3)
            #expect(try inspector.cells(of: orders).total == total, "re-attaching changes no total")
            counter.increment(by: 5)
            #expect(try inspector.cells(of: orders).total == total + 5)
            #expect(try inspector.cells(of: exposure).lastValue == level)
            let consumer = try RingConsumer("kit", directory: directory)
            let fills = try metric(consumer.metrics, "order_fill_latency")
            let values = try drainAll(consumer).filter { $0.record.metric == fills.index }.map(\.record.value)
            #expect(values == (0..<100).map { 1000 + $0 * 10 })
            let after = try consumer.status()
            #expect(after.lanes.count == 1 && after.lanes[0].claims == 2 && after.producerAttaches == 2)
        }
    }

    @Test("a multi-threaded bot restarted three times keeps its counter totals (lane cells), records and metrics, reusing its lanes")
    func reattachKeepsCounterCells() throws {
        try withRingDirectory { directory in
            let threads = 3, count = 1_000
            var mostLanes = 0
            for _ in 0..<3 {
                let child = try ChildProcess(
                    testProducer: "threads", ring: "cells", in: directory,
                    ["--threads", "\(threads)", "--count", "\(count)", "--capacity", "\(1 << 14)"])
                // "lanes L written W dropped D": the figures of the file so far, every life included.
                let report = try #require(child.readLine()).split(separator: " ")
                #expect(child.waitForExit().status == 0)
                try #require(report.count == 6)
                mostLanes = max(mostLanes, try #require(Int(report[1])))
            }
            let consumer = try RingConsumer("cells", directory: directory)
            #expect(consumer.metrics.map(\.name) == ["thread_values", "thread_increments"])
            let total = UInt64(3 * threads * count)
            // Every increment of every thread of every life, exactly: the lanes' cells summed.
            #expect(consumer.cells(of: consumer.metrics[1]).total == total)
            let status = try consumer.status()
            // Retired lanes are taken over: never more lanes than threads alive at once.
            #expect(status.lanes.count == mostLanes && mostLanes >= 1 && mostLanes <= threads)
            // The last process exited without detaching, perhaps while a thread of it was still exiting:
            // a lane may be left active, as after a SIGKILL, until the next attach retires it.
            #expect(!status.producerAlive && status.lanes.allSatisfy { $0.state == .retired || $0.state == .active })
            #expect(status.writeCursor == total && status.dropped == 0 && status.producerAttaches == 3)
            let values = try drainAll(consumer).map(\.record.value)
            // Each life wrote 1 ... threads * count once.
            #expect(values.count == Int(total))
            var seen: [UInt64: Int] = [:]
            for value in values { seen[value, default: 0] += 1 }
            #expect(seen.count == threads * count && seen.values.allSatisfy { $0 == 3 })
        }
    }

    @Test("an incompatible layout is refused with a clear error, or recreated when asked")
    func incompatibleLayout() throws {
        try withRingDirectory { directory in
            do {
                let bot = try Bot.attach("layout", directory: directory.path, options: .init(laneCapacity: 16))
                try bot.counter("old").increment()
            }
            #expect {
                try Bot.attach("layout", directory: directory.path, options: .init(laneCapacity: 32))
            } throws: { error in
                guard case .incompatibleLayout? = error as? RingError else { return false }
                return "\(error)".contains("16 records") && "\(error)".contains("recreate")
            }
            let bot = try Bot.attach("layout", directory: directory.path, options: .init(laneCapacity: 32, onIncompatible: .recreate))
            #expect(bot.registeredMetrics.isEmpty)
            #expect(try RingInspector("layout", directory: directory).status().capacity == 32)
        }
    }

    @Test("a ring file of another user is refused, naming its owner")
    func otherOwnerRefused() throws {
        guard geteuid() == 0 else { return }  // only root can make a file another user owns
        try withRingDirectory { directory in
            do { _ = try Bot.attach("theirs", directory: directory.path, options: .init(laneCapacity: 16)) }
            chown(directory.filePath(for: "theirs"), 4242, 4242)
            #expect {
                try Bot.attach("theirs", directory: directory.path, options: .init(laneCapacity: 16))
            } throws: { error in
                guard case .permissionDenied? = error as? RingError else { return false }
                return "\(error)".contains("uid 4242")
            }
            #expect(throws: RingError.self) { try RingInspector("theirs", directory: directory) }
        }
    }
}
