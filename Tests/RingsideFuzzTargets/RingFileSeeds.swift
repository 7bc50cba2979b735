import CRingside
import Foundation
import Ringside
import RingsideTestSupport  // onConcurrentThreads

/// Bot files made by the producer API (`Bot`), small (lanes of 16 records, a few metrics), for the
/// ring file targets' and the post-mortem's corpora: format 3 (whole units only) and format 4
/// (signed and scaled values), exemplars, sampled (weighted) records, several lanes that wrapped
/// and were partly drained, and a file with no lane.
enum RingFileSeeds {
    static func make(worker: Bool) throws -> [FuzzSeed] {
        var seeds: [FuzzSeed] = []
        seeds.append(
            FuzzSeed(
                "format3-kinds",
                try file(worker: worker) { bot in
                    let fill = try bot.histogram(
                        "fill_latency", unit: .nanoseconds, labels: ["symbol": "AAPL", "venue": "x\"y"], help: "fills")
                    let orders = try bot.counter("orders", labels: ["side": "buy"])
                    let exposure = try bot.gauge("exposure", unit: .bytes, help: "gross")
                    for value in 1...6 as ClosedRange<UInt64> {
                        fill.record(value * 1_000)
                        orders.increment(by: value)
                        exposure.set(Double(value) * 1.5 - 4)
                    }
                    _ = fill.measure { usleep(10) }  // a span
                }))
        seeds.append(
            FuzzSeed(
                "format4-signed-scaled",
                try file(worker: worker) { bot in
                    let slippage = try bot.histogram("slippage_bps", resolution: 0.01, signed: true)
                    let fees = try bot.counter("fees_dollars", resolution: 1e-6)
                    let size = try bot.histogram("order_size", unit: .bytes, resolution: 100)
                    for value in [-3.5, 0, 2.25, -1_000_000, 7.01] {
                        slippage.record(value)
                        fees.increment(by: 0.37)
                        size.record(Double(abs(value)) * 100)
                    }
                }))
        seeds.append(
            FuzzSeed(
                "exemplars",
                try file(worker: worker) { bot in
                    let fill = try bot.histogram("fill_latency", unit: .microseconds)
                    let order = try Bot.Exemplar(["order_id": "A-17", "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"])
                    for value in 1...2 as ClosedRange<UInt64> { fill.record(value * 250, exemplar: order) }
                    fill.record(9, exemplar: try Bot.Exemplar("k", "v"))
                }))
        // A consumer reads gather cells from the start, so a full lane samples (weighted records).
        seeds.append(
            FuzzSeed(
                "sampled-burst",
                try file(worker: worker, sampleAbove: 1, consumer: true) { bot in
                    let fill = try bot.histogram("fill_latency", unit: .nanoseconds, sampleEvery: 2)
                    for value in 1...200 as ClosedRange<UInt64> { fill.record(value) }
                }))
        // Three lanes at once, 12 records each, 10 of each drained, then 12 more each: cursors past the 16 slots.
        seeds.append(
            FuzzSeed(
                "three-lanes-wrapped",
                try file(worker: worker, lanes: 3, consumer: true) { bot, consumer in
                    let fill = try bot.histogram("fill_latency", unit: .nanoseconds)
                    let gauge = try bot.gauge("position", merge: .sum)
                    for phase in 0..<2 as Range<UInt64> {
                        onConcurrentThreads(3) { thread in
                            for value in 0..<10 as Range<UInt64> {
                                fill.record(phase * 1_000 + value * 3 + UInt64(thread))
                                if value % 8 == 0 { gauge.set(Double(value)) }
                            }
                        }
                        if phase == 0 { _ = try consumer?.drain(limitPerLane: 10) { _, _, _ in } }
                    }
                }))
        seeds.append(
            FuzzSeed(
                "registered-no-lane",
                try file(worker: worker) { bot in
                    _ = try bot.counter("idle_total")
                    _ = try bot.histogram("never_recorded", unit: .seconds)
                }))
        return seeds
    }

    /// The bytes of a file the producer API made: `write` registers and records (the calling
    /// thread and threads of its own), with a consumer attached first if `consumer`; then the bot
    /// goes, as a dead bot's file is found.
    private static func file(
        worker: Bool, lanes: Int = 2, sampleAbove: Int = 100, consumer: Bool = false,
        _ write: (Bot, RingConsumer?) throws -> Void
    ) throws -> [UInt8] {
        FuzzScratch.empty()
        let path: String
        do {
            let options = Bot.Options(laneCapacity: 16, maxMetrics: 4, maxLanes: lanes, worker: worker, sampleAbovePercent: sampleAbove)
            let bot = try Bot.attach("seed", directory: FuzzScratch.path, options: options)
            path = try bot.path.orThrow("the seed bot has no file")
            let name = String(path.split(separator: "/").last!.dropFirst(RingDirectory.filePrefix.count))
            let reader = consumer ? try RingConsumer(name, directory: FuzzScratch.ringDirectory, readsWeights: true) : nil
            try write(bot, reader)
            bot.releaseCurrentThreadLane()
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw SeedError("cannot read \(path)") }
        FuzzScratch.empty()
        return [UInt8](data)
    }

    private static func file(
        worker: Bool, lanes: Int = 2, sampleAbove: Int = 100, consumer: Bool = false, _ write: (Bot) throws -> Void
    ) throws -> [UInt8] {
        try file(worker: worker, lanes: lanes, sampleAbove: sampleAbove, consumer: consumer) { bot, _ in try write(bot) }
    }
}

struct SeedError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension Optional {
    func orThrow(_ reason: String) throws -> Wrapped {
        guard let self else { throw SeedError(reason) }
        return self
    }
}
