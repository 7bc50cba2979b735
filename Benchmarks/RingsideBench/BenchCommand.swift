import Ringside
import RingsideCollector
import RingsideExport
import RingsideCommandLine
import RingsideJSON

/// ringside-bench's command line.
package struct BenchCommand: Sendable, Equatable {
    package enum Benchmark: String, Sendable, CaseIterable { case emit, collector, scrape, burst, gap, wake, scale, attack, soak }

    /// The benchmarks run when none is named: all but `wake`, which runs the collector built beside,
    /// `scale` and `attack`, which take minutes and gigabytes, and the soak, an hour long, which runs alone.
    package static let defaultBenchmarks = Benchmark.allCases.filter { ![.wake, .scale, .attack, .soak].contains($0) }

    /// Which benchmarks, in order: all of `defaultBenchmarks` when none is named.
    package var benchmarks: [Benchmark] = defaultBenchmarks
    package var json = false
    package var settings = BenchSettings()
    /// Where to write the emit rows' percentile chart.
    package var svgPath: String?
    /// Emit rows and collector groups to run (`--row`); a benchmark none of them names runs all of its own.
    package var rows: Set<String> = []
    /// `scale`'s series and whether Prometheus runs beside.
    package var scale = ScaleBenchmark.Settings()
    /// The soak's settings (`--duration`, `--interval`, `--producers`, `--workers`, `--warmup`).
    package var soak = SoakSettings()

    package init() {}

    package static let usage = """
        usage: ringside-bench [emit | collector | scrape | burst | gap | wake | scale | attack] [options]
               ringside-bench soak [--duration S] [--interval S] [--producers N] [--workers N] [--warmup S] [--json]

        Measures, on this machine, what each way of emitting a metric costs (emit), how fast the
        collector drains and aggregates (collector), how long GET /metrics takes with 10,000
        series (scrape), what a burst at 10 times the drain leaves of a histogram, sampled or
        dropped (burst), and how long a paced producer's records wait between two drains, and
        what it drops, at lane sizes around the sizing rule (gap). All five, one after the other,
        when none is named. Only when named: what a series costs a ringside-collector process's
        memory, drained, at rest and after scrapes, at 100,000 series or more (scale: 2 to 10
        minutes; the collector built beside ringside-bench); and a cardinality attack on the
        collector at its defaults (attack: 75 bots of 4,096 series of 200-byte labels beside 3
        honest bots; what is kept and refused, /health probed every 50 ms, two gzipped scrapes,
        memory; its exit status is 1 when an honest bot lost a series or a count, or a probe went
        unanswered; the collector and ringside-test-producer built beside it); what the doorbell
        changes against the poll, beside the collector built beside it (wake: a record from an idle
        collector until drained and until /latest shows it; 2,000 idle bots' CPU by thread; a lane
        starting after an idle spell, sampling off, and what it drops; about 3 minutes).
        Build it in release mode: swift build -c release --product ringside-bench

        soak runs alone: the collector built beside this binary for an hour, under producers at full
        speed and a pool of forked workers recycled all along, pushing OTLP to a receiver of its own
        that fails every other minute; it samples the collector's memory, descriptors, CPU and drain,
        then judges: RSS and descriptors flat after the warm-up, nothing lost, every counter exact.
        Its exit status is 1 when a check fails. Build the collector and the producer beside it:
          swift build -c release --product ringside-collector
          swift build -c release --product ringside-test-producer

        options:
          --json            print exactly one JSON object (name emit, collector, scrape, burst, gap, wake or soak)
          --quick           a few seconds in all (0.25 s per row)
          --duration SECS   measuring time per row (all rounds) or phase (default 2; e.g. 5, 500ms); scrape makes
                            10 scrapes a row per second of it, 5 to 100; burst runs 5 seeds a second of it, 3 to 40;
                            gap runs each row that long, over its rounds
          --svg FILE        write the emit rows' latency percentile chart (SVG) to FILE
          --batch N         calls per timed batch (default 16; 1 times every call)
          --rounds N        emit and gap: run the rows interleaved in N rounds, each row for 1/N of its
                            time per round (default 5; --quick 3)
          --row NAME        run only this emit row, or this group of collector or wake rows (repeatable):
                            \(EmitBenchmark.rowNames.joined(separator: ", ")); the A/B rows, only when named:
                            \(EmitBenchmark.abRowNames.joined(separator: ", ")); collector: \(CollectorBenchmark.rowGroups.joined(separator: ", "));
                            wake: \(WakeBenchmark.rowGroups.joined(separator: ", "))
          --capacity N      records in the emit rows' rings (default \(BenchSettings().ringCapacity); the library's is \(Bot.Options().laneCapacity))
          --poll DUR        the collector's --poll in the live run and in wake (default 100ms)
          --series N        scale: series registered (default 100000; 1000 to 2000000)
          --kind KIND       scale: the series' kind: histogram (the default), counter or gauge
          --prometheus      scale: run Debian's prometheus beside the collector, scraping it

        soak's options:
          --duration SECS   how long the producers write (default 3600; 180 s to 7 days; e.g. 900, 1h)
          --interval SECS   time between two samples (default 10; 1 to 20 s)
          --producers N     blast producers at full speed, a bot each (default 8; 1 to 64)
          --workers N       workers the pool keeps running, each recycled after 20,000 calls (default 4; 0 to 32)
          --warmup SECS     time before the memory's baseline minute (default 300; 0 to 1 day); the run must
                            last the warm-up and two minutes more
          --json            print the report as one JSON object, every sample in it

          --help            show this text
          --version         print the version and the git revision, and exit
        """

    /// What `--version` prints: `ringside-bench 0.4.0 (revision abc1234)`.
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
        var durationText: String?
        var soakFlags: [String] = []
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
            case "--duration": durationText = try value(for: flag)
            case "--interval":
                command.soak.intervalSeconds = try seconds(
                    parseDuration(value(for: flag), flag: flag, bareSeconds: true, in: 1_000_000_000...20_000_000_000) {
                        "--interval \($0): expected seconds from 1 to 20 (e.g. 10, 5s)"
                    })
                soakFlags.append(flag)
            case "--warmup":
                command.soak.warmupSeconds = try seconds(
                    parseDuration(value(for: flag), flag: flag, bareSeconds: true, in: 0...86_400_000_000_000, zeroIsOff: true) {
                        "--warmup \($0): expected seconds from 0 to 86400 (e.g. 300, 5m)"
                    })
                soakFlags.append(flag)
            case "--producers":
                command.soak.producers = try parseCount(value(for: flag), in: 1...64) { "--producers \($0): expected 1 to 64 producers" }
                soakFlags.append(flag)
            case "--series":
                command.scale.series = try parseCount(value(for: flag), in: 1_000...2_000_000) {
                    "--series \($0): expected a number of series from 1000 to 2000000"
                }
            case "--prometheus": command.scale.prometheus = true
            case "--kind":
                let kind = try value(for: flag)
                guard ["histogram", "counter", "gauge"].contains(kind) else {
                    throw UsageError("--kind \(kind): expected histogram, counter or gauge")
                }
                command.scale.kind = kind
            case "--workers":
                command.soak.workers = try parseCount(value(for: flag), in: 0...32) { "--workers \($0): expected 0 to 32 workers" }
                soakFlags.append(flag)
            case "--svg": command.svgPath = try value(for: flag)
            case "--batch":
                command.settings.batchSize = try parseCount(value(for: flag), in: 1...1024) {
                    "--batch \($0): expected calls per batch from 1 to 1024"
                }
            case "--row":
                let name = try value(for: flag)
                guard
                    EmitBenchmark.allRowNames.contains(name) || CollectorBenchmark.rowGroups.contains(name)
                        || WakeBenchmark.rowGroups.contains(name)
                else {
                    throw UsageError(
                        "--row \(name): not a row; rows are \(EmitBenchmark.allRowNames.joined(separator: ", ")), the collector's "
                            + CollectorBenchmark.rowGroups.joined(separator: ", ") + ", and wake's "
                            + WakeBenchmark.rowGroups.joined(separator: ", "))
                }
                command.rows.insert(name)
            case "--capacity":
                let text = try value(for: flag)
                guard let capacity = Int(text), capacity >= 1 << 10, capacity <= 1 << 26, capacity & (capacity - 1) == 0 else {
                    throw UsageError("--capacity \(text): expected a power of two from 1024 to 67108864")
                }
                command.settings.ringCapacity = capacity
            case "--poll":
                command.settings.collectorPollNanos = try parseDuration(value(for: flag), flag: flag, in: 1_000_000...10_000_000_000) { _ in
                    "--poll must be from 1ms to 10s"
                }
            default:
                throw stream.unknown(flag)
            }
        }
        if !named.isEmpty { command.benchmarks = Benchmark.allCases.filter(named.contains) }
        let soak = command.benchmarks.contains(.soak)
        if soak && command.benchmarks.count > 1 { throw UsageError("soak runs alone: name no other benchmark with it") }
        if let flag = soakFlags.first, !soak { throw UsageError("\(flag) is soak's: run ringside-bench soak") }
        if let text = durationText {
            if soak {
                command.soak.seconds = try seconds(
                    parseDuration(text, flag: "--duration", bareSeconds: true, in: 180_000_000_000...604_800_000_000_000) {
                        "--duration \($0): expected the soak's seconds from 180 to 604800 (e.g. 3600, 1h)"
                    })
            } else {
                let seconds = durationNanos(text, bareSeconds: true).map { Double($0) / 1e9 }
                guard let seconds, seconds >= 0.05, seconds <= 3600 else {
                    throw UsageError("--duration \(text): expected seconds from 0.05 to 3600 (e.g. 2, 500ms)")
                }
                command.settings.seconds = seconds
            }
        }
        if soak && command.soak.warmupSeconds + 2 * SoakSettings.windowSeconds > command.soak.seconds {
            throw UsageError(
                "--duration \(Int(command.soak.seconds)) s is too short for --warmup \(Int(command.soak.warmupSeconds)) s: the soak "
                    + "compares the minute after the warm-up with the last minute, so it must last the warm-up and two minutes more")
        }
        if command.json, let only = command.benchmarks.first, [.scale, .attack].contains(only) {
            throw UsageError("--json: \(only.rawValue) prints its table only")
        }
        if command.json && command.benchmarks.count != 1 {
            throw UsageError("--json prints one benchmark's object: name emit, collector, scrape, burst, gap, wake or soak")
        }
        if command.svgPath != nil && !command.benchmarks.contains(.emit) {
            throw UsageError("--svg charts the emit rows: run emit")
        }
        return .run(command)
    }
}

/// Nanoseconds as seconds.
private func seconds(_ nanos: UInt64) -> Double { Double(nanos) / 1e9 }
