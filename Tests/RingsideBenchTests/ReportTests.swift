import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
@testable import RingsideBench
import RingsideJSON

@Suite("Reports: JSON, table and chart")
struct ReportTests {
    static let machine = Machine(
        cpu: "Test CPU \"x\" & co", cores: 2, allowedCores: 2, clockSource: "tsc",
        kernel: "Linux 6.1 x86_64", pinned: true, spanClock: "tsc: invariant TSC, clocksource tsc")
    static let rows = [
        LatencySummary(
            name: "ringside.record", batchNanos: [100, 120, 180, 4000], batchSize: 16, timerNanos: 20,
            callsPerSecond: 123_456_789.4, dropped: 0),
        LatencySummary(
            name: "unix-dgram", batchNanos: [20_000, 25_000, 90_000], batchSize: 16, timerNanos: 20,
            callsPerSecond: 800_000, dropped: 2),
    ]

    @Test("emit --json is one object with the issue's keys, in order")
    func emitJSONShape() throws {
        let report = EmitReport(machine: Self.machine, method: "batches of 16", rows: Self.rows)
        let text = report.json.text
        #expect(!text.contains("\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(Set(object.keys) == ["benchmark", "machine", "method", "results"])
        #expect(object["benchmark"] as? String == "emit")
        let results = try #require(object["results"] as? [[String: Any]])
        #expect(results.count == 2)
        #expect(
            Set(results[0].keys) == [
                "name", "p50_ns", "floor_ratio", "round_p50_ns", "p90_ns", "p99_ns", "p999_ns",
                "max_ns", "mean_ns", "calls_per_s", "dropped",
            ])
        #expect(results[0]["floor_ratio"] is NSNull)  // measured in one go: no rounds, no ratio
        #expect(results[0]["calls_per_s"] as? Int == 123_456_789)
        #expect(results[1]["dropped"] as? Int == 2)
        #expect(text.hasPrefix(#"{"benchmark":"emit","machine":{"cpu":"Test CPU \"x\" & co","#))
    }

    @Test("collector --json has the drain, e2e (one row a kind), cpu and rss rows")
    func collectorJSONShape() throws {
        let report = CollectorReport(
            machine: Self.machine, method: "m",
            drains: Self.drains,
            endToEnd: [
                .init(kind: "histogram", p50Micros: 50_000.25, p99Micros: 99_000, samples: 40),
                .init(kind: "counter", p50Micros: 60_000, p99Micros: 120_000, samples: 41),
            ],
            cpuPercent: 12.34,
            loadRecordsPerSecond: 1e6, rssMegabytes: 20.06, rssAnonMegabytes: 5,
            threadSampling: [
                .init(
                    name: "thread_sampler.2000lanes.idle", lanes: 2_000, processes: 1, cpuPercent: 0.2345, rounds: 6, deferredMost: 0,
                    keptDescriptors: 2_498, keptDescriptorLimit: 2_500)
            ])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(report.json.text.utf8)) as? [String: Any])
        #expect(object["benchmark"] as? String == "collector")
        let results = try #require(object["results"] as? [[String: Any]])
        #expect(
            results.map { $0["name"] as? String } == [
                "drain.1ring", "drain.8rings", "drain.64rings", "drain.baseline", "e2e.histogram", "e2e.counter",
                "cpu_at_1m_per_s", "rss", "thread_sampler.2000lanes.idle",
            ])
        #expect(results[0]["records_per_s"] as? Int == 25_000_000 && results[0]["ns_per_record"] as? Int == 40)
        #expect(results[4]["p50_us"] as? Double == 50_000.25)
        #expect(results[5]["p99_us"] as? Double == 120_000 && results[5]["samples"] as? Int == 41)
        #expect(results[6]["percent"] as? Double == 12.3)
        #expect(results[7]["mb"] as? Double == 20.1)
        #expect(results[8]["percent"] as? Double == 0.23 && results[8]["lanes"] as? Int == 2_000)
        #expect(results[8]["deferred_most"] as? Int == 0 && results[8]["kept_fds"] as? Int == 2_498)
        #expect(report.table.contains("thread_sampler.2000lanes.idle") && report.table.contains("0.23 % of a core"))
    }

    /// Drain rows of three rounds: 1 ring at 40, 30, 50 ns; 64 rings at 60, 60, 50 (ratios 1.5,
    /// 2, 1); the baseline at 20, 20, 25. Their wall times are twice their CPU times.
    static let drains: [CollectorReport.Drain] = {
        let one = [40.0, 30, 50], baseline = [20.0, 20, 25]
        func row(_ name: String, _ rings: Int, _ rounds: [Double], passes: Int) -> CollectorReport.Drain {
            .init(
                name: name, rings: rings, roundNanosPerRecord: rounds, oneRingRoundNanos: one, baselineRoundNanos: baseline,
                roundWallNanosPerRecord: rounds.map { $0 * 2 }, records: 30, passes: passes)
        }
        return [
            row("drain.1ring", 1, one, passes: 3), row("drain.8rings", 8, [45, 45, 45], passes: 3),
            row("drain.64rings", 64, [60, 60, 50], passes: 9), row("drain.baseline", 0, baseline, passes: 0),
        ]
    }()

    @Test("drain rows: the median of the rounds, and the medians of the rounds' ratios to 1 ring and the baseline")
    func drainRatios() throws {
        let sixtyFour = Self.drains[2]
        #expect(sixtyFour.nanosPerRecord == 60)
        #expect(sixtyFour.overOneRing == 1.5)  // of 1.5, 2 and 1: not 60 / 40
        #expect(sixtyFour.overBaseline == 3)  // of 3, 3 and 2
        #expect(Self.drains[3].overBaseline == 1)
        let report = CollectorReport(
            machine: Self.machine, method: "m", drains: Self.drains, endToEnd: [], cpuPercent: 0,
            loadRecordsPerSecond: 0, rssMegabytes: 0, rssAnonMegabytes: 0, liveRun: false)
        let line = try #require(report.table.split(separator: "\n").first { $0.hasPrefix("drain.64rings") })
        #expect(line.contains("60.00 ns/record") && line.contains("x1ring 1.50") && line.contains("xbaseline 3.00"), "\(line)")
        #expect(line.contains("wall 120.00 ns"), "\(line)")
        #expect(!report.table.contains("e2e"))  // the live run did not run
        let object = try #require(try JSONSerialization.jsonObject(with: Data(report.json.text.utf8)) as? [String: Any])
        let results = try #require(object["results"] as? [[String: Any]])
        #expect(results.map { $0["name"] as? String } == ["drain.1ring", "drain.8rings", "drain.64rings", "drain.baseline"])
        #expect(results[2]["x_1ring"] as? Double == 1.5 && results[2]["round_ns_per_record"] as? [Int] == [60, 60, 50])
        #expect(results[2]["wall_ns_per_record"] as? Int == 120)
        #expect(results[2]["x_without_recorder"] is NSNull && !line.contains("xnorec"))
    }

    @Test("a .recorder row: the median of the rounds' ratios to the same rings drained without the recorder")
    func recorderRatio() throws {
        let row = CollectorReport.Drain(
            name: "drain.64rings.recorder", rings: 64, roundNanosPerRecord: [66, 70, 50], oneRingRoundNanos: [40, 30, 50],
            baselineRoundNanos: [20, 20, 25], roundWallNanosPerRecord: [66, 70, 50], records: 30, passes: 9,
            withoutRecorderRoundNanos: [60, 60, 50], recorderPeakBytes: 200 << 20)
        #expect(row.overWithoutRecorder == 1.1)  // of 1.1, 1.1667 and 1: not 66 / 60 by chance
        let report = CollectorReport(
            machine: Self.machine, method: "m", drains: Self.drains + [row], endToEnd: [], cpuPercent: 0,
            loadRecordsPerSecond: 0, rssMegabytes: 0, rssAnonMegabytes: 0, liveRun: false)
        let line = try #require(report.table.split(separator: "\n").first { $0.hasPrefix("drain.64rings.recorder") })
        #expect(line.contains("xnorec 1.10") && line.contains("recorder at most 200 MiB"), "\(line)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(report.json.text.utf8)) as? [String: Any])
        let results = try #require(object["results"] as? [[String: Any]])
        #expect(results.last?["x_without_recorder"] as? Double == 1.1)
        #expect(results.last?["recorder_peak_bytes"] as? Int == 200 << 20 && results[0]["recorder_peak_bytes"] is NSNull)
    }

    @Test("scrape --json has a row per phase with nearest-rank p50, p90 and p99; the table lists them")
    func scrapeReport() throws {
        let millis = (1...10).map(Double.init)
        let report = ScrapeReport(
            machine: Self.machine, method: "m", series: 10_000, pageBytes: 19_800_000,
            rows: [
                .init(name: "scrape.first", millis: [42.25], detail: "cold"),
                .init(name: "scrape.busy", millis: millis.reversed(), detail: "busy"),
            ])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(report.json.text.utf8)) as? [String: Any])
        #expect(object["benchmark"] as? String == "scrape" && object["series"] as? Int == 10_000)
        let results = try #require(object["results"] as? [[String: Any]])
        #expect(results.map { $0["name"] as? String } == ["scrape.first", "scrape.busy"])
        #expect(results[0]["p50_ms"] as? Double == 42.3 && results[0]["max_ms"] as? Double == 42.3)
        #expect(results[1]["p50_ms"] as? Int == 5 && results[1]["p90_ms"] as? Int == 9 && results[1]["scrapes"] as? Int == 10)
        #expect(results[1]["p99_ms"] as? Int == 10)
        #expect(report.table.contains("page: 10000 series, 19.8 MB"))
        #expect(report.table.split(separator: "\n").contains { $0.hasPrefix("scrape.busy") && $0.contains("5.0") && $0.contains("9.0") })
    }

    @Test("non-finite numbers are written as null, strings are escaped")
    func jsonEscapes() {
        let value = JSON.object([("a", .figure(.nan)), ("b", .string("x\n\"\u{1}")), ("c", .figure(2.5))])
        #expect(value.text == #"{"a":null,"b":"x\n\"\u0001","c":2.5}"#)
    }

    @Test("the chart is a well-formed SVG with one line per row")
    func chartIsWellFormed() throws {
        let svg = PercentileChart(title: "emit <test>", subtitle: Self.machine.line, rows: Self.rows).svg
        let document = try XMLDocument(data: Data(svg.utf8))
        let root = try #require(document.rootElement())
        #expect(root.name == "svg")
        #expect(root.attribute(forName: "xmlns")?.stringValue == "http://www.w3.org/2000/svg" || root.uri == "http://www.w3.org/2000/svg")
        let lines = try root.nodes(forXPath: "//*[local-name()='polyline']")
        #expect(lines.count == Self.rows.count)
        #expect(svg.contains("emit &lt;test&gt;"))
        #expect(!svg.contains("nan") && !svg.contains("inf"))
    }

    @Test("the chart's percentile axis ends at the nines the samples resolve")
    func chartAxis() {
        let row = LatencySummary(
            name: "r", batchNanos: (0..<100_000).map { UInt32($0 % 1000) }, batchSize: 1,
            timerNanos: 0, callsPerSecond: 1, dropped: 0)
        let svg = PercentileChart(title: "t", subtitle: "s", rows: [row]).svg
        #expect(svg.contains(">99.999 %<"))
        #expect(!svg.contains(">99.9999 %<"))
    }

    @Test("rows measured in rounds: the table shows the ratio to c.floor and the rounds' spread")
    func roundsInTable() throws {
        let floor = [10.0, 20.0, 10.0]  // ratios 2, 1 and 4: the median is 2
        let rounds = [[340, 660, 340], [340, 340, 340], [660, 660, 660]].map { batch in
            RoundSample(batchNanos: batch.map(UInt32.init), calls: 100, elapsedNanos: 1_000, dropped: 1)
        }
        let row = LatencySummary(name: "bot.record", rounds: rounds, batchSize: 16, timerNanos: 20, floorRoundP50s: floor)
        let table = EmitReport(machine: Self.machine, method: "m", rows: [row]).table
        let line = try #require(table.split(separator: "\n").first { $0.hasPrefix("bot.record") })
        #expect(line.contains("2.00") && line.contains("20.0-40.0"), "\(line)")
        let object = try #require(
            try JSONSerialization.jsonObject(
                with: Data(
                    EmitReport(
                        machine: Self.machine, method: "m",
                        rows: [row]
                    ).json.text.utf8)) as? [String: Any])
        let result = try #require((object["results"] as? [[String: Any]])?.first)
        #expect(result["floor_ratio"] as? Double == 2 && result["round_p50_ns"] as? [Int] == [20, 20, 40])
    }

    @Test("the table has a line per row under its heading")
    func tableLines() {
        let table = EmitReport(machine: Self.machine, method: "m", rows: Self.rows).table
        #expect(table.contains("ringside.record"))
        #expect(table.contains("123.5 M"))
        #expect(table.contains("\nspan clock: tsc: invariant TSC, clocksource tsc\n"))
        // title, machine, span clock, method; header, rule; rows
        #expect(table.split(separator: "\n").count == 4 + 2 + 2)
    }
}

@Suite("The command line")
struct BenchCommandTests {
    @Test("--json needs one benchmark; --quick and --duration set the time")
    func parsing() throws {
        #expect(throws: (any Error).self) { try BenchCommand.parse(["--json"]) }
        let quick = try #require(try BenchCommand.parse(["emit", "--json", "--quick"]))
        #expect(quick.benchmarks == [.emit] && quick.json && quick.settings.seconds == 0.25 && quick.settings.rounds == 3)
        #expect(try BenchCommand.parse(["--rounds", "7", "--quick"])?.settings.rounds == 7)
        #expect(try BenchCommand.parse(["emit"])?.settings.rounds == 5)
        #expect(throws: (any Error).self) { try BenchCommand.parse(["--rounds", "0"]) }
        let long = try #require(try BenchCommand.parse(["collector", "--duration", "500ms", "--poll=10ms"]))
        #expect(long.settings.seconds == 0.5 && long.settings.collectorPollNanos == 10_000_000)
        #expect(try BenchCommand.parse(["--help"]) == nil)
        #expect(throws: (any Error).self) { try BenchCommand.parse(["--row", "nope"]) }
        #expect(try BenchCommand.parse(["collector", "--row", "drain"])?.rows == ["drain"])
        #expect(try BenchCommand.parse([])?.benchmarks == [.emit, .collector, .scrape, .burst, .gap])
        #expect(try BenchCommand.parse(["gap", "--rounds", "3"])?.benchmarks == [.gap])
        #expect(try BenchCommand.parse(["scrape", "emit"])?.benchmarks == [.emit, .scrape])
        // wake runs only when named (the collector built beside), and prints JSON too.
        #expect(try BenchCommand.parse(["wake", "--json", "--quick"])?.benchmarks == [.wake])
        #expect(try BenchCommand.parse(["wake", "--poll", "10ms"])?.settings.collectorPollNanos == 10_000_000)
        #expect(try BenchCommand.parse(["wake", "--row", "idle"])?.rows == ["idle"])
        // scale and attack run only when named, and print their tables only.
        #expect(try BenchCommand.parse(["attack"])?.benchmarks == [.attack])
        #expect(throws: (any Error).self) { try BenchCommand.parse(["attack", "--json"]) }
        #expect(throws: (any Error).self) { try BenchCommand.parse(["scale", "--json"]) }
    }
}
