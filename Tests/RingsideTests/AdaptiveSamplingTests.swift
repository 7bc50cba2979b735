import CRingside
import Foundation
@testable import Ringside
import RingsideTestSupport
import Testing

/// A C bot and metric for a thread that must keep no reference to the Swift bot.
private struct RawMetric: @unchecked Sendable {  // unchecked: a pointer; the C bot is safe from any thread
    let bot: UnsafeMutablePointer<rs_bot>
    let metric: rs_metric
}

/// The sum of the weights of a histogram's records: the calls they stand for.
private func weighed(_ records: [PeekedRecord], metric: UInt32) -> UInt64 {
    records.filter { $0.record.metric == metric && $0.record.kind == UInt8(RS_KIND_HISTOGRAM.rawValue) }.reduce(0) { $0 + $1.record.weight }
}

@Suite("Producer: adaptive sampling of a filling lane (SAMPLING in ringside.h)")
struct AdaptiveSamplingTests {
    @Test("a lane filling past its threshold writes records of 2^k calls, k growing with the fill; the thread's release writes the rest")
    func weightsGrowWithTheFill() throws {
        try withRingDirectory { directory in
            let bot = try Bot.attach("filling", directory: directory.path, options: .init(laneCapacity: 256))
            let fills = try bot.histogram("fills")
            let consumer = try RingConsumer("filling", directory: directory, readsWeights: true)
            let calls = 500_000  // to level 15 (past 240 records), short of full
            var written = 0
            for value in 0..<calls { written += rs_bot_record(bot.bot, fills.target.metric, UInt64(value)) == 1 ? 1 : 0 }
            // Nothing drained: the lane filled to its threshold (128) unweighted, then ever fewer, heavier records.
            let records = try drainAll(consumer)
            #expect(records.count == written)
            let weights = records.map(\.record.weightLog2)
            #expect(weights.prefix(128).allSatisfy { $0 == 0 }, "below half full, every call is written as it is")
            #expect(zip(weights, weights.dropFirst()).allSatisfy { $0 <= $1 }, "k never falls while the lane only fills: \(weights)")
            #expect(weights.last == Int(RS_WEIGHT_LOG2_MAX), "a lane near full writes 1 call in 32,768")
            #expect(records.count < 256, "the lane never filled: \(records.count) records")
            // Each record is the last call of its group: the calls since the previous one.
            var before: UInt64 = 0
            for entry in records {
                #expect(entry.record.value == before + entry.record.weight - 1)
                before += entry.record.weight
            }
            // The calls of the group still open are written when the thread lets go of its lane.
            bot.releaseCurrentThreadLane()
            let closing = try drainAll(consumer)
            let dropped = consumer.cells(of: consumer.metrics[0]).dropped
            #expect(!closing.isEmpty && dropped == 0)
            #expect(closing.allSatisfy { $0.record.value == UInt64(calls - 1) }, "a group is written as its latest value")
            #expect(Set(closing.map(\.record.weight)).count == closing.count, "a record per bit of the group's calls")
            #expect(weighed(records + closing, metric: 0) == UInt64(calls))
        }
    }

    @Test("metrics that alternate are sampled apart, each exact; a gauge in the same lane is never sampled")
    func alternatingMetrics() throws {
        try withRingDirectory { directory in
            let bot = try Bot.attach("alternate", directory: directory.path, options: .init(laneCapacity: 1024))
            let first = try bot.histogram("first")
            let second = try bot.histogram("second")
            let level = try bot.gauge("level")
            let consumer = try RingConsumer("alternate", directory: directory, readsWeights: true)
            var all: [PeekedRecord] = []
            for round in 0..<200 {
                // 1,000 calls of each for 300 records drained: over three times the drain.
                for value in 0..<1_000 {
                    first.record(UInt64(value))
                    second.record(UInt64(1_000_000 + value))
                    if value % 100 == 0 { level.set(Double(round)) }
                }
                try consumer.drain(limitPerLane: 300) { batch, start, lane in
                    for (offset, record) in batch.enumerated() {
                        all.append(PeekedRecord(lane: lane, cursor: start + UInt64(offset), record: record, consumed: true))
                    }
                }
            }
            bot.releaseCurrentThreadLane()
            all += try drainAll(consumer)
            let dropped = consumer.metrics.map { consumer.cells(of: $0).dropped }
            #expect(all.contains { $0.record.weightLog2 > 0 }, "the lane was sampled")
            #expect(weighed(all, metric: 0) + dropped[0] == 200_000)
            #expect(weighed(all, metric: 1) + dropped[1] == 200_000)
            let sampledFirst = all.filter { $0.record.metric == 0 }.count
            let sampledSecond = all.filter { $0.record.metric == 1 }.count
            // A countdown shared by both would give one of them every record it writes (1 in 2 of
            // calls that alternate); each has its own, so they keep as many, within a few percent.
            #expect(
                abs(sampledFirst - sampledSecond) * 20 <= max(sampledFirst, sampledSecond),
                "one metric is not kept at the other's expense: \(sampledFirst), \(sampledSecond)")
            let gauges = all.filter { $0.record.kind == UInt8(RS_KIND_GAUGE.rawValue) }
            #expect(gauges.allSatisfy { $0.record.weightLog2 == 0 })
            #expect(UInt64(gauges.count) + dropped[2] == 2_000, "every gauge set is a record or a drop")
        }
    }

    @Test("a lane drained below its threshold closes its groups at the next call: the latest value once per bit of the calls")
    func drainingClosesGroups() throws {
        try withRingDirectory { directory in
            let bot = try Bot.attach("drains", directory: directory.path, options: .init(laneCapacity: 256))
            let fills = try bot.histogram("fills")
            let consumer = try RingConsumer("drains", directory: directory, readsWeights: true)
            for value in 0..<10_000 { fills.record(UInt64(value)) }
            var records = try drainAll(consumer)
            let open = 10_000 - weighed(records, metric: 0)
            #expect(open > 0, "a group is open")
            fills.record(42)  // the lane is empty now: the open group is written first, then this call as it is
            let after = try drainAll(consumer)
            #expect(after.last?.record.value == 42 && after.last?.record.weight == 1)
            let closing = after.dropLast()
            #expect(closing.allSatisfy { $0.record.value == 9_999 })
            #expect(closing.map(\.record.weight).reduce(0, +) == open)
            #expect(closing.count == open.nonzeroBitCount)
            records += after
            #expect(weighed(records, metric: 0) == 10_001)
            // Below the threshold again, every call is written as it is.
            for value in 0..<100 { fills.record(UInt64(value)) }
            #expect(try drainAll(consumer).allSatisfy { $0.record.weight == 1 })
        }
    }

    @Test("without a consumer that reads weights a full lane drops as before; sampling off (100 %) drops even with one")
    func noSamplingWithoutWeights() throws {
        try withRingDirectory { directory in
            for (name, percent, weighs) in [("old-reader", 50, false), ("off", 100, true)] {
                let bot = try Bot.attach(name, directory: directory.path, options: .init(laneCapacity: 64, sampleAbovePercent: percent))
                let fills = try bot.histogram("fills")
                let consumer = try RingConsumer(name, directory: directory, readsWeights: weighs)
                for value in 0..<1_000 { fills.record(UInt64(value)) }
                let records = try drainAll(consumer)
                #expect(records.count == 64 && records.allSatisfy { $0.record.weight == 1 }, "\(name)")
                #expect(records.map(\.record.value) == (0..<64).map(UInt64.init), "\(name): the first 64 kept")
                #expect(consumer.cells(of: consumer.metrics[0]).dropped == 1_000 - 64, "\(name)")
                #expect(try consumer.status().consumerReadsWeights == weighs)
                #expect(fileHeader(try #require(bot.path)).sample_above == (percent == 100 ? 0 : 32))
            }
        }
    }

    @Test("a call with an exemplar is sampled as a unit: the call that closes a group writes its exemplar after its weighted value")
    func exemplarsSampledAsUnits() throws {
        try withRingDirectory { directory in
            let bot = try Bot.attach("exemplars", directory: directory.path, options: .init(laneCapacity: 256))
            let fills = try bot.histogram("fills")
            let consumer = try RingConsumer("exemplars", directory: directory, readsWeights: true)
            for value in 0..<5_000 { fills.record(UInt64(value), exemplar: try Bot.Exemplar("order_id", "A\(value)")) }
            let records = try drainAll(consumer).map(\.record)
            var index = 0
            var weights: [UInt64] = []
            while index < records.count {
                let value = records[index]
                #expect(value.kind == UInt8(RS_KIND_HISTOGRAM.rawValue) && value.flags & UInt8(RS_FLAG_EXEMPLAR) != 0)
                let parts = Int((value.exemplar_length + 15) / 16)
                #expect(records[(index + 1)...].prefix(parts).allSatisfy { $0.kind == UInt8(RS_KIND_EXEMPLAR.rawValue) && $0.flags == 0 })
                weights.append(value.weight)
                index += 1 + parts
            }
            #expect(weights.contains { $0 > 1 })
            bot.releaseCurrentThreadLane()
            let closing = try drainAll(consumer).map(\.record)
            #expect(closing.allSatisfy { $0.flags & UInt8(RS_FLAG_EXEMPLAR) == 0 }, "a group's latest value, without its exemplar")
            #expect(weights.reduce(0, +) + closing.map(\.weight).reduce(0, +) + consumer.cells(of: consumer.metrics[0]).dropped == 5_000)
        }
    }

    @Test("a metric's own 1-in-N sampling applies first: the collector's count is N times the weights")
    func staticSamplingFirst() throws {
        try withRingDirectory { directory in
            let bot = try Bot.attach("static", directory: directory.path, options: .init(laneCapacity: 256))
            let fills = try bot.histogram("fills", sampleEvery: 4)
            let consumer = try RingConsumer("static", directory: directory, readsWeights: true)
            for value in 0..<40_000 { fills.record(UInt64(value)) }
            bot.releaseCurrentThreadLane()
            let records = try drainAll(consumer)
            #expect(records.contains { $0.record.weightLog2 > 0 })
            #expect(4 * (weighed(records, metric: 0) + consumer.cells(of: consumer.metrics[0]).dropped) == 40_000)
        }
    }

    @Test("a bot detached with groups open writes its own thread's, and counts another thread's calls as dropped, in unlaned")
    func detachClosesOpenGroups() throws {
        try withRingDirectory { directory in
            let recorded = DispatchSemaphore(value: 0), finish = DispatchSemaphore(value: 0)
            defer { finish.signal() }
            let reader: RingConsumer
            var open: [UInt64] = []
            do {
                let bot = try Bot.attach("detached", directory: directory.path, options: .init(laneCapacity: 256))
                let fills = try bot.histogram("fills")
                reader = try RingConsumer("detached", directory: directory, readsWeights: true)
                // Lane 0: another thread's, held past the detach (it keeps no reference to the bot).
                let raw = RawMetric(bot: bot.bot, metric: fills.target.metric)
                Thread {
                    for value in 0..<10_000 { _ = rs_bot_record(raw.bot, raw.metric, UInt64(value)) }
                    recorded.signal()
                    finish.wait()
                }.start()
                recorded.wait()
                // Lane 1: this thread's.
                for value in 0..<10_000 { fills.record(UInt64(value)) }
                let records = try drainAll(reader)
                open = (0..<2).map { lane in 10_000 - records.filter { $0.lane == lane }.reduce(0) { $0 + $1.record.weight } }
                withExtendedLifetime((bot, fills)) {}
            }  // the bot's last references: it detaches here
            #expect(open.allSatisfy { $0 > 0 }, "a group open in each lane: \(open)")
            let after = try drainAll(reader)
            #expect(after.allSatisfy { $0.lane == 1 && $0.record.value == 9_999 }, "this thread's group, written")
            #expect(after.reduce(0) { $0 + $1.record.weight } == open[1])
            let cells = try RingInspector("detached", directory: directory).cells(of: reader.metrics[0])
            #expect(cells.dropped == open[0], "the other thread's calls, counted as dropped")
        }
    }

    @Test("a process that calls exit() with its bot attached writes its exiting thread's open groups: every call of its burst counted")
    func exitWritesOpenGroups() throws {
        try withRingDirectory { directory in
            let calls = 100_000
            let producer = try ChildProcess(
                testProducer: "burst-exit", ring: "exits", in: directory,
                ["--count", "\(calls)", "--capacity", "256", "--sample-above", "50"], withInput: true)
            #expect(producer.readLine()?.hasPrefix("attached ") == true)
            let consumer = try RingConsumer("exits", directory: directory, readsWeights: true)
            producer.write("go\n")
            #expect(producer.waitForExit().status == 0)
            let records = try drainAll(consumer)
            #expect(records.contains { $0.record.weightLog2 > 0 }, "the lane was sampled")
            #expect(consumer.cells(of: consumer.metrics[0]).dropped == 0)
            #expect(weighed(records, metric: 0) == UInt64(calls))
            #expect(records.last?.record.value == UInt64(calls - 1), "the open group, written at exit as its latest value")
        }
    }

    @Test("the threshold is checked: 1 to 100 percent")
    func thresholdChecked() throws {
        try withRingDirectory { directory in
            for percent in [0, 101, -1] {
                #expect(throws: RingError.self) {
                    _ = try Bot.attach("bad", directory: directory.path, options: .init(sampleAbovePercent: percent))
                }
            }
            let bot = try Bot.attach("quarter", directory: directory.path, options: .init(laneCapacity: 1024, sampleAbovePercent: 25))
            _ = try bot.histogram("fills")
            #expect(fileHeader(try #require(bot.path)).sample_above == 256)
        }
    }
}
