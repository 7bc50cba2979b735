import Foundation
@testable import Ringside
import RingsideTestSupport
import Testing

@Suite("Ownership: one producer, one consumer, and what survives a SIGKILL")
struct RingOwnershipTests {
    @Test("a second producer is refused while the first lives, even in the same process")
    func secondProducerInProcess() throws {
        try withRingDirectory { directory in
            let first = try Ring.attach("solo", directory: directory.path, options: .init(capacity: 16))
            #expect(throws: RingError.producerAlive(ring: "solo", pid: getpid())) {
                try Ring.attach("solo", directory: directory.path, options: .init(capacity: 16))
            }
            withExtendedLifetime(first) {}
        }
    }

    @Test("a second producer process is refused while the first lives and accepted after SIGKILL; what it published is readable")
    func producerKilled() throws {
        try withRingDirectory { directory in
            let child = try ChildProcess("ringside-test-producer", [
                "hold", "--dir", directory.path, "--ring", "held", "--count", "1000", "--capacity", "1024",
            ])
            #expect(child.readLine() == "ready \(child.pid)")
            #expect(throws: RingError.producerAlive(ring: "held", pid: child.pid)) {
                try Ring.attach("held", directory: directory.path, options: .init(capacity: 1024))
            }
            let inspector = try RingInspector("held", directory: directory)
            #expect(try inspector.status().producerAlive)
            #expect(try inspector.status().producerPID == child.pid)

            child.kill()
            #expect(try !inspector.status().producerAlive)
            let ring = try Ring.attach("held", directory: directory.path, options: .init(capacity: 1024))
            // The new producer finds the old metric again and carries on after the old records.
            let sequence = try ring.histogram("sequence", labels: ["source": "test"])
            sequence.record(1000)
            let consumer = try RingConsumer("held", directory: directory)
            let values = try drainAll(consumer).map(\.record.value)
            #expect(values == Array(0...1000))
            #expect(try consumer.status().producerAttaches == 2)
        }
    }

    @Test("a second consumer is refused while the first lives, accepted once it closes")
    func secondConsumer() throws {
        try withRingDirectory { directory in
            let ring = try Ring.attach("shared", directory: directory.path, options: .init(capacity: 16))
            var first: RingConsumer? = try RingConsumer("shared", directory: directory)
            #expect(throws: RingError.consumerAlive(ring: "shared", pid: getpid())) {
                try RingConsumer("shared", directory: directory)
            }
            #expect(try RingInspector("shared", directory: directory).status().consumerAlive)
            first = nil
            _ = try RingConsumer("shared", directory: directory)
            withExtendedLifetime((ring, first)) {}
        }
    }

    @Test("a restarted producer re-attaches, keeping unconsumed records, counters and metrics")
    func reattachKeepsState() throws {
        try withRingDirectory { directory in
            for round in 0..<3 {
                let child = try ChildProcess("ringside-test-producer", [
                    "sequence", "--dir", directory.path, "--ring", "restart", "--count", "100",
                    "--start", "\(round * 100)", "--capacity", "256",
                ])
                _ = child.readLine()
                #expect(child.waitForExit().status == 0)
            }
            let consumer = try RingConsumer("restart", directory: directory)
            let status = try consumer.status()
            #expect(status.writeCursor == 256 && status.dropped == 44)
            #expect(consumer.metrics.count == 1)
            #expect(try drainAll(consumer).map(\.record.value) == Array(0..<256))
        }
    }

    @Test("an incompatible layout is refused with a clear error, or recreated when asked")
    func incompatibleLayout() throws {
        try withRingDirectory { directory in
            do {
                let ring = try Ring.attach("layout", directory: directory.path, options: .init(capacity: 16))
                try ring.counter("old").increment()
            }
            #expect {
                try Ring.attach("layout", directory: directory.path, options: .init(capacity: 32))
            } throws: { error in
                guard case .incompatibleLayout? = error as? RingError else { return false }
                return "\(error)".contains("16 records") && "\(error)".contains("recreate")
            }
            let ring = try Ring.attach("layout", directory: directory.path, options: .init(capacity: 32, onIncompatible: .recreate))
            #expect(ring.registeredMetrics.isEmpty)
            #expect(try RingInspector("layout", directory: directory).status().capacity == 32)
        }
    }

    @Test("a ring file of another user is refused, naming its owner")
    func otherOwnerRefused() throws {
        guard geteuid() == 0 else { return } // only root can make a file another user owns
        try withRingDirectory { directory in
            do { _ = try Ring.attach("theirs", directory: directory.path, options: .init(capacity: 16)) }
            chown(directory.filePath(for: "theirs"), 4242, 4242)
            #expect {
                try Ring.attach("theirs", directory: directory.path, options: .init(capacity: 16))
            } throws: { error in
                guard case .permissionDenied? = error as? RingError else { return false }
                return "\(error)".contains("uid 4242")
            }
            #expect(throws: RingError.self) { try RingInspector("theirs", directory: directory) }
        }
    }
}
