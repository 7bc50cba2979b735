// swift-tools-version:6.0
import PackageDescription

// Ringside: a shared-memory telemetry transport. The toolchain only: no package dependencies,
// and no unsafe compiler flags (they would stop other packages from depending on this one).
let package = Package(
    name: "Ringside",
    products: [
        .library(name: "Ringside", targets: ["Ringside"])
    ],
    dependencies: [],
    targets: [
        // MARK: - The system

        /// The one system-call layer: a thin wrapper for each call the Swift code makes (Glibc's),
        /// named after it, throwing a typed `Errno` and making it again after `EINTR` where the
        /// call is restartable. The readers, tools, collector, exporter, demo, HTTP server and
        /// benchmark call it; the producer's hot path is C and makes its own.
        .target(name: "RingsideSystem", dependencies: ["CRingsideSystem"]),
        /// The few calls Swift cannot make (variadic in glibc, or not declared): a thread's
        /// scheduler slice, malloc's trim and mmap threshold, membarrier, futex_waitv and a futex
        /// wake, and ppoll. Called through RingsideSystem only.
        .target(name: "CRingsideSystem"),

        // MARK: - The ring: format (C), producer API and reader

        /// The shared-memory format's specification, its atomics and clocks, and the producer's
        /// hot path, in C so that C and C++ bots write the same rings.
        .target(name: "CRingside"),
        .target(name: "Ringside", dependencies: ["CRingside", "RingsideSystem"]),

        // MARK: - The collector's parts

        /// Log-bucketed histograms and sliding windows, and the same histograms in Prometheus's
        /// native and OTLP's exponential buckets: pure computation, no I/O.
        .target(name: "RingsideAggregation"),
        /// A small HTTP/1.1 server on POSIX sockets, and a client for one request at a time (the
        /// OTLP exporter's); their calls made through RingsideSystem. The server speaks TLS and
        /// checks passwords as exporter-toolkit's web configuration file says (`--web-config-file`),
        /// counting what it refused in the snapshot's own type (RingsideSnapshot's
        /// `WebSecurityStats`; RingsideSnapshot never imports this module, so the tools that read
        /// snapshots do not link OpenSSL).
        .target(
            name: "RingsideHTTP", dependencies: ["RingsideSnapshot", "RingsideSystem", "RingsideHTTPClient", "COpenSSL", "CCrypt"]),
        /// A plain-HTTP client (and the sockets it and the server use), without TLS: what the
        /// operator's tools link (`ringside-dump capture`), never OpenSSL.
        .target(name: "RingsideHTTPClient", dependencies: ["RingsideSystem"]),
        /// The system's OpenSSL (libssl-dev): the HTTP server's TLS and SHA-256. Linked by the
        /// collector's HTTP server only, never by the library bots import.
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        /// The system's libxcrypt (libcrypt-dev): bcrypt, to check the web configuration's
        /// password hashes. Linked by the collector's HTTP server only.
        .systemLibrary(name: "CCrypt", pkgConfig: "libxcrypt", providers: [.apt(["libcrypt-dev"])]),
        /// What the collector knows at one moment, as plain values: the snapshot the collector
        /// builds and the exporters read (series, rings, SLOs, its own and its process's figures).
        .target(name: "RingsideSnapshot", dependencies: ["Ringside", "RingsideAggregation", "RingsideSystem"]),
        /// What the collector serves, rendered from snapshots only: Prometheus text, OpenMetrics
        /// and protobuf with native histograms, the `/latest` and `/health` JSON, OTLP's metrics
        /// requests, gzip, the live page and the capture timeline, HdrHistogram's encoding and log
        /// lines; the one Prometheus escaper, and how quantiles are named and written.
        .target(
            name: "RingsideExport",
            dependencies: [
                "Ringside", "RingsideAggregation", "RingsideSnapshot", "RingsideCommandLine", "RingsideJSON", "RingsideSystem",
                "RingsideText", "CZlib",
            ],
            resources: [.embedInCode("LivePage.html"), .embedInCode("CaptureTimeline.html")]),
        /// The system's zlib (a prerequisite of Swift on Linux): linked by the collector's export
        /// formats only, never by the library bots import.
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        /// The collector: discovery, draining, series, SLOs, the snapshots it builds, the per-second
        /// history they feed, its process's figures from `/proc`, its logs and the HTTP routes.
        .target(
            name: "RingsideCollector",
            dependencies: [
                "Ringside", "CRingside", "RingsideAggregation", "RingsideSnapshot", "RingsideExport", "RingsideHTTP", "RingsideJSON",
                "RingsideCommandLine", "RingsideSystem", "RingsideText", "RingsideTrace", "RingsideHTTPClient",
            ]),
        /// The collector's `--demo`: the synthetic trading bot (written against the public producer
        /// API only), the process that runs it, and the live table.
        .target(
            name: "RingsideDemo",
            dependencies: ["Ringside", "RingsideCollector", "RingsideSnapshot", "RingsideCommandLine", "RingsideSystem", "RingsideText"]),

        /// The flight recorder's trace: raw records of a bot's files in, a trace a person opens out
        /// (Chrome's Trace Event Format JSON, Perfetto's protobuf trace) and an HdrHistogram interval
        /// log of the same seconds. Pure: no I/O. Written by `ringside-dump postmortem`.
        .target(
            name: "RingsideTrace",
            dependencies: ["Ringside", "CRingside", "RingsideAggregation", "RingsideExport", "RingsideJSON", "RingsideText"]),

        // MARK: - Operator tools

        /// ringside-dump's and ringside-emit's commands: arguments, tables, JSON, value parsing.
        .target(
            name: "RingsideTools",
            dependencies: [
                "Ringside", "CRingside", "RingsideJSON", "RingsideCommandLine", "RingsideSystem", "RingsideText", "RingsideTrace",
                "RingsideHTTPClient",
            ]),
        /// Text shared by the tools, the trace, the collector, its exports and the benchmark: tables,
        /// numbers to a decimal or two, sizes, times and measures for people, wall-clock times, a
        /// metric's name as people write it (and the one Prometheus escaper's rule), base64. Over
        /// Ringside's types only (the bots' library gains nothing from it).
        .target(name: "RingsideText", dependencies: ["Ringside"]),
        /// JSON: a value written by hand (the tools' and the benchmark's output) and the collector's
        /// streaming writer, over one string escaper and number policy.
        .target(name: "RingsideJSON"),
        /// The usage error, the argument reading, the duration grammar and its written form, and
        /// the version every executable shares.
        .target(name: "RingsideCommandLine", plugins: ["RingsideRevision"]),
        /// Records the git commit the sources are at (`git rev-parse --short HEAD`, else "unknown")
        /// in RingsideCommandLine at each build, for `--version` and `ringside_build_info`.
        .plugin(name: "RingsideRevision", capability: .buildTool(), path: "Sources/RingsideRevision"),

        // MARK: - Executables

        .executableTarget(name: "ringside-collector", dependencies: ["RingsideCollector", "RingsideDemo", "RingsideSystem"]),
        .executableTarget(name: "ringside-dump", dependencies: ["RingsideTools"], path: "tools/ringside-dump"),
        .executableTarget(name: "ringside-emit", dependencies: ["RingsideTools"], path: "tools/ringside-emit"),

        // MARK: - Benchmarks

        /// ringside-bench's harness: the emit rows, the collector runs, timing, percentiles, table,
        /// JSON and SVG. It imports Ringside as a bot does, so the hot path is the cross-module one.
        .target(
            name: "RingsideBench",
            dependencies: [
                "Ringside", "CRingside", "CRingsideBench", "RingsideAggregation", "RingsideCollector", "RingsideExport",
                "RingsideHTTP", "RingsideJSON", "RingsideCommandLine", "RingsideSystem", "RingsideTestSupport", "RingsideText",
            ],
            path: "Benchmarks/RingsideBench"),
        /// The C floor (the same ring written from C with the same clock) and thread pinning.
        .target(name: "CRingsideBench", dependencies: ["CRingside"], path: "Benchmarks/CRingsideBench"),
        .executableTarget(name: "ringside-bench", dependencies: ["RingsideBench", "RingsideExport"], path: "Benchmarks/ringside-bench"),

        // MARK: - Tests

        /// A producer process the tests start, stop and kill.
        .executableTarget(
            name: "ringside-test-producer", dependencies: ["Ringside", "CAllocationCounter"],
            path: "Tests/ringside-test-producer"),
        /// Counts malloc calls in the test producer (it replaces that process's malloc).
        .target(name: "CAllocationCounter", path: "Tests/CAllocationCounter"),
        /// The one home of the tests' helpers (and the raw HTTP client ringside-bench scrapes with):
        /// ring directories that clean themselves up, processes run or launched (the collector among
        /// them), a raw HTTP client, polling, log capture.
        .target(
            name: "RingsideTestSupport",
            dependencies: ["Ringside", "CRingside", "RingsideAggregation", "RingsideCollector", "RingsideSystem"],
            path: "Tests/RingsideTestSupport"),

        .testTarget(
            name: "RingsideTests",
            dependencies: ["Ringside", "CRingside", "RingsideTestSupport", "ringside-test-producer", "RingsideSystem"]),
        .testTarget(name: "RingsideSystemTests", dependencies: ["RingsideSystem"]),
        .testTarget(name: "RingsideAggregationTests", dependencies: ["RingsideAggregation", "RingsideTestSupport"]),
        .testTarget(
            name: "RingsideCollectorTests",
            dependencies: [
                "RingsideCollector", "RingsideSnapshot", "RingsideExport", "Ringside", "CRingside", "RingsideAggregation",
                "RingsideHTTP", "RingsideCommandLine", "RingsideSystem", "RingsideTestSupport", "ringside-test-producer",
                "ringside-collector",
            ]),
        /// The benchmark's harness, and the soak's five minutes (`RINGSIDE_SOAK=1`), which runs the
        /// collector and the test producer built beside it.
        .testTarget(
            name: "RingsideBenchTests",
            dependencies: [
                "RingsideBench", "CRingsideBench", "RingsideJSON", "RingsideCommandLine", "ringside-collector", "ringside-test-producer",
            ]),
        .testTarget(
            name: "RingsideHTTPTests",
            dependencies: ["RingsideHTTP", "RingsideHTTPClient", "RingsideSnapshot", "RingsideTestSupport", "RingsideSystem"]),
        .testTarget(
            name: "RingsideTraceTests",
            dependencies: ["RingsideTrace", "Ringside", "CRingside", "RingsideExport", "RingsideJSON", "RingsideTestSupport"]),
        .testTarget(
            name: "RingsideExportTests",
            dependencies: ["RingsideExport", "RingsideSnapshot", "RingsideAggregation", "Ringside", "RingsideJSON", "RingsideTestSupport"]),
        .testTarget(
            name: "RingsideToolsTests",
            dependencies: [
                "RingsideTools", "RingsideJSON", "RingsideCommandLine", "Ringside", "CRingside", "RingsideText", "RingsideTestSupport",
                "ringside-test-producer", "ringside-dump", "ringside-emit",
            ]),
        /// Faults, SIGBUS and load: producers and collectors killed at random points, a full ring
        /// directory, files truncated or removed under their readers, eight producers at full speed.
        .testTarget(
            name: "RingsideReliabilityTests",
            dependencies: [
                "Ringside", "CRingside", "RingsideCollector", "RingsideSnapshot", "RingsideTestSupport",
                "ringside-test-producer", "ringside-collector", "ringside-dump", "ringside-emit",
            ]),
        /// Bad input and security: the reader fuzzer, HTTP abuse against the real collector, every
        /// bad command line, ownership, links and names, end to end with the real binaries.
        .testTarget(
            name: "RingsideAbuseTests",
            dependencies: [
                "Ringside", "CRingside", "RingsideCollector", "RingsideTestSupport",
                "ringside-collector", "ringside-dump", "ringside-emit", "ringside-test-producer", "RingsideSystem",
            ]),
        /// The reader fuzzer the abuse tests run as a process of its own, so a crash or a hang names its case.
        /// Not a dependency of the tests (`swift build` and `swift test` build it anyway): its allocator
        /// hooks must not be linked into the test bundle, which has CAllocationCounter's.
        .executableTarget(
            name: "ringside-abuse-fuzzer",
            dependencies: ["Ringside", "CRingside", "RingsideCollector", "RingsideExport", "CAbuseWatch", "RingsideTestSupport"],
            path: "Tests/ringside-abuse-fuzzer"),
        /// Watches the fuzzer's allocator (the largest request) and names the case a fatal signal arrived in.
        .target(name: "CAbuseWatch", path: "Tests/CAbuseWatch"),
        /// The coverage-guided fuzz targets, one per parser of outside input (`ringside-fuzz --list`):
        /// each feeds its bytes to the real parser and checks what it can cheaply. `swift test`
        /// replays their corpora (`Tests/fixtures/fuzz`); `.ci/fuzz` fuzzes them with libFuzzer.
        .target(
            name: "RingsideFuzzTargets",
            dependencies: [
                "Ringside", "CRingside", "RingsideAggregation", "RingsideCollector", "RingsideExport", "RingsideHTTP",
                "RingsideHTTPClient", "RingsideJSON", "RingsideSystem", "RingsideTools", "RingsideTrace",
                "RingsideTestSupport",  // onConcurrentThreads, for the bot files of the seeds
            ],
            path: "Tests/RingsideFuzzTargets"),
        /// One executable for both: a C `main`, weak, so that a build with `--sanitize=fuzzer` runs
        /// libFuzzer's instead; built as usual it replays inputs through a target (`fuzz_replay`).
        .executableTarget(name: "ringside-fuzz", dependencies: ["RingsideFuzzTargets"], path: "Tests/ringside-fuzz"),
        /// The operator's kit: a real Prometheus scraping real collectors, the rules and dashboard,
        /// and the C, C++ and Python producers read back by the Swift reader.
        .testTarget(
            name: "RingsideKitTests",
            dependencies: [
                "Ringside", "CRingside", "RingsideCollector", "RingsideSnapshot", "RingsideTestSupport",
                "ringside-collector", "ringside-test-producer", "ringside-emit", "ringside-dump", "RingsideSystem",
            ]),
    ]
)
