import CRingside
import Dispatch
import Foundation
@testable import Ringside
import RingsideTestSupport
import Synchronization
import Testing

@Suite("Reader: drain and peek, across processes and threads")
struct RingReaderTests {
    @Test("a producer process writes N known records; the consumer reads exactly those, in order")
    func crossProcessSequence() throws {
        try withRingDirectory { directory in
            let count = 50_000
            let child = try ChildProcess(
                testProducer: "sequence", ring: "xproc", in: directory, ["--count", "\(count)", "--start", "7", "--capacity", "65536"])
            #expect(child.readLine() == "wrote \(count) dropped 0")
            #expect(child.waitForExit().status == 0)

            let consumer = try RingConsumer("xproc", directory: directory)
            let drained = try drainAll(consumer)
            #expect(drained.map(\.record.value) == (0..<UInt64(count)).map { $0 + 7 })
            #expect(drained.allSatisfy { $0.record.sequence == $0.cursor && $0.record.metric == 0 })
            #expect(consumer.metrics.map(\.name) == ["sequence"])
            #expect(consumer.metrics[0].labelDictionary == ["source": "test"])
            let status = try consumer.status()
            #expect(status.writeCursor == UInt64(count) && status.readCursor == UInt64(count) && status.dropped == 0)
            #expect(!status.producerAlive)
        }
    }

    @Test("a producer waiting for room and a concurrent consumer pass a million records through a small ring intact")
    func producerAndConsumerThreadsOverWraparounds() throws {
        try withRingDirectory { directory in
            let total: UInt64 = 1_000_000
            let capacity = 256
            let ready = DispatchSemaphore(value: 0)
            let done = DispatchSemaphore(value: 0)
            let path = directory.path
            Thread.detachNewThread {
                // The ring is made on this thread and never leaves it: it is not Sendable.
                let ring = try! Bot.attach("threads", directory: path, options: .init(laneCapacity: capacity))
                let values = try! ring.histogram("values")
                ready.signal()
                for value in 0..<total {
                    while ring.currentThreadLane.freeSlots == 0 { sched_yield() }
                    values.record(value)
                }
                done.signal()
                withExtendedLifetime(ring) { ready.wait() }
            }
            ready.wait()
            let consumer = try RingConsumer("threads", directory: directory)
            var expected: UInt64 = 0
            var problems = 0
            while expected < total {
                try consumer.drain { records, first in
                    for (offset, record) in records.enumerated() {
                        if record.value != expected || record.sequence != first + UInt64(offset) { problems += 1 }
                        expected += 1
                    }
                }
            }
            done.wait()
            ready.signal()
            #expect(problems == 0)
            #expect(expected == total)
            let status = try consumer.status()
            #expect(status.writeCursor == total && status.dropped == 0)
            #expect(total / UInt64(capacity) > 3000, "the ring wrapped thousands of times")
        }
    }

    @Test("a full ring drops and counts: written == consumed + dropped, exactly, with nothing overwritten")
    func fullRingAccounting() throws {
        try withRingDirectory { directory in
            let attempts: UInt64 = 200_000
            let finished = Atomic<Bool>(false)
            let started = DispatchSemaphore(value: 0)
            let path = directory.path
            let producerDone = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                let ring = try! Bot.attach("full", directory: path, options: .init(laneCapacity: 64))
                let values = try! ring.histogram("values")
                started.signal()
                for value in 0..<attempts { values.record(value) }
                finished.store(true, ordering: .releasing)
                producerDone.signal()
                withExtendedLifetime(ring) { started.wait() }
            }
            started.wait()
            let consumer = try RingConsumer("full", directory: directory)
            var consumed: [UInt64] = []
            while true {
                let isFinished = finished.load(ordering: .acquiring)
                try consumer.drain { records, _ in consumed.append(contentsOf: records.map(\.value)) }
                if isFinished {
                    try consumer.drain { records, _ in consumed.append(contentsOf: records.map(\.value)) }
                    break
                }
                usleep(50)
            }
            producerDone.wait()
            let status = try consumer.status()
            started.signal()
            #expect(status.writeCursor + status.dropped == attempts)
            #expect(UInt64(consumed.count) == status.writeCursor)
            // The same identities hold for the one lane, and the sums are its figures.
            let lane = try #require(status.lanes.first)
            #expect(status.lanes.count == 1)
            #expect(lane.writeCursor + lane.dropped == attempts && lane.writeCursor == lane.readCursor + lane.backlog)
            #expect(lane.writeCursor == status.writeCursor && lane.dropped == status.dropped && status.unlanedDropped == 0)
            // Every drop is counted against the metric too (a histogram's lane cell).
            #expect(consumer.cells(of: consumer.metrics[0]).dropped == status.dropped)
            #expect(status.dropped > 0, "a 64-slot ring under a tight loop must fill")
            // Never overwritten: what was consumed is strictly increasing (drops only skip values).
            #expect(zip(consumed, consumed.dropFirst()).allSatisfy { $0 < $1 })
        }
    }

    @Test("peek shows the unconsumed records oldest first and moves no cursor")
    func peekDoesNotConsume() throws {
        try withBot("peek", options: .init(laneCapacity: 16)) { directory, bot in
            let values = try bot.histogram("v")
            for value in 0..<10 { values.record(UInt64(value)) }
            let inspector = try RingInspector("peek", directory: directory)
            #expect(try inspector.peek().map(\.record.value) == Array(0..<10))
            #expect(try inspector.peek(last: 3).map(\.record.value) == [7, 8, 9])
            let consumer = try RingConsumer("peek", directory: directory)
            try consumer.drain(limit: 4) { _, _ in }
            #expect(try inspector.peek().map(\.cursor) == Array(4..<10))
            #expect(try inspector.status().readCursor == 4)
            #expect(try inspector.status().backlog == 6)
        }
    }

    @Test("peek never returns a torn or overwritten record while a producer writes and a consumer drains")
    func peekUnderLoad() throws {
        try withRingDirectory { directory in
            let path = directory.path
            let stop = Atomic<Bool>(false)
            let ready = DispatchSemaphore(value: 0)
            let stopped = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                let ring = try! Bot.attach("busy", directory: path, options: .init(laneCapacity: 64))
                let values = try! ring.histogram("v")
                ready.signal()
                var value: UInt64 = 0
                while !stop.load(ordering: .relaxed) {
                    if ring.currentThreadLane.freeSlots > 0 {
                        values.record(value &* 3)
                        value += 1
                    }
                }
                stopped.signal()
            }
            ready.wait()
            let consumer = try RingConsumer("busy", directory: directory)
            let inspector = try RingInspector("busy", directory: directory)
            var peeks = 0, problems = 0
            for _ in 0..<3_000 {
                try consumer.drain(limit: 17) { _, _ in }
                for peeked in try inspector.peek() {
                    // Value, sequence and cursor agree exactly unless the record was torn or reused.
                    if peeked.lane != 0 || peeked.record.sequence != peeked.cursor || peeked.record.value != peeked.cursor &* 3 {
                        problems += 1
                    }
                }
                peeks += 1
            }
            stop.store(true, ordering: .relaxed)
            stopped.wait()
            #expect(peeks == 3_000)
            #expect(problems == 0)
        }
    }
}
