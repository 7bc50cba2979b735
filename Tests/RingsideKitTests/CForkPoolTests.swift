import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideCollector
import RingsideSnapshot
import RingsideTestSupport
import Testing

// A C program forks a pool of workers from one bot (Tests/fixtures/c_fork_pool.c): the children
// record through the handles they inherited, with no worker code, each into a worker file of its
// own; the in-process collector merges them into the bot's series, and removes the files of the
// workers once they are gone and drained, keeping their totals.
@Suite("a C program's forked pool of workers (Tests/fixtures/c_fork_pool.c) merges exactly")
struct CForkPoolTests {
    @Test(
        "16 forked children of 100,000 records each (the C module also under AddressSanitizer with UndefinedBehaviorSanitizer): the collector counts 1,600,001 records and increments, the exact sum, no drop; the workers' files go, the totals stay",
        arguments: ["c", CSanitizer.addressUndefined.rawValue])
    func sixteenWorkersExact(build language: String) throws {
        let build = try TemporaryDirectory("ringside-kit-fork-pool")
        defer { build.remove() }
        guard let executable = try buildCProducer(language, fixture: "c_fork_pool", into: build) else { return }
        try withRingDirectory { directory in
            let n: UInt64 = 100_000, children = 16
            let run = try runProcess(executable, [directory.path, "pool", "\(children)", "\(n)"])
            let pool = try forkedChildren(run, children)
            #expect(pool.allSatisfy { $0.status == "exit 0" }, "\(run.output)")
            #expect(Set(directory.ringNames()) == Set(["pool"] + pool.map { "pool@\($0.pid)" }), "the bot's file and one per worker")

            // What each file holds, as its writer left it: every value written, none dropped.
            for name in directory.ringNames() {
                let inspector = try RingInspector(name, directory: directory)
                let status = try inspector.status()
                let counter = try #require(try inspector.metrics().first { $0.name == "pool_increments" })
                let expected = name == "pool" ? 1 : n
                #expect(status.writeCursor == expected && status.dropped == 0, "\(name)")
                #expect(try inspector.cells(of: counter).total == expected, "\(name)")
                #expect(!status.producerAlive, "\(name): its process is gone")
            }

            let total = 1 + UInt64(children) * n
            let sum = UInt128(n + 1) + UInt128(children) * UInt128(n * (n + 1) / 2)
            try expectTotalsOutliveWorkers(directory, Totals(records: total, sum: sum, dropped: 0, increments: total))
        }
    }

    @Test(
        "16 forked children, the first SIGKILLed while it records: every record a worker wrote is counted once, its drops as its cells count them, and the totals outlive the workers' files"
    )
    func sixteenWorkersOneKilled() throws {
        let build = try TemporaryDirectory("ringside-kit-fork-pool-kill")
        defer { build.remove() }
        guard let executable = try buildCProducer("c", fixture: "c_fork_pool", into: build) else { return }
        try withRingDirectory { directory in
            let n: UInt64 = 100_000, children = 16
            let run = try runProcess(executable, [directory.path, "pool", "\(children)", "\(n)", "kill-one"])
            let pool = try forkedChildren(run, children)
            #expect(pool.first?.status == "signal \(SIGKILL)" && pool.dropFirst().allSatisfy { $0.status == "exit 0" }, "\(run.output)")
            #expect(Set(directory.ringNames()) == Set(["pool"] + pool.map { "pool@\($0.pid)" }), "the bot's file and one per worker")

            // What the files hold, as their writers left them: the figures to expect exactly. Each
            // worker that finished wrote 1 ... N; the killed one, however far it got (its lane may
            // have filled, its later records dropped and counted).
            let killed = "pool@\(pool[0].pid)"
            var totals = ForkPoolTotals()
            var sum: UInt128 = 0
            for name in directory.ringNames() {
                let file = try ForkPoolFile(name, directory: directory)
                let (inspector, status, counted) = (file.inspector, file.status, file.increments)
                #expect(!status.producerAlive, "\(name): its process is gone")
                totals.add(file)
                switch name {
                case "pool":
                    #expect(status.writeCursor == 1 && counted == 1, "the parent's own")
                    sum += UInt128(n + 1)
                case killed:
                    // Its values wrap around (1 ... N, 1 ...): the sum is what its lanes hold.
                    let records = try inspector.peek()
                    #expect(UInt64(records.count) == status.writeCursor, "every record it wrote is there to drain")
                    #expect(status.writeCursor >= n / 2, "it said it was halfway before it was killed")
                    sum += records.reduce(UInt128(0)) { $0 + UInt128($1.record.value) }
                default:
                    #expect(status.writeCursor == n && status.dropped == 0 && counted == n, "\(name)")
                    sum += UInt128(n * (n + 1) / 2)
                }
            }
            #expect(totals.incrementsMatchRecords, "\(totals)")
            #expect(totals.valueDropsMatchLaneDrops, "\(totals)")
            let (written, valuesDropped, increments) = (totals.written, totals.valuesDropped, totals.increments)

            let expected = Totals(records: written, sum: sum, dropped: valuesDropped, increments: increments)
            try expectTotalsOutliveWorkers(directory, expected)
        }
    }
}

/// What a pool's files add up to: `pool_values`' records (each drained once), their sum and drops,
/// and `pool_increments`' total.
private struct Totals {
    let records: UInt64
    let sum: UInt128
    let dropped: UInt64
    let increments: UInt64
}

/// Drains the pool's files into a collector and expects `totals`, its two series the bot's alone;
/// then, every worker gone and drained, their files removed and the same totals.
private func expectTotalsOutliveWorkers(_ directory: RingDirectory, _ totals: Totals) throws {
    let collector = try makeCollector(directory, captured: CapturedLog())
    func expectTotals(_ snapshot: Snapshot, _ when: String) {
        let values = snapshot.series(named: "pool_values")
        #expect(values?.cumulativeCount == totals.records, "each record drained once: \(when)")
        #expect(values?.cumulativeExactSum == totals.sum, "\(when)")
        #expect(values?.droppedRecords == totals.dropped, "\(when)")
        #expect(snapshot.series(named: "pool_increments")?.cumulativeExactSum == UInt128(totals.increments), "\(when)")
        #expect(snapshot.series.count == 2, "one series per metric, the bot's: \(when)")
    }
    expectTotals(drained(collector, records: totals.records), "drained")
    // Every worker is gone and drained: their files go, their totals stay.
    let snapshot = workersRemoved(collector)
    #expect(directory.ringNames() == ["pool"])
    expectTotals(snapshot, "after the workers' files went")
}

/// The children a `c_fork_pool` run forked, in order, from its lines `child K pid P exit S` or
/// `child K pid P signal N`: each one's pid and how it ended ("exit S", "signal N").
private func forkedChildren(_ run: ProcessRun, _ count: Int) throws -> [(pid: Int32, status: String)] {
    try #require(run.status == 0, "c_fork_pool: \(run.output) \(run.errors)")
    let children: [(pid: Int32, status: String)] = run.outputLines.enumerated().compactMap { index, line in
        let words = line.split(separator: " ").map(String.init)
        guard words.count == 6, words[0] == "child", words[1] == "\(index)", words[2] == "pid", let pid = Int32(words[3]) else {
            return nil
        }
        return (pid, words[4] + " " + words[5])
    }
    try #require(children.count == count && run.outputLines.count == count, "\(run.output)")
    return children
}

/// Passes of the collector 10 ms apart (as it sees time), each forcing a snapshot, until the bot's
/// pool_values counts `records` records (at most 200 passes: a pass drains a bounded amount).
private func drained(_ collector: Collector, records: UInt64) -> Snapshot {
    var step: UInt64 = 0
    repeat {
        collector.runPass(nowNanos: rs_clock_precise_ns() + step * 10_000_000, forcePublish: true)
        step += 1
    } while collector.snapshot.series(named: "pool_values")?.cumulativeCount != records && step < 200
    return collector.snapshot
}

/// Passes seconds apart, as the collector sees time: a worker that is gone and drained has its
/// file removed and its totals folded into the bot's.
private func workersRemoved(_ collector: Collector) -> Snapshot {
    for step in UInt64(1)...4 {
        collector.runPass(nowNanos: rs_clock_precise_ns() + 2_000_000_000 * (step + 1), forcePublish: true)
    }
    return collector.snapshot
}

extension Snapshot {
    /// The bot "pool"'s series of `metric`.
    fileprivate func series(named metric: String) -> SeriesSnapshot? {
        series.first { $0.metric.name == metric && $0.ring == "pool" }
    }
}
