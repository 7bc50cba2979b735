import Ringside
import RingsideAggregation
import RingsideCommandLine
import RingsideExport
import RingsideHTTP

// The collector's options: where it reads and serves, and the figures it makes. The rest are in
// CollectorOptionRows+Bounds.swift and, the OTLP exporter's, in OTLPFlags.swift.
extension CollectorOption {
    /// The ring directory, the rings, the configuration and the HTTP listener.
    static var startAndServe: [CollectorOption] {
        [
            .init(
                ["--dir"], .value("PATH"), help: ["ring directory (default: $RINGSIDE_DIR, else /dev/shm)"],
                startOnly: [.init("--dir", \.directory)]
            ) { reading, value throws(UsageError) in
                // An empty value would silently mean the default directory.
                guard !value.text.isEmpty else { throw UsageError("--dir is empty") }
                reading.directory = value.text
            },
            .init(
                ["--ring"], .value("NAME"), help: ["collect only this ring (repeatable; default: every ring)"],
                startOnly: [.init("--ring", \.rings)]
            ) { reading, value throws(UsageError) in
                do { try RingDirectory.validate(name: value.text) } catch { throw UsageError("--ring: \(error)") }
                reading.options.rings.append(value.text)
            },
            .init(
                ["--config"], .value("FILE"),
                help: [
                    "a YAML file of these options, `flag: value` (a list for the ones",
                    "that repeat); the command line's override it. Re-read on SIGHUP:",
                    "a file that does not read is refused with its line, and the running",
                    "configuration stays (docs/collector.md)",
                ], scope: .commandLineOnly
            ) { _, _ throws(UsageError) in
                // `CollectorConfigFile.split` takes it off the command line before the flags are read.
                throw UsageError("--config is given once, on the command line")
            },
            .init(
                ["--web-enable-lifecycle", "--web.enable-lifecycle"], help: ["POST /-/reload re-reads the configuration, as SIGHUP does"],
                startOnly: [.init("--web-enable-lifecycle", \.reloadEndpoint)]
            ) { reading, _ throws(UsageError) in reading.options.reloadEndpoint = true },
            .init(
                ["--listen"], .value("HOST:PORT"), help: ["HTTP address (default 127.0.0.1:9464; port 0 picks a free one)"]
            ) { reading, value throws(UsageError) in reading.options.listen = try listenAddress(value.text) },
            .init(
                ["--web-config-file", "--web.config.file"], .value("PATH"),
                help: [
                    "exporter-toolkit's web configuration (also --web.config.file): TLS,",
                    "client certificates, basic-auth users with bcrypt hashes; re-read",
                    "when it or its files change. /health and /-/healthy need no",
                    "password (docs/operations.md)",
                ]
            ) { reading, value throws(UsageError) in
                let path = try value.file()
                // Read and loaded here (certificate and key too), so a bad file is a usage error
                // naming its line; the daemon loads it again to serve.
                do { try WebSecurity.check(path: path) } catch { throw UsageError("\(value.flag) \(path): \(error)") }
                reading.options.webConfigFile = path
            },
        ]
    }

    /// The windows, quantiles and SLOs, the JSON document, the drain's pace and whose rings.
    static var figures: [CollectorOption] {
        [
            .init(
                ["--windows"], .list("LIST"), help: ["sliding windows (default 1s,5s,1m)"], startOnly: [.init("--windows", \.windowNanos)]
            ) { reading, value throws(UsageError) in reading.options.windowNanos = try windows(value) },
            .init(
                ["--quantiles"], .list("LIST"), help: ["quantiles per window (default 0.5,0.9,0.95,0.99,0.999)"]
            ) { reading, value throws(UsageError) in reading.options.quantiles = try quantiles(value) },
            .init(
                ["--json-dump"], .value("PATH"), help: ["write the /latest document to PATH (atomically) every interval"]
            ) { reading, value throws(UsageError) in reading.options.jsonDumpPath = try logFile(value) },
            .init(["--dump-interval"], .value("DUR"), help: ["how often to write it (default 60s)"]) { reading, value throws(UsageError) in
                reading.options.dumpIntervalNanos = try value.duration(100 * ms...UInt64.max) { _ in "\(value.flag) must be at least 100ms"
                }
            },
            .init(
                ["--slo"], .value("RULE"),
                help: [
                    "a service-level objective (repeatable), e.g.",
                    "'order_fill_latency{symbol=\"AAPL\"}:p99<100us@1m', a gauge's",
                    "'kill_switch_active:max<1@1m', a rate 'orders:rate>1@5m', or",
                    "an availability 'orders_rejected/orders_total<0.05%@30d';",
                    "' severity=P2' after it labels its series (default P1)",
                ]
            ) { reading, value throws(UsageError) in
                do throws(SLORule.ParseError) { reading.options.sloRules.append(try SLORule(parsing: value.text)) } catch {
                    throw UsageError("--slo '\(value.text)': \(error.reason)")
                }
            },
            .init(
                ["--poll"], .value("DUR"), help: ["drain-loop sleep when the rings are empty (default 100ms)"],
                startOnly: [.init("--poll", \.pollNanos)]
            ) { reading, value throws(UsageError) in
                reading.options.pollNanos = try value.duration(ms...10 * second) { _ in "--poll must be from 1ms to 10s" }
            },
            .init(
                ["--allow-uid"], .value("UID"), help: ["also collect rings owned by this user (repeatable)"],
                startOnly: [.init("--allow-uid", \.allowedUIDs)]
            ) { reading, value throws(UsageError) in
                guard let uid = UInt32(value.text) else { throw UsageError("--allow-uid: \(value.text) is not a user id") }
                reading.options.allowedUIDs.append(uid)
            },
            .init(
                ["--native-histograms"], .value("SCHEMA"),
                help: [
                    "histograms also carry Prometheus native buckets of SCHEMA (-4 to 8;",
                    "5 errs by at most 1.1 %), served in the protobuf format Prometheus asks",
                    "for with --enable-feature=native-histograms (it then keeps the native",
                    "form only: docs/prometheus.md has the rules and panels for it)",
                ], startOnly: [.init("--native-histograms", \.nativeHistogramSchema)]
            ) { reading, value throws(UsageError) in
                reading.options.nativeHistogramSchema = try value.count(NativeBuckets.schemas) {
                    "\(value.flag): \($0) is not a schema from -4 to 8 (3: buckets 9 % wide, 5: 2 %, 8: 0.3 %)"
                }
            },
        ]
    }

    // MARK: - The values that take more than a range

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
    static func logFile(_ value: OptionValue) throws(UsageError) -> String {
        let path = try value.file()
        guard LogDirectory.namesFile(path) else {
            throw UsageError("\(value.flag) \(path): expected the path of a file (DIRECTORY/NAME), not of a directory")
        }
        return path
    }

    static let maxWindows = 16

    /// `--windows`: whole milliseconds from 100ms to 24h, none twice, at most 16, sorted.
    private static func windows(_ value: OptionValue) throws(UsageError) -> [UInt64] {
        let flag = value.flag
        let windows = try parseList(value) { item throws(UsageError) in
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
    private static func quantiles(_ value: OptionValue) throws(UsageError) -> [Double] {
        let quantiles = try parseList(value) { item throws(UsageError) in
            guard let q = Double(item), q > 0, q < 1 else {
                throw UsageError("\(value.flag): \(item) is not a quantile between 0 and 1 (exclusive)")
            }
            return q
        }
        return Array(Set(quantiles)).sorted()
    }

    private static func parseList<T>(_ value: OptionValue, _ parse: (String) throws(UsageError) -> T) throws(UsageError) -> [T] {
        let items = value.text.split(separator: ",", omittingEmptySubsequences: false).map { String($0) }
        guard !items.isEmpty, !items.contains(where: \.isEmpty) else { throw UsageError("\(value.flag): expected a comma-separated list") }
        var parsed: [T] = []
        for item in items { parsed.append(try parse(item)) }
        return parsed
    }
}

// Nanoseconds, for the options' bounds.
private let ms: UInt64 = 1_000_000
private let second: UInt64 = 1_000_000_000
private let hour: UInt64 = 3600 * second
