import CRingside
import Foundation
import Ringside
@testable import RingsideCollector
import RingsideTestSupport
import Testing

// A bot written by several processes: its own file and its workers' (`<bot>@<pid>`) feed one
// set of series, merged by metric name and labels.
@Suite("Collector: a bot's workers merge into its series")
struct WorkerMergeTests {
    @Test(
        "a forked worker's file and its parent's make one bot: one series per metric, exact totals; the worker's file gone, its totals stay"
    )
    func forkedWorkerMerges() throws {
        try withRingDirectory { directory in
            let n: UInt64 = 1000
            let run = try runTestProducer("fork", ring: "forked", in: directory, ["--count", "\(n)"])
            let words = run.output.split(whereSeparator: \.isWhitespace)
            let pid = try #require(words.count == 6 ? Int32(words[3]) : nil, "\(run.output)")

            let captured = CapturedLog()
            let collector = try makeCollector(directory, captured: captured)
            let snapshot = pass(collector)
            #expect(snapshot.rings.map(\.name).sorted() == ["forked", "forked@\(pid)"])
            #expect(snapshot.series.allSatisfy { $0.ring == "forked" }, "series are the bot's, not a file's")
            #expect(snapshot.series.filter { $0.metric.name == "forked_increments" }.count == 1)
            #expect(snapshot.series("forked_increments")?.cumulativeExactSum == UInt128(2 * n), "parent's and child's")
            let values = try #require(snapshot.series("forked_values"))
            #expect(values.cumulativeCount == n && values.cumulativeExactSum == UInt128(n * (n + 1) / 2))

            // The worker's file removed (as the collector will once it folds a dead worker): the
            // bot keeps what the worker counted.
            try FileManager.default.removeItem(atPath: directory.filePath(for: "forked@\(pid)"))
            let after = pass(collector, offset: RingTracker.identityCheckNanos + 1_000_000_000)
            #expect(after.rings.map(\.name) == ["forked"])
            #expect(after.series("forked_increments")?.cumulativeExactSum == UInt128(2 * n), "never less")
            #expect(after.series("forked_values")?.cumulativeCount == n)
        }
    }

    @Test("a worker attached by asking merges with the bot's own file: counters add, histograms merge, a gauge shows the value set last")
    func workerByOptionMerges() throws {
        try withRingDirectory { directory in
            let own = try Bot.attach("mix", directory: directory.path, options: .init(laneCapacity: 64))
            let worker = try Bot.attach("mix", directory: directory.path, options: .init(laneCapacity: 64, worker: true))
            try own.counter("jobs").increment(by: 3)
            try worker.counter("jobs").increment(by: 4)
            let ownLatency = try own.histogram("latency", unit: .nanoseconds),
                workerLatency = try worker.histogram("latency", unit: .nanoseconds)
            for value in 1...3 { ownLatency.record(UInt64(value)) }
            for value in 4...5 { workerLatency.record(UInt64(value)) }
            let ownLevel = try own.gauge("level"), workerLevel = try worker.gauge("level")
            // The same name and labels as another kind: the bot's own file registered it first.
            try own.counter("dual").increment()
            try worker.gauge("dual").set(9)
            ownLevel.set(1)

            let captured = CapturedLog()
            let collector = try makeCollector(directory, captured: captured)
            var snapshot = pass(collector)
            #expect(snapshot.series("jobs", ring: "mix")?.cumulativeExactSum == 7)
            #expect(snapshot.series("latency", ring: "mix")?.cumulativeCount == 5)
            #expect(snapshot.series("latency", ring: "mix")?.cumulativeExactSum == 15)
            #expect(snapshot.series("level", ring: "mix")?.lastValue == 1)
            #expect(snapshot.series.filter { $0.metric.name == "dual" }.map(\.metric.kind) == [.counter])
            let workerRing = try #require(snapshot.rings.first { $0.name == "mix@\(getpid())" })
            #expect(workerRing.seriesRefused == 1)
            #expect(captured.contains("mix@\(getpid())", "registered as another kind"))

            workerLevel.set(2)
            snapshot = pass(collector, offset: 1_100_000_000)
            #expect(snapshot.series("level", ring: "mix")?.lastValue == 2, "the worker set it last")
            ownLevel.set(3)
            snapshot = pass(collector, offset: 2_200_000_000)
            #expect(snapshot.series("level", ring: "mix")?.lastValue == 3, "then the bot's own process")
            withExtendedLifetime((own, worker)) {}
        }
    }
}
