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
    /// on new series' first figures (see `SnapshotPublisher.PendingPublish`). Not a flag: a test
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
    /// Writing a capture takes about 1 KB a record while its files are built (docs/collector.md):
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

    /// The text `--help` prints.
    package static let usage = """
        usage: ringside-collector [options]

        Drains every Ringside ring in the ring directory and exports windowed percentiles,
        counters, gauges and SLO states as Prometheus text (/metrics), JSON (/latest) and health (/health).

        options:
          --dir PATH             ring directory (default: $RINGSIDE_DIR, else /dev/shm)
          --ring NAME            collect only this ring (repeatable; default: every ring)
          --config FILE          a YAML file of these options, `flag: value` (a list for the ones
                                 that repeat); the command line's override it. Re-read on SIGHUP:
                                 a file that does not read is refused with its line, and the running
                                 configuration stays (docs/collector.md)
          --web-enable-lifecycle POST /-/reload re-reads the configuration, as SIGHUP does
          --listen HOST:PORT     HTTP address (default 127.0.0.1:9464; port 0 picks a free one)
          --web-config-file PATH exporter-toolkit's web configuration (also --web.config.file): TLS,
                                 client certificates, basic-auth users with bcrypt hashes; re-read
                                 when it or its files change. /health and /-/healthy need no
                                 password (docs/operations.md)
          --windows LIST         sliding windows (default 1s,5s,1m)
          --quantiles LIST       quantiles per window (default 0.5,0.9,0.95,0.99,0.999)
          --json-dump PATH       write the /latest document to PATH (atomically) every interval
          --dump-interval DUR    how often to write it (default 60s)
          --slo RULE             a service-level objective (repeatable), e.g.
                                 'order_fill_latency{symbol="AAPL"}:p99<100us@1m', a gauge's
                                 'kill_switch_active:max<1@1m', a rate 'orders:rate>1@5m', or
                                 an availability 'orders_rejected/orders_total<0.05%@30d';
                                 ' severity=P2' after it labels its series (default P1)
          --poll DUR             drain-loop sleep when the rings are empty (default 100ms)
          --allow-uid UID        also collect rings owned by this user (repeatable)
          --native-histograms SCHEMA
                                 histograms also carry Prometheus native buckets of SCHEMA (-4 to 8;
                                 5 errs by at most 1.1 %), served in the protobuf format Prometheus asks
                                 for with --enable-feature=native-histograms (it then keeps the native
                                 form only: docs/operations.md has the rules and panels for it)
          --hlog PATH            write each histogram series' per-interval histograms to PATH in
                                 HdrHistogram's interval log format (see docs/collector.md)
          --hlog-interval DUR    the log's interval (default 1s; 100ms to 1h)
          --hlog-max-bytes N     at this size the log is renamed PATH.1 (replacing it) and a new one
                                 begun (default 268435456: 256 MiB; 4096 at least; K, M, G suffixes)
          --max-series N         series kept in all (default 100000); metrics registered past it
                                 are refused, counted, exported and logged
          --max-series-bytes N   memory the series may take in all (default 1G; K, M, G suffixes):
                                 each is charged its windows, its counts and its lines on the
                                 pages; metrics registered past it are refused like those past
                                 --max-series (docs/operations.md has the figures)
          --max-series-per-ring N
                                 series kept per ring (default 4096: all a bot can register)
          --history DUR          per-second history kept for /api/history (default 1h; 10s to 24h;
                                 0 disables): what changes, 44 bytes a second a series at most
                                 (32 bytes a minute when idle), lost at a restart
          --history-max-series N series kept in that history (default 2000: at most 324 MB at 1h,
                                 4 MB idle); series past it are refused and counted (series_refused
                                 in /api/history)
          --state-max-bytes N    the most read of one file of the collector's state (the totals of
                                 workers that are gone) at start (default 64M; 1M to 4G; K, M, G
                                 suffixes); a larger file is refused, unread, and left as it is
          --state-expiry DUR     a bot's totals in that state expire once its files have all been
                                 gone this long (default 168h: 7 days; 1h at least; 0: never)
          --recorder-seconds S   the flight recorder keeps each bot's raw records of the last S
                                 seconds, or a duration (default 10; 1s to 10m; 0: off), for
                                 captures (docs/collector.md)
          --recorder-max-bytes N the recorder's memory budget (default 256M; 1M to 64G; K, M, G
                                 suffixes): past it, the oldest records go early, counted in
                                 ringside_recorder_evicted_records_total
          --capture-dir DIR      write captures of the recorder's records there: a Chrome trace
                                 (JSON, which Perfetto's UI opens), a Perfetto protobuf trace and an
                                 HdrHistogram log per capture. Asked for by an SLO with the option
                                 capture, a --capture-when bound, a bot that dies or stops,
                                 POST /api/capture, or ringside-dump capture (docs/collector.md)
          --capture-after DUR    the seconds after the trigger a capture holds (default 2s; 0 to
                                 1m); before it, the recorder's (--recorder-seconds)
          --capture-min-interval DUR
                                 at most one capture per trigger this often (default 1m; 1s to
                                 24h); the rest are counted in ringside_captures_suppressed_total
          --capture-max-records N
                                 records a capture holds at most, the nearest the trigger
                                 (default 250000; 1000 to 10000000; about 1 KB of
                                 memory each while it is written)
          --capture-when 'METRIC{LABEL="V"}>THRESHOLD'
                                 capture when a matching histogram's value goes above THRESHOLD
                                 (e.g. order_fill_latency>5ms); may be repeated
          --thread-sample-interval DUR
                                 how often each lane thread's CPU, run-queue wait, context switches
                                 and CPU, and each bot process's CPU, memory, threads, descriptors
                                 and major faults, are read from /proc (default 1s; 100ms to 1h; 0: never)
        \(OTLPFlags.usage)
          --demo                 start a synthetic trading bot and show a live table
          --log-format FORMAT    text (default: a UTC time and the message) or json (one object a
                                 line: {"time","level","msg"})
          --help                 show this text
          --version              print the version and the git revision, and exit

        Durations: a number and a unit: ns, us, ms, s, m, h (e.g. 250ms, 5s, 1m).
        """

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

    /// Parses flags only (no `--config`).
    private static func parseFlags(_ arguments: [String], environment: [String: String]) throws(UsageError) -> Invocation<CollectorOptions>
    {
        var options = CollectorOptions()
        var directory: String?
        var otlp = OTLPFlags()  // kept until the end: --otlp-endpoint may come after the others
        var stream = ArgumentStream(arguments)
        func value(for flag: String) throws(UsageError) -> String { try stream.value(for: flag) }
        while let flag = try stream.nextOption() {
            let index = stream.lastIndex
            // The flag's value, range-checked: each option below is one line and its bounds.
            func duration(
                _ range: ClosedRange<UInt64>, zeroIsOff: Bool = false, step: UInt64 = 1, bareSeconds: Bool = false,
                _ message: (String) -> String
            ) throws(UsageError) -> UInt64 {
                try parseDuration(
                    value(for: flag), flag: flag, bareSeconds: bareSeconds, in: range, step: step, zeroIsOff: zeroIsOff, else: message)
            }
            /// Bytes, with K, M and G suffixes; `bounds` says the range in its message ("from 1M to 4G").
            func bytes(_ range: ClosedRange<UInt64>, _ bounds: String) throws(UsageError) -> UInt64 {
                try parseByteSize(value(for: flag), in: range) {
                    "\(flag) \($0): expected a number of bytes \(bounds) (K, M and G suffixes: 1024s)"
                }
            }
            func count(_ range: ClosedRange<Int>, _ message: (String) -> String) throws(UsageError) -> Int {
                try parseCount(value(for: flag), in: range, else: message)
            }
            func series() throws(UsageError) -> Int {
                try count(1...100_000_000) { "\(flag): \($0) is not a number of series from 1 to 100000000" }
            }
            func file() throws(UsageError) -> String {
                let path = try value(for: flag)
                guard !path.isEmpty else { throw UsageError("\(flag) is empty") }
                return path
            }
            do throws(UsageError) {
                switch flag {
                case "--help": return .help
                case "--version": return .version
                case "--demo": options.demo = true
                case "--web-enable-lifecycle", "--web.enable-lifecycle": options.reloadEndpoint = true
                case "--config": throw UsageError("--config is given once, on the command line")
                case "--dir":
                    // An empty value would silently mean the default directory.
                    directory = try value(for: flag)
                    guard directory?.isEmpty == false else { throw UsageError("--dir is empty") }
                case "--ring": options.rings.append(try ringName(value(for: flag)))
                case "--listen": options.listen = try listenAddress(value(for: flag))
                case "--web-config-file", "--web.config.file":
                    let path = try file()
                    // Read and loaded here (certificate and key too), so a bad file is a usage error
                    // naming its line; the daemon loads it again to serve.
                    do { try WebSecurity.check(path: path) } catch { throw UsageError("\(flag) \(path): \(error)") }
                    options.webConfigFile = path
                case "--windows": options.windowNanos = try windows(value(for: flag), flag: flag)
                case "--quantiles": options.quantiles = try quantiles(value(for: flag), flag: flag)
                case "--json-dump": options.jsonDumpPath = try logFile(file(), flag: flag)
                case "--hlog": options.hlogPath = try logFile(file(), flag: flag)
                case "--hlog-interval":
                    options.hlogIntervalNanos = try duration(100 * ms...hour) { "--hlog-interval \($0): must be from 100ms to 1h" }
                case "--hlog-max-bytes": options.hlogMaxBytes = try bytes(4096...UInt64.max, "of at least 4096")
                case "--max-series-bytes": options.maxSeriesBytes = Int(try bytes(1 << 20...1 << 40, "from 1M to 1024G"))
                case "--state-max-bytes": options.stateMaxBytes = Int(try bytes(1 << 20...4 << 30, "from 1M to 4G"))
                case "--state-expiry":
                    let nanos = try duration(hour...UInt64.max, zeroIsOff: true) { "\(flag): \($0) must be 1h at least (or 0: never)" }
                    options.stateExpirySeconds = nanos == 0 ? nil : nanos / second
                case "--dump-interval":
                    options.dumpIntervalNanos = try duration(100 * ms...UInt64.max) { _ in "\(flag) must be at least 100ms" }
                case "--slo":
                    let text = try value(for: flag)
                    do { options.sloRules.append(try SLORule(parsing: text)) } catch {
                        throw UsageError("--slo '\(text)': \(error.reason)")
                    }
                case "--poll": options.pollNanos = try duration(ms...10 * second) { _ in "--poll must be from 1ms to 10s" }
                case "--max-series": options.maxSeries = try series()
                case "--max-series-per-ring": options.maxSeriesPerRing = try series()
                case "--history":
                    let seconds = UInt64(HistoryStore.minRetentionSeconds)...UInt64(HistoryStore.maxRetentionSeconds)
                    let nanos = try duration(seconds.lowerBound * second...seconds.upperBound * second, zeroIsOff: true, step: second) {
                        "\(flag): \($0) must be whole seconds from 10s to 24h (or 0 to disable the history)"
                    }
                    options.historySeconds = Int(nanos / second)
                case "--history-max-series": options.historyMaxSeries = try series()
                case "--recorder-seconds":
                    options.recorderNanos = try duration(second...10 * minute, zeroIsOff: true, bareSeconds: true) {
                        "\(flag): \($0) must be from 1s to 10m (or 0 to keep no records)"
                    }
                case "--recorder-max-bytes": options.recorderMaxBytes = Int(try bytes(1 << 20...64 << 30, "from 1M to 64G"))
                case "--capture-dir": options.captureDirectory = try value(for: flag)
                case "--capture-after":
                    options.captureAfterNanos = try duration(0...minute, zeroIsOff: true) { "\(flag): \($0) must be from 0 to 1m" }
                case "--capture-min-interval":
                    options.captureMinIntervalNanos = try duration(second...24 * hour) { "\(flag): \($0) must be from 1s to 24h" }
                case "--capture-max-records":
                    options.captureMaxRecords = try count(1_000...10_000_000) {
                        "\(flag) \($0): expected a number of records from 1000 to 10000000"
                    }
                case "--capture-when":
                    let text = try value(for: flag)
                    do { options.captureBounds.append(try CaptureBound(parsing: text)) } catch {
                        throw UsageError("--capture-when '\(text)': \(error.reason)")
                    }
                case "--thread-sample-interval":
                    options.threadSampleIntervalNanos = try duration(100 * ms...hour, zeroIsOff: true) {
                        "\(flag): \($0) must be from 100ms to 1h (or 0 to read no thread)"
                    }
                case "--native-histograms":
                    options.nativeHistogramSchema = try count(NativeBuckets.schemas) {
                        "\(flag): \($0) is not a schema from -4 to 8 (3: buckets 9 % wide, 5: 2 %, 8: 0.3 %)"
                    }
                case "--log-format":
                    let text = try value(for: flag)
                    guard let format = LogFormat(rawValue: text) else {
                        throw UsageError("--log-format \(text): use " + LogFormat.allCases.map(\.rawValue).joined(separator: " or "))
                    }
                    options.logFormat = format
                case "--allow-uid":
                    let text = try value(for: flag)
                    guard let uid = UInt32(text) else { throw UsageError("--allow-uid: \(text) is not a user id") }
                    options.allowedUIDs.append(uid)
                default:
                    let taken = try otlp.take(flag, value: { () throws(UsageError) in try value(for: flag) }) { range throws(UsageError) in
                        try duration(range) {
                            "\(flag) \($0): must be from \(formatDuration(range.lowerBound)) to \(formatDuration(range.upperBound))"
                        }
                    }
                    guard taken else { throw stream.unknown(flag) }
                }
            } catch {
                // The argument it is about: one of a configuration file's is named by its line.
                var located = error
                if located.argumentIndex == nil { located.argumentIndex = index }
                throw located
            }
        }
        options.directory = RingDirectory(directory)
        options.otlp = try otlp.options(environment: environment)
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

    // MARK: - The values that take more than a range

    /// `--ring`'s name, checked as the ring directory checks it.
    private static func ringName(_ name: String) throws(UsageError) -> String {
        do { try RingDirectory.validate(name: name) } catch { throw UsageError("--ring: \(error)") }
        return name
    }

    /// `--listen`'s address: its form is checked here, so a typo is a usage error; resolving and
    /// binding happen at start.
    private static func listenAddress(_ address: String) throws(UsageError) -> String {
        do { try HTTPServer.validate(listen: address) } catch {
            guard case let .invalidAddress(_, reason) = error else { throw UsageError("--listen \(address): \(error)") }
            throw UsageError("--listen \(address): \(reason)")
        }
        return address
    }

    /// The path of a file the collector writes (`--json-dump`, `--hlog`): its directory is opened
    /// and the file created by name in it (LogDirectory).
    private static func logFile(_ path: String, flag: String) throws(UsageError) -> String {
        guard LogDirectory.namesFile(path) else {
            throw UsageError("\(flag) \(path): expected the path of a file (DIRECTORY/NAME), not of a directory")
        }
        return path
    }

    static let maxWindows = 16

    /// `--windows`: whole milliseconds from 100ms to 24h, none twice, at most 16, sorted.
    private static func windows(_ text: String, flag: String) throws(UsageError) -> [UInt64] {
        let windows = try parseList(text, flag: flag) { item throws(UsageError) in
            try parseDuration(item, flag: flag, in: 100 * ms...24 * hour, step: ms) {
                "\(flag): window \($0) must be whole milliseconds from 100ms to 24h"
            }
        }
        guard Set(windows).count == windows.count else { throw UsageError("\(flag): windows repeat") }
        // A series notes its windows that hold values in 16 bits (`windowsHoldingValues`).
        guard windows.count <= maxWindows else { throw UsageError("\(flag): at most \(maxWindows) windows") }
        return windows.sorted()
    }

    /// `--quantiles`: each between 0 and 1 (exclusive); repeats dropped, sorted.
    private static func quantiles(_ text: String, flag: String) throws(UsageError) -> [Double] {
        let quantiles = try parseList(text, flag: flag) { item throws(UsageError) in
            guard let q = Double(item), q > 0, q < 1 else {
                throw UsageError("\(flag): \(item) is not a quantile between 0 and 1 (exclusive)")
            }
            return q
        }
        return Array(Set(quantiles)).sorted()
    }

    private static func parseList<T>(
        _ text: String, flag: String,
        _ parse: (String) throws(UsageError) -> T
    ) throws(UsageError) -> [T] {
        let items = text.split(separator: ",", omittingEmptySubsequences: false).map { String($0) }
        guard !items.isEmpty, !items.contains(where: \.isEmpty) else { throw UsageError("\(flag): expected a comma-separated list") }
        var parsed: [T] = []
        for item in items { parsed.append(try parse(item)) }
        return parsed
    }
}

// Nanoseconds, for the options' bounds.
private let ms: UInt64 = 1_000_000
private let second: UInt64 = 1_000_000_000
private let minute: UInt64 = 60 * second
private let hour: UInt64 = 60 * minute
