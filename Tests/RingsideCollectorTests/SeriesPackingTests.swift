import CRingside
import Foundation
import Ringside
import RingsideExport
import RingsideSnapshot
import RingsideTestSupport
import Testing

@testable import RingsideCollector

@Suite("Series packed: the figures of the series a bot let go quiet together held in one block, taken out by a series that records again")
struct SeriesPackingTests {
    @Test("a packed series reads as it did, keeps its classic counts, and a write takes it out of the block alone")
    func packedReadsAndWrites() {
        let series = (0..<3).map { index in
            var one = SeriesSnapshot(
                ring: "pack",
                metric: MetricDescriptor(
                    index: UInt32(index), name: "m\(index)", kind: .histogram, unit: .none, encodedLabels: "", help: "", sampleEvery: 1),
                id: UInt64(index + 1), windows: [])
            one.cumulativeCount = UInt64(10 * (index + 1))
            one.droppedRecords = UInt64(index)
            return one
        }
        _ = series[1].classicCounts { [0, 4, 4] }
        let packed = SeriesSnapshot.packed(series)
        #expect(packed.allSatisfy { $0.isPacked })
        #expect(Set(packed.map { $0.block!.id }).count == 1 && packed[0].block?.capacity == 3)
        #expect(packed.map { $0.cumulativeCount } == [10, 20, 30] && packed.map { $0.droppedRecords } == [0, 1, 2])
        #expect(packed.map { $0.metric.name } == ["m0", "m1", "m2"] && packed.map { $0.id } == [1, 2, 3])
        var computed = false
        #expect(
            Array(
                packed[1].classicCounts {
                    computed = true
                    return []
                }) == [0, 4, 4] && !computed, "carried into the block")
        #expect(Array(packed[2].classicCounts { [1, 1] }) == [1, 1], "computed for a place of the block")
        #expect(Array(packed[2].classicCounts { [9, 9] }) == [1, 1], "and kept there")

        var written = packed[1]
        written.cumulativeCount = 21
        #expect(!written.isPacked && written.cumulativeCount == 21 && written.metric.name == "m1")
        #expect(Array(written.classicCounts { [] }) == [0, 4, 4], "its classic counts go with it")
        #expect(packed[1].cumulativeCount == 20 && packed[1].isPacked, "the block is never written")
        #expect(!written.sharesFigures(with: packed[1]) && packed[0].sharesFigures(with: packed[0]))
        #expect(!packed[0].sharesFigures(with: packed[1]), "a place in a block is a series' own")
    }

    @Test("series gone quiet in one publish share a block; a series that records again leaves it; a block most left is made again")
    func aggregatorPacksQuietSeries() throws {
        try withRingDirectory { directory in
            let bot = try Bot.attach("pack-quiet", directory: directory.path)
            let histograms = try (0..<8).map { try bot.histogram("latency", labels: ["n": String($0)]) }
            for (index, histogram) in histograms.enumerated() { histogram.record(UInt64(index + 1)) }
            var file = try OneFile(bot, directory: directory)
            let start = rs_clock_precise_ns()
            func pass(at now: UInt64) throws -> [SeriesSnapshot] { try file.pass(at: now) }

            let busy = try pass(at: start)
            #expect(busy.count == 8 && !busy.contains(where: \.isPacked), "series with values in their windows keep boxes")

            // Past the longest window: every window empty, the eight figures made again together.
            let quiet = try pass(at: start + 100_000_000_000)
            let first = try #require(quiet[0].block)
            #expect(quiet.allSatisfy { $0.block?.id == first.id } && first.capacity == 8)
            #expect(quiet.map { $0.cumulativeCount } == Array(repeating: 1, count: 8))
            #expect(quiet.map { $0.cumulativeExactSum } == (1...8).map { UInt128($0) })
            #expect(try pass(at: start + 100_500_000_000).map { $0.block?.id } == quiet.map { $0.block?.id }, "quiet, they stay")

            // Seven record again (late for the windows, in the all-time figures): they leave the
            // block, which keeps one of eight, so the eighth goes with them into a new one.
            for histogram in histograms.prefix(7) { histogram.record(100) }
            let again = try pass(at: start + 101_000_000_000)
            let second = try #require(again[0].block)
            #expect(second.id != first.id && again.allSatisfy { $0.block?.id == second.id } && second.capacity == 8)
            #expect(again.map { $0.cumulativeCount } == Array(repeating: 2, count: 7) + [1])
            #expect(again[7].cumulativeExactSum == 8 && again[0].cumulativeExactSum == 101)

            // One records again: it alone leaves (a box of its own), the block keeps seven of eight.
            histograms[0].record(1_000)
            let last = try pass(at: start + 102_000_000_000)
            #expect(!last[0].isPacked && last[0].cumulativeCount == 3 && last[0].cumulativeExactSum == 1_101)
            #expect(last.dropFirst().allSatisfy { $0.block?.id == second.id })
            #expect(last.dropFirst().map { $0.cumulativeCount } == Array(repeating: 2, count: 6) + [1])
        }
    }

    @Test("a worker's gauges that went with its file leave their block: one series left of eight gets a box of its own")
    func seriesGoneLeaveTheirBlock() throws {
        try withRingDirectory { directory in
            let own = try Bot.attach("pack-own", directory: directory.path)
            let worker = try Bot.attach("pack-worker", directory: directory.path)
            try own.histogram("latency").record(7)
            for index in 0..<7 { try worker.gauge("depth", labels: ["n": String(index)], merge: .perWorker).set(Double(index)) }
            let consumers = [try RingConsumer(own.name, directory: directory), try RingConsumer(worker.name, directory: directory)]
            var aggregator = BotAggregator(ring: "pack", layout: .standard, quantiles: 1, pageBytes: PrometheusExporter.pageBytes)
            let sources = [aggregator.addSource(pid: 101), aggregator.addSource(pid: 102)]
            let room: (BotAggregator.Usage) -> BotAggregator.Usage = { _ in BotAggregator.Usage(series: 100, bytes: .max) }
            var versions = VersionCounter()
            let start = rs_clock_precise_ns()
            func pass(at now: UInt64) throws -> [SeriesSnapshot] {
                for (consumer, source) in zip(consumers, sources) where aggregator.sources[source].inUse {
                    aggregator.addMetrics(of: consumer, source: source, admitting: room)
                    _ = try aggregator.drain(
                        consumer, source: source, limitPerLane: .max, nowNanos: now, admitting: room, counted: { _, _ in })
                    aggregator.sampleCells(of: consumer, source: source, nowNanos: now)
                }
                return aggregator.snapshots(nowNanos: now, quantiles: [0.5], versions: &versions)
            }

            #expect(try pass(at: start).count == 8)
            let quiet = try pass(at: start + 100_000_000_000)
            let block = try #require(quiet[0].block)
            #expect(quiet.count == 8 && quiet.allSatisfy { $0.block?.id == block.id } && block.capacity == 8, "quiet together: one block")

            aggregator.removeSource(sources[1])  // the worker exited: its gauges go
            let left = try pass(at: start + 101_000_000_000)
            #expect(left.map(\.metric.name) == ["latency"])
            #expect(!left[0].isPacked, "not held in a block of eight for one series")
            #expect(left[0].cumulativeCount == 1 && left[0].cumulativeExactSum == 7 && left[0].id == quiet[0].id)
            #expect(try !pass(at: start + 102_000_000_000)[0].isPacked, "and it stays in its box")
        }
    }

    @Test("a pass that leaves a new series out, its figures waiting, packs none; the next that shows every series packs every quiet one")
    func packingWaitsForEverySeries() throws {
        try withRingDirectory { directory in
            let bot = try Bot.attach("pack-later", directory: directory.path)
            let histograms = try (0..<4).map { try bot.histogram("latency", labels: ["n": String($0)]) }
            for histogram in histograms { histogram.record(5) }
            var file = try OneFile(bot, directory: directory)
            let start = rs_clock_precise_ns()
            #expect(try file.pass(at: start).count == 4)
            // A new series, then the windows empty: the pass that leaves it out packs nothing.
            try bot.histogram("latency", labels: ["n": "new"]).record(9)
            let left = try file.pass(at: start + 100_000_000_000, firstFigures: false)
            #expect(left.count == 4 && file.aggregator.seriesAwaitingFigures == 1 && !left.contains(where: \.isPacked))
            #expect(left.allSatisfy { $0.windows.allSatisfy(\.isEmpty) }, "quiet, but not yet in a block")
            // The next shows it (its value too old for the windows: quiet), and puts it in one block
            // with the four quiet ones, whose figures did not change.
            let whole = try file.pass(at: start + 100_500_000_000)
            #expect(whole.count == 5 && file.aggregator.seriesAwaitingFigures == 0 && file.aggregator.seriesShownFirst == 1)
            let block = try #require(whole[0].block)
            #expect(whole.allSatisfy { $0.block?.id == block.id } && block.capacity == 5)
            #expect(whole.map { $0.cumulativeExactSum } == [5, 5, 5, 5, 9])
        }
    }
}

/// One bot file's aggregator, and its passes as the collector makes them: metrics admitted,
/// records drained, cells sampled, then the snapshots (in label order).
private struct OneFile {
    let consumer: RingConsumer
    var aggregator = BotAggregator(ring: "pack", layout: .standard, quantiles: 1, pageBytes: PrometheusExporter.pageBytes)
    let source: Int
    var versions = VersionCounter()
    let room: (BotAggregator.Usage) -> BotAggregator.Usage = { _ in BotAggregator.Usage(series: 100, bytes: .max) }

    init(_ bot: Bot, directory: RingDirectory) throws {
        consumer = try RingConsumer(bot.name, directory: directory)
        source = aggregator.addSource(pid: 101)
    }

    mutating func pass(at now: UInt64, firstFigures: Bool = true) throws -> [SeriesSnapshot] {
        aggregator.addMetrics(of: consumer, source: source, admitting: room)
        _ = try aggregator.drain(consumer, source: source, limitPerLane: .max, nowNanos: now, admitting: room, counted: { _, _ in })
        aggregator.sampleCells(of: consumer, source: source, nowNanos: now)
        return aggregator.snapshots(nowNanos: now, quantiles: [0.5], versions: &versions, firstFigures: firstFigures)
            .sorted { $0.metric.encodedLabels < $1.metric.encodedLabels }
    }
}
