import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

/// Where things lie in a ring made by `makeSequenceRing` with capacity 16 (and the default 256
/// metrics): its one lane, lane 0, holds the records.
private let layout = BotFileLayout(capacity: 16)

/// Bytes of a little-endian integer, for a patch.
private func bytes<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }

@Suite("ringside-dump check: each kind of corruption gets its message and exit 1; never a crash")
struct CheckTests {
    @Test("a sound ring: exit 0 and an ok line")
    func soundRing() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "good", count: 5, capacity: 16)
            let run = try dump(directory, "check", "good")
            #expect(run.status == 0)
            #expect(run.output == "ring good: ok (5 records in 1 lane, 1 metric, producer dead)\n")
            try makeLanesRing(directory, "threads", threads: 3, count: 4, capacity: 16)
            #expect(
                try dump(directory, "check", "threads").output
                    == "ring threads: ok (15 records in 3 lanes, 3 metrics, producer dead)\n")
        }
    }

    @Test("a value's exemplar records stay after it, whatever their bytes read as as a time: check is ok, records in cursor order")
    func exemplarGroupsStayTogether() throws {
        try withRingDirectory { directory in
            do {
                let bot = try Bot.attach("ex", directory: directory.path, options: .init(laneCapacity: 64))
                let fill = try bot.histogram("fill", unit: .nanoseconds)
                // Read as a little-endian time, "a=b" and "=db1" are a few ns: before every real record.
                let exemplars = [try Bot.Exemplar(encoded: "a=b"), try Bot.Exemplar(encoded: "job_id=1234\nhost=db1")]
                for value in 1...4 { fill.record(UInt64(value), exemplar: exemplars[value % 2]) }
            }
            let run = try dump(directory, "check", "ex")
            #expect(run.status == 0 && run.output == "ring ex: ok (10 records in 1 lane, 1 metric, producer dead)\n", "\(run.output)")
            let records = try dump(directory, "records", "ex", "--json").json().objects("records")
            #expect(records.compactMap { $0.uint64("cursor") } == Array(0...9))
        }
    }

    @Test("the test layout is the file's: the offsets come from the header the producer wrote")
    func layoutMatchesTheFile() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "ring", count: 1, capacity: 16)
            let path = directory.filePath(for: "ring")
            let header = fileHeader(path)
            #expect(header.version == RS_FORMAT_VERSION_MIN && header.capacity_log2 == 4)
            #expect(header.lanes_offset == layout.geometry.lanes_offset && header.lane_size == layout.geometry.lane_size)
            #expect(header.lanes_allocated == 1 && header.max_lanes == RS_DEFAULT_MAX_LANES)
            var info = stat()
            #expect(stat(path, &info) == 0 && Int(info.st_size) == layout.fileSize(lanes: 1))
        }
    }

    @Test(
        "each corruption is named, one line each, exit 1",
        arguments: [
            ("bad magic", [(headerOffset(\.magic), [0xEF, 0xBE, 0xAD, 0xDE])], "bad magic 0x45444953deadbeef (not a Ringside ring)"),
            ("version", [(headerOffset(\.version), bytes(UInt32(7)))], "unsupported format version 7"),
            ("header size", [(headerOffset(\.header_size), bytes(UInt32(1)))], "bad layout: header_size is 1, expected 4096"),
            ("record size", [(headerOffset(\.record_size), bytes(UInt32(33)))], "bad layout: record_size is 33, expected 32"),
            ("capacity", [(headerOffset(\.capacity_log2), bytes(UInt32(40)))], "bad layout: capacity_log2 is 40"),
            (
                "lanes offset", [(headerOffset(\.lanes_offset), bytes(UInt64(1)))],
                "bad layout: lanes_offset is 1, expected \(layout.lanesOffset)"
            ),
            ("max lanes", [(headerOffset(\.max_lanes), bytes(UInt32(0)))], "bad layout: max_lanes is 0, expected 1 to \(RS_MAX_LANES)"),
            ("lanes allocated", [(headerOffset(\.lanes_allocated), bytes(UInt32(65)))], "lanes_allocated is 65, more than max_lanes 64"),
            ("metric count", [(headerOffset(\.metric_count), bytes(UInt32(257)))], "metric count 257 exceeds the registry's 256 entries"),
            (
                "read cursor past write", [(layout.lane(0, \.read_cursor), bytes(UInt64(9)))],
                "lane 0: cursors out of range: the read cursor 9 is past the write cursor 5"
            ),
            (
                "write cursor past capacity", [(layout.lane(0, \.write_cursor), bytes(UInt64(100)))],
                "lane 0: cursors out of range: read 0, write 100: 100 records, more than the lane's capacity of 16"
            ),
            ("lane state", [(layout.lane(0, \.state), bytes(UInt32(7)))], "lane 0: unknown state 7"),
            ("registry kind", [(layout.registry(0, \.kind), [9])], "registry entry 0: unknown kind 9"),
            ("registry name", [(layout.registry(0, \.name), [UInt8(ascii: "9")])], "registry entry 0: the name must match"),
            ("record sequence", [(layout.record(2, \.sequence), [77])], "lane 0 record 2: its sequence is 77"),
            (
                "record metric", [(layout.record(3, \.metric), [5])],
                "lane 0 record 3: metric index 5 is not registered (the registry has 1)"
            ),
            ("record kind", [(layout.record(1, \.kind), [2])], "lane 0 record 1: kind gauge but metric 0 (sequence) is a histogram"),
            (
                "counter record", [(layout.record(0, \.kind), [UInt8(RS_KIND_COUNTER.rawValue)])],
                "lane 0 record 0: a counter's record (counters live in cells and write none)"
            ),
            ("record flags", [(layout.record(4, \.flags), [0x84])], "lane 0 record 4: unknown flags 0x84"),
        ] as [(String, [(Int, [UInt8])], String)])
    func corruption(name: String, damage: [(Int, [UInt8])], expected: String) throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "victim", count: 5, capacity: 16)
            let path = directory.filePath(for: "victim")
            for (offset, bytes) in damage {
                for (index, byte) in bytes.enumerated() { patch(path, at: offset + index, with: byte) }
            }
            let run = try dump(directory, "check", "victim")
            #expect(run.status == 1, "\(name)")
            #expect(run.outputLines.count == 1, "\(run.output)")
            #expect(
                run.output == "ring victim: \(path) is corrupt: " + expected + "\n" || run.output.contains(expected),
                "\(name): \(run.output)")
            #expect(run.output.hasPrefix("ring victim: \(path) is corrupt: "))

            let json = try dump(directory, "check", "victim", "--json").json()
            #expect(json.bool("ok") == false)
            #expect(json.objects("rings").first?["problems"] as? [String] == run.outputLines)
        }
    }

    @Test("a sampled lane's weighted records check sound, records shows their bucket weights, and a weight on a gauge is a problem")
    func sampledRecords() throws {
        try withBot("sampled", options: .init(laneCapacity: 64)) { directory, bot in
            let fills = try bot.histogram("fills")
            let consumer = try RingConsumer("sampled", directory: directory, readsWeights: true)  // reads weights, never drains
            for value in 0..<10_000 { fills.record(UInt64(value)) }
            let check = try dump(directory, "check", "sampled")
            #expect(check.status == 0 && check.output.hasPrefix("ring sampled: ok"), "\(check.output)")
            let records = try dump(directory, "records", "sampled")
            #expect(records.output.contains("weight="), "\(records.output)")
            let weights = try dump(directory, "records", "sampled", "--json").json().objects("records").compactMap { $0.uint64("weight") }
            #expect(weights.count > 32 && weights.contains { $0 > 1 } && weights.allSatisfy { $0.nonzeroBitCount == 1 })
            let info = try dump(directory, "info", "sampled")
            #expect(info.output.contains("histograms sampled past 32 records in a lane (50.0 %) only where"), "\(info.output)")
            #expect(info.output.contains("calls gathered"), "\(info.output)")
            #expect(info.output.contains("read: a filling lane may be sampled"), "\(info.output)")
            withExtendedLifetime((bot, fills, consumer)) {}
        }
        // A gauge's record never carries a weight.
        try withBot("gauged", options: .init(laneCapacity: 16)) { directory, bot in
            try bot.gauge("level").set(1)
            let path = try #require(bot.path)
            patch(path, at: layout.record(0, \.flags), with: UInt8(0x10))
            let check = try dump(directory, "check", "gauged")
            #expect(check.status == 1 && check.output.contains("record 0: a span, exemplar or weight flag on a gauge"), "\(check.output)")
        }
    }

    @Test("several problems give several lines")
    func severalProblems() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "victim", count: 5, capacity: 16)
            let path = directory.filePath(for: "victim")
            patch(path, at: layout.record(0, \.metric), with: UInt32(3))
            patch(path, at: layout.record(1, \.sequence), with: UInt64(99))
            let run = try dump(directory, "check", "victim")
            #expect(run.status == 1)
            #expect(run.outputLines.count == 2)
            #expect(run.outputLines[0].hasSuffix("lane 0 record 0: metric index 3 is not registered (the registry has 1)"))
            #expect(run.outputLines[1].hasSuffix("lane 0 record 1: its sequence is 99"))
        }
    }

    @Test("every bad lane is named, not only the first; records in other lanes are checked with their lane")
    func badLanes() throws {
        try withRingDirectory { directory in
            try makeLanesRing(directory, "victim", threads: 3, count: 4, capacity: 16)
            let path = directory.filePath(for: "victim")
            patch(path, at: layout.lane(0, \.read_cursor), with: UInt64(6))
            patch(path, at: layout.lane(2, \.write_cursor), with: UInt64(40))
            let run = try dump(directory, "check", "victim")
            #expect(run.status == 1)
            #expect(run.outputLines.count == 2, "\(run.output)")
            #expect(run.outputLines.first?.hasSuffix("lane 0: cursors out of range: the read cursor 6 is past the write cursor 5") == true)
            #expect(
                run.outputLines.last?.hasSuffix(
                    "lane 2: cursors out of range: read 0, write 40: 40 records, more than the lane's capacity of 16") == true)

            try makeLanesRing(directory, "records", threads: 2, count: 4, capacity: 16)
            patch(directory.filePath(for: "records"), at: layout.record(lane: 1, 2, \.sequence), with: UInt64(12))
            let records = try dump(directory, "check", "records")
            #expect(
                records.outputLines == [
                    "ring records: \(directory.filePath(for: "records")) is corrupt: "
                        + "lane 1 record 2: its sequence is 12"
                ])
        }
    }

    @Test("a counter's record is a problem: counters keep their totals in cells and write no records")
    func counterRecord() throws {
        try withRingDirectory { directory in
            #expect(try runProcess("ringside-emit", ["--dir", directory.path, "--ring", "mixed", "latency", "7", "8"]).status == 0)
            #expect(
                try runProcess("ringside-emit", ["--dir", directory.path, "--ring", "mixed", "orders", "--kind", "counter", "5"]).status
                    == 0)
            #expect(try dump(directory, "check", "mixed").status == 0)
            // Record 1 made into a record of the counter (metric 1), as a broken producer might write it.
            let path = directory.filePath(for: "mixed")
            let recordLayout = BotFileLayout(capacity: 1 << Int(RS_DEFAULT_LANE_CAPACITY_LOG2))
            patch(path, at: recordLayout.record(1, \.metric), with: UInt32(1))
            patch(path, at: recordLayout.record(1, \.kind), with: UInt8(RS_KIND_COUNTER.rawValue))
            let run = try dump(directory, "check", "mixed")
            #expect(run.status == 1)
            #expect(
                run.outputLines == [
                    "ring mixed: \(path) is corrupt: lane 0 record 1: a counter's record (counters live in cells and write none)"
                ])
        }
    }

    @Test("a truncated file: too short for its header part, or for its lanes")
    func truncated() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "short", count: 5, capacity: 16)
            truncate(directory.filePath(for: "short"), 5000)
            let run = try dump(directory, "check", "short")
            #expect(run.status == 1)
            #expect(run.output.contains("is corrupt: truncated: the file has 5000 bytes, the layout needs \(layout.lanesOffset)"))

            // The part before the lanes is whole, but the last of three lanes is cut in half.
            try makeLanesRing(directory, "lanes", threads: 3, count: 4, capacity: 16)
            let size = layout.fileSize(lanes: 2) + layout.laneSize / 2
            truncate(directory.filePath(for: "lanes"), off_t(size))
            let lanes = try dump(directory, "check", "lanes")
            #expect(lanes.status == 1)
            #expect(
                lanes.outputLines == [
                    "ring lanes: \(directory.filePath(for: "lanes")) is corrupt: truncated: the file has "
                        + "\(size) bytes, its 3 lanes need \(layout.fileSize(lanes: 3))"
                ])
            for command in ["info", "records", "stats"] {
                let other = try dump(directory, command, "lanes")
                #expect(other.status == 1 && other.errors.contains("is corrupt: truncated"), "\(command): \(other.errors)")
            }
        }
    }

    @Test("a ring still being created is reported as such, not as a problem")
    func notReady() throws {
        try withRingDirectory { directory in
            _ = FileManager.default.createFile(
                atPath: directory.filePath(for: "young"), contents: Data(count: 8192),
                attributes: [.posixPermissions: 0o600])
            let run = try dump(directory, "check", "young")
            #expect(run.status == 0)
            #expect(run.output == "ring young: not checked: the file is still being created (format version 0)\n")
            #expect(try dump(directory, "list").output.contains("being created"))
        }
    }

    @Test("check --all flags only the bad ring, and exits 1")
    func all() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "a", count: 3, capacity: 16)
            try makeSequenceRing(directory, "b", count: 3, capacity: 16)
            patch(directory.filePath(for: "b"), at: headerOffset(\.magic), with: UInt64(1))
            let run = try dump(directory, "check", "--all")
            #expect(run.status == 1)
            #expect(run.outputLines.count == 2)
            #expect(run.outputLines[0].hasPrefix("ring a: ok"))
            #expect(run.outputLines[1].contains("ring b:") && run.outputLines[1].contains("bad magic 0x1"))
        }
    }

    @Test("random damage anywhere never crashes any command", arguments: 0..<6)
    func randomDamage(seed: Int) throws {
        try withRingDirectory { directory in
            try makeLanesRing(directory, "noise", threads: 2, count: 10, capacity: 16)
            let path = directory.filePath(for: "noise")
            var generator = SplitMix64(seed: UInt64(seed))
            // Mostly where the checks are: the header, the first registry entry, and each lane's
            // header, cells and records.
            let regions: [Range<Int>] = [
                0..<MemoryLayout<rs_header>.size,
                layout.registryOffset..<(layout.registryOffset + Int(RS_REGISTRY_ENTRY_SIZE)),
                layout.lane(0, \.write_cursor)..<(layout.lane(0, \.write_cursor) + Int(RS_LANE_HEADER_SIZE) + 3 * 8),
                layout.records(lane: 0)..<(layout.records(lane: 0) + 16 * Int(RS_RECORD_SIZE)),
                layout.lane(1, \.write_cursor)..<(layout.lane(1, \.write_cursor) + Int(RS_LANE_HEADER_SIZE) + 3 * 8),
                layout.records(lane: 1)..<(layout.records(lane: 1) + 16 * Int(RS_RECORD_SIZE)),
            ]
            for _ in 0..<(4 + seed * 8) {
                let region = regions[Int(generator.next() % UInt64(regions.count))]
                patch(
                    path, at: region.lowerBound + Int(generator.next() % UInt64(region.count)),
                    with: UInt8(truncatingIfNeeded: generator.next()))
            }
            for arguments in [["check", "noise"], ["info", "noise"], ["records", "noise"], ["stats", "noise"], ["list"]] {
                let run = try runProcess("ringside-dump", ["--dir", directory.path] + arguments)
                #expect(run.exitedNormally, "\(arguments) crashed")
                #expect(run.status == 0 || run.status == 1, "\(arguments): \(run.status) \(run.errors)")
            }
        }
    }
}

@Suite("ringside-dump clean removes only dead rings that are drained (--force: every dead one)")
struct CleanTests {
    /// A directory with one ring of each kind; returns the live producer (keep it alive).
    private func prepare(_ directory: RingDirectory) throws -> ChildProcess {
        // Drained means every lane drained.
        try makeLanesRing(directory, "drained", threads: 3, count: 3)
        _ = try drainAll(directory, "drained")
        try makeSequenceRing(directory, "backlog", count: 10)
        try makeSequenceRing(directory, "corrupt", count: 10)
        patch(directory.filePath(for: "corrupt"), at: headerOffset(\.magic), with: UInt64(1))
        _ = FileManager.default.createFile(
            atPath: directory.filePath(for: "unfinished"), contents: Data(count: 4096),
            attributes: [.posixPermissions: 0o600])
        let live = try holdRing(directory, "live", count: 0)  // alive and drained: must stay
        return live
    }

    private func present(_ directory: RingDirectory) -> [String] { directory.ringNames() }

    @Test("--dry-run removes nothing and says what it would remove")
    func dryRun() throws {
        try withRingDirectory { directory in
            let live = try prepare(directory)
            let run = try dump(directory, "clean", "--dry-run")
            #expect(run.status == 0)
            #expect(present(directory) == ["backlog", "corrupt", "drained", "live", "unfinished"])
            #expect(run.outputLines.contains { $0.hasPrefix("would remove ring drained: producer dead (was pid") })
            #expect(run.outputLines.contains { $0.hasPrefix("would remove ring unfinished: never finished being created") })
            #expect(run.outputLines.contains("kept ring live: producer alive (pid \(live.pid))"))
            #expect(run.outputLines.last == "would remove 2 of 5 rings in \(directory.path)")
        }
    }

    @Test("clean removes dead, drained rings and keeps the rest, saying why")
    func clean() throws {
        try withRingDirectory { directory in
            let live = try prepare(directory)
            let run = try dump(directory, "clean")
            #expect(run.status == 0)
            #expect(present(directory) == ["backlog", "corrupt", "live"])
            #expect(
                run.outputLines.contains { $0.hasPrefix("removed ring drained: producer dead (was pid") && $0.hasSuffix("fully drained") })
            #expect(
                run.outputLines.contains {
                    $0.hasPrefix("kept ring backlog:") && $0.contains("10 records not drained (--force removes it)")
                })
            #expect(run.outputLines.contains { $0.hasPrefix("kept ring corrupt: corrupt: bad magic") })
            #expect(run.outputLines.contains("kept ring live: producer alive (pid \(live.pid))"))
            #expect(run.outputLines.last == "removed 2 of 5 rings in \(directory.path)")
            // The live producer still owns its ring and can be read.
            #expect(try RingInspector("live", directory: directory).status().producerAlive)
        }
    }

    @Test("--force removes every dead ring, never a live one; --json says what it did")
    func force() throws {
        try withRingDirectory { directory in
            let live = try prepare(directory)
            let json = try dump(directory, "clean", "--force", "--json").json()
            #expect(present(directory) == ["live"])
            #expect(json.uint64("removed") == 4)
            let actions = Dictionary(uniqueKeysWithValues: json.objects("rings").map { ($0.string("name")!, $0.string("action")!) })
            #expect(
                actions == [
                    "backlog": "removed", "corrupt": "removed", "drained": "removed", "live": "kept",
                    "unfinished": "removed",
                ])
            live.kill()
            // Once its producer is dead, the (drained) ring goes too.
            let after = try dump(directory, "clean")
            #expect(after.outputLines.first?.hasPrefix("removed ring live:") == true)
            #expect(present(directory).isEmpty)
        }
    }
}
