import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

/// The offsets of a ring made by `makeSequenceRing` with capacity 16 (and the default 256 metrics).
private let registryOffset = 4096
private let recordsOffset = 4096 + 256 * 512

private func record(_ index: Int, field: Int) -> Int { recordsOffset + index * 32 + field }

@Suite("ringside-dump check: each kind of corruption gets its message and exit 1; never a crash")
struct CheckTests {
    @Test("a sound ring: exit 0 and an ok line")
    func soundRing() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "good", count: 5, capacity: 16)
            let run = try dump(directory, "check", "good")
            #expect(run.status == 0)
            #expect(run.output == "ring good: ok (5 records in the ring, 1 metric, producer dead)\n")
        }
    }

    @Test("each corruption is named, one line each, exit 1", arguments: [
        ("bad magic", [(0, [0xEF, 0xBE, 0xAD, 0xDE])], "bad magic 0x45444953deadbeef (not a Ringside ring)"),
        ("version", [(0x008, [7, 0, 0, 0])], "unsupported format version 7"),
        ("header size", [(0x00C, [1, 0, 0, 0])], "bad layout: header_size is 1, expected 4096"),
        ("record size", [(0x010, [33, 0, 0, 0])], "bad layout: record_size is 33, expected 32"),
        ("capacity", [(0x014, [40, 0, 0, 0])], "bad layout: capacity_log2 is 40"),
        ("file size field", [(0x030, [1, 0, 0, 0])], "bad layout: file_size is 1"),
        ("cursors", [(0x100, [9, 0, 0, 0])], "cursors out of range: read 9, write 5, capacity 16"),
        ("metric count", [(0x0A4, [1, 1, 0, 0])], "metric count 257 exceeds the registry's 256 entries"),
        ("registry kind", [(registryOffset + 4, [9])], "registry entry 0: unknown kind 9"),
        ("registry name", [(registryOffset + 0x18, [UInt8(ascii: "9")])], "registry entry 0: the name must match"),
        ("record sequence", [(recordsOffset + 2 * 32 + 16, [77])], "record 2: its sequence is 77"),
        ("record metric", [(recordsOffset + 3 * 32 + 24, [5])], "record 3: metric index 5 is not registered (the registry has 1)"),
        ("record kind", [(recordsOffset + 1 * 32 + 28, [2])], "record 1: kind gauge but metric 0 (sequence) is a histogram"),
        ("record flags", [(recordsOffset + 4 * 32 + 29, [0x80])], "record 4: unknown flags 0x80"),
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
            #expect(run.output == "ring victim: \(path) is corrupt: " + expected + "\n" || run.output.contains(expected),
                    "\(name): \(run.output)")
            #expect(run.output.hasPrefix("ring victim: \(path) is corrupt: "))

            let json = try dump(directory, "check", "victim", "--json").json()
            #expect(json.bool("ok") == false)
            #expect(json.objects("rings").first?["problems"] as? [String] == run.outputLines)
        }
    }

    @Test("several problems give several lines")
    func severalProblems() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "victim", count: 5, capacity: 16)
            let path = directory.filePath(for: "victim")
            patch(path, at: record(0, field: 24), with: UInt32(3))
            patch(path, at: record(1, field: 16), with: UInt64(99))
            let run = try dump(directory, "check", "victim")
            #expect(run.status == 1)
            #expect(run.outputLines.count == 2)
            #expect(run.outputLines[0].hasSuffix("record 0: metric index 3 is not registered (the registry has 1)"))
            #expect(run.outputLines[1].hasSuffix("record 1: its sequence is 99"))
        }
    }

    @Test("a truncated file and an empty one")
    func truncated() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "short", count: 5, capacity: 16)
            truncate(directory.filePath(for: "short"), 5000)
            let run = try dump(directory, "check", "short")
            #expect(run.status == 1)
            #expect(run.output.contains("is corrupt: truncated: the file has 5000 bytes, the layout needs"))
        }
    }

    @Test("a ring still being created is reported as such, not as a problem")
    func notReady() throws {
        try withRingDirectory { directory in
            _ = FileManager.default.createFile(atPath: directory.filePath(for: "young"), contents: Data(count: 8192),
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
            patch(directory.filePath(for: "b"), at: 0, with: UInt64(1))
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
            try makeSequenceRing(directory, "noise", count: 20, capacity: 16)
            let path = directory.filePath(for: "noise")
            var generator = SplitMix64(seed: UInt64(seed))
            let size = recordsOffset + 16 * 32
            for _ in 0..<(4 + seed * 8) {
                // Mostly the header and the first registry entry, where the checks are.
                let region = [0x180, registryOffset + 0x200, size][Int(generator.next() % 3)]
                let start = region == size ? recordsOffset : (region == 0x180 ? 0 : registryOffset)
                patch(path, at: start + Int(generator.next() % UInt64(region - start)), with: UInt8(truncatingIfNeeded: generator.next()))
            }
            for arguments in [["check", "noise"], ["info", "noise"], ["records", "noise"], ["stats", "noise"], ["list"]] {
                let run = try run("ringside-dump", ["--dir", directory.path] + arguments)
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
        try makeSequenceRing(directory, "drained", count: 10)
        _ = try drainAll(directory, "drained")
        try makeSequenceRing(directory, "backlog", count: 10)
        try makeSequenceRing(directory, "corrupt", count: 10)
        patch(directory.filePath(for: "corrupt"), at: 0, with: UInt64(1))
        _ = FileManager.default.createFile(atPath: directory.filePath(for: "unfinished"), contents: Data(count: 4096),
                                           attributes: [.posixPermissions: 0o600])
        let live = try holdRing(directory, "live", count: 0) // alive and drained: must stay
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
            #expect(run.outputLines.contains { $0.hasPrefix("removed ring drained: producer dead (was pid") && $0.hasSuffix("fully drained") })
            #expect(run.outputLines.contains { $0.hasPrefix("kept ring backlog:") && $0.contains("10 records not drained (--force removes it)") })
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
            #expect(actions == ["backlog": "removed", "corrupt": "removed", "drained": "removed", "live": "kept",
                                "unfinished": "removed"])
            live.kill()
            // Once its producer is dead, the (drained) ring goes too.
            let after = try dump(directory, "clean")
            #expect(after.outputLines.first?.hasPrefix("removed ring live:") == true)
            #expect(present(directory).isEmpty)
        }
    }
}
