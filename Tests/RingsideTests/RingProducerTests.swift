import CRingside
import Foundation
@testable import Ringside
import RingsideTestSupport
import Testing

@Suite("Producer: attach, register, record")
struct RingProducerTests {
    @Test("a new bot is a 0600 file of its header part, a lane is added by a thread's first record, and records and cells read back")
    func attachCreatesRing() throws {
        try withBot("bot-a", options: .init(laneCapacity: 1024)) { directory, bot in
            let path = try #require(bot.path)
            #expect(path == directory.path + "/ringside.bot-a")
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
            // The part before the lanes; the lanes come as threads first record.
            let layout = BotFileLayout(capacity: 1024).geometry
            #expect((attributes[.size] as? Int) == Int(layout.lanes_offset))
            let header = fileHeader(path)
            #expect(header.version == RS_FORMAT_VERSION_MIN && header.lanes_allocated == 0, "format 3 until a signed or scaled metric")
            #expect(header.lanes_offset == layout.lanes_offset && header.lane_size == layout.lane_size)
            #expect(header.lane_records_offset == layout.lane_records_offset && header.cells_offset == layout.cells_offset)

            let fill = try bot.histogram("order_fill_latency", unit: .nanoseconds, labels: ["symbol": "AAPL"])
            let orders = try bot.counter("orders", labels: ["side": "buy"])
            let exposure = try bot.gauge("gross_exposure")
            fill.record(1234)
            orders.increment()
            orders.increment(by: 5)
            exposure.set(1.25e6)
            // This thread's lane, added by its first record.
            let grown = try FileManager.default.attributesOfItem(atPath: path)
            #expect((grown[.size] as? Int) == Int(layout.lanes_offset + layout.lane_size))
            #expect(fileHeader(path).lanes_allocated == 1)
            // Counters write no records: their total lives in the lane's cell.
            #expect(bot.currentThreadLane.recordsWritten == 2)

            let consumer = try RingConsumer("bot-a", directory: directory)
            let drained = try drainAll(consumer)
            let records = drained.map(\.record)
            #expect(records.map(\.metric) == [0, 2])
            #expect(records.map(\.kind) == [3, 2])
            #expect(records.map(\.value) == [1234, 1.25e6.bitPattern])
            #expect(records.map(\.sequence) == [0, 1])
            #expect(drained.allSatisfy { $0.lane == 0 })
            #expect(consumer.metrics.map(\.name) == ["order_fill_latency", "orders", "gross_exposure"])
            #expect(consumer.metrics[0].labelDictionary == ["symbol": "AAPL"])
            #expect(consumer.metrics[0].unit == .nanoseconds)
            #expect(consumer.metrics[1].kind == .counter && consumer.metrics[1].unit == MetricUnit.none)
            #expect(consumer.cells(of: consumer.metrics[0]) == MetricCells(total: 0, dropped: 0, lastValue: nil))
            #expect(consumer.cells(of: consumer.metrics[1]) == MetricCells(total: 6, dropped: 0, lastValue: nil))
            #expect(consumer.cells(of: consumer.metrics[2]) == MetricCells(total: 0, dropped: 0, lastValue: 1.25e6))
        }
    }

    @Test("a full ring keeps counters and gauges exact in the cells and counts each record it drops against its metric")
    func cellsSurviveAFullRing() throws {
        try withBot("cells", options: .init(laneCapacity: 16)) { directory, bot in
            let orders = try bot.counter("orders")
            let fills = try bot.histogram("fills")
            let level = try bot.gauge("level")
            for value in 1...1_000 {
                orders.increment(by: 3)
                fills.record(UInt64(value))
                if value % 10 == 0 { level.set(Double(value)) }
            }
            // 16 slots: the first 16 records (histogram and gauge) are kept, the rest dropped.
            #expect(bot.currentThreadLane.recordsWritten == 16)
            #expect(bot.currentThreadLane.recordsWritten + bot.currentThreadLane.recordsDropped == 1_000 + 100)
            let consumer = try RingConsumer("cells", directory: directory)
            let kept = try drainAll(consumer)
            #expect(kept.count == 16)
            let keptFills = UInt64(kept.filter { $0.record.metric == 1 }.count)
            let keptLevels = UInt64(kept.filter { $0.record.metric == 2 }.count)
            #expect(consumer.cells(of: consumer.metrics[0]).total == 3_000)
            #expect(consumer.cells(of: consumer.metrics[1]).dropped == 1_000 - keptFills)
            #expect(consumer.cells(of: consumer.metrics[2]) == MetricCells(total: 0, dropped: 100 - keptLevels, lastValue: 1_000))
            // The lane's drop count is the sum of its metrics' cells.
            let status = try consumer.status()
            #expect(
                status.dropped == bot.currentThreadLane.recordsDropped
                    && status.lanes.map(\.dropped) == [bot.currentThreadLane.recordsDropped])
            #expect(status.dropped == (1_000 - keptFills) + (100 - keptLevels))
        }
    }

    @Test("record timestamps are coarse monotonic time, good to place a record in a second")
    func timestampsAreMonotonicNow() throws {
        try withBot("clock", options: .init(laneCapacity: 16)) { directory, bot in
            let before = rs_clock_precise_ns()
            try bot.histogram("h").record(1)
            let after = rs_clock_precise_ns()
            let record = try drainAll(RingConsumer("clock", directory: directory))[0].record
            // The coarse clock lags the precise one by at most a tick (a few ms).
            #expect(record.timestamp_ns + 20_000_000 >= before)
            #expect(record.timestamp_ns <= after)
        }
    }

    @Test("spans record their duration in the histogram's unit, flagged as spans")
    func spansRecordDurations() throws {
        try withBot("spans", options: .init(laneCapacity: 16)) { directory, bot in
            let micros = try bot.histogram("work", unit: .microseconds)
            let timing = micros.startTiming()
            usleep(2_000)
            timing.stop()
            let result = micros.measure { 42 }
            #expect(result == 42)
            let records = try drainAll(RingConsumer("spans", directory: directory)).map(\.record)
            #expect(records.count == 2)
            #expect(records[0].value >= 2_000 && records[0].value < 1_000_000)
            #expect(records[0].flags == UInt8(RS_FLAG_SPAN))
            #expect(records[1].value < 1_000)
        }
    }

    @Test("registering the same name and labels again returns the same metric; a clash is refused")
    func registrationIsIdempotent() throws {
        try withBot("reg", options: .init(laneCapacity: 16)) { directory, bot in
            let first = try bot.counter("orders", labels: ["side": "buy", "venue": "x"])
            let again = try bot.counter("orders", labels: ["venue": "x", "side": "buy"])
            let other = try bot.counter("orders", labels: ["side": "sell"])
            #expect(first.target.metric.index == again.target.metric.index)
            #expect(other.target.metric.index != first.target.metric.index)
            #expect(bot.registeredMetrics.count == 2)
            #expect(bot.registeredMetrics[0].encodedLabels == "side=buy\nvenue=x")
            #expect(throws: RingError.self) { try bot.histogram("orders", labels: ["side": "sell"]) }
        }
    }

    @Test("a full registry of 4,096 metrics finds each again by name and labels, and so does a bot attached again to its file")
    func fullRegistryFoundAgain() throws {
        // Seven names, so that names repeat and only the labels tell the metrics apart.
        let identities = (0..<4_096).map { ("fill_\($0 % 7)", ["symbol": "S\($0)"]) }
        try withRingDirectory { directory in
            let options = Bot.Options(laneCapacity: 16, maxMetrics: 4_096)
            do {
                let bot = try Bot.attach("many", directory: directory.path, options: options)
                for (index, (name, labels)) in identities.enumerated() {
                    #expect(try bot.counter(name, labels: labels).target.metric.index == index)
                }
                for (index, (name, labels)) in identities.enumerated().reversed() {
                    #expect(try bot.counter(name, labels: labels).target.metric.index == index)
                }
                #expect(throws: RingError.self) { try bot.histogram("fill_3", labels: ["symbol": "S3"]) }
                #expect(throws: RingError.registryFull(ring: "many", capacity: 4_096)) {
                    try bot.counter("fill_0", labels: ["symbol": "S4096"])
                }
            }
            // Attached again (the first went with its scope): the file's entries are found, none added.
            let bot = try Bot.attach("many", directory: directory.path, options: options)
            for (index, (name, labels)) in identities.enumerated().reversed() {
                #expect(try bot.counter(name, labels: labels).target.metric.index == index)
            }
            #expect(bot.registeredMetrics.count == 4_096)
        }
    }

    @Test(
        "bad metric names, labels and help text are refused with a reason",
        arguments: [
            ("9lives", [String: String]()), ("has space", [:]), ("", [:]), (String(repeating: "m", count: 105), [:]),
            ("ok", ["bad-key": "v"]), ("ok", ["__reserved": "v"]), ("ok", ["k": "line\nbreak"]),
            ("ok", ["k": String(repeating: "v", count: 300)]),
        ])
    func badMetricsRefused(name: String, labels: [String: String]) throws {
        let bot = try Bot.disabled()
        #expect {
            try bot.counter(name, labels: labels)
        } throws: { error in
            guard case let RingError.invalidMetric(_, metric, reason)? = error as? RingError else { return false }
            return metric == name && !reason.isEmpty
        }
    }

    @Test("the registry refuses a metric past its capacity")
    func registryFull() throws {
        try withBot("full-reg", options: .init(laneCapacity: 16, maxMetrics: 2)) { directory, bot in
            _ = try bot.counter("a")
            _ = try bot.counter("b")
            #expect(throws: RingError.registryFull(ring: "full-reg", capacity: 2)) { try bot.counter("c") }
        }
    }

    @Test(
        "a gauge's merge policy is stored in its registry entry; asked again with another it is a conflict, and a per-worker gauge may not name the label pid"
    )
    func gaugeMergePolicies() throws {
        try withBot("merging", options: .init(laneCapacity: 1024)) { directory, bot in
            for merge in GaugeMerge.allCases { _ = try bot.gauge("level_\(merge)", merge: merge) }
            _ = try bot.gauge("in_flight", merge: .sum)  // found again
            #expect {
                try bot.gauge("in_flight", merge: .max)
            } throws: { error in
                guard case let RingError.metricConflict(_, metric, reason)? = error as? RingError else { return false }
                return metric == "in_flight" && reason.contains("sum") && reason.contains("max")
            }
            #expect {
                try bot.gauge("queue", labels: ["pid": "1"], merge: .perWorker)
            } throws: { error in
                guard case let RingError.invalidMetric(_, _, reason)? = error as? RingError else { return false }
                return reason.contains("pid")
            }
            _ = try bot.gauge("queue", labels: ["pid": "1"])  // a label of its own, when the collector adds none
            let consumer = try RingConsumer("merging", directory: directory)
            let stored = consumer.metrics.map { "\($0.name):\($0.gaugeMerge)" }
            #expect(
                stored == GaugeMerge.allCases.map { "level_\($0):\($0)" } + ["in_flight:sum", "queue:last"])
        }
    }

    @Test("sampling writes 1 in N calls and records N in the registry")
    func samplingWritesOneInN() throws {
        try withBot("sampled", options: .init(laneCapacity: 1024)) { directory, bot in
            let sampled = try bot.histogram("latency", sampleEvery: 10)
            for value in 0..<100 { sampled.record(UInt64(value)) }
            let consumer = try RingConsumer("sampled", directory: directory)
            let values = try drainAll(consumer).map(\.record.value)
            #expect(values == stride(from: 0, to: 100, by: 10).map { UInt64($0) })
            #expect(consumer.metrics[0].sampleEvery == 10)
        }
    }

    @Test("a disabled ring makes no file and its handles do nothing")
    func disabledRing() throws {
        try withRingDirectory { directory in
            let bot = try Bot.disabled("quiet")
            #expect(!bot.isEnabled)
            let histogram = try bot.histogram("latency", unit: .nanoseconds)
            histogram.record(5)
            histogram.measure {}
            try bot.counter("orders").increment()
            try bot.gauge("g").set(1)
            #expect(bot.currentThreadLane.recordsWritten == 0)
            #expect(directory.ringNames().isEmpty)
        }
    }

    @Test("RINGSIDE_DISABLED=1 makes attach return a disabled ring, so bots run unchanged")
    func disabledByEnvironment() throws {
        try withRingDirectory { directory in
            let child = try ChildProcess(
                testProducer: "sequence", ring: "off", in: directory, ["--count", "10"], environment: ["RINGSIDE_DISABLED": "1"])
            #expect(child.readLine() == "wrote 0 dropped 0")
            #expect(child.waitForExit().status == 0)
            #expect(directory.ringNames().isEmpty)
        }
    }

    @Test("the hot path allocates nothing over a million calls of each operation (counted in a real process)")
    func hotPathAllocatesNothing() throws {
        try withRingDirectory { directory in
            let child = try ChildProcess(
                testProducer: "count-allocations", ring: "alloc", in: directory, ["--count", "1000000", "--capacity", "1024"])
            let line = try #require(child.readLine())
            let fields = line.split(separator: " ")
            #expect(fields.count == 6, "unexpected output: \(line)")
            #expect(fields[0] == "allocations" && fields[1] == "0", "malloc calls on the hot path: \(line)")
            #expect(fields[2] == "heap_bytes" && fields[3] == "0", "heap growth on the hot path: \(line)")
            #expect(Int(fields[5]) ?? 0 > 0, "the ring should have filled and dropped: \(line)")
            #expect(child.waitForExit().status == 0)
        }
    }
}

@Suite("Ring names and the ring directory")
struct RingNameTests {
    @Test("valid names are accepted", arguments: ["bot-a", "a", "Bot_1.v2", String(repeating: "x", count: 200)])
    func validNames(name: String) throws {
        try RingDirectory.validate(name: name)
    }

    @Test(
        "invalid names are refused with what is allowed",
        arguments: [
            "", "a/b", "../etc", "sp ace", "é", String(repeating: "x", count: 201), "semi;colon",
        ])
    func invalidNames(name: String) {
        #expect {
            try RingDirectory.validate(name: name)
        } throws: { error in
            guard case let RingError.invalidName(refused, reason)? = error as? RingError else { return false }
            return refused == name && reason.contains("allowed")
        }
    }

    @Test("the directory is the one given, else RINGSIDE_DIR, else /dev/shm")
    func directoryResolution() {
        #expect(RingDirectory("/tmp/x").path == "/tmp/x")
        #expect(RingDirectory("/tmp/x").filePath(for: "bot") == "/tmp/x/ringside.bot")
        if getenv("RINGSIDE_DIR") == nil { #expect(RingDirectory().path == "/dev/shm") }
    }

    @Test("listing finds rings by their file names; removing one frees the name")
    func listAndRemove() throws {
        try withRingDirectory { directory in
            _ = try Bot.attach("b", directory: directory.path, options: .init(laneCapacity: 16))
            _ = try Bot.attach("a", directory: directory.path, options: .init(laneCapacity: 16))
            _ = FileManager.default.createFile(atPath: directory.path + "/unrelated", contents: Data())
            #expect(directory.ringNames() == ["a", "b"])
            try directory.remove("a")
            #expect(directory.ringNames() == ["b"])
            #expect(throws: RingError.self) { try directory.remove("a") }
        }
    }

    @Test("a symbolic link is never followed")
    func symlinkRefused() throws {
        try withRingDirectory { directory in
            let target = directory.path + "/elsewhere"
            _ = FileManager.default.createFile(atPath: target, contents: Data())
            symlink(target, directory.filePath(for: "linked"))
            #expect {
                try Bot.attach("linked", directory: directory.path)
            } throws: { error in
                guard case RingError.notARegularFile? = error as? RingError else { return false }
                return "\(error)".contains("symbolic link")
            }
            #expect(throws: RingError.self) { try RingInspector("linked", directory: directory) }
        }
    }

    @Test("a ring that does not exist is reported with the rings that do")
    func unknownRing() throws {
        try withRingDirectory { directory in
            _ = try Bot.attach("present", directory: directory.path, options: .init(laneCapacity: 16))
            #expect {
                try RingInspector("absent", directory: directory)
            } throws: { error in
                guard case let RingError.notFound(_, _, existing)? = error as? RingError else { return false }
                return existing == ["present"]
            }
        }
    }

    @Test("attach options outside the format's bounds are refused", arguments: [(1000, 256), (8, 256), (1024, 0), (1024, 5000)])
    func badOptions(capacity: Int, maxMetrics: Int) throws {
        try withRingDirectory { directory in
            #expect(throws: RingError.self) {
                try Bot.attach("opts", directory: directory.path, options: .init(laneCapacity: capacity, maxMetrics: maxMetrics))
            }
            #expect(directory.ringNames().isEmpty)
        }
    }
}
