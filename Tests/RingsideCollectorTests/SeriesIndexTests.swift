import CRingside
import Foundation
import Ringside
import RingsideExport
import RingsideSnapshot
import RingsideTestSupport
import Testing

@testable import RingsideCollector

@Suite("SeriesIndex: a bot's series found by their name and labels' hash, and by the strings when hashes collide")
struct SeriesIndexTests {
    /// The index's hash: the real one, or one that gives every series the same hash.
    enum Hashing: String, TestArgument {
        case real, colliding
    }

    @Test(
        "two files of a bot reach the same series by name and labels, a worker's gauge goes with its file and the one moved into its place still takes records",
        arguments: Hashing.allCases)
    func routesByNameAndLabels(hashing: Hashing) throws {
        try withRingDirectory { directory in
            let own = try Bot.attach("index-own-\(hashing)", directory: directory.path)
            let worker = try Bot.attach("index-worker-\(hashing)", directory: directory.path)
            var aggregator = BotAggregator(ring: "index", layout: .standard, quantiles: 1, pageBytes: PrometheusExporter.pageBytes)
            if hashing == .colliding { aggregator.index = BotAggregator.SeriesIndex(hash: { _ in 7 }) }
            let room: (BotAggregator.Usage) -> BotAggregator.Usage = { _ in BotAggregator.Usage(series: 100, bytes: .max) }

            // The same metrics from both files, and one of the bot's own file alone.
            var depths: [Bot.Gauge] = []
            for (bot, base) in [(own, UInt64(10)), (worker, UInt64(20))] {
                try bot.histogram("latency", labels: ["venue": "a"]).record(base)
                try bot.histogram("latency", labels: ["venue": "b"]).record(base + 1)
                try bot.counter("fills").increment(by: base)
                let depth = try bot.gauge("depth", merge: .perWorker)
                depth.set(Double(base))
                depths.append(depth)
            }
            try own.histogram("only_own").record(5)

            let consumers = [
                try RingConsumer(own.name, directory: directory), try RingConsumer(worker.name, directory: directory),
            ]
            let sources = [aggregator.addSource(pid: 101), aggregator.addSource(pid: 102)]
            func pass() throws -> [String: SeriesSnapshot] {
                let now = rs_clock_precise_ns()
                for (consumer, source) in zip(consumers, sources) {
                    aggregator.addMetrics(of: consumer, source: source, admitting: room)
                    _ = try aggregator.drain(
                        consumer, source: source, limitPerLane: .max, nowNanos: now, admitting: room, counted: { _, _ in })
                    aggregator.sampleCells(of: consumer, source: source, nowNanos: now)
                }
                var versions = VersionCounter()
                let series = aggregator.snapshots(nowNanos: now, quantiles: [0.5], versions: &versions)
                return Dictionary(uniqueKeysWithValues: series.map { ("\($0.metric.name){\($0.metric.encodedLabels)}", $0) })
            }

            var series = try pass()
            #expect(series.count == 6, "\(series.keys.sorted())")
            #expect(series["latency{venue=a}"]?.cumulativeCount == 2 && series["latency{venue=a}"]?.cumulativeExactSum == 30)
            #expect(series["latency{venue=b}"]?.cumulativeCount == 2 && series["latency{venue=b}"]?.cumulativeExactSum == 32)
            #expect(series["only_own{}"]?.cumulativeCount == 1)
            #expect(series["fills{}"]?.cumulativeExactSum == 30)
            #expect(series["depth{pid=101}"]?.lastValue == 10 && series["depth{pid=102}"]?.lastValue == 20)
            #expect(aggregator.index.collisions == (hashing == .colliding ? 5 : 0))

            // The bot's own file goes: its per-worker gauge with it (the worker's moves into its
            // place), the rest keep what it counted.
            aggregator.removeSource(sources[0])
            depths[1].set(25)
            let now = rs_clock_precise_ns()
            aggregator.sampleCells(of: consumers[1], source: sources[1], nowNanos: now)
            var versions = VersionCounter()
            let left = aggregator.snapshots(nowNanos: now, quantiles: [0.5], versions: &versions)
            series = Dictionary(uniqueKeysWithValues: left.map { ("\($0.metric.name){\($0.metric.encodedLabels)}", $0) })
            #expect(series["depth{pid=101}"] == nil && series["depth{pid=102}"]?.lastValue == 25, "\(series.keys.sorted())")
            #expect(series["fills{}"]?.cumulativeExactSum == 30)

            // A file of the bot that comes later finds every series by name and labels, the moved gauge's too.
            let later = try Bot.attach("index-later-\(hashing)", directory: directory.path)
            try later.histogram("latency", labels: ["venue": "a"]).record(40)
            try later.gauge("depth", merge: .last).set(1)  // another policy than the series': refused
            let laterConsumer = try RingConsumer(later.name, directory: directory)
            let laterSource = aggregator.addSource(pid: 103)
            aggregator.addMetrics(of: laterConsumer, source: laterSource, admitting: room)
            _ = try aggregator.drain(
                laterConsumer, source: laterSource, limitPerLane: .max, nowNanos: rs_clock_precise_ns(), admitting: room,
                counted: { _, _ in })
            versions = VersionCounter()
            let all = aggregator.snapshots(nowNanos: rs_clock_precise_ns(), quantiles: [0.5], versions: &versions)
            #expect(all.count == 5)
            #expect(all.first { $0.metric.name == "latency" && $0.metric.encodedLabels == "venue=a" }?.cumulativeCount == 3)
            #expect(aggregator.sources[laterSource].refusedSeries == 1)
        }
    }
}
