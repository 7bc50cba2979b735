import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing
import RingsideJSON

@Suite("ringside-dump on real rings made by a real producer process")
struct DumpToolTests {
    @Test("list shows every ring, alive or dead by the producer lock, with its counts; --json parses")
    func list() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "finished", count: 40, capacity: 32) // 8 dropped
            let live = try holdRing(directory, "live", count: 5)

            let text = try dump(directory, "list")
            #expect(text.status == 0)
            let lines = text.outputLines
            #expect(lines.first?.hasPrefix("RING") == true)
            let finished = try #require(lines.first { $0.hasPrefix("finished ") })
            #expect(finished.contains("dead (lock free, pid gone)"))
            #expect(finished.contains("100.0%"))
            let liveLine = try #require(lines.first { $0.hasPrefix("live ") })
            #expect(liveLine.contains("\(live.pid)") && liveLine.contains("alive (lock held)"))

            let json = try dump(directory, "list", "--json").json()
            #expect(json.string("directory") == directory.path)
            let rings = json.objects("rings")
            #expect(rings.map { $0.string("name") } == ["finished", "live"])
            #expect(rings[0].uint64("written") == 32 && rings[0].uint64("dropped") == 8 && rings[0].uint64("backlog") == 32)
            #expect(rings[0].uint64("capacity") == 32 && rings[0].double("fill_percent") == 100)
            #expect(rings[0].object("producer")?.bool("alive") == false)
            #expect(rings[0].object("producer")?.bool("pid_exists") == false)
            #expect(rings[1].object("producer")?.bool("alive") == true)
            #expect(rings[1].object("producer")?.int("pid") == Int(live.pid))
            #expect(rings[1].uint64("written") == 5 && rings[1].uint64("format_version") == 1)
        }
    }

    @Test("list on an empty directory says so; on a missing one, fails with its path")
    func listEmptyAndMissing() throws {
        try withRingDirectory { directory in
            let empty = try dump(directory, "list")
            #expect(empty.status == 0 && empty.output == "no rings in \(directory.path)\n")
            let missing = try run("ringside-dump", ["list", "--dir", directory.path + "/nope"])
            #expect(missing.status == 1 && missing.errors.contains(directory.path + "/nope"))
        }
    }

    @Test("RINGSIDE_DIR chooses the directory when --dir is not given")
    func environmentDirectory() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "env", count: 1)
            let listed = try run("ringside-dump", ["list", "--json"], environment: [RingDirectory.environmentVariable: directory.path])
            #expect(try listed.json().objects("rings").map { $0.string("name") } == ["env"])
        }
    }

    @Test("info shows the whole header, cursors, counters and registry")
    func info() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "ring", count: 10, start: 100, capacity: 64)
            let text = try dump(directory, "info", "ring")
            #expect(text.status == 0)
            for expected in ["magic", "\"RINGSIDE\"", "format version  1", "capacity        64 records (capacity_log2 6)",
                             "write cursor    10 (records written)", "read cursor     0 (records consumed)", "sequence", "source=test", "histogram"] {
                #expect(text.output.contains(expected), "info lacks \(expected)")
            }
            let json = try dump(directory, "info", "ring", "--json", "--raw").json()
            let layout = try #require(json.object("layout"))
            #expect(layout.string("magic") == "0x45444953474e4952")
            #expect(layout.uint64("capacity") == 64 && layout.uint64("registry_offset") == 4096)
            #expect(layout.uint64("file_size") == 4096 + 256 * 512 + 64 * 32)
            #expect(json.object("producer")?.uint64("write_cursor") == 10)
            #expect(json.object("consumer")?.uint64("read_cursor") == 0)
            let metric = try #require(json.objects("metrics").first)
            #expect(metric.string("name") == "sequence" && metric.string("kind") == "histogram")
            #expect(metric.object("labels")?.string("source") == "test" && metric.uint64("sample_every") == 1)
            #expect(json.string("raw_header")?.count == 0x180 * 2)
        }
    }

    @Test("records --last N shows the newest N, oldest first, with names, times and values; --raw adds the bytes")
    func recordsLast() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "ring", count: 20, start: 1000)
            let text = try dump(directory, "records", "ring", "--last", "3")
            #expect(text.status == 0)
            let rows = text.outputLines.filter { $0.contains("sequence{source=\"test\"}") }
            #expect(rows.count == 3)
            #expect(rows.map { $0.split(separator: " ").first.map(String.init) } == ["17", "18", "19"])

            let json = try dump(directory, "records", "ring", "--last", "3", "--json", "--raw").json()
            let records = json.objects("records")
            #expect(records.compactMap { $0.uint64("value") } == [1017, 1018, 1019])
            #expect(records.compactMap { $0.uint64("cursor") } == [17, 18, 19])
            #expect(records.allSatisfy { $0.string("metric") == "sequence" && $0.string("kind") == "histogram" })
            let now = Date()
            for record in records {
                let time = try #require(record.string("time"))
                #expect(time.count == "2025-01-01T00:00:00.000000Z".count && time.hasSuffix("Z"))
                let formatter = ISO8601DateFormatter()
                formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
                let date = try #require(formatter.date(from: String(time.dropLast(4)) + "Z"))
                #expect(abs(date.timeIntervalSince(now)) < 120, "the record's wall time is about now")
                // The raw bytes are the record: its value sits at bytes 8 to 15, little-endian.
                let raw = try #require(record.string("raw"))
                #expect(raw.count == 64)
                let valueHex = raw.dropFirst(16).prefix(16)
                let bytes = stride(from: 0, to: 16, by: 2).map { UInt64(valueHex.dropFirst($0).prefix(2), radix: 16)! }
                #expect(bytes.enumerated().reduce(UInt64(0)) { $0 | $1.element << (8 * UInt64($1.offset)) } == record.uint64("value"))
            }
        }
    }

    @Test("records --metric keeps that metric's records; an unknown metric is an error naming the ring's metrics")
    func recordsByMetric() throws {
        try withRingDirectory { directory in
            #expect(try run("ringside-emit", ["--dir", directory.path, "--ring", "mixed", "a", "1", "2", "3"]).status == 0)
            #expect(try run("ringside-emit", ["--dir", directory.path, "--ring", "mixed", "b", "--kind", "gauge", "0.5"]).status == 0)
            #expect(try run("ringside-emit", ["--dir", directory.path, "--ring", "mixed", "a", "4"]).status == 0)
            let only = try dump(directory, "records", "mixed", "--metric", "a", "--last", "2", "--json").json()
            #expect(only.objects("records").compactMap { $0.uint64("value") } == [3, 4])
            let gauge = try dump(directory, "records", "mixed", "--metric", "b", "--json").json()
            #expect(gauge.objects("records").compactMap { $0.double("value") } == [0.5])
            let unknown = try dump(directory, "records", "mixed", "--metric", "zzz")
            #expect(unknown.status == 1)
            #expect(unknown.errors == "ringside-dump: ring mixed: no metric \"zzz\"; its metrics: a, b\n")
        }
    }

    @Test("records never moves the consumer's cursor")
    func recordsLeavesCursors() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "ring", count: 50)
            _ = try drainAll(directory, "ring") // read cursor 50
            try makeSequenceRing(directory, "ring", count: 30, start: 50)
            #expect(try dump(directory, "records", "ring").status == 0)
            #expect(try dump(directory, "stats", "ring").status == 0)
            let status = try RingInspector("ring", directory: directory).status()
            #expect(status.readCursor == 50 && status.writeCursor == 80)
            #expect(try drainAll(directory, "ring").map(\.value) == Array(50..<80))
        }
    }

    @Test("records while the producer writes and a collector drains: every record shown is whole and in order")
    func recordsDuringTraffic() throws {
        try withRingDirectory { directory in
            // The producer waits for room, so it writes for as long as the test drains.
            let producer = try ChildProcess("ringside-test-producer", [
                "sequence", "--dir", directory.path, "--ring", "busy", "--count", "100000000", "--capacity", "256", "--wait",
            ])
            #expect(eventually { (try? RingInspector("busy", directory: directory).status().writeCursor) ?? 0 > 0 })
            let stop = Stop()
            let path = directory.path
            let drainer = Thread {
                // A collector: drains small batches with pauses, so the ring holds records while
                // the dumps look (a drainer that keeps it empty would leave them nothing to show).
                guard let consumer = try? RingConsumer("busy", directory: RingDirectory(path)) else { return }
                while !stop.isSet {
                    _ = try? consumer.drain(limit: 64) { _, _ in }
                    usleep(500)
                }
            }
            drainer.start()
            defer { stop.set() }

            var seen = 0
            var writesDuring = Set<UInt64>()
            for _ in 0..<8 {
                let run = try dump(directory, "records", "busy", "--json")
                #expect(run.status == 0, "\(run.errors)")
                let json = try run.json()
                writesDuring.insert(json.uint64("written") ?? 0)
                let records = json.objects("records")
                let cursors = records.compactMap { $0.uint64("cursor") }
                #expect(cursors.count == records.count)
                // Whole: the test producer writes value == sequence == cursor into a fresh ring.
                #expect(records.allSatisfy { $0.uint64("value") == $0.uint64("cursor") && $0.uint64("sequence") == $0.uint64("cursor") })
                #expect(zip(cursors, cursors.dropFirst()).allSatisfy { $1 == $0 + 1 }, "contiguous, oldest first")
                seen += records.count
            }
            stop.set()
            #expect(writesDuring.count > 1, "the producer wrote while the dumps ran")
            #expect(seen > 0)
            producer.kill()
        }
    }

    @Test("stats gives exact nearest-rank percentiles, counter sums and gauge extremes")
    func stats() throws {
        try withRingDirectory { directory in
            let emit = { (arguments: [String]) throws -> ToolRun in
                try run("ringside-emit", ["--dir", directory.path, "--ring", "s"] + arguments)
            }
            #expect(try emit(["latency", "--unit", "us"] + (1...1000).reversed().map(String.init)).status == 0)
            #expect(try emit(["orders", "--kind", "counter", "1", "2", "3", "4"]).status == 0)
            #expect(try emit(["exposure", "--kind", "gauge", "5.5", "-2", "9", "3.25"]).status == 0)
            let json = try dump(directory, "stats", "s", "--json").json()
            #expect(json.uint64("records") == 1008)
            let metrics = Dictionary(uniqueKeysWithValues: json.objects("metrics").map { ($0.string("name")!, $0) })
            let latency = try #require(metrics["latency"])
            #expect(latency.uint64("count") == 1000 && latency.string("unit") == "us")
            #expect([latency.uint64("min"), latency.uint64("p50"), latency.uint64("p90"), latency.uint64("p99"),
                     latency.uint64("p999"), latency.uint64("max")] == [1, 500, 900, 990, 999, 1000])
            #expect(metrics["orders"]?.uint64("sum") == 10 && metrics["orders"]?.uint64("count") == 4)
            let exposure = try #require(metrics["exposure"])
            #expect(exposure.double("last") == 3.25 && exposure.double("min") == -2 && exposure.double("max") == 9)

            let text = try dump(directory, "stats", "s")
            #expect(text.status == 0)
            let row = try #require(text.outputLines.first { $0.hasPrefix("latency") })
            #expect(row.split(separator: " ").map(String.init) == ["latency", "us", "all", "1000", "1", "500", "900", "990", "999", "1000"])
        }
    }

    @Test("watch --count N prints N refreshes; --json one object per line, with rates after the first")
    func watch() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "w", count: 10)
            let json = try dump(directory, "watch", "--interval", "100ms", "--count", "3", "--json")
            #expect(json.status == 0)
            let frames = try json.outputLines.map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
            #expect(frames.count == 3)
            #expect(frames.allSatisfy { $0.objects("rings").first?.uint64("written") == 10 })
            #expect(frames[0].objects("rings").first?["written_per_second"] is NSNull)
            #expect(frames[2].objects("rings").first?.double("written_per_second") == 0)

            let text = try dump(directory, "watch", "w", "--interval", "0.1", "--count", "2")
            #expect(text.status == 0)
            #expect(text.outputLines.filter { $0.hasPrefix("ringside-dump watch:") }.count == 2)
            #expect(!text.output.contains("\u{1B}["), "no screen control codes when not on a terminal")
            #expect(text.outputLines.filter { $0.hasPrefix("w ") }.count == 2)
        }
    }

    @Test("an unknown ring is an error listing the rings that exist")
    func unknownRing() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "alpha", count: 1)
            try makeSequenceRing(directory, "beta", count: 1)
            for command in ["info", "records", "stats", "check"] {
                let run = try dump(directory, command, "gamma")
                #expect(run.status == 1)
                #expect(run.errors.contains("ring gamma: no such ring") || run.output.contains("ring gamma: no such ring"))
                #expect((run.errors + run.output).contains("rings there: alpha, beta"))
            }
        }
    }

    @Test("a ring owned by another user is refused, naming its owner")
    func permissionDenied() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "theirs", count: 1)
            guard chown(directory.filePath(for: "theirs"), 4242, 4242) == 0 else { return } // needs root; not a failure
            let run = try dump(directory, "info", "theirs")
            #expect(run.status == 1)
            #expect(run.errors.contains("owned by uid 4242"), "\(run.errors)")
            #expect(try dump(directory, "info", "theirs", "--allow-uid", "4242").status == 0)
            let listed = try dump(directory, "list", "--json").json()
            #expect(listed.objects("rings").first?.object("error")?.string("kind") == "permission_denied")
        }
    }

    @Test("usage errors: exit 2 and one line on standard error, nothing else", arguments: [
        [], ["frobnicate"], ["list", "--last", "3"], ["records"], ["records", "a", "b"], ["records", "x", "--last", "many"],
        ["records", "bad/name"], ["watch", "--interval", "0"], ["watch", "--count", "0"], ["check"], ["check", "x", "--all"],
        ["clean", "x"], ["info", "x", "--dir"],
    ])
    func usageErrors(arguments: [String]) throws {
        let run = try run("ringside-dump", arguments)
        #expect(run.status == 2)
        #expect(run.output.isEmpty)
        #expect(run.errorLines.count == 1 && run.errors.hasPrefix("ringside-dump"), "\(run.errors)")
    }

    @Test("--help for the tool and every command", arguments: ["", "list", "info", "records", "watch", "stats", "check", "clean"])
    func help(command: String) throws {
        let run = try run("ringside-dump", (command.isEmpty ? [] : [command]) + ["--help"])
        #expect(run.status == 0)
        #expect(run.output.hasPrefix("usage: ringside-dump \(command)".trimmingCharacters(in: .whitespaces)))
    }

    @Test("every reading command's --json is one valid JSON document", arguments: [
        ["list"], ["info", "j"], ["records", "j"], ["records", "j", "--raw"], ["stats", "j"], ["check", "j"], ["check", "--all"],
        ["clean", "--dry-run"],
    ])
    func jsonIsValid(arguments: [String]) throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "j", count: 5)
            #expect(try run("ringside-emit", ["--dir", directory.path, "--ring", "j2", "name\"with", "1"]).status == 2)
            #expect(try run("ringside-emit", ["--dir", directory.path, "--ring", "j2", "g", "--kind", "gauge",
                                              "--label", "quote=a\"b\\c\tend", "1.5"]).status == 0)
            let run = try run("ringside-dump", ["--dir", directory.path] + arguments + ["--json"])
            #expect(run.status == 0, "\(run.errors)")
            #expect(run.outputLines.count == 1)
            _ = try run.json()
        }
    }
}

/// A flag one thread sets and another reads.
final class Stop: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}
