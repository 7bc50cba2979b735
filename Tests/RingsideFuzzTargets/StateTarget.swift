import CRingside
import Foundation
import Ringside
import RingsideAggregation
import RingsideCollector

/// The collector's state: the input is a snapshot (`ringside-collector.state`) and a journal, the
/// bytes before its first NUL and after it (no NUL: a snapshot alone; an empty part: no such file),
/// read as the collector reads them at start (`StateFiles.load` through `StateReading`: JSON
/// snapshots, the journal's header and folds, generations).
///
/// Checks: what was read, written back as the saver writes a snapshot within the bound, is never
/// larger than the bound, and reads back whole and the same when nothing was left out for room
/// (a collector must read whatever it writes); each all-time histogram a bot's series would
/// take holds together the same when kept again.
enum StateTarget {
    static let target = FuzzTarget(
        name: "state",
        covers: "a state snapshot and journal: their reader, then written back and read again",
        run: run,
        seeds: seeds)

    static let snapshotName = "ringside-collector.state"
    static let journalName = "ringside-collector.1.journal"
    static let limit = 1 << 20

    static func run(_ bytes: [UInt8]) {
        func finding(_ what: String) -> Never { FuzzFinding.report("state", what) }
        FuzzScratch.empty()
        let split = bytes.firstIndex(of: 0)
        let snapshot = bytes[..<(split ?? bytes.endIndex)], journal = split.map { bytes[($0 + 1)...] } ?? []
        if !snapshot.isEmpty { FuzzScratch.write(snapshotName, Array(snapshot)) }
        if !journal.isEmpty { FuzzScratch.write(journalName, Array(journal)) }
        let read: StateReading
        do { read = try StateReading(directory: FuzzScratch.path, limit: limit) } catch { finding("the scratch directory: \(error)") }
        for (histogram, negative) in read.persistedHistograms {
            checkKeptAgain(histogram, finding: finding)
            if let negative { checkKeptAgain(negative, finding: finding) }
            _ = SignedHistogram(PersistedSignedHistogram(nonNegative: histogram, negative: negative ?? Histogram().persisted))
        }

        FuzzScratch.empty()
        do {
            let written = try read.writeSnapshot(
                directory: FuzzScratch.path, name: snapshotName, generation: read.nextGeneration, limit: limit)
            if written.bytes > limit { finding("a snapshot of \(written.bytes) bytes was written under a bound of \(limit)") }
            let again = try StateReading(directory: FuzzScratch.path, limit: limit)
            if let problem = again.unreadable.first {
                finding("the snapshot written of what was read is refused: \(problem.value)")
            }
            // What was left out for room is counted by the saver; the rest must read back the same.
            if written.fits, written.shed == 0, !again.holdsTheSame(as: read) {
                finding(
                    "the snapshot written of what was read reads back otherwise (\(read.series) series and \(read.histograms) "
                        + "histograms read, \(again.series) and \(again.histograms) read back)")
            }
        } catch {
            finding("\(error)")
        }
    }

    /// A histogram a series takes must be kept (`persisted`) as one that is taken the same again.
    private static func checkKeptAgain(_ persisted: PersistedHistogram, finding: (String) -> Never) {
        guard let histogram = Histogram(persisted) else { return }
        guard let again = Histogram(histogram.persisted), again.persisted == histogram.persisted else {
            finding("a histogram kept again is not taken the same: \(persisted) kept as \(histogram.persisted)")
        }
    }

    /// A real collector's files: a bot's workers are folded (a journal's lines), then the
    /// collector stops (the saver's snapshot, with all-time histograms, one of them signed).
    static func seeds() throws -> [FuzzSeed] {
        FuzzScratch.empty()
        var options = CollectorOptions()
        options.directory = FuzzScratch.ringDirectory
        options.threadSampleIntervalNanos = 0
        options.pollNanos = 1_000_000
        let collector = try Collector(options: options, log: CollectorLog { _ in })
        collector.start()
        func contents(_ suffix: String) throws -> [UInt8] {
            let names = try FileManager.default.contentsOfDirectory(atPath: FuzzScratch.path).sorted()
            let name = try names.first { $0.hasSuffix(suffix) }.orThrow("the collector wrote no \(suffix) file (\(names))")
            return [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(FuzzScratch.path)/\(name)")))
        }
        /// The folds in the journal (its lines after the header).
        func journalLines() throws -> Int { try contents(".journal").filter { $0 == 10 }.count - 1 }
        for worker in 0..<2 {
            do {
                let bot = try Bot.attach(
                    "bot-a", directory: FuzzScratch.path, options: .init(laneCapacity: 64, maxMetrics: 8, worker: true))
                let orders = try bot.counter("orders", labels: ["side": worker == 0 ? "buy" : "sell"])
                let fill = try bot.histogram("fill_latency", unit: .nanoseconds)
                let slippage = try bot.histogram("slippage_bps", resolution: 0.01, signed: true)
                for value in 1...20 as ClosedRange<UInt64> {
                    orders.increment(by: value)
                    fill.record(value * 1_000)
                    slippage.record(Double(value) - 10.5)
                }
                bot.releaseCurrentThreadLane()
            }
            // Folded once its records are drained and its process is gone: a line of the journal.
            for _ in 0..<500 where (try? journalLines()) ?? 0 <= worker { usleep(10_000) }
        }
        let journal = try contents(".journal")
        collector.stop()
        let snapshot = try contents(".state")
        FuzzScratch.empty()
        return [
            FuzzSeed("snapshot", snapshot),
            FuzzSeed("journal", [0] + journal),
            FuzzSeed("snapshot-and-journal", snapshot + [0] + journal),
            FuzzSeed("version-1", #"{"bots":{"b":[{"metric":"orders","labels":"side=buy","total":5,"dropped":0}]}}"#),
            FuzzSeed(
                "journal-cut-short", [0] + Array(#"{"journal":7}"#.utf8) + [10] + Array(#"{"bot":"b","entries":[{"metric":"m","la"#.utf8)),
        ]
    }
}
