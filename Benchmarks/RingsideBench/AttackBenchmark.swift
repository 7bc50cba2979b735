import CRingside
import Foundation
import Ringside
import RingsideSystem
import RingsideTestSupport
import RingsideText

/// `ringside-bench attack`: issue 44's cardinality attack on a real `ringside-collector` (the
/// release build beside this one) at its defaults (the series budget `--max-series-bytes` 1 GiB,
/// the history on). Three honest bots record all along (2,000 records a second and a counter
/// each); then 75 bots of 4,096 histograms with 200-byte labels register at once
/// (`ringside-test-producer wide-series`), while `/health` is asked every 50 ms and Prometheus's
/// two gzipped scrapes are made. It reports what was kept and refused (and by which cap), how
/// soon every attacking series was accounted for, the probes' answers, the scrapes and the
/// collector's memory; and it checks the promise: the honest bots keep every series and count
/// exactly, and every probe is answered.
package enum AttackBenchmark {
    static let attackBots = 75
    static let seriesPerBot = 4_096
    static let labelBytes = 200
    /// Bots a `wide-series` process holds (at most 64).
    static let botsPerProcess = 38
    static let honestBots = 3
    static let honestRate = 2_000

    package static func run(progress: (String) -> Void = { _ in }) throws(BenchError) -> AttackReport {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let directory = try scratch.subdirectory("attack")
        var report = AttackReport(machine: .current(pinned: false), attackSeries: attackBots * seriesPerBot)
        do {
            let (collector, port) = try startCollector(["--dir", directory])
            ScaleBenchmark.keep(collector, in: scratch)
            defer { ScaleBenchmark.stop(collector, in: scratch) }
            guard eventually(seconds: 30, { (try? httpGet(port: port, path: "/-/ready").status) == 200 }) else {
                throw BenchError("the collector was not ready in 30 s")
            }

            progress("attack: \(honestBots) honest bots at \(honestRate) records a second")
            let honestNames = (0..<honestBots).map { "honest-\($0)" }
            var honest: [ChildProcess] = []
            defer { for producer in honest { ScaleBenchmark.stop(producer, in: scratch) } }
            for name in honestNames {
                let producer = try startBlast(RingDirectory(directory), ring: name, rate: honestRate, counter: true)
                scratch.own(processGroup: producer.pid)
                honest.append(producer)
            }
            guard eventually(seconds: 30, { honestSeries(latestDocument(port: port), honestNames) == 2 * honestBots }) else {
                throw BenchError("the honest bots' series did not show in 30 s")
            }

            let probes = HealthProbes(port: port)
            Thread.detachNewThread { probes.run() }
            defer { _ = probes.stop() }

            progress("attack: \(attackBots) bots of \(seriesPerBot) series of \(labelBytes)-byte labels")
            let started = rs_clock_precise_ns()
            var attackers: [ChildProcess] = []
            defer { for producer in attackers { ScaleBenchmark.stop(producer, in: scratch) } }
            for first in stride(from: 0, to: attackBots, by: botsPerProcess) {
                let bots = min(botsPerProcess, attackBots - first)
                let producer = try ChildProcess(
                    testProducer: "wide-series", ring: "attack-\(first / botsPerProcess)", in: RingDirectory(directory),
                    ["--rings", String(bots), "--metrics", String(seriesPerBot), "--label-bytes", String(labelBytes)])
                scratch.own(processGroup: producer.pid)
                attackers.append(producer)
                guard producer.readLine()?.hasPrefix("ready") == true else {
                    throw BenchError("ringside-test-producer wide-series did not register: \(producer.waitForExit().standardError)")
                }
            }
            let accounted = eventually(seconds: 600) { () -> AttackReport.Accounting? in
                guard let accounting = AttackReport.Accounting(latestDocument(port: port)),
                    accounting.bots == attackBots, accounting.kept + accounting.refused == report.attackSeries
                else { return nil }
                return accounting
            }
            guard let accounted else { throw BenchError("the collector did not account for the \(report.attackSeries) series in 600 s") }
            report.accounting = accounted
            report.accountedSeconds = Double(rs_clock_precise_ns() - started) / 1e9

            progress("attack: two gzipped scrapes, as Prometheus makes them")
            for _ in 0..<2 {
                report.scrapes.append(try ScrapeBenchmark.get(port: port, gzip: true, accept: nil, timeoutSeconds: 600))
            }
            report.rssAnonKiB = residentKiB(of: collector.pid)?.anonymous ?? 0

            progress("attack: the honest bots stop; their counts against the collector's")
            let counts = try honest.map { try stopBlast($0) }
            honest.removeAll()
            report.honestRecords = counts.reduce(0) { $0 + $1.written }
            report.honestExact = eventually(seconds: 30) { countsExact(latestDocument(port: port), honestNames, counts) }
            report.honestKept = honestSeries(latestDocument(port: port), honestNames)
            report.probes = probes.stop()
            report.peakKiB = statusKiB(of: collector.pid, "VmHWM") ?? 0
        } catch let error as BenchError {
            throw error
        } catch {
            throw BenchError("\(error) (build ringside-collector and ringside-test-producer beside ringside-bench: swift build -c release)")
        }
        return report
    }

    /// The honest bots' series shown in a `/latest` document.
    private static func honestSeries(_ document: [String: Any]?, _ names: [String]) -> Int {
        let series = document?["series"] as? [[String: Any]] ?? []
        return series.filter { names.contains($0["ring"] as? String ?? "") }.count
    }

    /// Whether each honest bot's histogram and counter show exactly what it wrote.
    private static func countsExact(_ document: [String: Any]?, _ names: [String], _ counts: [BlastCounts]) -> Bool {
        let series = document?["series"] as? [[String: Any]] ?? []
        return zip(names, counts).allSatisfy { name, counts in
            let own = series.filter { $0["ring"] as? String == name }
            let histogram = own.first { $0["kind"] as? String == "histogram" }
            let counter = own.first { $0["kind"] as? String == "counter" }
            return uint(histogram?["total_count"]) == counts.written && uint(histogram?["dropped_records"]) ?? 0 == counts.dropped
                && uint(counter?["total"]) == counts.increments && counts.attempts == counts.written + counts.dropped
        }
    }
}

/// The result of `ringside-bench attack`.
package struct AttackReport: Sendable {
    /// The attack's figures in a `/latest` document: its bots, their series kept and refused, and
    /// the caps that refused them.
    struct Accounting: Sendable {
        var bots = 0, kept = 0, refused = 0
        var caps: Set<String> = []

        init() {}

        init?(_ document: [String: Any]?) {
            guard let document, let rings = document["rings"] as? [[String: Any]] else { return nil }
            func isAttack(_ name: Any?) -> Bool { (name as? String)?.hasPrefix("attack-") == true }
            let attack = rings.filter { isAttack($0["name"]) }
            bots = attack.count
            refused = attack.reduce(0) { $0 + Int(uint($1["series_refused"]) ?? 0) }
            caps = Set(attack.compactMap { $0["series_refused_by"] as? String })
            kept = (document["series"] as? [[String: Any]] ?? []).filter { isAttack($0["ring"]) }.count
        }
    }

    package var machine: Machine
    var attackSeries: Int
    var accounting = Accounting()
    /// From the attack's first registration to every one of its series kept or refused.
    var accountedSeconds = 0.0
    var honestKept = 0
    var honestRecords: UInt64 = 0
    var honestExact = false
    var probes: [HealthProbes.Answer] = []
    var scrapes: [(millis: Double, bytes: Int)] = []
    /// The collector's RssAnon after the scrapes, and its largest resident set (VmHWM).
    var rssAnonKiB = 0, peakKiB = 0

    var unanswered: Int { probes.filter { $0.status == nil }.count }

    /// The attack's promise: the honest bots keep both series each and count exactly, and every
    /// probe is answered.
    package var passed: Bool { honestKept == 2 * AttackBenchmark.honestBots && honestExact && unanswered == 0 && !probes.isEmpty }

    package var table: String {
        let millis = probes.compactMap(\.millis).sorted()
        let stalled = probes.filter { $0.status == 503 }.count
        var table = TextTable(columns: ["figure", "value"])
        table.add(["attacking series registered", "\(attackSeries) (\(AttackBenchmark.attackBots) bots)"])
        table.add(["kept", "\(accounting.kept)"])
        table.add(["refused, counted", "\(accounting.refused), by \(accounting.caps.sorted().joined(separator: ", "))"])
        table.add(["all accounted for after", "\(oneDecimal(accountedSeconds)) s"])
        table.add(["honest series kept", "\(honestKept) of \(2 * AttackBenchmark.honestBots)"])
        table.add(["honest counts exact", honestExact ? "yes (\(honestRecords) records)" : "NO"])
        table.add([
            "/health probes",
            "\(probes.count), \(unanswered) unanswered, \(stalled) answered 503; "
                + "p50 \(oneDecimal(millis.isEmpty ? 0 : millis[(millis.count - 1) / 2])) ms, slowest \(oneDecimal(millis.last ?? 0)) ms",
        ])
        for (index, scrape) in scrapes.enumerated() {
            table.add(["gzipped scrape \(index + 1)", "\(oneDecimal(scrape.millis)) ms, \(humanBytes(scrape.bytes))"])
        }
        table.add(["collector RssAnon after the scrapes", humanBytes(rssAnonKiB * 1024)])
        table.add(["collector peak VmHWM", humanBytes(peakKiB * 1024)])
        return "ringside-bench attack: the collector at its defaults (--max-series-bytes 1G)\nmachine: \(machine.line)\n\n" + table.text
            + (passed ? "passed: the honest bots kept and exact, every probe answered\n" : "FAILED: see the table\n")
    }
}
