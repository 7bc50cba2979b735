import CRingside
import Foundation
import Ringside
import RingsideSystem
import RingsideTestSupport
import RingsideText

/// `ringside-bench scale`: what a series costs the memory of a real `ringside-collector` process
/// (the release build beside this one), with its defaults (the 1 s / 5 s / 1 m windows, the
/// history on), at 100,000 series or a million.
///
/// `ringside-test-producer scale-series` processes (built beside it too) register the series,
/// in bots of 4,000 histograms (or `--kind` counters or gauges) with short labels (`symbol=S0001234`), one value each; the
/// benchmark reads the collector's anonymous memory (RssAnon: its heap, not the bots' files it
/// maps) with none, once they are drained, at rest (100 s later: every window let its value
/// go, 75 s, and the heap was trimmed), after scrapes of the variants Prometheus asks for
/// (gzipped text and protobuf, scraped as it polls: the first, and 10 more 2 s apart, timed),
/// and after a plain one too. With `--prometheus`, a real
/// Prometheus scrapes the collector beside it, keeping one series of its own per series
/// (`_count`), and its memory is measured too.
package enum ScaleBenchmark {
    package struct Settings: Sendable, Equatable {
        package var series = 100_000
        /// The kind of the series: histogram, counter or gauge.
        package var kind = "histogram"
        /// Whether to run Prometheus beside the collector.
        package var prometheus = false

        package init() {}
    }

    static let seriesPerBot = 4_000
    static let botsPerProcess = 50
    /// The most series run at the default `--max-series-bytes`, which keeps them all.
    static let defaultBudgetSeries = 100_000
    /// The most series scraped without gzip too.
    static let plainTextSeries = 200_000
    /// Scrapes of each gzipped variant after its first, and the time between them.
    static let polledScrapes = 10
    static let polledSpacingNanos: UInt64 = 2_000_000_000
    /// Longer than the longest window and its last slice (75 s with the defaults), and than the
    /// heap trim after them: the collector gives the freed pages back 10 s after the last series
    /// let theirs go (`HeapTrim`), so at 80 s the figure could hold pages it was about to return.
    static let restNanos: UInt64 = 100_000_000_000
    /// The part of the rest in which windows may still slide (the longest window and its last slice).
    static let slidingNanos: UInt64 = 80_000_000_000

    package static func run(_ settings: Settings, progress: (String) -> Void = { _ in }) throws(BenchError) -> ScaleReport {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let directory = try scratch.subdirectory("scale")
        let collector = try ScaleCollector(directory: directory, series: settings.series, scratch: scratch)
        defer { collector.stop() }
        var report = ScaleReport(machine: .current(pinned: false), series: settings.series, kind: settings.kind)

        progress("scale: the collector with no series")
        System.nanosleep(2_000_000_000)
        report.none = try collector.anonymousKiB()

        progress("scale: registering \(settings.series) series")
        let started = rs_clock_precise_ns()
        let (producers, bots) = try registerSeries(settings.series, kind: settings.kind, in: directory, scratch: scratch)
        defer { for producer in producers { stop(producer, in: scratch) } }
        try collector.waitFor("all \(settings.series) series drained", seconds: 600) { health in
            // A collector of before /health said its series (a baseline) is given 10 s more once drained.
            (health.series ?? settings.series) == settings.series && health.awaiting == 0 && health.backlog == 0
                && health.rings == bots
        }
        if try collector.checkHealth().series == nil { System.nanosleep(10_000_000_000) }
        report.drainSeconds = Double(rs_clock_precise_ns() - started) / 1e9
        report.drained = try collector.anonymousKiB()
        report.snapshotWhileDraining = collector.takeSnapshotFigures()

        progress("scale: at rest (every window empty: \(restNanos / 1_000_000_000) s after the last value was drained)")
        let restUntil = rs_clock_precise_ns() + restNanos
        while rs_clock_precise_ns() < restUntil {
            try collector.checkHealth()
            System.nanosleep(1_000_000_000)
            // The windows let the values go within 75 s: what came before is their sliding.
            if report.snapshotWhileSliding == nil, rs_clock_precise_ns() + restNanos - slidingNanos >= restUntil {
                report.snapshotWhileSliding = collector.takeSnapshotFigures()
            }
        }
        report.health = collector.healthMillis
        report.healthStalled = collector.stalledAnswers
        report.atRest = try collector.anonymousKiB()
        report.snapshotAtRest = collector.takeSnapshotFigures()

        let prometheus = try settings.prometheus ? ScalePrometheus(scraping: collector.port, scratch: scratch) : nil
        defer { prometheus?.stop() }

        // What Prometheus asks for (gzip), then a plain page as a person's curl asks: the
        // collector keeps that one uncompressed while it is polled, so it is measured apart (a
        // plain page of a million series would be 4.4 GB: up to `plainTextSeries` only).
        // As Prometheus scrapes: the first scrape waits for a page rendered cold; from the second on
        // the collector keeps each variant's page rendered ahead (`MetricsPages`).
        progress("scale: scrapes gzipped (text, protobuf: \(polledScrapes + 1) each, \(polledSpacingNanos / 1_000_000_000) s apart)")
        for variant in [ScaleCollector.Scrape.textGzip, .protobufGzip] {
            var scrapes = [try collector.scrape(variant)]
            for _ in 0..<polledScrapes {
                System.nanosleep(polledSpacingNanos)
                scrapes.append(try collector.scrape(variant))
            }
            report.scrapes.append((variant, scrapes))
        }
        if let prometheus {
            progress("scale: Prometheus scraping the collector")
            report.prometheus = try prometheus.measure(series: settings.series)
        }
        System.nanosleep(2_000_000_000)
        report.afterScrapes = try collector.anonymousKiB()
        if settings.series <= plainTextSeries {
            progress("scale: scrapes without gzip (text, twice)")
            report.scrapes.append((.text, try (0..<2).map { _ throws(BenchError) in try collector.scrape(.text) }))
            System.nanosleep(2_000_000_000)
            report.afterPlainScrapes = try collector.anonymousKiB()
        }
        report.peakKiB = collector.peakKiB
        return report
    }

    /// Has a process the benchmark started (in a process group of its own) killed with the
    /// scratch directory, also on an interrupt, and its log read as it comes (a full pipe would
    /// stall it).
    static func keep(_ process: ChildProcess, in scratch: ScratchDirectory) {
        scratch.own(processGroup: process.pid)
        Thread.detachNewThread { while process.readErrorLine() != nil {} }
    }

    static func stop(_ process: ChildProcess, in scratch: ScratchDirectory) {
        process.kill()
        scratch.disown(processGroup: process.pid)
    }

    /// Bots of `seriesPerBot` histograms each, one value recorded in each series, held by
    /// `ringside-test-producer scale-series` processes (a process holds at most 64 bots), each
    /// started in a process group the scratch directory owns; returns them once each is ready,
    /// and how many bots they hold.
    static func registerSeries(
        _ count: Int, kind: String, in directory: String, scratch: ScratchDirectory
    ) throws(BenchError) -> (producers: [ChildProcess], bots: Int) {
        let perProcess = seriesPerBot * botsPerProcess
        var producers: [ChildProcess] = []
        for first in stride(from: 0, to: count, by: perProcess) {
            let series = min(perProcess, count - first)
            let producer: ChildProcess
            do {
                producer = try ChildProcess(
                    testProducer: "scale-series", ring: "scale", in: RingDirectory(directory),
                    ["--series", String(series), "--metrics", String(seriesPerBot), "--first", String(first), "--kind", kind])
            } catch {
                throw BenchError("starting ringside-test-producer (build it beside ringside-bench: swift build -c release): \(error)")
            }
            scratch.own(processGroup: producer.pid)
            producers.append(producer)
        }
        for producer in producers {
            guard let line = producer.readLine(), line.hasPrefix("ready ") else {
                throw BenchError("ringside-test-producer scale-series did not register its series: \(producer.waitForExit().standardError)")
            }
        }
        return (producers, (count + seriesPerBot - 1) / seriesPerBot)
    }
}

/// A `ringside-collector` process of the benchmark's: started with room for the series, its
/// log read (so it never blocks on a full pipe), asked `/health` and scraped.
final class ScaleCollector {
    enum Scrape: String, CaseIterable {
        case textGzip = "text, gzip"
        case protobufGzip = "protobuf, gzip"
        case text = "text"
    }

    struct Health {
        /// Nil from a collector whose /health did not say (one built before it did).
        var series: Int?
        /// Of `series`, those not shown yet (0 from a collector whose /health did not say).
        var awaiting = 0
        var backlog = 0
        var rings = 0
    }

    /// What `/health` said of the published snapshot over a phase: how old it was at most (the
    /// longest a window's figures went unrefreshed), and the longest the drain thread spent building one.
    struct SnapshotFigures {
        var largestAgeSeconds = 0.0
        var largestBuildSeconds = 0.0
    }

    let process: ChildProcess
    let port: Int
    /// Every `/health` answer's time.
    private(set) var healthMillis: [Double] = []
    /// `/health` answers that said the drain loop stalled (503).
    private(set) var stalledAnswers = 0
    private(set) var peakKiB = 0
    private var snapshotFigures = SnapshotFigures()

    private let scratch: ScratchDirectory

    init(directory: String, series: Int, scratch: ScratchDirectory) throws(BenchError) {
        self.scratch = scratch
        do {
            // The default --max-series-bytes holds the default --max-series (100,000): a run of up
            // to that many shows it keeps them all; more are given room.
            let budget = series > ScaleBenchmark.defaultBudgetSeries ? ["--max-series-bytes", "1024G"] : []
            (process, port) = try startCollector(["--dir", directory, "--max-series", String(series + 1_000)] + budget)
        } catch { throw BenchError("starting ringside-collector (build it beside ringside-bench: swift build -c release): \(error)") }
        ScaleBenchmark.keep(process, in: scratch)
    }

    func stop() { ScaleBenchmark.stop(process, in: scratch) }

    /// The collector's anonymous memory (RssAnon) now.
    func anonymousKiB() throws(BenchError) -> Int {
        guard let resident = residentKiB(of: process.pid) else { throw BenchError("the collector is gone") }
        peakKiB = max(peakKiB, statusKiB(of: process.pid, "VmHWM") ?? 0)
        return resident.anonymous
    }

    /// Asks `/health` (timed), and reads its series and backlog.
    @discardableResult
    func checkHealth() throws(BenchError) -> Health {
        let start = rs_clock_precise_ns()
        let answer: (status: Int, body: String)
        do { answer = try httpGet(port: port, path: "/health", timeoutSeconds: 10) } catch {
            throw BenchError("GET /health: \(error)")
        }
        healthMillis.append(Double(rs_clock_precise_ns() - start) / 1e6)
        // 503: the drain loop made no pass for a second (counted: the collector answered).
        if answer.status == 503 { stalledAnswers += 1 }
        guard answer.status == 200 || answer.status == 503, let json = try? jsonObject(answer.body) else {
            throw BenchError("GET /health: \(answer.status) \(answer.body.prefix(200))")
        }
        let rings = json["rings"] as? [[String: Any]] ?? []
        snapshotFigures.largestAgeSeconds = max(snapshotFigures.largestAgeSeconds, json["snapshot_age_seconds"] as? Double ?? 0)
        snapshotFigures.largestBuildSeconds = max(snapshotFigures.largestBuildSeconds, json["snapshot_build_seconds"] as? Double ?? 0)
        return Health(
            series: json["series"] as? Int, awaiting: json["series_awaiting_figures"] as? Int ?? 0,
            backlog: rings.reduce(0) { $0 + ($1["backlog"] as? Int ?? 0) }, rings: rings.count)
    }

    /// What `/health` said of the snapshot since the last call.
    func takeSnapshotFigures() -> SnapshotFigures {
        defer { snapshotFigures = SnapshotFigures() }
        return snapshotFigures
    }

    func waitFor(_ what: String, seconds: Double, _ condition: (Health) -> Bool) throws(BenchError) {
        let deadline = rs_clock_precise_ns() + UInt64(seconds * 1e9)
        while !condition(try checkHealth()) {
            guard rs_clock_precise_ns() < deadline else { throw BenchError("gave up waiting for \(what) after \(Int(seconds)) s") }
            System.nanosleep(100_000_000)
        }
    }

    /// One scrape of `/metrics` as asked, timed to its last byte.
    func scrape(_ variant: Scrape) throws(BenchError) -> (millis: Double, bytes: Int) {
        let protobuf = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
        return try ScrapeBenchmark.get(
            port: port, gzip: variant != .text, accept: variant == .protobufGzip ? protobuf : nil, timeoutSeconds: 600)
    }
}

/// A real Prometheus (Debian's `prometheus`, 2.42 on bookworm) scraping the collector every
/// 10 s, keeping one series per series of the collector's (its `fill_latency_seconds_count`; the page's other
/// lines are dropped as they are scraped), so that both hold the same series.
final class ScalePrometheus {
    let process: ChildProcess
    let port: Int

    private let scratch: ScratchDirectory

    init(scraping collectorPort: Int, scratch: ScratchDirectory) throws(BenchError) {
        self.scratch = scratch
        let directory = scratch.path
        guard let executable = systemTool("prometheus") else {
            throw BenchError("--prometheus: prometheus is not installed (apt-get install prometheus)")
        }
        let config = """
            global: {scrape_interval: 10s, scrape_timeout: 10s}
            scrape_configs:
              - job_name: ringside
                static_configs: [{targets: ['127.0.0.1:\(collectorPort)']}]
                metric_relabel_configs:
                  - {source_labels: [__name__], regex: 'fill_latency_seconds_count', action: keep}
            """
        let configPath = directory + "/prometheus.yml"
        do {
            try config.write(toFile: configPath, atomically: true, encoding: .utf8)
            port = try freeLoopbackPort()
            process = try ChildProcess(
                executable,
                [
                    "--config.file=\(configPath)", "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn",
                    "--storage.tsdb.path=\(directory)/prometheus", "--storage.tsdb.retention.time=1h",
                ])
        } catch { throw BenchError("starting prometheus: \(error)") }
        ScaleBenchmark.keep(process, in: scratch)
    }

    func stop() { ScaleBenchmark.stop(process, in: scratch) }

    /// Waits for three scrapes that each kept every series, then reads Prometheus's memory and
    /// the series its head holds.
    func measure(series: Int) throws(BenchError) -> ScaleReport.PrometheusFigures {
        var scrapes = 0
        var lastScrape = ""
        let deadline = rs_clock_precise_ns() + 180_000_000_000
        while scrapes < 3 {
            guard rs_clock_precise_ns() < deadline else { throw BenchError("Prometheus made \(scrapes) good scrapes of 3 in 180 s") }
            System.nanosleep(1_000_000_000)
            guard let targets = try? jsonObject(httpGet(port: port, path: "/api/v1/targets", timeoutSeconds: 5).body),
                let target = ((targets["data"] as? [String: Any])?["activeTargets"] as? [[String: Any]])?.first,
                let when = target["lastScrape"] as? String, when != lastScrape, target["health"] as? String == "up"
            else { continue }
            lastScrape = when
            scrapes += 1
        }
        guard let status = try? jsonObject(httpGet(port: port, path: "/api/v1/status/tsdb", timeoutSeconds: 10).body),
            let head = (status["data"] as? [String: Any])?["headStats"] as? [String: Any], let held = head["numSeries"] as? Int,
            let resident = residentKiB(of: process.pid)
        else { throw BenchError("reading Prometheus's status") }
        return .init(series: held, residentKiB: resident.total, anonymousKiB: resident.anonymous)
    }
}

/// The result of `ringside-bench scale`.
package struct ScaleReport: Sendable {
    package struct PrometheusFigures: Sendable {
        var series: Int
        var residentKiB: Int
        var anonymousKiB: Int
    }

    package var machine: Machine
    package var series: Int
    package var kind: String
    /// The collector's RssAnon in KiB: with no series, once they are drained, at rest, after the scrapes.
    var none = 0, drained = 0, atRest = 0, afterScrapes = 0
    /// And after a plain page was scraped too (nil: not scraped, past `plainTextSeries`).
    var afterPlainScrapes: Int?
    /// Its largest resident set (VmHWM, its maps of the bots' files included).
    var peakKiB = 0
    /// From the first series registered to the last drained.
    var drainSeconds = 0.0
    var health: [Double] = []
    var healthStalled = 0
    /// What `/health` said of the snapshot while the series were drained, while their windows
    /// slid (the first 80 s of the rest), and at rest (the last 20 s).
    var snapshotWhileDraining = ScaleCollector.SnapshotFigures()
    var snapshotWhileSliding: ScaleCollector.SnapshotFigures?
    var snapshotAtRest = ScaleCollector.SnapshotFigures()
    /// Each variant's scrapes, the first one first.
    var scrapes: [(ScaleCollector.Scrape, [(millis: Double, bytes: Int)])] = []
    var prometheus: PrometheusFigures?

    /// Bytes a series, from the collector's RssAnon less what it holds with none.
    func perSeries(_ kib: Int) -> Double { Double(kib - none) * 1024 / Double(max(series, 1)) }

    package var table: String {
        var table = TextTable(columns: ["state", "collector RssAnon", "a series"])
        let states = [("no series", none), ("drained", drained), ("at rest", atRest), ("after gzipped scrapes", afterScrapes)]
        for (name, kib) in states + (afterPlainScrapes.map { [("and plain ones", $0)] } ?? []) {
            table.add([name, bytes(kib), name == "no series" ? "-" : bytes(perSeries(kib))])
        }
        let budget =
            series > ScaleBenchmark.defaultBudgetSeries ? "--max-series-bytes 1024G" : "the default --max-series-bytes, every series kept"
        var text = "ringside-bench scale: \(series) \(kind) series (\(budget))\nmachine: \(machine.line)\n\n" + table.text
        text +=
            "\ndrained in \(oneDecimal(drainSeconds)) s; peak VmHWM \(bytes(peakKiB)); /health: \(health.count) answers, "
            + "slowest \(oneDecimal(health.max() ?? 0)) ms, \(healthStalled) of them 503 (a drain pass over a second)\n"
        let phases = [
            ("while draining", snapshotWhileDraining), ("while the windows slid", snapshotWhileSliding ?? .init()),
            ("at rest", snapshotAtRest),
        ]
        for (phase, figures) in phases {
            text +=
                "snapshot \(phase): at most \(oneDecimal(figures.largestAgeSeconds)) s old when /health was asked, "
                + "the longest build \(oneDecimal(figures.largestBuildSeconds)) s of the drain thread's time\n"
        }
        for (variant, made) in scrapes {
            guard let first = made.first else { continue }
            text += "scrape \(variant.rawValue): first \(oneDecimal(first.millis)) ms, \(bytes(first.bytes / 1024))"
            let rest = made.dropFirst().map(\.millis).sorted()
            if !rest.isEmpty {
                text += "; the \(rest.count) after it: p50 \(oneDecimal(rest[(rest.count - 1) / 2])) ms, max \(oneDecimal(rest.last!)) ms"
            }
            text += "\n"
        }
        if let prometheus {
            text +=
                "Prometheus beside it: \(prometheus.series) series in its head, VmRSS \(bytes(prometheus.residentKiB)) "
                + "(RssAnon \(bytes(prometheus.anonymousKiB))): \(bytes(Double(prometheus.residentKiB) * 1024 / Double(max(prometheus.series, 1)))) a series\n"
        }
        return text
    }

    private func bytes(_ kib: Int) -> String { humanBytes(kib * 1024) }
    private func bytes(_ value: Double) -> String { "\(Int(value.rounded())) B" }
}
