import RingsideAggregation
import RingsideCommandLine

// The collector's options: its latency log, its bounds (series, history, state), the flight
// recorder and captures, the thread samples, and how it runs.
extension CollectorOption {
    /// The latency log (`--hlog`).
    static var latencyLog: [CollectorOption] {
        [
            .init(
                ["--hlog"], .value("PATH"),
                help: [
                    "write each histogram series' per-interval histograms to PATH in",
                    "HdrHistogram's interval log format (see docs/collector.md)",
                ]
            ) { reading, value throws(UsageError) in reading.options.hlogPath = try logFile(value) },
            .init(["--hlog-interval"], .value("DUR"), help: ["the log's interval (default 1s; 100ms to 1h)"]) {
                reading, value throws(UsageError) in
                reading.options.hlogIntervalNanos = try value.duration(100 * ms...hour) {
                    "--hlog-interval \($0): must be from 100ms to 1h"
                }
            },
            .init(
                ["--hlog-max-bytes"], .value("N"),
                help: [
                    "at this size the log is renamed PATH.1 (replacing it) and a new one",
                    "begun (default 268435456: 256 MiB; 4096 at least; K, M, G suffixes)",
                ]
            ) { reading, value throws(UsageError) in reading.options.hlogMaxBytes = try value.bytes(4096...UInt64.max, "of at least 4096")
            },
        ]
    }

    /// The series kept, and the per-second history.
    static var seriesBounds: [CollectorOption] {
        [
            .init(
                ["--max-series"], .value("N"),
                help: ["series kept in all (default 100000); metrics registered past it", "are refused, counted, exported and logged"],
                startOnly: [.init("--max-series*", \.maxSeries)]
            ) { reading, value throws(UsageError) in reading.options.maxSeries = try value.series() },
            .init(
                ["--max-series-bytes"], .value("N"),
                help: [
                    "memory the series may take in all (default 1G; K, M, G suffixes):",
                    "each is charged its state, its counts and its share of the pages",
                    "kept; metrics registered past it are refused like those past",
                    "--max-series (docs/operations.md has the figures)",
                ], startOnly: [.init("--max-series*", \.maxSeriesBytes)]
            ) { reading, value throws(UsageError) in
                reading.options.maxSeriesBytes = Int(try value.bytes(1 << 20...1 << 40, "from 1M to 1024G"))
            },
            .init(
                ["--max-series-per-ring"], .value("N"), help: ["series kept per ring (default 4096: all a bot can register)"],
                startOnly: [.init("--max-series*", \.maxSeriesPerRing)]
            ) { reading, value throws(UsageError) in reading.options.maxSeriesPerRing = try value.series() },
            .init(
                ["--history"], .value("DUR"),
                help: [
                    "per-second history kept for /api/history (default 1h; 10s to 24h;",
                    "0 disables): what changes, 44 bytes a second a series at most",
                    "(32 bytes a minute when idle), lost at a restart",
                ], startOnly: [.init("--history*", \.historySeconds)]
            ) { reading, value throws(UsageError) in
                let seconds = UInt64(HistoryStore.minRetentionSeconds)...UInt64(HistoryStore.maxRetentionSeconds)
                let nanos = try value.duration(seconds.lowerBound * second...seconds.upperBound * second, zeroIsOff: true, step: second) {
                    "\(value.flag): \($0) must be whole seconds from 10s to 24h (or 0 to disable the history)"
                }
                reading.options.historySeconds = Int(nanos / second)
            },
            .init(
                ["--history-max-series"], .value("N"),
                help: [
                    "series kept in that history (default 2000: at most 324 MB at 1h,",
                    "4 MB idle); series past it are refused and counted (series_refused",
                    "in /api/history)",
                ], startOnly: [.init("--history*", \.historyMaxSeries)]
            ) { reading, value throws(UsageError) in reading.options.historyMaxSeries = try value.series() },
        ]
    }

    /// The collector's state: how much is read of it, and when a bot's figures in it expire.
    static var state: [CollectorOption] {
        [
            .init(
                ["--state-max-bytes"], .value("N"),
                help: [
                    "the most read of one file of the collector's state (the totals of",
                    "workers that are gone) at start (default 64M; 1M to 4G; K, M, G",
                    "suffixes); a larger file is refused, unread, and left as it is",
                ], startOnly: [.init("--state-*", \.stateMaxBytes)]
            ) { reading, value throws(UsageError) in
                reading.options.stateMaxBytes = Int(try value.bytes(1 << 20...4 << 30, "from 1M to 4G"))
            },
            .init(
                ["--state-expiry"], .value("DUR"),
                help: [
                    "a bot's totals in that state expire once its files have all been",
                    "gone this long (default 168h: 7 days; 1h at least; 0: never)",
                ], startOnly: [.init("--state-*", \.stateExpirySeconds)]
            ) { reading, value throws(UsageError) in
                let nanos = try value.duration(hour...UInt64.max, zeroIsOff: true) {
                    "\(value.flag): \($0) must be 1h at least (or 0: never)"
                }
                reading.options.stateExpirySeconds = nanos == 0 ? nil : nanos / second
            },
        ]
    }

    /// The flight recorder, and where captures of its records go.
    static var recorder: [CollectorOption] {
        [
            .init(
                ["--recorder-seconds"], .value("S"),
                help: [
                    "the flight recorder keeps each bot's raw records of the last S",
                    "seconds, or a duration (default 10; 1s to 10m; 0: off), for",
                    "captures (docs/captures.md)",
                ], startOnly: [.init("--recorder-*", \.recorderNanos)]
            ) { reading, value throws(UsageError) in
                reading.options.recorderNanos = try value.duration(second...10 * minute, zeroIsOff: true, bareSeconds: true) {
                    "\(value.flag): \($0) must be from 1s to 10m (or 0 to keep no records)"
                }
            },
            .init(
                ["--recorder-max-bytes"], .value("N"),
                help: [
                    "the recorder's memory budget (default 256M; 1M to 64G; K, M, G",
                    "suffixes): past it, the oldest records go early, counted in",
                    "ringside_recorder_evicted_records_total",
                ], startOnly: [.init("--recorder-*", \.recorderMaxBytes)]
            ) { reading, value throws(UsageError) in
                reading.options.recorderMaxBytes = Int(try value.bytes(1 << 20...64 << 30, "from 1M to 64G"))
            },
            .init(
                ["--capture-dir"], .value("DIR"),
                help: [
                    "write captures of the recorder's records there: a Chrome trace",
                    "(JSON, which Perfetto's UI opens), a Perfetto protobuf trace and an",
                    "HdrHistogram log per capture. Asked for by an SLO with the option",
                    "capture, a --capture-when bound, a bot that dies or stops,",
                    "POST /api/capture, or ringside-dump capture (docs/captures.md)",
                ], startOnly: [.init("--capture-*", \.captureDirectory)]
            ) { reading, value throws(UsageError) in reading.options.captureDirectory = value.text },
        ]
    }

    /// What a capture holds, how often one is made, and the bounds that ask for one.
    static var captures: [CollectorOption] {
        [
            .init(
                ["--capture-after"], .value("DUR"),
                help: [
                    "the seconds after the trigger a capture holds (default 2s; 0 to",
                    "1m); before it, the recorder's (--recorder-seconds)",
                ],
                startOnly: [.init("--capture-*", \.captureAfterNanos)]
            ) { reading, value throws(UsageError) in
                reading.options.captureAfterNanos = try value.duration(0...minute, zeroIsOff: true) {
                    "\(value.flag): \($0) must be from 0 to 1m"
                }
            },
            .init(
                ["--capture-min-interval"], .value("DUR"),
                help: [
                    "at most one capture per trigger this often (default 1m; 1s to",
                    "24h); the rest are counted in ringside_captures_suppressed_total",
                ],
                startOnly: [.init("--capture-*", \.captureMinIntervalNanos)]
            ) { reading, value throws(UsageError) in
                reading.options.captureMinIntervalNanos = try value.duration(second...24 * hour) {
                    "\(value.flag): \($0) must be from 1s to 24h"
                }
            },
            .init(
                ["--capture-max-records"], .value("N"),
                help: [
                    "records a capture holds at most, the nearest the trigger",
                    "(default 250000; 1000 to 10000000; about 1 KB of",
                    "memory each while it is written)",
                ], startOnly: [.init("--capture-*", \.captureMaxRecords)]
            ) { reading, value throws(UsageError) in
                reading.options.captureMaxRecords = try value.count(1_000...10_000_000) {
                    "\(value.flag) \($0): expected a number of records from 1000 to 10000000"
                }
            },
            .init(
                ["--capture-when"], .value("'METRIC{LABEL=\"V\"}>THRESHOLD'"),
                help: ["capture when a matching histogram's value goes above THRESHOLD", "(e.g. order_fill_latency>5ms); may be repeated"],
                startOnly: [.init("--capture-*", \.captureBounds)]
            ) { reading, value throws(UsageError) in
                do throws(SLORule.ParseError) { reading.options.captureBounds.append(try CaptureBound(parsing: value.text)) } catch {
                    throw UsageError("--capture-when '\(value.text)': \(error.reason)")
                }
            },
        ]
    }

    /// How often the lane threads and bot processes are read from /proc.
    static var threadSamples: [CollectorOption] {
        [
            .init(
                ["--thread-sample-interval"], .value("DUR"),
                help: [
                    "how often each lane thread's CPU, run-queue wait, context switches",
                    "and CPU, and each bot process's CPU, memory, threads, descriptors",
                    "and major faults, are read from /proc (default 1s; 100ms to 1h; 0: never)",
                ], startOnly: [.init("--thread-sample-interval", \.threadSampleIntervalNanos)]
            ) { reading, value throws(UsageError) in
                reading.options.threadSampleIntervalNanos = try value.duration(100 * ms...hour, zeroIsOff: true) {
                    "\(value.flag): \($0) must be from 100ms to 1h (or 0 to read no thread)"
                }
            }
        ]
    }

    /// The demo, the log's format, and the options that ask instead of run.
    static var running: [CollectorOption] {
        [
            .init(["--demo"], help: ["start a synthetic trading bot and show a live table"], scope: .commandLineOnly) {
                reading, _ throws(UsageError) in reading.options.demo = true
            },
            .init(
                ["--log-format"], .value("FORMAT"),
                help: ["text (default: a UTC time and the message) or json (one object a", "line: {\"time\",\"level\",\"msg\"})"],
                startOnly: [.init("--log-format", \.logFormat)]
            ) { reading, value throws(UsageError) in
                guard let format = LogFormat(rawValue: value.text) else {
                    throw UsageError("--log-format \(value.text): use " + LogFormat.allCases.map(\.rawValue).joined(separator: " or "))
                }
                reading.options.logFormat = format
            },
            .init(["--help"], help: ["show this text"], scope: .commandLineOnly) { reading, _ throws(UsageError) in reading.asked = .help },
            .init(["--version"], help: ["print the version and the git revision, and exit"], scope: .commandLineOnly) {
                reading, _ throws(UsageError) in reading.asked = .version
            },
        ]
    }
}

// Nanoseconds, for the options' bounds.
private let ms: UInt64 = 1_000_000
private let second: UInt64 = 1_000_000_000
private let minute: UInt64 = 60 * second
private let hour: UInt64 = 60 * minute
