import Foundation
import RingsideAggregation
import RingsideExport
import CRingside
import Ringside
import RingsideCommandLine
import RingsideHTTP
import RingsideHTTPClient

/// The collector's configuration, from its command line.
package struct CollectorOptions: Sendable, Equatable {
    /// The ring directory (`--dir`, else `RINGSIDE_DIR`, else `/dev/shm`).
    package var directory = RingDirectory()
    /// Rings to collect (`--ring`, repeatable); empty means every ring in the directory.
    package var rings: [String] = []
    /// Where the HTTP server listens (`--listen`).
    package var listen = "127.0.0.1:9464"
    /// Sliding windows in nanoseconds (`--windows 1s,5s,1m`).
    package var windowNanos: [UInt64] = [1_000_000_000, 5_000_000_000, 60_000_000_000]
    /// Quantiles reported per window (`--quantiles`).
    package var quantiles: [Double] = [0.5, 0.9, 0.95, 0.99, 0.999]
    /// Where to write the JSON snapshot (`--json-dump`), and how often (`--dump-interval`).
    package var jsonDumpPath: String?
    package var dumpIntervalNanos: UInt64 = 60_000_000_000
    /// Service-level objectives (`--slo`, repeatable).
    package var sloRules: [SLORule] = []
    /// How long the drain loop sleeps when every ring is empty (`--poll`).
    package var pollNanos: UInt64 = 100_000_000
    /// The most time a snapshot spends admitting metrics new in registries, and the most it spends
    /// on new series' first figures (see `NewSeriesBudget`). Not a flag: a test
    /// sets it to 0 (each snapshot then admits one ring's and shows one bot's).
    package var newSeriesNanos: UInt64 = 200_000_000
    /// The most time a drain pass spends adopting rings discovery found (at least one; see
    /// `RingTracker.beginPass`): a bot of 4,000 metrics takes 10 to 20 ms to admit, and 64 of them
    /// registered at once made a pass of about a second. Not a flag: a test sets it to 0.
    package var adoptionNanos: UInt64 = 50_000_000
    /// Start a synthetic bot and show a live table (`--demo`).
    package var demo = false
    /// Users (besides our own) whose rings may be collected (`--allow-uid`, repeatable).
    package var allowedUIDs: [UInt32] = []
    /// Series the collector keeps in all (`--max-series`), and per ring (`--max-series-per-ring`),
    /// and the memory they may take in all (`--max-series-bytes`; see `SeriesCost` for what a
    /// series is charged). Metrics registered past a cap get no series; their records are
    /// counted, not aggregated.
    package var maxSeries = 100_000
    package var maxSeriesPerRing = Int(RS_MAX_REGISTRY_CAPACITY)
    package var maxSeriesBytes = 1 << 30
    /// How log lines are written (`--log-format text|json`).
    package var logFormat = LogFormat.text
    /// Histograms also export Prometheus native (exponential) buckets of this schema, -4 to 8
    /// (`--native-histograms`), in the protobuf format; nil: classic buckets only.
    package var nativeHistogramSchema: Int?
    /// Seconds of per-second history kept for `/api/history` (`--history`, 10s to 24h; 0 disables),
    /// and the series it keeps (`--history-max-series`): 2,000 series of an hour take 324 MB at
    /// most (every number of every series changing every second), 4 MB idle.
    package var historySeconds = 3600
    package var historyMaxSeries = 2_000
    /// Where to write every histogram series' per-interval histograms in HdrHistogram's interval
    /// log format (`--hlog`), how long an interval is (`--hlog-interval`), and the size at which
    /// the file is renamed to `PATH.1` and a new one begun (`--hlog-max-bytes`).
    package var hlogPath: String?
    package var hlogIntervalNanos: UInt64 = 1_000_000_000
    package var hlogMaxBytes: UInt64 = 256 << 20
    /// How often the lane threads' and bot processes' scheduling is read from `/proc`
    /// (`--thread-sample-interval`, 100ms to 1h); 0: never.
    package var threadSampleIntervalNanos: UInt64 = 1_000_000_000
    /// With `--otlp-endpoint`: the OTLP/HTTP exporter's receiver and how it pushes (`--otlp-*`).
    package var otlp: OTLPOptions?
    /// Exporter-toolkit's web configuration file (`--web-config-file`, also `--web.config.file`):
    /// TLS, client certificates and basic-auth users for the HTTP listener; re-read when it changes.
    package var webConfigFile: String?
    /// The configuration file (`--config`), and the command line's own arguments, which override
    /// it: both are read again at a reload (SIGHUP, and `POST /-/reload` with `reloadEndpoint`).
    package var configFile: String?
    package var commandLineArguments: [String] = []
    /// `POST /-/reload` re-reads the configuration (`--web-enable-lifecycle`, as Prometheus').
    package var reloadEndpoint = false
    /// The most bytes read of one state file at start (`--state-max-bytes`, default 64 MiB): a
    /// larger one is refused, unread, and a snapshot larger is not written.
    package var stateMaxBytes = 64 << 20
    /// How long a bot's figures are kept in the state once its files have all gone
    /// (`--state-expiry`, default 168h: 7 days); nil: for ever (`0`).
    package var stateExpirySeconds: UInt64? = 7 * 24 * 3600
    /// The flight recorder: the last seconds of raw records kept per bot (`--recorder-seconds`,
    /// 0 turns it off), within a memory budget (`--recorder-max-bytes`).
    package var recorderNanos: UInt64 = 10_000_000_000
    package var recorderMaxBytes = 256 << 20
    /// Captures of the recorder's records: where they are written (`--capture-dir`; nil: no
    /// captures), the seconds after the trigger they hold (`--capture-after`; before it, the
    /// recorder's), at most one per trigger per `--capture-min-interval`, at most
    /// `--capture-max-records` records each, and the bounds that ask for one (`--capture-when`).
    package var captureDirectory: String?
    package var captureAfterNanos: UInt64 = 2_000_000_000
    package var captureMinIntervalNanos: UInt64 = 60_000_000_000
    /// Writing a capture takes about 1 KB a record while its files are built (docs/captures.md):
    /// 250,000 keeps that near 250 MB, within the shipped unit's MemoryMax beside the defaults'.
    package var captureMaxRecords = 250_000
    var captureBounds: [CaptureBound] = []

    /// What the recorder keeps: `--recorder-seconds`, and with captures on, a capture's seconds
    /// after its trigger and a second more, since a capture takes its records once those have
    /// been drained: its seconds before are then still held.
    var recorderRetentionNanos: UInt64 {
        captureDirectory == nil ? recorderNanos : recorderNanos + captureAfterNanos + 1_000_000_000
    }

    package init() {}

    /// The text `--help` prints: each option's lines from `CollectorOption.all`.
    package static var usage: String {
        let head = """
            usage: ringside-collector [options]

            Drains every Ringside ring in the ring directory and exports windowed percentiles,
            counters, gauges and SLO states as Prometheus text (/metrics), JSON (/latest) and health (/health).

            options:
            """
        let tail = "Durations: a number and a unit: ns, us, ms, s, m, h (e.g. 250ms, 5s, 1m)."
        return ([head] + CollectorOption.all.flatMap(\.usageLines) + ["", tail]).joined(separator: "\n")
    }

    /// What `--version` prints: `ringside-collector 0.4.0 (revision abc1234)`.
    package static var versionLine: String { RingsideVersion.line(program: "ringside-collector") }

    /// Parses arguments (without the program name); `nil` means `--help` or `--version` was asked for.
    package static func parse(_ arguments: [String]) throws(UsageError) -> CollectorOptions? {
        guard case let .run(options) = try invocation(arguments) else { return nil }
        return options
    }

    /// Parses arguments (without the program name): the options to run with, or `--help`, or
    /// `--version`. With `--config FILE`, the file's options come first and the command line's
    /// override them: a flag given on the command line replaces every value the file gives it.
    /// `environment`: the `OTEL_*` variables the exporter reads where no flag says (`OTLPFlags`).
    package static func invocation(
        _ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(UsageError) -> Invocation<CollectorOptions> {
        if arguments.contains(where: { $0 == "--help" || $0 == "-h" }) { return .help }
        if arguments.contains("--version") { return .version }
        guard let (path, commandLine) = try CollectorConfigFile.split(arguments) else {
            return try parseFlags(arguments, environment: environment)
        }
        let file = try CollectorConfigFile(path: path)
        let (fromFile, entries) = file.arguments(excluding: CollectorConfigFile.flagNames(in: commandLine))
        do {
            guard case var .run(options) = try parseFlags(fromFile + commandLine, environment: environment) else { return .help }
            options.configFile = path
            options.commandLineArguments = commandLine
            return .run(options)
        } catch {
            if let index = error.argumentIndex, index < entries.count {
                throw UsageError("--config \(path): line \(entries[index].line): \(error.description)")
            }
            throw error.argumentIndex == nil ? UsageError("\(error.description) (--config \(path) and the command line)") : error
        }
    }

    /// The options of the configuration file and command line this was read from, read again:
    /// what a reload runs with (`--config`'s file as it is now).
    package func reloaded() throws(UsageError) -> CollectorOptions {
        guard let configFile else { return self }
        guard case let .run(options) = try Self.invocation(["--config", configFile] + commandLineArguments) else { return self }
        return options
    }

    /// Parses flags only (no `--config`), each as its row of `CollectorOption.all` reads it.
    private static func parseFlags(_ arguments: [String], environment: [String: String]) throws(UsageError) -> Invocation<CollectorOptions>
    {
        let table = CollectorOption.byName()
        var reading = OptionsReading()
        var stream = ArgumentStream(arguments)
        while let flag = try stream.nextOption() {
            let index = stream.lastIndex
            do throws(UsageError) {
                guard let option = table[flag] else { throw stream.unknown(flag) }
                let text = option.takes == .nothing ? "" : try stream.value(for: flag)
                try option.read(&reading, OptionValue(flag: flag, text: text))
            } catch {
                // The argument it is about: one of a configuration file's is named by its line.
                var located = error
                if located.argumentIndex == nil { located.argumentIndex = index }
                throw located
            }
            if let asked = reading.asked { return asked }
        }
        var options = reading.options
        options.directory = RingDirectory(reading.directory)
        options.otlp = try reading.otlp.options(environment: environment)
        try options.checkCombinations(arguments: arguments)
        return .run(options)
    }

    /// Refuses options that need another one not given (`--capture-*` without `--capture-dir`,
    /// `--hlog-*` without `--hlog`), and an SLO whose window no kind it judges can be judged over
    /// (a quantile's not one of `--windows`).
    private func checkCombinations(arguments: [String]) throws(UsageError) {
        if captureDirectory == nil,
            let flag = arguments.first(where: {
                ["--capture-after", "--capture-min-interval", "--capture-max-records", "--capture-when"].contains($0)
            })
        {
            throw UsageError("\(flag) needs --capture-dir DIR")
        }
        // An SLO marked capture would otherwise capture nothing, silently.
        if captureDirectory == nil, let rule = sloRules.first(where: \.capture) {
            throw UsageError("--slo '\(rule.text) capture': capture needs --capture-dir DIR")
        }
        if captureDirectory != nil, recorderNanos == 0 {
            throw UsageError("--capture-dir needs the flight recorder: --recorder-seconds 0 turns it off")
        }
        if hlogPath == nil, let flag = arguments.first(where: { $0 == "--hlog-interval" || $0 == "--hlog-max-bytes" }) {
            throw UsageError("\(flag) needs --hlog PATH")
        }
        for rule in sloRules {
            if let problem = rule.windowProblem(windows: windowNanos) { throw UsageError("--slo '\(rule.text)': \(problem)") }
        }
    }
}
