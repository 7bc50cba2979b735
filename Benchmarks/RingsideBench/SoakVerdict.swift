import RingsideTestSupport

/// The soak's verdict, once the producers have stopped: memory and descriptors flat, nothing lost,
/// every counter exact in the collector's `/latest` and in the last export the receiver took.
enum SoakVerdict {
    /// What the collector must show of each bot: its histogram's count and drops, its counter's
    /// total (`bot/metric`), and, for a bot of one file, that file's figures.
    struct Expected {
        var histograms: [String: (written: UInt64, dropped: UInt64)] = [:]
        var counters: [String: UInt64] = [:]
        /// Bots of one file (the blasts): written and dropped, which it must have drained whole.
        var files: [String: (written: UInt64, dropped: UInt64)] = [:]
        /// Bots whose workers' files must all be gone (folded into the bot).
        var pools: [String] = []

        init(_ results: [SoakProducerResult]) {
            for result in results {
                let pool = result.workers > 0 || result.bot == SoakBenchmark.poolBot
                let (histogram, counter) = pool ? ("pool_values", "pool_increments") : ("blast", "blast_calls")
                histograms["\(result.bot)/\(histogram)"] = (result.written, result.dropped)
                counters["\(result.bot)/\(counter)"] = result.increments
                if pool { pools.append(result.bot) } else { files[result.bot] = (result.written, result.dropped) }
            }
        }

        /// The totals an OTLP export must carry: each histogram's count, each counter's total.
        var exportTotals: [String: UInt64] { histograms.mapValues(\.written).merging(counters) { first, _ in first } }
    }

    static func checks(
        samples: [SoakSample], settings: SoakSettings, results: [SoakProducerResult], problems: [String], collector: SoakCollector,
        receiver: SoakReceiver, expectedBots: Int
    ) -> [SoakCheck] {
        var checks = [SoakFlatness.memory(samples, settings: settings), SoakFlatness.descriptors(samples, settings: settings)]
        checks.append(
            SoakCheck(
                name: "producers ran to the end", passed: problems.isEmpty && results.count == expectedBots,
                detail: problems.isEmpty
                    ? "\(results.count) producers stopped by SIGTERM, each with its counts; the pool recycled "
                        + "\(results.reduce(0) { $0 + $1.workers }) workers"
                    : problems.prefix(3).joined(separator: "; ")))
        let expected = Expected(results)

        // Nothing lost: at each producer, and in what the collector shows once it has drained.
        var mismatches = results.filter { $0.attempts != $0.written + $0.dropped }.map {
            "\($0.bot): \($0.attempts) attempts, \($0.written) written + \($0.dropped) dropped"
        }
        var latest: LatestFigures?
        var collectorMismatches: [String] = []
        _ = eventually(seconds: 60) { () -> Bool in
            latest = LatestFigures(collector.get("/latest"))
            collectorMismatches = latest.map { lost(expected, $0) + inexact(expected, $0) } ?? ["no /latest"]
            return collectorMismatches.isEmpty
        }
        let lostAtCollector = latest.map { lost(expected, $0) } ?? ["no /latest"]
        mismatches += lostAtCollector
        let attempts = results.reduce(0) { $0 + $1.attempts }, written = results.reduce(0) { $0 + $1.written }
        let dropped = results.reduce(0) { $0 + $1.dropped }
        checks.append(
            SoakCheck(
                name: "nothing lost", problems: mismatches, counted: !results.isEmpty,
                passing: "\(attempts) calls = \(written) written + \(dropped) dropped, at each producer; the collector's written, "
                    + "dropped and drained figures are the producers', each bot's and each file's, every worker's file folded"))

        // Every counter exact in /latest.
        let inexactAtCollector = latest.map { inexact(expected, $0) } ?? ["no /latest"]
        let increments = results.reduce(0) { $0 + $1.increments }
        checks.append(
            SoakCheck(
                name: "counters exact", problems: inexactAtCollector, counted: !results.isEmpty,
                passing: "every counter's total (\(increments) increments in all) and histogram's count in /latest is the producers'"))

        // The receiver: failures went by, an export taken at the end carries the same totals.
        receiver.takeEverything()
        let totals = expected.exportTotals
        let caughtUp = eventually(seconds: 90) { receiver.snapshot.lastTotals == totals }
        let figures = receiver.snapshot
        let differing = totals.keys.sorted().filter { figures.lastTotals[$0] != totals[$0] }.prefix(4).map {
            "\($0): \(figures.lastTotals[$0].map(String.init) ?? "absent") exported, \(totals[$0] ?? 0) counted"
        }
        checks.append(
            SoakCheck(
                name: "OTLP export exact", passed: caughtUp && figures.problemCount == 0,
                detail: (caughtUp
                    ? "the last export taken carries every count and total of /latest (\(totals.count) of them)"
                    : "no export taken within 90 s carried the final totals: " + differing.joined(separator: "; "))
                    + (figures.problemCount == 0
                        ? "; no total went back from one export to the next"
                        : "; \(figures.problemCount) problems: " + figures.problems.joined(separator: "; "))))
        // The collector's own count of its attempts, from /latest (rendered when asked: /metrics
        // pages are rendered ahead, at the snapshot's changes, and may lag the last exports).
        var otlp: LatestFigures.OTLP?
        var seen = receiver.snapshot
        _ = eventually(seconds: 15) { () -> Bool in
            otlp = LatestFigures(collector.get("/latest"))?.otlp
            seen = receiver.snapshot
            guard let otlp else { return false }
            return otlp.sent + otlp.retries + otlp.failed == UInt64(seen.taken + seen.refused + seen.cut)
        }
        checks.append(otlpCheck(otlp, seen, outages: settings.seconds >= 2 * SoakSettings.failPeriodSeconds))
        return checks
    }

    /// The outages went by and the collector's count of its exports is the receiver's: each attempt
    /// it counted (sent, retried, failed) one the receiver saw (taken, refused, cut), every export
    /// taken one it counted sent (unless an attempt timed out after the receiver took it), none
    /// failed or dropped.
    static func otlpCheck(_ otlp: LatestFigures.OTLP?, _ seen: SoakReceiver.Figures, outages: Bool) -> SoakCheck {
        let name = "OTLP outages survived"
        guard let otlp else { return SoakCheck(name: name, passed: false, detail: "no otlp figures in /latest") }
        let attempts = otlp.sent + otlp.retries + otlp.failed
        let seenAttempts = UInt64(seen.taken + seen.refused + seen.cut)
        let passed =
            otlp.failed == 0 && otlp.dropped == 0 && seen.taken > 0 && (!outages || seen.refused + seen.cut > 0)
            && attempts == seenAttempts && (otlp.timeouts > 0 || otlp.sent == UInt64(seen.taken))
        return SoakCheck(
            name: name, passed: passed,
            detail: "the receiver took \(seen.taken) exports, answered \(seen.refused) attempts 503 and cut \(seen.cut); "
                + "the collector counted \(otlp.sent) sent, \(otlp.retries) retries (\(otlp.timeouts) timed out), \(otlp.failed) "
                + "failed and \(otlp.dropped) dropped" + (attempts == seenAttempts ? "" : ": \(attempts) attempts, \(seenAttempts) seen"))
    }

    /// What the collector shows against what the producers counted: each file written, dropped and
    /// drained (nothing left), each histogram's drops, no worker's file left.
    static func lost(_ expected: Expected, _ latest: LatestFigures) -> [String] {
        var problems: [String] = []
        for (bot, counts) in expected.files.sorted(by: { $0.key < $1.key }) {
            guard let file = latest.files[bot] else {
                problems.append("\(bot): no file in /latest")
                continue
            }
            if file.written != counts.written || file.dropped != counts.dropped || file.drained != counts.written || file.backlog != 0 {
                problems.append(
                    "\(bot): the collector shows \(file.written) written, \(file.dropped) dropped, \(file.drained) drained, "
                        + "backlog \(file.backlog); the producer \(counts.written) written, \(counts.dropped) dropped")
            }
        }
        for (key, counts) in expected.histograms.sorted(by: { $0.key < $1.key }) where latest.droppedRecords[key] != counts.dropped {
            problems.append("\(key): \(latest.droppedRecords[key].map(String.init) ?? "no") dropped records, \(counts.dropped) dropped")
        }
        for pool in expected.pools {
            let left = latest.files.values.filter { $0.bot == pool && ($0.isWorker || $0.backlog > 0) }
            if !left.isEmpty { problems.append("\(pool): \(left.count) files not drained and folded") }
        }
        return problems
    }

    /// Counts and totals in /latest that are not the producers'.
    static func inexact(_ expected: Expected, _ latest: LatestFigures) -> [String] {
        var problems: [String] = []
        for (key, counts) in expected.histograms.sorted(by: { $0.key < $1.key }) where latest.totalCount[key] != counts.written {
            problems.append("\(key): count \(latest.totalCount[key].map(String.init) ?? "absent"), \(counts.written) written")
        }
        for (key, total) in expected.counters.sorted(by: { $0.key < $1.key }) where latest.counterTotal[key] != total {
            problems.append("\(key): total \(latest.counterTotal[key].map(String.init) ?? "absent"), \(total) increments")
        }
        return problems
    }
}
