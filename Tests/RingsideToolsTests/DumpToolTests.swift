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
    @Test("list shows every ring, alive or dead by the producer lock, with its lanes and counts; --json parses")
    func list() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "finished", count: 40, capacity: 32)  // 8 dropped
            let live = try holdRing(directory, "live", count: 5)

            let text = try dump(directory, "list")
            #expect(text.status == 0)
            let lines = text.outputLines
            #expect(lines.first?.hasPrefix("RING") == true)
            let finished = try #require(lines.first { $0.hasPrefix("finished ") })
            #expect(finished.contains("dead (lock free, pid gone)"))
            #expect(finished.contains("100.0%") && finished.contains(" 1/64 "), "one lane of the 64 a bot may have")
            let liveLine = try #require(lines.first { $0.hasPrefix("live ") })
            #expect(liveLine.contains("\(live.pid)") && liveLine.contains("alive (lock held)"))

            let json = try dump(directory, "list", "--json").json()
            #expect(json.string("directory") == directory.path)
            let rings = json.objects("rings")
            #expect(rings.map { $0.string("name") } == ["finished", "live"])
            #expect(rings[0].uint64("written") == 32 && rings[0].uint64("dropped") == 8 && rings[0].uint64("backlog") == 32)
            #expect(rings[0].uint64("capacity") == 32 && rings[0].double("fill_percent") == 100)
            #expect(rings[0].uint64("lanes_allocated") == 1 && rings[0].uint64("max_lanes") == 64)
            #expect(rings[0].object("producer")?.bool("alive") == false)
            #expect(rings[0].object("producer")?.bool("pid_exists") == false)
            #expect(rings[1].object("producer")?.bool("alive") == true)
            #expect(rings[1].object("producer")?.int("pid") == Int(live.pid))
            #expect(rings[1].uint64("written") == 5 && rings[1].uint64("format_version") == UInt64(RS_FORMAT_VERSION_MIN))
            #expect(rings[1].uint64("lanes_held") == 1, "the live producer's ring holds its lane")
        }
    }

    @Test("list on an empty directory says so; on a missing one, fails with its path")
    func listEmptyAndMissing() throws {
        try withRingDirectory { directory in
            let empty = try dump(directory, "list")
            #expect(empty.status == 0 && empty.output == "no rings in \(directory.path)\n")
            let missing = try runProcess("ringside-dump", ["list", "--dir", directory.path + "/nope"])
            #expect(missing.status == 1 && missing.errors.contains(directory.path + "/nope"))
        }
    }

    @Test("RINGSIDE_DIR chooses the directory when --dir is not given")
    func environmentDirectory() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "env", count: 1)
            let listed = try runProcess(
                "ringside-dump", ["list", "--json"], environment: [RingDirectory.environmentVariable: directory.path])
            #expect(try listed.json().objects("rings").map { $0.string("name") } == ["env"])
        }
    }

    @Test("info shows the whole header, the lane, the sums and the registry")
    func info() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "ring", count: 10, start: 100, capacity: 64)
            let text = try dump(directory, "info", "ring")
            #expect(text.status == 0)
            for expected in [
                "magic", "\"RINGSIDE\"", "format version  \(RS_FORMAT_VERSION_MIN)",
                "lane capacity   64 records (capacity_log2 6)", "max lanes       64",
                "write cursor    10 (records written", "read cursor     0 (records consumed",
                "lanes (1 of 64, each holds 64 records)", "sequence", "source=test", "histogram",
            ] {
                #expect(text.output.contains(expected), "info lacks \(expected)")
            }
            let laneRow = try #require(
                text.outputLines.first { $0.hasPrefix("  LANE") }.flatMap { header in
                    text.outputLines.firstIndex(of: header).map { text.outputLines[$0 + 1] }
                })
            #expect(laneRow.contains(" 10 of 64 ") && laneRow.contains("15.6%"), "\(laneRow)")

            let json = try dump(directory, "info", "ring", "--json", "--raw").json()
            let layout = try #require(json.object("layout"))
            let expected = BotFileLayout(capacity: 64)
            #expect(layout.string("magic") == "0x45444953474e4952")
            #expect(layout.uint64("capacity") == 64 && layout.uint64("registry_offset") == UInt64(expected.registryOffset))
            #expect(
                layout.uint64("lanes_offset") == UInt64(expected.lanesOffset) && layout.uint64("lane_size") == UInt64(expected.laneSize))
            #expect(layout.uint64("file_size") == UInt64(expected.fileSize(lanes: 1)))
            #expect(layout.uint64("file_size") == json.object("file")?.uint64("size"))
            #expect(json.object("producer")?.uint64("write_cursor") == 10)
            #expect(json.object("producer")?.uint64("lanes_allocated") == 1)
            #expect(json.object("consumer")?.uint64("read_cursor") == 0)
            let lanes = json.objects("lanes")
            #expect(lanes.count == 1)
            #expect(lanes.first?.uint64("write_cursor") == 10 && lanes.first?.uint64("read_cursor") == 0)
            #expect(lanes.first?.uint64("backlog") == 10 && lanes.first?.uint64("capacity") == 64)
            #expect(lanes.first?.bool("held") == false, "its producer has exited")
            let metric = try #require(json.objects("metrics").first)
            #expect(metric.string("name") == "sequence" && metric.string("kind") == "histogram")
            #expect(metric.object("labels")?.string("source") == "test" && metric.uint64("sample_every") == 1)
            #expect(metric.object("cells")?.uint64("dropped") == 0)
            #expect(json.string("raw_header")?.count == MemoryLayout<rs_header>.size * 2)
        }
    }

    @Test("info shows each live thread's lane and the metrics' cells: counter totals, gauge values, drops")
    func infoLanesAndCells() throws {
        try withRingDirectory { directory in
            // Three threads, each holding its lane: 18 histogram values and a gauge record each, in
            // lanes of 16 records, so each lane drops 3 records (2 of the histogram's, its gauge's).
            let bot = try holdLanesRing(directory, "threads", threads: 3, count: 18, capacity: 16)
            let json = try dump(directory, "info", "threads", "--json").json()
            let lanes = json.objects("lanes")
            #expect(lanes.map { $0.uint64("lane") } == [0, 1, 2])
            #expect(lanes.allSatisfy { $0.string("state") == "active" && $0.bool("held") == true && $0.uint64("claims") == 1 })
            let threadIDs = lanes.compactMap { $0.int("owner_tid") }
            #expect(Set(threadIDs).count == 3 && threadIDs.allSatisfy { $0 > 0 && $0 != Int(bot.pid) })
            #expect(lanes.allSatisfy { $0.uint64("write_cursor") == 16 && $0.uint64("backlog") == 16 && $0.uint64("dropped") == 3 })
            #expect(lanes.allSatisfy { $0.double("fill_percent") == 100 })
            #expect(json.object("producer")?.uint64("write_cursor") == 48, "the sum over the lanes")
            #expect(json.object("producer")?.uint64("dropped") == 9 && json.object("producer")?.uint64("lanes_held") == 3)
            let layout = BotFileLayout(capacity: 16)
            #expect(json.object("layout")?.uint64("file_size") == UInt64(layout.fileSize(lanes: 3)))
            let metrics = Dictionary(uniqueKeysWithValues: json.objects("metrics").map { ($0.string("name")!, $0) })
            // Counters are exact whatever the lanes held: 54 increments, none lost to the full lanes.
            #expect(metrics["lane_increments"]?.object("cells")?.uint64("total") == 54)
            #expect(metrics["lane_values"]?.object("cells")?.uint64("dropped") == 6)
            #expect(metrics["lane_level"]?.object("cells")?.double("last") == 2)
            #expect(metrics["lane_level"]?.object("cells")?.uint64("dropped") == 3)

            let text = try dump(directory, "info", "threads")
            #expect(text.status == 0)
            for (lane, tid) in threadIDs.enumerated() {
                let row = try #require(text.outputLines.first { $0.hasPrefix(String(format: "  %4d  active ", lane)) })
                #expect(row.contains(" \(tid) ") && row.contains(" 16 of 16 "), "\(row)")
            }
            #expect(text.outputLines.contains { $0.contains("lane_increments") && $0.contains("total 54") })
            #expect(text.outputLines.contains { $0.contains("lane_level") && $0.contains("last 2.0") })

            bot.kill()
            // The threads died with their process, which never retired their lanes: info says so.
            let after = try dump(directory, "info", "threads")
            #expect(after.outputLines.filter { $0.contains("active (producer dead)") }.count == 3)
            #expect(try dump(directory, "info", "threads", "--json").json().objects("lanes").allSatisfy { $0.bool("held") == false })
        }
    }

    @Test("backlog and fill are per lane: a lane's backlog is shown against its own capacity")
    func backlogPerLane() throws {
        try withRingDirectory { directory in
            // Three lanes of 16 records holding 5 each (4 values and a gauge's record); then a
            // single-lane writer takes lane 0 again and fills it.
            try makeLanesRing(directory, "bot", threads: 3, count: 4, capacity: 16)
            #expect(
                try runProcess("ringside-emit", ["--dir", directory.path, "--ring", "bot", "more"] + (1...11).map(String.init)).status == 0)

            let info = try dump(directory, "info", "bot")
            let rows = info.outputLines.filter { $0.hasPrefix("     ") && $0.contains(" of 16 ") }
            #expect(rows.count == 3)
            #expect(rows[0].contains(" 16 of 16 ") && rows[0].contains("100.0%"))
            #expect(rows[1].contains(" 5 of 16 ") && rows[2].contains(" 5 of 16 "))
            #expect(info.output.contains("26 records in all; the fullest lane is 100.0% full"))
            #expect(try dump(directory, "info", "bot", "--json").json().objects("lanes").compactMap { $0.uint64("backlog") } == [16, 5, 5])

            // list: 26 records against 3 lanes of 16 (never "26 of 16"), the fullest lane full.
            let ring = try #require(try dump(directory, "list", "--json").json().objects("rings").first)
            #expect(ring.uint64("backlog") == 26 && ring.uint64("capacity") == 16 && ring.double("fill_percent") == 100)
            #expect(ring.uint64("lanes_allocated") == 3)
            let row = try #require(try dump(directory, "list").outputLines.first { $0.hasPrefix("bot ") })
            #expect(row.contains(" 3/64 ") && row.contains(" 26 ") && row.contains("100.0%"), "\(row)")
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
            // LANE, then CURSOR: the one lane a single-threaded ring writes.
            #expect(rows.map { $0.split(separator: " ").prefix(2).map(String.init) } == [["0", "17"], ["0", "18"], ["0", "19"]])

            let json = try dump(directory, "records", "ring", "--last", "3", "--json", "--raw").json()
            let records = json.objects("records")
            #expect(records.compactMap { $0.uint64("value") } == [1017, 1018, 1019])
            #expect(records.compactMap { $0.uint64("cursor") } == [17, 18, 19])
            #expect(records.allSatisfy { $0.uint64("lane") == 0 })
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

    @Test("records shows each record's lane; each lane's records are its thread's, in cursor order")
    func recordsByLane() throws {
        try withRingDirectory { directory in
            try makeLanesRing(directory, "bot", threads: 3, count: 5)
            let json = try dump(directory, "records", "bot", "--json").json()
            #expect(json.uint64("lanes") == 3 && json.uint64("count") == 18)
            let records = json.objects("records")
            for lane in 0..<3 {
                let mine = records.filter { $0.uint64("lane") == UInt64(lane) }
                let values = mine.filter { $0.string("metric") == "lane_values" }
                #expect(values.compactMap { $0.uint64("value") } == (1...5).map { UInt64(lane * 5 + $0) }, "lane \(lane)")
                #expect(values.compactMap { $0.uint64("cursor") } == [0, 1, 2, 3, 4])
                let gauge = mine.filter { $0.string("metric") == "lane_level" }
                #expect(gauge.compactMap { $0.double("value") } == [Double(lane)] && gauge.first?.uint64("cursor") == 5)
            }
            // Counters write no records: their totals are in the cells (see info and stats).
            #expect(!records.contains { $0.string("kind") == "counter" })

            let text = try dump(directory, "records", "bot", "--metric", "lane_values", "--last", "2")
            #expect(text.outputLines.first == "ring bot: 2 records from 1 of its 3 lanes (written 18, consumed 0, every lane's added up)")
        }
    }

    @Test("records --metric keeps that metric's records; an unknown metric is an error naming the ring's metrics")
    func recordsByMetric() throws {
        try withRingDirectory { directory in
            #expect(try runProcess("ringside-emit", ["--dir", directory.path, "--ring", "mixed", "a", "1", "2", "3"]).status == 0)
            #expect(
                try runProcess("ringside-emit", ["--dir", directory.path, "--ring", "mixed", "b", "--kind", "gauge", "0.5"]).status == 0)
            #expect(try runProcess("ringside-emit", ["--dir", directory.path, "--ring", "mixed", "a", "4"]).status == 0)
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
            _ = try drainAll(directory, "ring")  // read cursor 50
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
            let producer = try ChildProcess(
                testProducer: "sequence", ring: "busy", in: directory, ["--count", "100000000", "--capacity", "256", "--wait"])
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
                #expect(records.allSatisfy { $0.uint64("lane") == 0 }, "a single-threaded producer writes one lane")
                #expect(zip(cursors, cursors.dropFirst()).allSatisfy { $1 == $0 + 1 }, "contiguous, oldest first")
                seen += records.count
            }
            stop.set()
            #expect(writesDuring.count > 1, "the producer wrote while the dumps ran")
            #expect(seen > 0)
            producer.kill()
        }
    }

    @Test("stats gives exact nearest-rank percentiles, gauge extremes, and counters' totals from the cells")
    func stats() throws {
        try withRingDirectory { directory in
            let emit = { (arguments: [String]) throws -> ProcessRun in
                try runProcess("ringside-emit", ["--dir", directory.path, "--ring", "s"] + arguments)
            }
            #expect(try emit(["latency", "--unit", "us"] + (1...1000).reversed().map(String.init)).status == 0)
            #expect(try emit(["orders", "--kind", "counter", "1", "2", "3", "4"]).status == 0)
            #expect(try emit(["exposure", "--kind", "gauge", "5.5", "-2", "9", "3.25"]).status == 0)
            let json = try dump(directory, "stats", "s", "--json").json()
            // 1000 observations and 4 gauge records: a counter's increments are not records.
            #expect(json.uint64("records") == 1004)
            let metrics = Dictionary(uniqueKeysWithValues: json.objects("metrics").map { ($0.string("name")!, $0) })
            let latency = try #require(metrics["latency"])
            #expect(latency.uint64("count") == 1000 && latency.string("unit") == "us" && latency.uint64("dropped") == 0)
            #expect(
                [
                    latency.uint64("min"), latency.uint64("p50"), latency.uint64("p90"), latency.uint64("p99"),
                    latency.uint64("p999"), latency.uint64("max"),
                ] == [1, 500, 900, 990, 999, 1000])
            #expect(metrics["orders"]?.uint64("total") == 10 && metrics["orders"]?.uint64("count") == 0)
            let exposure = try #require(metrics["exposure"])
            #expect(exposure.double("last") == 3.25 && exposure.double("min") == -2 && exposure.double("max") == 9)

            let text = try dump(directory, "stats", "s")
            #expect(text.status == 0)
            let row = try #require(text.outputLines.first { $0.hasPrefix("latency") })
            #expect(
                row.split(separator: " ").map(String.init)
                    == ["latency", "us", "all", "1000", "1", "500", "900", "990", "999", "1000", "0"])
            #expect(text.outputLines.contains { $0.split(separator: " ").map(String.init) == ["orders", "10"] })
        }
    }

    @Test("stats: counter totals and gauge values stay exact once the records are drained or dropped")
    func statsFromCells() throws {
        try withRingDirectory { directory in
            // Lanes of 16 records: each of the three threads keeps 16 of its 18 values and drops the
            // rest, and its gauge's record.
            try makeLanesRing(directory, "bot", threads: 3, count: 18, capacity: 16)
            let full = try dump(directory, "stats", "bot", "--json").json()
            let metrics = Dictionary(uniqueKeysWithValues: full.objects("metrics").map { ($0.string("name")!, $0) })
            #expect(metrics["lane_increments"]?.uint64("total") == 54)
            #expect(metrics["lane_values"]?.uint64("count") == 48 && metrics["lane_values"]?.uint64("dropped") == 6)
            #expect(metrics["lane_level"]?.double("last") == 2 && metrics["lane_level"]?.uint64("dropped") == 3)

            _ = try drainAll(directory, "bot")
            // Drained, the records stay in their slots and are shown, consumed: all but each
            // lane's oldest, whose slot the producer may be rewriting with its next record.
            let drained = try dump(directory, "stats", "bot", "--json").json()
            #expect(drained.uint64("records") == 45 && drained.uint64("consumed") == 45)
            let after = Dictionary(uniqueKeysWithValues: drained.objects("metrics").map { ($0.string("name")!, $0) })
            #expect(after["lane_increments"]?.uint64("total") == 54)
            #expect(after["lane_level"]?.double("last") == 2 && after["lane_level"]?["min"] is NSNull)
            #expect(after["lane_values"]?.uint64("count") == 45 && after["lane_values"]?.uint64("dropped") == 6)
        }
    }

    @Test("records after a collector drained: the most recent records, consumed or waiting, never a slot's replaced record")
    func recordsOnceConsumed() throws {
        try withRingDirectory { directory in
            // 10 records into a lane of 16, drained, then 10 more: slots hold cursors 4 ... 19,
            // and the one of cursor 4 is where the producer writes cursor 20 next.
            try makeSequenceRing(directory, "s", count: 10, start: 100, capacity: 16)
            #expect(try drainAll(directory, "s").count == 10)
            try makeSequenceRing(directory, "s", count: 10, start: 200, capacity: 16)
            let json = try dump(directory, "records", "s", "--json").json()
            let records = json.objects("records")
            #expect(records.map { $0.uint64("cursor")! } == Array(5...19))
            #expect(records.allSatisfy { $0.uint64("sequence") == $0.uint64("cursor") })
            #expect(records.map { $0.uint64("value")! } == Array(105...109) + Array(200...209))
            #expect(records.map { $0.bool("consumed")! } == Array(repeating: true, count: 5) + Array(repeating: false, count: 10))

            let table = try dump(directory, "records", "s", "--last", "12")
            #expect(table.status == 0)
            let rows = table.outputLines.dropFirst(2).map { $0.split(separator: " ").map(String.init) }
            #expect(rows.map { $0[1] } == (8...19).map(String.init))
            #expect(rows.map { $0.last! } == ["consumed", "consumed"] + Array(repeating: "waiting", count: 10))
        }
    }

    @Test("watch --count N prints N refreshes; --json one object per line, with rates after the first")
    func watch() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "w", count: 10)
            let json = try dump(directory, "watch", "--interval", "100ms", "--count", "3", "--json")
            #expect(json.status == 0)
            let frames = try json.outputLines.map(jsonObject)
            #expect(frames.count == 3)
            #expect(frames.allSatisfy { $0.objects("rings").first?.uint64("written") == 10 })
            #expect(frames.allSatisfy { $0.objects("rings").first?.uint64("lanes_allocated") == 1 })
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
            guard chown(directory.filePath(for: "theirs"), 4242, 4242) == 0 else { return }  // needs root; not a failure
            let run = try dump(directory, "info", "theirs")
            #expect(run.status == 1)
            #expect(run.errors.contains("owned by uid 4242"), "\(run.errors)")
            #expect(try dump(directory, "info", "theirs", "--allow-uid", "4242").status == 0)
            let listed = try dump(directory, "list", "--json").json()
            #expect(listed.objects("rings").first?.object("error")?.string("kind") == "permission_denied")
        }
    }

    @Test(
        "usage errors: exit 2 and one line on standard error, nothing else",
        arguments: [
            [], ["frobnicate"], ["list", "--last", "3"], ["records"], ["records", "a", "b"], ["records", "x", "--last", "many"],
            ["records", "bad/name"], ["watch", "--interval", "0"], ["watch", "--count", "0"], ["check"], ["check", "x", "--all"],
            ["clean", "x"], ["info", "x", "--dir"],
        ])
    func usageErrors(arguments: [String]) throws {
        let run = try runProcess("ringside-dump", arguments)
        #expect(run.status == 2)
        #expect(run.output.isEmpty)
        #expect(run.errorLines.count == 1 && run.errors.hasPrefix("ringside-dump"), "\(run.errors)")
    }

    @Test("--help for the tool and every command", arguments: ["", "list", "info", "records", "watch", "stats", "check", "clean"])
    func help(command: String) throws {
        let run = try runProcess("ringside-dump", (command.isEmpty ? [] : [command]) + ["--help"])
        #expect(run.status == 0)
        #expect(run.output.hasPrefix("usage: ringside-dump \(command)".trimmingCharacters(in: .whitespaces)))
    }

    @Test(
        "every reading command's --json is one valid JSON document",
        arguments: [
            ["list"], ["info", "j"], ["records", "j"], ["records", "j", "--raw"], ["stats", "j"], ["check", "j"], ["check", "--all"],
            ["clean", "--dry-run"], ["info", "j3", "--raw"], ["records", "j3"], ["stats", "j3"], ["watch", "--count", "1"],
        ])
    func jsonIsValid(arguments: [String]) throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "j", count: 5)
            try makeLanesRing(directory, "j3", threads: 3, count: 2)
            #expect(try runProcess("ringside-emit", ["--dir", directory.path, "--ring", "j2", "name\"with", "1"]).status == 2)
            #expect(
                try runProcess(
                    "ringside-emit",
                    [
                        "--dir", directory.path, "--ring", "j2", "g", "--kind", "gauge",
                        "--label", "quote=a\"b\\c\tend", "1.5",
                    ]
                ).status == 0)
            let run = try runProcess("ringside-dump", ["--dir", directory.path] + arguments + ["--json"])
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
