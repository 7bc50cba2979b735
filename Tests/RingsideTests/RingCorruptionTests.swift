import CRingside
import Foundation
@testable import Ringside
import RingsideTestSupport
import Testing

/// Makes a valid ring with one metric and three records, releases it, then lets `damage` loose on
/// its file; returns what a reader then says.
private func damagedRingError(_ damage: (String) -> Void) throws -> RingError? {
    try withRingDirectory { directory -> RingError? in
        do {
            let ring = try Ring.attach("victim", directory: directory.path, options: .init(capacity: 16, maxMetrics: 4))
            let metric = try ring.histogram("latency", unit: .nanoseconds, labels: ["symbol": "AAPL"])
            for value in 1...3 { metric.record(UInt64(value)) }
        }
        damage(directory.filePath(for: "victim"))
        do {
            let inspector = try RingInspector("victim", directory: directory)
            _ = try inspector.status()
            _ = try inspector.metrics()
            _ = try inspector.peek()
            let consumer = try RingConsumer("victim", directory: directory)
            _ = try drainAll(consumer)
            return nil
        } catch let error as RingError {
            return error
        }
    }
}

private func corruption(_ error: RingError?) -> RingCorruption? {
    guard case let .corrupt(ring, _, problem)? = error, ring == "victim" else { return nil }
    return problem
}

@Suite("Corrupt rings: each problem gets its own error, never a crash")
struct RingCorruptionTests {
    @Test("an undamaged ring reads without error")
    func soundRing() throws {
        #expect(try damagedRingError { _ in } == nil)
    }

    @Test("bad magic")
    func badMagic() throws {
        let problem = corruption(try damagedRingError { patch($0, at: 0, with: UInt64(0xDEAD_BEEF)) })
        #expect(problem == .badMagic(0xDEAD_BEEF))
    }

    @Test("unsupported version")
    func badVersion() throws {
        let problem = corruption(try damagedRingError { patch($0, at: headerOffset(\.version), with: UInt32(7)) })
        #expect(problem == .unsupportedVersion(7))
    }

    @Test("truncated file", arguments: [100, 4096, 4096 + 4 * 512 + 100])
    func truncated(to size: Int) throws {
        let error = try damagedRingError { truncate($0, off_t(size)) }
        guard case .truncated? = corruption(error) else {
            Issue.record("expected truncated, got \(String(describing: error))")
            return
        }
    }

    @Test("sizes that disagree with the format", arguments: [
        (0x00C, "header_size"), (0x010, "record_size"), (0x014, "capacity_log2"),
        (0x018, "registry_capacity"), (0x028, "records_offset"),
    ])
    func badLayout(offset: Int, name: String) throws {
        let error = try damagedRingError { patch($0, at: offset, with: UInt32(99_999)) }
        guard case let .badLayout(field, _, _)? = corruption(error) else {
            Issue.record("expected badLayout, got \(String(describing: error))")
            return
        }
        #expect(field == name)
    }

    @Test("cursors out of range", arguments: [(UInt64(2), UInt64(1)), (UInt64(0), UInt64(17)), (UInt64.max, UInt64(3))])
    func cursorsOutOfRange(read: UInt64, write: UInt64) throws {
        let problem = corruption(try damagedRingError { path in
            patch(path, at: headerOffset(\.read_cursor), with: read)
            patch(path, at: headerOffset(\.write_cursor), with: write)
        })
        #expect(problem == .cursorsOutOfRange(read: read, write: write, capacity: 16))
    }

    @Test("a metric count past the registry's capacity")
    func badMetricCount() throws {
        let problem = corruption(try damagedRingError { patch($0, at: headerOffset(\.metric_count), with: UInt32(5)) })
        #expect(problem == .badMetricCount(count: 5, capacity: 4))
    }

    @Test("garbage in a registry entry", arguments: [
        (0x000, [UInt8](repeating: 9, count: 4), "index field"),
        (0x004, [99], "unknown kind"),
        (0x005, [77], "unknown unit"),
        (0x008, [0, 0, 0, 0], "sample_every"),
        (0x00C, [0xFF, 0x7F], "name length"),
        (0x018, [0xFF, 0xFE], "UTF-8"),
        (0x018, [UInt8(ascii: "9")], "[a-zA-Z_]"),
        (0x080, [UInt8(ascii: "#")], "label"),
    ])
    func garbageRegistry(offset: Int, bytes: [UInt8], expected: String) throws {
        let error = try damagedRingError { path in
            for (index, byte) in bytes.enumerated() { patch(path, at: 4096 + offset + index, with: byte) }
        }
        guard case let .badRegistryEntry(index, reason)? = corruption(error) else {
            Issue.record("expected badRegistryEntry, got \(String(describing: error))")
            return
        }
        #expect(index == 0)
        #expect(reason.contains(expected), "reason: \(reason)")
    }

    @Test("random bytes over the whole header never crash a reader", arguments: 0..<20)
    func randomHeader(seed: Int) throws {
        var generator = SplitMix64(seed: UInt64(seed))
        let error = try damagedRingError { path in
            for _ in 0..<8 { patch(path, at: Int(generator.next() % 0x180), with: UInt8(truncatingIfNeeded: generator.next())) }
        }
        // Either the damage hit nothing that matters or it is reported; a crash fails the run.
        if let error { #expect(!"\(error)".isEmpty) }
    }

    @Test("a producer refuses a corrupt ring, or recreates it when asked")
    func producerOnCorruptRing() throws {
        try withRingDirectory { directory in
            do { _ = try Ring.attach("bad", directory: directory.path, options: .init(capacity: 16)) }
            patch(directory.filePath(for: "bad"), at: 0, with: UInt64(1))
            #expect {
                try Ring.attach("bad", directory: directory.path, options: .init(capacity: 16))
            } throws: { error in
                guard case .corrupt(_, _, .badMagic)? = error as? RingError else { return false }
                return true
            }
            let ring = try Ring.attach("bad", directory: directory.path, options: .init(capacity: 16, onIncompatible: .recreate))
            try ring.counter("fresh").increment()
            #expect(try RingInspector("bad", directory: directory).peek().count == 1)
        }
    }

    @Test("a zero-filled file is a ring still being created, not a corrupt one")
    func notReady() throws {
        try withRingDirectory { directory in
            _ = FileManager.default.createFile(atPath: directory.filePath(for: "young"), contents: Data(count: 8192),
                                           attributes: [.posixPermissions: 0o600])
            #expect(throws: RingError.notReady(ring: "young")) { try RingInspector("young", directory: directory) }
            // Its producer finishes the creation.
            let ring = try Ring.attach("young", directory: directory.path, options: .init(capacity: 16))
            #expect(ring.isEnabled)
            #expect(try RingInspector("young", directory: directory).status().capacity == 16)
        }
    }
}
