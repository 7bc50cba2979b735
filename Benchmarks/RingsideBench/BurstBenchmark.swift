import CRingside
import Foundation
import Ringside
import RingsideAggregation
import RingsideTestSupport

/// `ringside-bench burst`: what a burst at 10 times the drain rate leaves of a histogram's count
/// and quantiles, over seeds. Issue 27's burst (`BurstShape.rising`) with the lane sampling when it
/// would fill (the default) and dropping when full (as before sampling); issue 70's two into a
/// lane of 32 records, sampled: the median drifting from 20 to 200 µs, and the tail in one block
/// (the last 3 % of the calls at ten times the median). Each burst is drained in steps by this
/// thread, so each seed's figures are the same on every run and machine.
package enum BurstBenchmark {
    /// The rows: a burst, and where its lane starts sampling (100: never; it drops when full).
    static let rows: [(name: String, shape: BurstShape, sampleAbovePercent: Int)] = [
        ("burst.sampled", .rising, 50), ("burst.dropped", .rising, 100),
        ("burst.drifting", .drifting(calls: 3_000_000), 50), ("burst.tail", .tailInABlock(calls: 3_000_000), 50),
    ]
    static let quantiles = [0.5, 0.99]

    package static func run(_ settings: BenchSettings, progress: (String) -> Void = { _ in }) throws(BenchError) -> BurstReport {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let directory = try scratch.subdirectory("burst")
        let seeds = max(3, min(40, Int(settings.seconds * 5)))
        var report: [BurstReport.Row] = []
        for (name, shape, percent) in rows {
            var row = BurstReport.Row(name: name, sampleAbovePercent: percent)
            for seed in 1...seeds {
                progress("\(name): seed \(seed) of \(seeds)")
                row.seeds.append(try burst(shape, seed: UInt64(seed), sampleAbovePercent: percent, directory: directory))
            }
            report.append(row)
        }
        let rising = BurstShape.rising, drifting = BurstShape.drifting(calls: 3_000_000)
        let method =
            "burst.sampled and burst.dropped: \(rising.calls) calls into one lane of \(rising.laneCapacity) records, "
            + "\(rising.callsPerStep) calls at a time, each step followed by a drain of \(rising.drainedPerStep) records "
            + "(10 times less), then the rest drained; values log-normal (sigma 0.25) around a median rising from 50 to "
            + "150 µs through the burst; sampled: sampleAbovePercent 50 (the default); dropped: 100 (a full lane drops, "
            + "as before sampling). burst.drifting and burst.tail: \(drifting.calls) calls into a lane of "
            + "\(drifting.laneCapacity) records, \(drifting.callsPerStep) at a time, each step followed by a drain of "
            + "\(drifting.drainedPerStep), sampled; the median drifting from 20 to 200 µs, or 50 µs but for the last 3 % "
            + "of the calls at 500 µs (the tail in one block). Seeded 1 to \(seeds). Drained as the collector drains "
            + "(RingConsumer(readsWeights: true), GatherPlacement): each record counts once, the calls gathered from the "
            + "lane's gather cells, placed beside the records that stand for them; p50 and p99 against the burst's own "
            + "(nearest rank)."
        return BurstReport(machine: Machine.current(pinned: false), method: method, rows: report)
    }

    /// One burst: the histogram of what its lane kept, against the burst's values.
    static func burst(
        _ shape: BurstShape, seed: UInt64, sampleAbovePercent: Int, directory: String
    ) throws(BenchError)
        -> BurstReport.Seed
    {
        let name = "burst-\(shape.name)-\(sampleAbovePercent)-\(seed)"
        let bot: Bot
        let latency: Bot.Histogram
        let consumer: RingConsumer
        do {
            bot = try Bot.attach(
                name, directory: directory,
                options: .init(laneCapacity: shape.laneCapacity, sampleAbovePercent: sampleAbovePercent))
            latency = try bot.histogram("latency", unit: .nanoseconds)
            consumer = try RingConsumer(name, directory: RingDirectory(directory), readsWeights: true)
        } catch { throw BenchError("setting up bot \(name) in \(directory): \(error)") }
        let drained = ExactDrain(consumer)  // as the collector drains (SAMPLING in ringside.h)
        var records = 0
        func drain(limit: Int) throws(BenchError) {
            do { records += try drained.drain(limitPerLane: limit) } catch { throw BenchError("draining \(name): \(error)") }
        }
        var random = SplitMix64(seed: seed)
        var values: [UInt64] = []
        values.reserveCapacity(shape.calls)
        for start in stride(from: 0, to: shape.calls, by: shape.callsPerStep) {
            for index in start..<min(start + shape.callsPerStep, shape.calls) {
                let value = shape.value(index, &random)
                values.append(value)
                latency.record(value)
            }
            try drain(limit: shape.drainedPerStep)
        }
        try drain(limit: .max)
        values.sort()
        let histogram = drained.histogram(0)
        return BurstReport.Seed(
            calls: UInt64(shape.calls), count: histogram.count, records: records,
            quantiles: histogram.values(atQuantiles: quantiles), trueQuantiles: BurstShape.trueQuantiles(values, quantiles))
    }
}
