import CRingside
import Foundation
@testable import Ringside
import RingsideTestSupport
import Testing

/// Makes a valid ring (one lane of 16 records, a registry of 4) with one metric and three records,
/// releases it, then lets `damage` loose on its file; returns what the readers then say (each one
/// reads the header, the lanes and their cursors, the registry, the cells and the records).
private func damagedRingError(_ damage: (String) -> Void) throws -> RingError? {
    try withRingDirectory { directory -> RingError? in
        do {
            let bot = try Bot.attach("victim", directory: directory.path, options: .init(laneCapacity: 16, maxMetrics: 4))
            let metric = try bot.histogram("latency", unit: .nanoseconds, labels: ["symbol": "AAPL"])
            for value in 1...3 { metric.record(UInt64(value)) }
        }
        damage(directory.filePath(for: "victim"))
        do {
            let inspector = try RingInspector("victim", directory: directory)
            _ = try inspector.status()
            for metric in try inspector.metrics() { _ = try inspector.cells(of: metric) }
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
        let problem = corruption(try damagedRingError { patch($0, at: headerOffset(\.magic), with: UInt64(0xDEAD_BEEF)) })
        #expect(problem == .badMagic(0xDEAD_BEEF))
    }

    @Test("unsupported version")
    func badVersion() throws {
        let problem = corruption(try damagedRingError { patch($0, at: headerOffset(\.version), with: UInt32(7)) })
        #expect(problem == .unsupportedVersion(7))
    }

    /// The victim's file: lanes of 16 records, 4 metrics, one lane allocated. The part before the
    /// lanes ends at `lanes_offset`; the lane fills `lane_size` bytes after it.
    static let victim = BotFileLayout(capacity: 16, registryCapacity: 4).geometry

    @Test(
        "truncated file: inside the header page, inside the registry, before the lanes, inside the lane",
        arguments: [
            100, 4096, 4096 + 4 * 512 + 100, Int(victim.lanes_offset) - 1,
            Int(victim.lanes_offset), Int(victim.lanes_offset + victim.lane_size) - 1,
        ])
    func truncated(to size: Int) throws {
        let error = try damagedRingError { truncate($0, off_t(size)) }
        guard case let .truncated(fileSize, expected)? = corruption(error) else {
            Issue.record("expected truncated, got \(String(describing: error))")
            return
        }
        #expect(fileSize <= size && expected > fileSize)
        // Cut inside the lanes, the reader names what its one allocated lane needs.
        if size >= Int(Self.victim.lanes_offset) { #expect(expected == Int(Self.victim.lanes_offset + Self.victim.lane_size)) }
    }

    @Test(
        "sizes and offsets of the layout that disagree with the format",
        arguments: [
            (headerOffset(\rs_header.header_size), 4, "header_size"), (headerOffset(\rs_header.record_size), 4, "record_size"),
            (headerOffset(\rs_header.capacity_log2), 4, "capacity_log2"),
            (headerOffset(\rs_header.registry_capacity), 4, "registry_capacity"),
            (headerOffset(\rs_header.registry_entry_size), 4, "registry_entry_size"),
            (headerOffset(\rs_header.registry_offset), 8, "registry_offset"), (headerOffset(\rs_header.cells_offset), 8, "cells_offset"),
            (headerOffset(\rs_header.lanes_offset), 8, "lanes_offset"), (headerOffset(\rs_header.lane_size), 8, "lane_size"),
            (headerOffset(\rs_header.lane_records_offset), 4, "lane_records_offset"),
            (headerOffset(\rs_header.max_lanes), 4, "max_lanes"),
            (headerOffset(\rs_header.metric_cell_size), 4, "metric_cell_size"),
            (headerOffset(\rs_header.lane_header_size), 4, "lane_header_size"),
        ])
    func badLayout(offset: Int, width: Int, name: String) throws {
        let error = try damagedRingError { path in
            if width == 8 { patch(path, at: offset, with: UInt64(99_999)) } else { patch(path, at: offset, with: UInt32(99_999)) }
        }
        guard case let .badLayout(field, value, _)? = corruption(error) else {
            Issue.record("expected badLayout, got \(String(describing: error))")
            return
        }
        #expect(field == name)
        #expect(value == 99_999)
    }

    @Test(
        "a layout whose free choices change it is refused by the derived fields",
        arguments: [
            (headerOffset(\rs_header.capacity_log2), UInt32(12), "lane_size"),
            (headerOffset(\rs_header.registry_capacity), UInt32(8), "cells_offset"),
            (headerOffset(\rs_header.max_lanes), UInt32(0), "max_lanes"),
            (headerOffset(\rs_header.max_lanes), UInt32(RS_MAX_LANES + 1), "max_lanes"),
        ])
    func derivedFieldsDisagree(offset: Int, value: UInt32, name: String) throws {
        let error = try damagedRingError { patch($0, at: offset, with: value) }
        guard case let .badLayout(field, _, _)? = corruption(error) else {
            Issue.record("expected badLayout, got \(String(describing: error))")
            return
        }
        #expect(field == name)
    }

    @Test(
        "a lane's cursors out of range",
        arguments: [
            (UInt64(2), UInt64(1)), (UInt64(0), UInt64(17)), (UInt64.max, UInt64(3)), (UInt64(1) << 63, UInt64(3)),
        ])
    func cursorsOutOfRange(read: UInt64, write: UInt64) throws {
        let problem = corruption(
            try damagedRingError { path in
                patch(path, at: laneFieldOffset(path, lane: 0, \.read_cursor), with: read)
                patch(path, at: laneFieldOffset(path, lane: 0, \.write_cursor), with: write)
            })
        #expect(problem == .cursorsOutOfRange(read: read, write: write, capacity: 16))
    }

    @Test("a lane's cursors anywhere in range read fine, even far along (free-running, never wrapped)")
    func cursorsFarAlong() throws {
        let far = UInt64.max - 100
        let error = try damagedRingError { path in
            patch(path, at: laneFieldOffset(path, lane: 0, \.read_cursor), with: far)
            patch(path, at: laneFieldOffset(path, lane: 0, \.write_cursor), with: far + 16)
        }
        #expect(error == nil)
    }

    @Test("lanes_allocated beyond max_lanes is refused by name")
    func lanesBeyondMaxLanes() throws {
        let problem = corruption(
            try damagedRingError { path in
                let maxLanes = fileHeader(path).max_lanes
                patch(path, at: headerOffset(\.lanes_allocated), with: maxLanes + 1)
            })
        guard case let .badLayout(field, value, expected)? = problem else {
            Issue.record("expected badLayout(lanes_allocated), got \(String(describing: problem))")
            return
        }
        #expect(field == "lanes_allocated" && value == UInt64(RS_DEFAULT_MAX_LANES) + 1 && expected.contains("max_lanes"))
    }

    @Test("a file shorter than the lanes its header counts is truncated, naming the size its lanes need")
    func fileShorterThanItsLanes() throws {
        let problem = corruption(
            try damagedRingError { path in
                patch(path, at: headerOffset(\.lanes_allocated), with: UInt32(3))
            })
        let needed = Int(Self.victim.lanes_offset + 3 * Self.victim.lane_size)
        #expect(problem == .truncated(fileSize: Int(Self.victim.lanes_offset + Self.victim.lane_size), expected: needed))
    }

    @Test("the inspector's lane problems name each one, read from the file: cursors, and lanes the file cannot hold")
    func laneProblems() throws {
        try withRingDirectory { directory in
            do {
                let bot = try Bot.attach("victim", directory: directory.path, options: .init(laneCapacity: 16, maxMetrics: 4))
                let metric = try bot.histogram("latency", unit: .nanoseconds)
                for value in 1...3 { metric.record(UInt64(value)) }
            }
            let path = directory.filePath(for: "victim")
            let inspector = try RingInspector("victim", directory: directory)
            #expect(inspector.laneProblems() == [])
            patch(path, at: laneFieldOffset(path, lane: 0, \.read_cursor), with: UInt64(5))
            #expect(inspector.laneProblems() == [.readPastWrite(lane: 0, read: 5, write: 3)])
            patch(path, at: laneFieldOffset(path, lane: 0, \.write_cursor), with: UInt64(40))
            let overCapacity = LaneProblem.overCapacity(lane: 0, read: 5, write: 40, capacity: 16)
            #expect(inspector.laneProblems() == [overCapacity])
            // Lanes past the file's end are not read; the one it holds still is.
            patch(path, at: headerOffset(\.lanes_allocated), with: UInt32(3))
            let oneLane = Int(Self.victim.lanes_offset + Self.victim.lane_size)
            let needed = Int(Self.victim.lanes_offset + 3 * Self.victim.lane_size)
            #expect(inspector.laneProblems() == [.truncated(fileSize: oneLane, lanes: 3, needed: needed), overCapacity])
            patch(path, at: headerOffset(\.lanes_allocated), with: UInt32(RS_DEFAULT_MAX_LANES + 1))
            #expect(
                inspector.laneProblems()
                    == [.tooManyLanes(allocated: Int(RS_DEFAULT_MAX_LANES) + 1, maxLanes: Int(RS_DEFAULT_MAX_LANES)), overCapacity])
        }
    }

    /// Grows the file by `bytes`, allocated, as a producer adding a lane does.
    private static func grow(_ path: String, by bytes: Int) {
        let fd = open(path, O_RDWR)
        precondition(fd >= 0, "open \(path)")
        defer { close(fd) }
        precondition(posix_fallocate(fd, off_t(fileSize(path)), off_t(bytes)) == 0, "posix_fallocate \(path)")
    }

    @Test("a file longer than its lanes is sound (a lane being added, say), and so is a lane allocated with zeros")
    func fileLongerThanItsLanes() throws {
        #expect(try damagedRingError { Self.grow($0, by: Int(Self.victim.lane_size) / 2) } == nil)
        #expect(
            try damagedRingError { path in
                Self.grow(path, by: Int(Self.victim.lane_size))
                patch(path, at: headerOffset(\.lanes_allocated), with: UInt32(2))
            } == nil)
    }

    @Test("a fault on a file that is not short is not called a truncation")
    func faultOnAWholeFile() {
        #expect(
            RingCorruption.truncated(fileSize: 100, expected: 200).description == "truncated: the file has 100 bytes, the layout needs 200")
        let whole = RingCorruption.truncated(fileSize: 200, expected: 200).description
        #expect(whole.contains("SIGBUS") && whole.contains("could not be allocated") && !whole.hasPrefix("truncated"), "\(whole)")
    }

    @Test("a sparse file (grown by ftruncate, never allocated) is refused before its holes are read")
    func sparseFile() throws {
        let lane = Int(Self.victim.lane_size)
        let problem = corruption(
            try damagedRingError { path in
                truncate(path, off_t(fileSize(path) + lane))
                patch(path, at: headerOffset(\.lanes_allocated), with: UInt32(2))
            })
        guard case let .unallocated(fileSize, allocated) = problem else {
            Issue.record("expected unallocated, got \(String(describing: problem))")
            return
        }
        #expect(fileSize - allocated >= lane - 4096 && allocated < fileSize)
        #expect(RingCorruption.unallocated(fileSize: fileSize, allocatedBytes: allocated).description.hasPrefix("sparse: "))
    }

    @Test("a metric count past the registry's capacity")
    func badMetricCount() throws {
        let problem = corruption(try damagedRingError { patch($0, at: headerOffset(\.metric_count), with: UInt32(5)) })
        #expect(problem == .badMetricCount(count: 5, capacity: 4))
    }

    @Test(
        "garbage in a registry entry",
        arguments: [
            (entryOffset(\.index), [UInt8](repeating: 9, count: 4), "index field"),
            (entryOffset(\.kind), [99], "unknown kind"),
            (entryOffset(\.unit), [77], "unknown unit"),
            (entryOffset(\.sample_every), [0, 0, 0, 0], "sample_every"),
            (entryOffset(\.name_length), [0xFF, 0x7F], "name length"),
            (entryOffset(\.name), [0xFF, 0xFE], "UTF-8"),
            (entryOffset(\.name), [UInt8(ascii: "9")], "[a-zA-Z_]"),
            (entryOffset(\.labels), [UInt8(ascii: "#")], "label"),
        ])
    func garbageRegistry(offset: Int, bytes: [UInt8], expected: String) throws {
        let error = try damagedRingError { path in
            let entry = Int(fileHeader(path).registry_offset)  // entry 0
            for (index, byte) in bytes.enumerated() { patch(path, at: entry + offset + index, with: byte) }
        }
        guard case let .badRegistryEntry(index, reason)? = corruption(error) else {
            Issue.record("expected badRegistryEntry, got \(String(describing: error))")
            return
        }
        #expect(index == 0)
        #expect(reason.contains(expected), "reason: \(reason)")
    }

    @Test(
        "stored labels: sorted unique identifier keys, values without NUL, or the reader says what is wrong",
        arguments: [
            ("", nil), ("a=1", nil), ("a=", nil), ("a=1\nb=2", nil), ("a=1\nab=2", nil), ("_k=x=y", nil),
            ("A=1\na=2", nil), ("a=1\nb=", nil), ("a", "no '='"), ("a=1\n", "no '='"), ("\na=1", "no '='"),
            ("=1", "not an identifier"), ("1a=x", "not an identifier"), ("a-b=1", "not an identifier"),
            ("é=1", "not an identifier"), ("b=1\na=2", "not sorted"), ("a=1\na=2", "not sorted"),
            ("ab=1\na=2", "not sorted"), ("a=x\u{0}y", "NUL"), ("a=1\nb=\u{0}", "NUL"),
        ] as [(String, String?)])
    func storedLabelsChecked(encoded: String, problem: String?) throws {
        let found = MetricDescriptor.problem(withEncodedLabels: encoded)
        #expect((found == nil) == (problem == nil), "\(encoded.debugDescription): \(found ?? "none")")
        if let problem { #expect(found?.contains(problem) == true, "\(encoded.debugDescription): \(found ?? "none")") }
        // What a producer encodes, the reader takes.
        if problem == nil, !encoded.isEmpty {
            let labels = Dictionary(uniqueKeysWithValues: MetricDescriptor.decodeLabels(encoded).map { ($0.key, $0.value) })
            #expect(try MetricDescriptor.encode(labels: labels).get() == encoded)
        }
    }

    @Test("a version-1 file (one ring per file) is refused by readers and producers, naming both versions")
    func versionOneRefused() throws {
        try withRingDirectory { directory in
            do { _ = try Bot.attach("old", directory: directory.path, options: .init(laneCapacity: 16)) }
            let path = directory.filePath(for: "old")
            patch(path, at: headerOffset(\.version), with: UInt32(1))
            var refusal: RingError?
            do throws(RingError) { _ = try RingInspector("old", directory: directory) } catch { refusal = error }
            let readerError = try #require(refusal, "a version-1 file was read")
            #expect(readerError == .corrupt(ring: "old", path: path, problem: .unsupportedVersion(1)))
            let message = "\(readerError)"
            #expect(
                message.contains("version 1") && message.contains("versions \(RS_FORMAT_VERSION_MIN) to \(RS_FORMAT_VERSION)"), "\(message)"
            )
            #expect(throws: RingError.corrupt(ring: "old", path: path, problem: .unsupportedVersion(1))) {
                try RingConsumer("old", directory: directory)
            }
            // The producers refuse it as incompatible (a layout they do not write), saying which and why.
            for attach in [
                { _ = try Bot.attach("old", directory: directory.path, options: .init(laneCapacity: 16)) },
                { _ = try Bot.attach("old", directory: directory.path, options: .init(laneCapacity: 16)) },
            ]
                as [() throws -> Void]
            {
                #expect {
                    try attach()
                } throws: { error in
                    guard case let .incompatibleLayout(ring, reason)? = error as? RingError else { return false }
                    // Its advice in this API's words, said once.
                    let text = "\(error)"
                    return ring == "old" && reason.contains("version 1")
                        && reason.contains("versions \(RS_FORMAT_VERSION_MIN) and \(RS_FORMAT_VERSION)")
                        && text.contains("attach with onIncompatible: .recreate") && text.components(separatedBy: "recreate").count == 2
                }
            }
            #expect(fileHeader(path).version == 1, "refused, and left alone")
            // Asked to, a producer replaces it.
            let bot = try Bot.attach("old", directory: directory.path, options: .init(laneCapacity: 16, onIncompatible: .recreate))
            #expect(bot.isEnabled && fileHeader(path).version == RS_FORMAT_VERSION_MIN, "format 3 until a signed or scaled metric")
        }
    }

    @Test(
        "a producer refuses a file with corrupt lanes, naming the problem, and leaves it alone",
        arguments: [
            "lanes_allocated", "read_cursor", "capacity",
        ])
    func producerOnCorruptLanes(problem: String) throws {
        try withRingDirectory { directory in
            do {
                let bot = try Bot.attach("lanes", directory: directory.path, options: .init(laneCapacity: 16))
                try bot.histogram("h").record(1)
            }
            let path = directory.filePath(for: "lanes")
            switch problem {
            case "lanes_allocated": patch(path, at: headerOffset(\.lanes_allocated), with: UInt32(RS_DEFAULT_MAX_LANES + 1))
            case "read_cursor": patch(path, at: laneFieldOffset(path, lane: 0, \.read_cursor), with: UInt64(5))
            default: patch(path, at: laneFieldOffset(path, lane: 0, \.write_cursor), with: UInt64(17))
            }
            let before = try Data(contentsOf: URL(fileURLWithPath: path))
            #expect {
                try Bot.attach("lanes", directory: directory.path, options: .init(laneCapacity: 16))
            } throws: { error in
                guard case let .corrupt(ring, _, corruption)? = error as? RingError else { return false }
                return ring == "lanes" && "\(corruption)".contains(problem)
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "a refused file is not written")
        }
    }

    @Test("random bytes over the header and the lane's header never crash a reader", arguments: 0..<20)
    func randomHeader(seed: Int) throws {
        var generator = SplitMix64(seed: UInt64(seed))
        let error = try damagedRingError { path in
            let lane = laneStart(path, lane: 0)
            for _ in 0..<8 {
                patch(
                    path, at: Int(generator.next() % UInt64(MemoryLayout<rs_header>.size)),
                    with: UInt8(truncatingIfNeeded: generator.next()))
                patch(
                    path, at: lane + Int(generator.next() % UInt64(RS_LANE_HEADER_SIZE)), with: UInt8(truncatingIfNeeded: generator.next()))
            }
        }
        // Either the damage hit nothing that matters or it is reported; a crash fails the run.
        if let error { #expect(!"\(error)".isEmpty) }
    }

    @Test("a producer refuses a corrupt ring, or recreates it when asked")
    func producerOnCorruptRing() throws {
        try withRingDirectory { directory in
            do { _ = try Bot.attach("bad", directory: directory.path, options: .init(laneCapacity: 16)) }
            patch(directory.filePath(for: "bad"), at: headerOffset(\.magic), with: UInt64(1))
            #expect {
                try Bot.attach("bad", directory: directory.path, options: .init(laneCapacity: 16))
            } throws: { error in
                guard case .corrupt(_, _, .badMagic)? = error as? RingError else { return false }
                return true
            }
            let bot = try Bot.attach("bad", directory: directory.path, options: .init(laneCapacity: 16, onIncompatible: .recreate))
            try bot.counter("fresh").increment()
            try bot.histogram("fresh_latency").record(7)
            let inspector = try RingInspector("bad", directory: directory)
            #expect(try inspector.peek().map(\.record.value) == [7])
            #expect(try inspector.cells(of: metric(inspector.metrics(), "fresh")).total == 1)
        }
    }

    @Test("a zero-filled file is a ring still being created, not a corrupt one")
    func notReady() throws {
        try withRingDirectory { directory in
            _ = FileManager.default.createFile(
                atPath: directory.filePath(for: "young"), contents: Data(count: 8192),
                attributes: [.posixPermissions: 0o600])
            #expect(throws: RingError.notReady(ring: "young")) { try RingInspector("young", directory: directory) }
            // Its producer finishes the creation.
            let bot = try Bot.attach("young", directory: directory.path, options: .init(laneCapacity: 16))
            #expect(bot.isEnabled)
            #expect(try RingInspector("young", directory: directory).status().capacity == 16)
        }
    }
}
