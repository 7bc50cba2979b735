import Foundation
import Ringside
import RingsideAggregation
@testable import RingsideCollector
import RingsideExport
import RingsideSnapshot
import RingsideTestSupport
import Testing

/// Issue 45, attack 3: a total that wrapped at 2^64 (a counter folded from workers, a histogram's
/// count and sum under hostile weights) read lower than before, and Prometheus' `rate()` took it
/// for a reset. Totals saturate now: they stop at their ceiling, never go back, and are counted
/// (`ringside_collector_series_saturated`) and said once.
@Suite("Totals saturate at their ceiling: never lower than an earlier reading, counted and said once")
struct SaturationTests {
    @Test(
        "a worker's counter near 2^64 folded beside another's: the bot's total stops at 2^64 - 1, never lower at any pass or after a restart; counted and said once"
    )
    func counterSaturates() throws {
        try withRingDirectory { directory in
            let big = UInt64.max - 399
            var readings: [UInt128] = []
            do {
                let captured = CapturedLog()
                let collector = try makeCollector(directory, captured: captured)
                var step: UInt64 = 0, saturated = 0
                @discardableResult func look() -> Snapshot {
                    step += 1
                    let snapshot = pass(collector, offset: step * 2_000_000_000)
                    if let total = snapshot.series("worker_total", ring: "totals")?.cumulativeExactSum {
                        readings.append(total)
                        saturated = max(saturated, snapshot.collector.snapshotBuild.seriesSaturated)
                    }
                    return snapshot
                }
                try #require(runTestProducer("worker", ring: "totals", in: directory, ["--add", "\(big)"]).status == 0)
                for _ in 1...4 { look() }
                #expect(directory.ringNames().isEmpty, "the first worker is folded and its file gone")
                #expect(readings.last == UInt128(big))
                try #require(runTestProducer("worker", ring: "totals", in: directory, ["--add", "600"]).status == 0)
                var snapshot = look()
                for _ in 1...4 { snapshot = look() }
                #expect(directory.ringNames().isEmpty, "the second too")
                #expect(readings.last == UInt128(UInt64.max), "\(readings)")
                #expect(zip(readings, readings.dropFirst()).allSatisfy { $0 <= $1 }, "never lower: \(readings)")
                #expect(saturated == 1, "counted while the bot's series are shown")
                #expect(captured.all.filter { $0.contains("series worker_total reached its ceiling") }.count == 1, "\(captured.all)")
                _ = snapshot
            }
            // The next collector starts from the folded total: the ceiling, not 200.
            let collector = try makeCollector(directory, captured: CapturedLog())
            try #require(runTestProducer("worker", ring: "totals", in: directory, ["--add", "1"]).status == 0)
            let snapshot = pass(collector)
            #expect(snapshot.series("worker_total", ring: "totals")?.cumulativeExactSum == UInt128(UInt64.max))
        }
    }

    @Test(
        "weighted records pushing a histogram past 2^64 calls pin its count and sum at their ceilings: neither goes back, across passes and a restart"
    )
    func hostileWeightsSaturate() throws {
        try withRingDirectory { directory in
            // An earlier run left the bot's histogram near both ceilings: 2^64 - 2^33 calls, a sum
            // 2^97 short of 2^128. Each record below stands for 2^32 - 1 calls of 2^64 - 1.
            let value = UInt64.max, weight = UInt64(UInt32.max)
            var seed = Histogram()
            seed.record(value, count: UInt64.max - (1 << 33))
            var persisted = seed.persisted
            let seedSum = UInt128.max - (UInt128(1) << 97)
            persisted.sumLow = UInt64(truncatingIfNeeded: seedSum)
            persisted.sumHigh = UInt64(truncatingIfNeeded: seedSum >> 64)
            var earlier = StateContent()
            earlier.histograms["weights"] = [CollectorState.HistogramEntry(metric: "worker_values", labels: "", histogram: persisted)]
            let body = try JSONEncoder().encode(StateFiles.Snapshot(earlier, generation: 1))
            try body.write(to: URL(fileURLWithPath: directory.path + "/" + StateFiles.primaryName))

            var counts: [UInt64] = [], sums: [UInt128] = [], saturated = 0, page = ""
            do {
                let captured = CapturedLog()
                let collector = try makeCollector(directory, captured: captured)
                var step: UInt64 = 0
                @discardableResult func look() -> Snapshot {
                    step += 1
                    let snapshot = pass(collector, offset: step * 2_000_000_000)
                    if let series = snapshot.series("worker_values", ring: "weights") {
                        counts.append(series.cumulativeCount)
                        sums.append(series.cumulativeExactSum)
                        saturated = max(saturated, snapshot.collector.snapshotBuild.seriesSaturated)
                        if saturated > 0 { page = String(decoding: PrometheusExporter.render(snapshot), as: UTF8.self) }
                    }
                    return snapshot
                }
                // One worker per step, each 2 threads of one record: 2 (2^32 - 1) calls of 2^64 - 1.
                var snapshot = look()
                for _ in 0..<3 {
                    let worker = try runTestProducer(
                        "worker", ring: "weights", in: directory,
                        ["--threads", "2", "--value", "\(value)", "--sample-every", "\(weight)"])
                    try #require(worker.status == 0, "\(worker.errors)")
                    for _ in 1...3 { snapshot = look() }
                }
                // Each worker, dead when discovery finds it, is drained and retired in its first
                // pass: the bot's series show in that snapshot (a bot of workers alone has none between).
                #expect(counts.count >= 3, "\(captured.all)")
                #expect(zip(counts, counts.dropFirst()).allSatisfy { $0 <= $1 }, "the count never goes back: \(counts)")
                #expect(zip(sums, sums.dropFirst()).allSatisfy { $0 <= $1 }, "the sum never goes back: \(sums)")
                #expect(counts.last == .max && sums.last == .max, "both at their ceilings: \(counts.last ?? 0), \(sums.last ?? 0)")
                #expect(counts.contains { $0 > UInt64.max - (1 << 33) && $0 < .max }, "it grew before it stopped: \(counts)")
                #expect(saturated == 1, "counted while the bot's series are shown")
                #expect(page.contains("ringside_collector_series_saturated 1\n"))
                #expect(captured.all.filter { $0.contains("series worker_values reached its ceiling") }.count == 1)
                _ = snapshot
                collector.start()
                collector.stop()  // keeps the all-time histogram for the next run
            }
            let collector = try makeCollector(directory, captured: CapturedLog())
            try #require(runTestProducer("worker", ring: "weights", in: directory, ["--threads", "1", "--value", "1"]).status == 0)
            let series = try #require(pass(collector).series("worker_values", ring: "weights"))
            #expect(series.cumulativeCount == .max && series.cumulativeExactSum == .max, "not lower after the restart")
        }
    }
}
