import CRingside
import Foundation
import Ringside
import RingsideAggregation
import RingsideTestSupport

/// `ringside-bench burst`: what a burst at 10 times the drain rate leaves of a histogram's count
/// and quantiles, with the lane sampling when it would fill (the default) and dropping when full
/// (as before sampling), over seeds. The burst is `BurstShape`'s (as `BurstSamplingTests`'s), drained
/// in steps by this thread, so each seed's figures are the same on every run and machine.
package enum BurstBenchmark {
    package static func run(_ settings: BenchSettings, progress: (String) -> Void = { _ in }) throws(BenchError) -> BurstReport {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let directory = try scratch.subdirectory("burst")
        let seeds = max(3, min(40, Int(settings.seconds * 5)))
        var rows: [BurstReport.Row] = []
        for (name, percent) in [("burst.sampled", 50), ("burst.dropped", 100)] {
            var row = BurstReport.Row(name: name, sampleAbovePercent: percent)
            for seed in 1...seeds {
                progress("\(name): seed \(seed) of \(seeds)")
                row.seeds.append(try burst(seed: UInt64(seed), sampleAbovePercent: percent, directory: directory))
            }
            rows.append(row)
        }
        let method =
            "A burst of \(BurstShape.calls) calls into one lane of \(BurstShape.laneCapacity) records, \(BurstShape.callsPerStep) "
            + "calls at a time, each step followed by a drain of \(BurstShape.drainedPerStep) records (10 times less); then "
            + "the rest is drained. Values: log-normal (sigma 0.25) around a median rising from 50 to 150 µs through "
            + "the burst, seeded 1 to \(seeds). Drained as the collector drains (RingConsumer(readsWeights: true), "
            + "GatherPlacement): each record counts once, the calls gathered from the lane's gather cells, placed beside "
            + "the records that stand for them; its p50 and p99 against the burst's own (nearest rank). sampled: "
            + "sampleAbovePercent 50 (the default); dropped: 100 (a full lane drops, as before sampling)."
        return BurstReport(machine: Machine.current(pinned: false), method: method, rows: rows)
    }

    /// One burst: the histogram of what its lane kept, against the burst's values.
    static func burst(seed: UInt64, sampleAbovePercent: Int, directory: String) throws(BenchError) -> BurstReport.Seed {
        let name = "burst-\(sampleAbovePercent)-\(seed)"
        let bot: Bot
        let latency: Bot.Histogram
        let consumer: RingConsumer
        do {
            bot = try Bot.attach(
                name, directory: directory,
                options: .init(laneCapacity: BurstShape.laneCapacity, sampleAbovePercent: sampleAbovePercent))
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
        values.reserveCapacity(BurstShape.calls)
        for start in stride(from: 0, to: BurstShape.calls, by: BurstShape.callsPerStep) {
            for index in start..<min(start + BurstShape.callsPerStep, BurstShape.calls) {
                let value = BurstShape.value(index, &random)
                values.append(value)
                latency.record(value)
            }
            try drain(limit: BurstShape.drainedPerStep)
        }
        try drain(limit: .max)
        values.sort()
        let histogram = drained.histogram(0)
        return BurstReport.Seed(
            calls: UInt64(BurstShape.calls), count: histogram.count, records: records,
            quantiles: histogram.values(atQuantiles: BurstShape.quantiles), trueQuantiles: BurstShape.trueQuantiles(values))
    }
}
