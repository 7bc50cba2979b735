import Ringside
import RingsideCollector
import RingsideExport
import RingsideCommandLine
import RingsideJSON

/// ringside-bench's command line.
package struct BenchCommand: Sendable, Equatable {
    package enum Benchmark: String, Sendable, CaseIterable {
        case emit, collector, scrape, burst, gap, scale

        /// What runs when none is named: all but `scale`, which takes minutes and gigabytes.
        static let byDefault: [Benchmark] = [.emit, .collector, .scrape, .burst, .gap]
    }

    /// Which benchmarks, in order: all of them but `scale` when none is named.
    package var benchmarks: [Benchmark] = Benchmark.byDefault
    package var json = false
    package var settings = BenchSettings()
    /// Where to write the emit rows' percentile chart.
    package var svgPath: String?
    /// Emit rows and collector groups to run (`--row`); a benchmark none of them names runs all of its own.
    package var rows: Set<String> = []
    /// `scale`'s series and whether Prometheus runs beside.
    package var scale = ScaleBenchmark.Settings()

    package init() {}

    package static let usage = """
        usage: ringside-bench [emit | collector | scrape | burst | gap | scale] [options]

        Measures, on this machine, what each way of emitting a metric costs (emit), how fast the
        collector drains and aggregates (collector), how long GET /metrics takes with 10,000
        series (scrape), what a burst at 10 times the drain leaves of a histogram, sampled or
        dropped (burst), and how long a paced producer's records wait between two drains, and
        what it drops, at lane sizes around the sizing rule (gap). All five, one after the other,
        when none is named. Only when named: what a series costs a ringside-collector process's
        memory, drained, at rest and after scrapes, at 100,000 series or more (scale: 2 to 10
        minutes; the collector built beside ringside-bench).
        Build it in release mode: swift build -c release --product ringside-bench

        options:
          --json            print exactly one JSON object (name emit, collector, scrape, burst or gap)
          --quick           a few seconds in all (0.25 s per row)
          --duration SECS   measuring time per row (all rounds) or phase (default 2; e.g. 5, 500ms); scrape makes
                            10 scrapes a row per second of it, 5 to 100; burst runs 5 seeds a second of it, 3 to 40;
                            gap runs each row that long, over its rounds
          --svg FILE        write the emit rows' latency percentile chart (SVG) to FILE
          --batch N         calls per timed batch (default 16; 1 times every call)
          --rounds N        emit and gap: run the rows interleaved in N rounds, each row for 1/N of its
                            time per round (default 5; --quick 3)
          --row NAME        run only this emit row, or this group of collector rows (repeatable):
                            \(EmitBenchmark.rowNames.joined(separator: ", ")); the A/B rows, only when named:
                            \(EmitBenchmark.abRowNames.joined(separator: ", ")); collector: \(CollectorBenchmark.rowGroups.joined(separator: ", "))
          --capacity N      records in the emit rows' rings (default \(BenchSettings().ringCapacity); the library's is \(Bot.Options().laneCapacity))
          --poll DUR        the collector's --poll in the live run (default 100ms)
          --series N        scale: series registered (default 100000; 1000 to 2000000)
          --prometheus      scale: run Debian's prometheus beside the collector, scraping it
          --help            show this text
          --version         print the version and the git revision, and exit
        """

    /// What `--version` prints: `ringside-bench 0.3.0 (revision abc1234)`.
    package static var versionLine: String { RingsideVersion.line(program: "ringside-bench") }

    /// Parses arguments (without the program name); nil means `--help` or `--version`.
    package static func parse(_ arguments: [String]) throws(UsageError) -> BenchCommand? {
        guard case let .run(command) = try invocation(arguments) else { return nil }
        return command
    }

    /// Parses arguments (without the program name): the benchmarks to run, or `--help`, or `--version`.
    package static func invocation(_ arguments: [String]) throws(UsageError) -> Invocation<BenchCommand> {
        var command = BenchCommand()
        var named: [Benchmark] = []
        var stream = ArgumentStream(arguments)
        var roundsGiven = false
        func value(for flag: String) throws(UsageError) -> String { try stream.value(for: flag) }
        while let token = try stream.next() {
            let flag: String
            switch token {
            case let .argument(word):
                guard let benchmark = Benchmark(rawValue: word) else { throw stream.unexpected(word) }
                named.append(benchmark)
                continue
            case let .option(option): flag = option
            }
            switch flag {
            case "--help": return .help
            case "--version": return .version
            case "--json": command.json = true
            case "--quick":
                command.settings.seconds = BenchSettings.quick.seconds
                if !roundsGiven { command.settings.rounds = BenchSettings.quick.rounds }
            case "--rounds":
                command.settings.rounds = try parseCount(value(for: flag), in: 1...100) {
                    "--rounds \($0): expected a number of rounds from 1 to 100"
                }
                roundsGiven = true
            case "--duration":
                let text = try value(for: flag)
                let seconds = durationNanos(text, bareSeconds: true).map { Double($0) / 1e9 }
                guard let seconds, seconds >= 0.05, seconds <= 3600 else {
                    throw UsageError("--duration \(text): expected seconds from 0.05 to 3600 (e.g. 2, 500ms)")
                }
                command.settings.seconds = seconds
            case "--svg": command.svgPath = try value(for: flag)
            case "--batch":
                command.settings.batchSize = try parseCount(value(for: flag), in: 1...1024) {
                    "--batch \($0): expected calls per batch from 1 to 1024"
                }
            case "--row":
                let name = try value(for: flag)
                guard EmitBenchmark.allRowNames.contains(name) || CollectorBenchmark.rowGroups.contains(name) else {
                    throw UsageError(
                        "--row \(name): not a row; rows are \(EmitBenchmark.allRowNames.joined(separator: ", ")), and the collector's "
                            + CollectorBenchmark.rowGroups.joined(separator: ", "))
                }
                command.rows.insert(name)
            case "--capacity":
                let text = try value(for: flag)
                guard let capacity = Int(text), capacity >= 1 << 10, capacity <= 1 << 26, capacity & (capacity - 1) == 0 else {
                    throw UsageError("--capacity \(text): expected a power of two from 1024 to 67108864")
                }
                command.settings.ringCapacity = capacity
            case "--series":
                command.scale.series = try parseCount(value(for: flag), in: 1_000...2_000_000) {
                    "--series \($0): expected a number of series from 1000 to 2000000"
                }
            case "--prometheus": command.scale.prometheus = true
            case "--poll":
                command.settings.collectorPollNanos = try parseDuration(value(for: flag), flag: flag, in: 1_000_000...10_000_000_000) { _ in
                    "--poll must be from 1ms to 10s"
                }
            default:
                throw stream.unknown(flag)
            }
        }
        if !named.isEmpty { command.benchmarks = Benchmark.allCases.filter(named.contains) }
        if command.json && command.benchmarks == [.scale] { throw UsageError("--json: scale prints its table only") }
        if command.json && command.benchmarks.count != 1 {
            throw UsageError("--json prints one benchmark's object: name emit, collector, scrape, burst or gap")
        }
        if command.svgPath != nil && !command.benchmarks.contains(.emit) {
            throw UsageError("--svg charts the emit rows: run emit")
        }
        return .run(command)
    }
}
