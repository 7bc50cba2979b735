import CRingside
import Foundation
import Ringside
import RingsideAggregation
import RingsideExport
import RingsideSnapshot
import RingsideTestSupport
import Testing

@testable import RingsideCollector

/// A burst recorded into one lane and drained in steps by a collector's aggregator that reads
/// gather cells (SAMPLING in ringside.h): `drainedPerStep` records after each `callsPerStep`
/// calls, then the rest (the thread keeps its lane: the calls it gathered last are counted all
/// the same). The burst tests' one way to drive a lane past what its drain takes.
struct SteppedBurst {
    var calls: Int
    var callsPerStep: Int
    var drainedPerStep: Int
    var quantiles: [Double]

    /// The burst's series as the collector shows it, its values sorted, and the records drained.
    struct Drained {
        var series: SeriesSnapshot
        var sortedValues: [UInt64]
        var records: Int
    }

    /// Records `calls` values (`value(index, &random)`, seeded `seed`) into the histogram
    /// `latency` of bot `name` attached with `options`, and drains them.
    func run(
        _ name: String, options: Bot.Options, seed: UInt64, in directory: RingDirectory,
        value: (Int, inout SplitMix64) -> UInt64
    ) throws -> Drained {
        let bot = try Bot.attach(name, directory: directory.path, options: options)
        let latency = try bot.histogram("latency", unit: .nanoseconds)
        let consumer = try RingConsumer(name, directory: directory, readsWeights: true)
        var aggregator = BotAggregator(ring: name, layout: .standard, quantiles: quantiles.count, pageBytes: PrometheusExporter.pageBytes)
        let source = aggregator.addSource(pid: getpid())
        let room: (BotAggregator.Usage) -> BotAggregator.Usage = { _ in BotAggregator.Usage(series: 8, bytes: .max) }
        aggregator.addMetrics(of: consumer, source: source, admitting: room)
        var random = SplitMix64(seed: seed)
        var values: [UInt64] = []
        values.reserveCapacity(calls)
        var records = 0
        for start in stride(from: 0, to: calls, by: callsPerStep) {
            for index in start..<min(start + callsPerStep, calls) {
                let next = value(index, &random)
                values.append(next)
                latency.record(next)
            }
            records += try aggregator.drain(
                consumer, source: source, limitPerLane: drainedPerStep, nowNanos: rs_clock_precise_ns(), admitting: room,
                counted: { _, _ in })
        }
        records += try aggregator.drain(
            consumer, source: source, limitPerLane: .max, nowNanos: rs_clock_precise_ns(), admitting: room, counted: { _, _ in })
        let now = rs_clock_precise_ns()
        aggregator.sampleCells(of: consumer, source: source, nowNanos: now)
        var versions = VersionCounter()
        let snapshots = aggregator.snapshots(nowNanos: now, quantiles: quantiles, versions: &versions)
        let series = try #require(snapshots.first { $0.metric.name == "latency" })
        values.sort()
        return Drained(series: series, sortedValues: values, records: records)
    }
}
