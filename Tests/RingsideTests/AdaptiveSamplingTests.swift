import CRingside
import Foundation
@testable import Ringside
import RingsideAggregation
import RingsideTestSupport
import Testing

/// A C bot and metric for a thread that must keep no reference to the Swift bot.
private struct RawMetric: @unchecked Sendable {  // unchecked: a pointer; the C bot is safe from any thread
    let bot: UnsafeMutablePointer<rs_bot>
    let metric: rs_metric
}

/// What a histogram was given, to hold the drained figures to: how many calls, their sum and the
/// largest of them.
private struct Given {
    var calls: UInt64 = 0
    var sum: UInt64 = 0
    var max: UInt64 = 0

    mutating func add(_ value: UInt64) {
        calls += 1
        sum += value
        max = Swift.max(max, value)
    }
}

/// burst-idle's values (`ringside-test-producer`): spread over 1 ... 1,000,000 in no order.
private func burstValue(_ index: UInt64) -> UInt64 { 1 + (index &* 2_654_435_761) % 1_000_000 }

/// Holds a drained histogram and its drops to what it was given: every call counted or dropped,
/// the sum and the largest of each part exact.
private func expectExact(_ drained: ExactDrain, metric: Int, given: Given, _ comment: String) {
    let histogram = drained.histogram(metric)
    let cells = drained.consumer.cells(of: drained.consumer.metrics[metric])
    #expect(histogram.count + cells.dropped == given.calls, "calls: \(comment)")
    #expect(UInt64(histogram.exactSum) &+ cells.droppedSum == given.sum, "sum: \(comment)")
    #expect(Swift.max(histogram.max, cells.droppedMax) == given.max, "largest: \(comment)")
}

@Suite("Producer: sampling a filling lane, every call counted (SAMPLING AND GATHERING in ringside.h)")
struct AdaptiveSamplingTests {
    @Test("a lane filling with nothing drained: exact, then k growing every two records; full, 1 call in 32,768 tried")
    func weightsGrowWithTheFill() throws {
        try withBot("filling", options: .init(laneCapacity: 256)) { directory, bot in
            let fills = try bot.histogram("fills")
            let drained = ExactDrain(try RingConsumer("filling", directory: directory, readsWeights: true))
            // Full after 240 + 2 x (2 + 4 + ... + 2^8) calls (two records a level from 240 on), then
            // level 15: a record tried every 32,768 calls, and dropped.
            let calls = 90_000
            var given = Given()
            for value in 0..<UInt64(calls) {
                _ = rs_bot_record(bot.bot, fills.target.metric, value)
                given.add(value)
            }
            try drained.drain()
            let weights = drained.records.map(\.record.weightLog2)
            // Nothing drained: past half the lane, it gained it all within the drain interval, so its top
            // 16 records (1/32 of it, 16 at the least: SAMPLING) sample; the 240 below are exact.
            #expect(weights.prefix(240).allSatisfy { $0 == 0 }, "below capacity - R, every call is written as it is: \(weights)")
            let levels = (1...8).flatMap { [$0, $0] }
            #expect(Array(weights.dropFirst(240)) == levels, "k rises by one every two records (an eighth of R): \(weights)")
            #expect(drained.records.count == 256, "the lane filled: \(drained.records.count) records")
            let dropped = drained.consumer.cells(of: drained.consumer.metrics[0]).dropped
            #expect(dropped == UInt64(calls - 240 - 2 * 510) / (1 << RS_WEIGHT_LOG2_MAX), "full, 1 call in 32,768 is tried, and dropped")
            #expect(drained.gathered[0] == UInt64(calls - drained.records.count) - dropped, "every call not written or dropped is gathered")
            expectExact(drained, metric: 0, given: given, "90,000 calls into 256 slots")
        }
    }

    @Test("metrics that alternate are sampled apart, each exact; a gauge in the same lane is never sampled")
    func alternatingMetrics() throws {
        try withBot("alternate", options: .init(laneCapacity: 1024)) { directory, bot in
            let first = try bot.histogram("first")
            let second = try bot.histogram("second")
            let level = try bot.gauge("level")
            let drained = ExactDrain(try RingConsumer("alternate", directory: directory, readsWeights: true))
            var givenFirst = Given(), givenSecond = Given()
            for round in 0..<200 {
                // 1,000 calls of each for 300 records drained: over three times the drain.
                for value in 0..<UInt64(1_000) {
                    first.record(value)
                    second.record(1_000_000 + value)
                    givenFirst.add(value)
                    givenSecond.add(1_000_000 + value)
                    if value % 100 == 0 { level.set(Double(round)) }
                }
                try drained.drain(limitPerLane: 300)
            }
            try drained.drain()
            #expect(drained.weightedRecords() > 0, "the lane was sampled")
            expectExact(drained, metric: 0, given: givenFirst, "first")
            expectExact(drained, metric: 1, given: givenSecond, "second")
            let sampledFirst = drained.records(metric: 0), sampledSecond = drained.records(metric: 1)
            // A countdown shared by both would give one of them every record it writes (1 in 2 of
            // calls that alternate); each has its own, so they keep as many, within a few percent.
            #expect(
                abs(sampledFirst - sampledSecond) * 20 <= max(sampledFirst, sampledSecond),
                "one metric is not kept at the other's expense: \(sampledFirst), \(sampledSecond)")
            #expect(drained.weightedRecords(metric: 2) == 0, "a gauge's records carry no weight")
            let droppedGauges = drained.consumer.cells(of: drained.consumer.metrics[2]).dropped
            #expect(UInt64(drained.records(metric: 2)) + droppedGauges == 2_000, "every gauge set is a record or a drop")
        }
    }

    @Test("a lane drained below capacity - R writes the next call as it is: nothing is left to write, all was counted")
    func drainingStopsSampling() throws {
        try withBot("drains", options: .init(laneCapacity: 256)) { directory, bot in
            let fills = try bot.histogram("fills")
            let drained = ExactDrain(try RingConsumer("drains", directory: directory, readsWeights: true))
            var given = Given()
            for value in 0..<UInt64(10_000) {
                fills.record(value)
                given.add(value)
            }
            try drained.drain()
            #expect(drained.gathered[0] ?? 0 > 0, "calls were gathered")
            expectExact(drained, metric: 0, given: given, "the burst, its last calls gathered and no record after them")
            let before = drained.records.count
            fills.record(42)  // the lane is empty now: this call is written as it is, with no weight
            given.add(42)
            try drained.drain()
            #expect(drained.records.count == before + 1)
            #expect(drained.records.last?.record.value == 42 && drained.records.last?.record.weightLog2 == 0)
            expectExact(drained, metric: 0, given: given, "after one more call")
            // Below the threshold again, every call is written as it is.
            for value in 0..<UInt64(100) { fills.record(value) }
            try drained.drain()
            #expect(drained.records.suffix(100).allSatisfy { $0.record.weightLog2 == 0 })
        }
    }

    @Test("without a consumer that reads gather cells a full lane drops as before; sampling off (100 %) drops even with one")
    func noSamplingWithoutWeights() throws {
        try withRingDirectory { directory in
            for (name, percent, weighs) in [("old-reader", 50, false), ("off", 100, true)] {
                let bot = try Bot.attach(name, directory: directory.path, options: .init(laneCapacity: 64, sampleAbovePercent: percent))
                let fills = try bot.histogram("fills")
                let consumer = try RingConsumer(name, directory: directory, readsWeights: weighs)
                for value in 0..<UInt64(1_000) { fills.record(value) }
                let records = try drainAll(consumer)
                #expect(records.count == 64 && records.allSatisfy { $0.record.weightLog2 == 0 }, "\(name)")
                #expect(records.map(\.record.value) == (0..<64).map(UInt64.init), "\(name): the first 64 kept")
                let cells = consumer.cells(of: consumer.metrics[0])
                #expect(cells.dropped == 1_000 - 64, "\(name)")
                // The dropped values 64 ... 999: their sum and the largest, kept beside the count.
                #expect(cells.droppedSum == (64..<1_000).reduce(0, +) && cells.droppedMax == 999, "\(name)")
                #expect(try consumer.status().consumerReadsWeights == weighs)
                #expect(try consumer.status().gathered == 0)
                #expect(fileHeader(try #require(bot.path)).sample_above == (percent == 100 ? 0 : 32))
            }
        }
    }

    @Test("a call with an exemplar is sampled as a unit: a written one carries its exemplar after its value; counts exact")
    func exemplarsSampledAsUnits() throws {
        try withBot("exemplars", options: .init(laneCapacity: 256)) { directory, bot in
            let fills = try bot.histogram("fills")
            let drained = ExactDrain(try RingConsumer("exemplars", directory: directory, readsWeights: true))
            var given = Given()
            for value in 0..<UInt64(5_000) {
                fills.record(value, exemplar: try Bot.Exemplar("order_id", "A\(value)"))
                given.add(value)
            }
            try drained.drain()
            let records = drained.records.map(\.record)
            var index = 0
            var weighted = 0
            while index < records.count {
                let value = records[index]
                #expect(value.kind == UInt8(RS_KIND_HISTOGRAM.rawValue) && value.flags & UInt8(RS_FLAG_EXEMPLAR) != 0)
                let parts = Int((value.exemplar_length + 15) / 16)
                #expect(records[(index + 1)...].prefix(parts).allSatisfy { $0.kind == UInt8(RS_KIND_EXEMPLAR.rawValue) && $0.flags == 0 })
                if value.weightLog2 > 0 { weighted += 1 }
                index += 1 + parts
            }
            #expect(weighted > 0)
            expectExact(drained, metric: 0, given: given, "calls with exemplars")
        }
    }

    @Test("a metric's own 1-in-N sampling applies first: records and gathered calls are 1 in N of the calls")
    func staticSamplingFirst() throws {
        try withBot("static", options: .init(laneCapacity: 256)) { directory, bot in
            let fills = try bot.histogram("fills", sampleEvery: 4)
            let drained = ExactDrain(try RingConsumer("static", directory: directory, readsWeights: true))
            for value in 0..<UInt64(40_000) { fills.record(value) }
            try drained.drain()
            #expect(drained.weightedRecords() > 0)
            let dropped = drained.consumer.cells(of: drained.consumer.metrics[0]).dropped
            #expect(4 * (drained.histogram(0).count + dropped) == 40_000)
        }
    }

    @Test("a bot detached while its lanes sample: every lane's gathered calls stay counted, its own thread's and another's")
    func detachKeepsGatheredCalls() throws {
        try withRingDirectory { directory in
            let recorded = DispatchSemaphore(value: 0), finish = DispatchSemaphore(value: 0)
            defer { finish.signal() }
            let drained: ExactDrain
            var given = Given()
            for value in 0..<UInt64(10_000) {
                given.add(value)
                given.add(value)
            }
            do {
                let bot = try Bot.attach("detached", directory: directory.path, options: .init(laneCapacity: 256))
                let fills = try bot.histogram("fills")
                drained = ExactDrain(try RingConsumer("detached", directory: directory, readsWeights: true))
                // Lane 0: another thread's, held past the detach (it keeps no reference to the bot).
                let raw = RawMetric(bot: bot.bot, metric: fills.target.metric)
                Thread {
                    for value in 0..<UInt64(10_000) { _ = rs_bot_record(raw.bot, raw.metric, value) }
                    recorded.signal()
                    finish.wait()
                }.start()
                recorded.wait()
                // Lane 1: this thread's.
                for value in 0..<UInt64(10_000) { fills.record(value) }
                withExtendedLifetime((bot, fills)) {}
            }  // the bot's last references: it detaches here
            try drained.drain()
            var sampledLanes = Set<Int>()
            for entry in drained.records where entry.record.weightLog2 > 0 { sampledLanes.insert(entry.lane) }
            #expect(sampledLanes == [0, 1], "both lanes sampled")
            expectExact(drained, metric: 0, given: given, "both lanes, after the detach")
        }
    }

    @Test("pool threads that burst once and then wait: every call counted within one drain, while they wait")
    func idlePoolThreadsCounted() throws {
        try withBot("pool", options: .init(laneCapacity: 256)) { directory, bot in
            let fills = try bot.histogram("fills")
            let drained = ExactDrain(try RingConsumer("pool", directory: directory, readsWeights: true))
            let threads = 4, calls = 50_000
            let done = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            defer { for _ in 0..<threads { release.signal() } }
            for thread in 0..<threads {
                Thread {
                    for index in 0..<UInt64(calls) { fills.record(burstValue(UInt64(thread * calls) + index)) }
                    done.signal()
                    release.wait()  // idle, holding its lane, its last calls gathered
                }.start()
            }
            for _ in 0..<threads { done.wait() }
            var given = Given()
            for index in 0..<UInt64(threads * calls) { given.add(burstValue(index)) }
            try drained.drain()
            #expect(drained.gathered[0] ?? 0 > 0, "the lanes were sampled")
            expectExact(drained, metric: 0, given: given, "\(threads) threads idle after their bursts")
        }
    }

    @Test("a process that bursts, idles with its bot attached, then is killed: every call counted, sum and largest exact")
    func killedProcessCounted() throws {
        try withRingDirectory { directory in
            let calls: UInt64 = 300_000
            let producer = try ChildProcess(
                testProducer: "burst-idle", ring: "killed", in: directory,
                ["--count", "\(calls)", "--capacity", "256", "--sample-above", "50"], withInput: true)
            defer { producer.kill() }
            #expect(producer.readLine()?.hasPrefix("attached ") == true)
            let drained = ExactDrain(try RingConsumer("killed", directory: directory, readsWeights: true))
            producer.write("go\n")
            #expect(producer.readLine() == "done")
            var given = Given()
            for index in 0..<calls { given.add(burstValue(index)) }
            try drained.drain()
            #expect(drained.weightedRecords() > 0, "the lane was sampled")
            expectExact(drained, metric: 0, given: given, "idle, attached")
            producer.kill()
            _ = producer.waitForExit()
            try drained.drain()
            expectExact(drained, metric: 0, given: given, "killed")
        }
    }

    @Test("a seeded mix of drops and sampling: calls == count + drops, and the sums and largest of each exact")
    func randomMixOfDropsAndSampling() throws {
        try withRingDirectory { directory in
            // The smallest lane: it samples past half (8 records, a level each), and fills at times
            // all the same; full, it tries 1 call in 32,768, so a burst now and then is long.
            let bot = try Bot.attach("mixed", directory: directory.path, options: .init(laneCapacity: 16))
            let fills = try bot.histogram("fills")
            let drained = ExactDrain(try RingConsumer("mixed", directory: directory, readsWeights: true))
            var random = SplitMix64(seed: 39)
            var given = Given()
            for _ in 0..<400 {
                // Bursts of any size between drains of any size (none at all, at times).
                let long = random.next() % 40 == 0
                for _ in 0..<Int(random.next() % 5_000) + (long ? 40_000 : 0) {
                    let value = random.next() % 10_000_000
                    fills.record(value)
                    given.add(value)
                }
                try drained.drain(limitPerLane: Int(random.next() % 20))
            }
            try drained.drain()
            let cells = drained.consumer.cells(of: drained.consumer.metrics[0])
            #expect(drained.gathered[0] ?? 0 > 0 && cells.dropped > 0, "sampled, and dropped: \(cells.dropped)")
            expectExact(drained, metric: 0, given: given, "\(given.calls) calls, \(cells.dropped) dropped")
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
