import CRingside
import Foundation
import Ringside
@testable import RingsideCollector
import RingsideSnapshot
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

            // The worker is dead and drained: the collector removes its file, and the bot keeps
            // what the worker counted.
            var after = pass(collector, offset: 2_000_000_000)
            after = pass(collector, offset: 4_000_000_000)
            #expect(!FileManager.default.fileExists(atPath: directory.filePath(for: "forked@\(pid)")))
            #expect(FileManager.default.fileExists(atPath: directory.filePath(for: "forked")), "the bot's own file stays")
            #expect(captured.contains("ring forked@\(pid): worker pid \(pid) of bot forked is gone"))
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
            // The same histogram in another unit would merge wrongly scaled: refused too.
            try own.histogram("wait", unit: .nanoseconds).record(5)
            try worker.histogram("wait", unit: .microseconds).record(5)
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
            #expect(workerRing.seriesRefused == 2)
            #expect(workerRing.recordsRefusedTotal == 2, "the worker's gauge record and its microsecond record")
            #expect(snapshot.series("wait", ring: "mix")?.cumulativeCount == 1)
            #expect(snapshot.series("wait", ring: "mix")?.metric.unit == .nanoseconds)
            #expect(captured.contains("mix@\(getpid())", "registered as another kind, unit or gauge merge policy"))

            workerLevel.set(2)
            snapshot = pass(collector, offset: 1_100_000_000)
            #expect(snapshot.series("level", ring: "mix")?.lastValue == 2, "the worker set it last")
            ownLevel.set(3)
            snapshot = pass(collector, offset: 2_200_000_000)
            #expect(snapshot.series("level", ring: "mix")?.lastValue == 3, "then the bot's own process")
            withExtendedLifetime((own, worker)) {}
        }
    }

    @Test(
        "gauges merge across workers by the policy they declared: sum, max and min of the live workers, a series per worker labelled pid; a worker's exit takes its value and its series away"
    )
    func gaugesMergeByPolicy() throws {
        try withRingDirectory { directory in
            let producer = try ChildProcess(
                testProducer: "gauge-workers", ring: "gauges", in: directory, ["--children", "2"], withInput: true)
            let line = try #require(producer.readLine())
            let pids = line.split(separator: " ").dropFirst().compactMap { Int32($0) }
            try #require(pids.count == 2, "\(line)")
            func value(of gauge: String, in snapshot: RingsideSnapshot.Snapshot) -> Double? {
                snapshot.series.first { $0.metric.name == gauge && $0.ring == "gauges" }?.lastValue
            }
            func perWorker(_ snapshot: RingsideSnapshot.Snapshot) -> [String: Double] {
                var values: [String: Double] = [:]
                for series in snapshot.series where series.metric.name == "queue" {
                    values[series.metric.labelDictionary["pid"] ?? "none"] = series.lastValue
                }
                return values
            }

            let collector = try makeCollector(directory, captured: CapturedLog())
            var snapshot = pass(collector)
            #expect(value(of: "in_flight", in: snapshot) == 31, "1 + 10 + 20")
            #expect(value(of: "peak", in: snapshot) == 20)
            #expect(value(of: "low", in: snapshot) == 1)
            let expected: [String: Double] = ["\(producer.pid)": 1, "\(pids[0])": 10, "\(pids[1])": 20]
            let found = perWorker(snapshot)
            #expect(found == expected, "\(found.sorted { $0.key < $1.key }) \(expected.sorted { $0.key < $1.key })")
            #expect(snapshot.series.filter { $0.metric.name == "shared" }.count == 1, "the value set last: one series")

            // Worker 2 exits: once it is drained and its file removed, its value leaves the merges.
            producer.write("exit 2\n")
            #expect(producer.readLine() == "exited \(pids[1])")
            for step in 1...3 { snapshot = pass(collector, offset: UInt64(step) * 2_000_000_000) }
            #expect(!FileManager.default.fileExists(atPath: directory.filePath(for: "gauges@\(pids[1])")))
            #expect(value(of: "in_flight", in: snapshot) == 11, "1 + 10")
            #expect(value(of: "peak", in: snapshot) == 10)
            #expect(value(of: "low", in: snapshot) == 1)
            let left = perWorker(snapshot)
            let stay = expected.filter { $0.key != "\(pids[1])" }
            #expect(left == stay, "\(left.sorted { $0.key < $1.key })")
            producer.closeInput()
            #expect(producer.waitForExit().status == 0)
        }
    }

    @Test(
        "past max_workers, a new worker continues the file of one that is gone; when every one is alive it writes nothing, says why and is counted"
    )
    func workerFilesAreBounded() throws {
        try withRingDirectory { directory in
            let n: UInt64 = 1000
            let run = try runTestProducer("worker-bound", ring: "bound", in: directory, ["--count", "\(n)", "--max-workers", "2"])
            let pids = run.output.split(whereSeparator: \.isWhitespace).dropFirst().compactMap { Int32($0) }
            try #require(pids.count == 4, "\(run.output) \(run.errors)")
            // Children 1 and 2 made their files; 3 was refused; 4 continues 1's.
            #expect(directory.ringNames().sorted() == ["bound", "bound@\(pids[0])", "bound@\(pids[1])"])
            #expect(run.errors.contains("this forked child (pid \(pids[2])) writes nothing: the bot has 2 worker files (max_workers)"))
            #expect(run.errors.components(separatedBy: "writes nothing").count == 2, "said once: \(run.errors)")
            #expect(try RingInspector("bound", directory: directory).status().workersRefused == 1)
            let continued = try RingInspector("bound@\(pids[0])", directory: directory)
            #expect(try continued.status().producerPID == pids[3])
            let counter = try #require(try continued.metrics().first { $0.name == "bound_increments" })
            #expect(try continued.cells(of: counter).total == 2 * n, "its first worker's increments and its second's")

            let collector = try makeCollector(directory, captured: CapturedLog())
            let snapshot = pass(collector)
            #expect(snapshot.series("bound_increments", ring: "bound")?.cumulativeExactSum == UInt128(3 * n))
            #expect(snapshot.ring("bound")?.workersRefusedTotal == 1)
        }
    }

    @Test(
        "16 forked workers of 100,000 records, one SIGKILLed mid-stream: each record a worker wrote counts once, and the totals outlive the workers' files"
    )
    func forkedPoolWithAKill() throws {
        try withRingDirectory { directory in
            let n: UInt64 = 100_000, children = 16
            let run = try runTestProducer(
                "fork-pool", ring: "pool", in: directory,
                ["--count", "\(n)", "--children", "\(children)", "--kill-one", "yes", "--capacity", "131072"])
            let words = run.output.split(whereSeparator: \.isWhitespace).map(String.init)
            try #require(words.count == 2 + 2 * children && words[0] == "children", "\(run.output) \(run.errors)")
            let statuses = words[(children + 2)...].compactMap(Int32.init)
            #expect(statuses.first == SIGKILL && statuses.dropFirst().allSatisfy { $0 == 0 }, "\(run.output)")
            #expect(directory.ringNames().count == children + 1, "the bot's file and one per worker")

            // What the files hold, as their writers left them: the figures to expect exactly. Each
            // worker that finished attempted 1 ... N; the killed one, however far it got.
            let killed = "pool@\(words[1])"
            var totals = ForkPoolTotals()
            for name in directory.ringNames() {
                let file = try ForkPoolFile(name, directory: directory)
                totals.add(file)
                let (status, counted) = (file.status, file.increments)
                if name == "pool" {
                    #expect(status.writeCursor == 1 && counted == 1, "the parent's own")
                } else if name != killed {
                    #expect(status.writeCursor + status.dropped == n && counted == n, "\(name)")
                }
            }
            #expect(totals.incrementsMatchRecords, "\(totals)")
            #expect(totals.valueDropsMatchLaneDrops, "\(totals)")
            let (written, valuesDropped, increments) = (totals.written, totals.valuesDropped, totals.increments)

            let captured = CapturedLog()
            let collector = try makeCollector(directory, captured: captured)
            var snapshot = pass(collector)
            for step in 1...200 where snapshot.series("pool_values")?.cumulativeCount != written {
                snapshot = pass(collector, offset: UInt64(step) * 10_000_000)
            }
            #expect(snapshot.series("pool_values", ring: "pool")?.cumulativeCount == written, "each record drained once")
            #expect(snapshot.series("pool_values", ring: "pool")?.droppedRecords == valuesDropped)
            #expect(snapshot.series("pool_increments", ring: "pool")?.cumulativeExactSum == UInt128(increments))
            #expect(snapshot.series.count == 2)

            // Every worker is gone and drained: their files go, their totals stay.
            for step in 1...4 { snapshot = pass(collector, offset: 2_000_000_000 * UInt64(step) + 2_000_000_000) }
            #expect(directory.ringNames() == ["pool"])
            #expect(snapshot.series("pool_values", ring: "pool")?.cumulativeCount == written)
            #expect(snapshot.series("pool_values", ring: "pool")?.droppedRecords == valuesDropped)
            #expect(snapshot.series("pool_increments", ring: "pool")?.cumulativeExactSum == UInt128(increments))
        }
    }

    @Test("a collector started again keeps the totals of workers whose files it removed: counters never go back")
    func foldedTotalsOutliveARestart() throws {
        try withRingDirectory { directory in
            let total = try runPool(in: directory).records
            do {
                let captured = CapturedLog()
                let collector = try makeCollector(directory, captured: captured)
                var snapshot = pass(collector)
                for step in 1...4 { snapshot = pass(collector, offset: 2_000_000_000 * UInt64(step)) }
                #expect(directory.ringNames() == ["pool"], "the workers' files are removed")
                #expect(snapshot.series("pool_increments", ring: "pool")?.cumulativeExactSum == UInt128(total))
            }
            // A new collector finds the bot's own file (1 increment) and the saved totals of its workers.
            let captured = CapturedLog()
            let collector = try makeCollector(directory, captured: captured)
            let snapshot = pass(collector)
            #expect(snapshot.series("pool_increments", ring: "pool")?.cumulativeExactSum == UInt128(total))
            #expect(captured.contains("read the totals of workers that are gone (1 series of 1 bots)"), "\(captured.all)")
        }
    }

    @Test("a collector that stops keeps its all-time histograms for the next: a _count and _sum never go back across a restart")
    func histogramsOutliveARestart() throws {
        try withRingDirectory { directory in
            let (count, sum) = try runPool(in: directory)
            let first = try makeCollector(directory, pollNanos: 10_000_000, captured: CapturedLog())
            first.start()
            _ = eventually(seconds: 30) { first.snapshot.series("pool_values")?.cumulativeCount == count ? true : nil }
            #expect(first.snapshot.series("pool_values")?.cumulativeCount == count)
            first.stop()  // saves its all-time histograms; every record is drained from the rings

            let captured = CapturedLog()
            let second = try makeCollector(directory, captured: captured)
            let snapshot = pass(second)
            let values = try #require(snapshot.series("pool_values", ring: "pool"))
            #expect(values.cumulativeCount == count && values.cumulativeExactSum == sum, "kept, not counted twice")
            #expect(values.windows.allSatisfy { $0.count == 0 }, "the windows are this run's: nothing new")
            #expect(snapshot.series("pool_increments", ring: "pool")?.cumulativeExactSum == UInt128(count))
            #expect(captured.contains("1 all-time histograms"), "\(captured.all)")
        }
    }
}

/// Runs `ringside-test-producer fork-pool`: bot "pool" records once (the value `count + 1`, and an
/// increment), then `children` forked workers each record 1 ... `count` (each with an increment)
/// and exit.
/// - Returns: what they wrote in all: the records of `pool_values` (as many as the increments of
///   `pool_increments`) and their sum.
private func runPool(in directory: RingDirectory, children: Int = 4, count: UInt64 = 1000) throws -> (records: UInt64, sum: UInt128) {
    let run = try runTestProducer("fork-pool", ring: "pool", in: directory, ["--count", "\(count)", "--children", "\(children)"])
    try #require(run.status == 0, "\(run.output) \(run.errors)")
    return (1 + UInt64(children) * count, UInt128(count + 1) + UInt128(children) * UInt128(count * (count + 1) / 2))
}
