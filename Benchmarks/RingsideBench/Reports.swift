import RingsideJSON
import RingsideText
#if canImport(Glibc)
import Glibc
#endif

// The reports are package for `ringside-bench` to print; only this module (and its tests, through
// @testable) makes them, so the memberwise initializers Swift writes, internal, serve.

/// The result of `ringside-bench emit`.
package struct EmitReport: Sendable {
    package var machine: Machine
    /// How the per-call times were taken, in one paragraph.
    package var method: String
    package var rows: [LatencySummary]

    /// The one JSON object `--json` prints.
    package var json: JSON {
        .object([
            ("benchmark", .string("emit")),
            ("machine", machine.json),
            ("method", .string(method)),
            (
                "results",
                .array(
                    rows.map { row in
                        .object([
                            ("name", .string(row.name)), ("p50_ns", .figure(row.p50)),
                            ("floor_ratio", row.floorRatio.map { .figure(($0 * 100).rounded() / 100) } ?? .null),
                            ("round_p50_ns", .array(row.roundP50s.map { .figure(($0 * 100).rounded() / 100) })),
                            ("p90_ns", .figure(row.p90)),
                            ("p99_ns", .figure(row.p99)), ("p999_ns", .figure(row.p999)), ("max_ns", .figure(row.max)),
                            ("mean_ns", .figure(row.mean)), ("calls_per_s", .figure(row.callsPerSecond.rounded())),
                            ("dropped", .int(Int64(clamping: row.dropped))),
                        ])
                    })
            ),
        ])
    }

    /// The table for people.
    package var table: String {
        var table = TextTable(columns: [
            "row", "p50 ns", "×c.floor", "rounds' p50", "p90 ns", "p99 ns", "p99.9 ns",
            "max ns", "mean ns", "calls/s", "dropped",
        ])
        for row in rows {
            table.add([
                row.name, Self.ns(row.p50), row.floorRatio.map { twoDecimals($0) } ?? "-", Self.range(row.roundP50s),
                Self.ns(row.p90), Self.ns(row.p99), Self.ns(row.p999),
                Self.ns(row.max), Self.ns(row.mean), Self.rate(row.callsPerSecond), String(row.dropped),
            ])
        }
        return "ringside-bench emit\nmachine: \(machine.line)\nspan clock: \(machine.spanClock)\nmethod: \(method)\n\n"
            + table.text
    }

    static func ns(_ value: Double) -> String {
        value < 100 ? oneDecimal(value) : String(Int64(value.rounded()))
    }

    /// The lowest and highest of the rounds' p50s, `7.1-9.8`; `-` for one round or none.
    static func range(_ values: [Double]) -> String {
        guard values.count > 1, let low = values.min(), let high = values.max() else { return "-" }
        return ns(low) + "-" + ns(high)
    }

    static func rate(_ value: Double) -> String {
        switch value {
        case 1e9...: return oneDecimal(value / 1e9) + " G"
        case 1e6...: return oneDecimal(value / 1e6) + " M"
        case 1e3...: return oneDecimal(value / 1e3) + " k"
        default: return String(Int64(value.rounded()))
        }
    }
}

/// The result of `ringside-bench collector`.
package struct CollectorReport: Sendable {
    /// A drain row (see `DrainBenchmark`): its nanoseconds per record in each round (of the drain
    /// thread's CPU time), and its ratios to the 1-ring row and the baseline in the same rounds.
    package struct Drain: Sendable, Equatable {
        package var name: String
        /// Rings drained; 0 for the baseline.
        package var rings: Int
        package var roundNanosPerRecord: [Double]
        /// The median over the rounds.
        package var nanosPerRecord: Double
        /// The same of the wall time (which counts the time the thread waited for its CPU).
        package var roundWallNanosPerRecord: [Double]
        package var wallNanosPerRecord: Double
        /// Medians over the rounds of this row's figure over the 1-ring row's and the baseline's.
        package var overOneRing: Double?
        package var overBaseline: Double?
        /// A `.recorder` row's: the median over the rounds of its figure over the same rings'
        /// drained without the flight recorder.
        package var overWithoutRecorder: Double?
        /// A `.recorder` row's: the most bytes its recorder held after a pass (checked within its budget after each).
        package var recorderPeakBytes: Int?
        /// Records drained in the timed passes, and how many passes.
        package var records: UInt64
        package var passes: Int
        package var recordsPerSecond: Double { nanosPerRecord > 0 ? 1e9 / nanosPerRecord : 0 }

        package init(
            name: String, rings: Int, roundNanosPerRecord: [Double], oneRingRoundNanos: [Double], baselineRoundNanos: [Double],
            roundWallNanosPerRecord: [Double], records: UInt64, passes: Int, withoutRecorderRoundNanos: [Double]? = nil,
            recorderPeakBytes: Int? = nil
        ) {
            self.recorderPeakBytes = recorderPeakBytes
            self.name = name
            self.rings = rings
            self.roundNanosPerRecord = roundNanosPerRecord
            nanosPerRecord = Percentiles.value(at: 0.5, sorted: roundNanosPerRecord.sorted())
            self.roundWallNanosPerRecord = roundWallNanosPerRecord
            wallNanosPerRecord = Percentiles.value(at: 0.5, sorted: roundWallNanosPerRecord.sorted())
            overOneRing = Self.medianRatio(roundNanosPerRecord, oneRingRoundNanos)
            overBaseline = Self.medianRatio(roundNanosPerRecord, baselineRoundNanos)
            overWithoutRecorder = withoutRecorderRoundNanos.flatMap { Self.medianRatio(roundNanosPerRecord, $0) }
            self.records = records
            self.passes = passes
        }

        /// The median over the rounds of `rows[i] / references[i]`; nil without rounds to pair.
        static func medianRatio(_ rows: [Double], _ references: [Double]) -> Double? {
            guard rows.count == references.count else { return nil }
            let ratios = zip(rows, references).compactMap { row, reference in reference > 0 ? row / reference : nil }
            return ratios.isEmpty ? nil : Percentiles.value(at: 0.5, sorted: ratios.sorted())
        }
    }

    package var machine: Machine
    package var method: String
    package var drains: [Drain]
    /// Emit-to-visible latency of each kind: a histogram's record, a counter's increment, a gauge's set.
    package var endToEnd: [EndToEnd]
    /// The drain thread's CPU, in % of one core, while producers write `loadRecordsPerSecond`.
    package var cpuPercent: Double
    package var loadRecordsPerSecond: Double
    /// Records the paced producer's ring dropped (the collector fell behind).
    package var loadDropped: UInt64 = 0
    /// VmRSS of the process during that run, and its anonymous part (the collector's heap).
    package var rssMegabytes: Double
    package var rssAnonMegabytes: Double
    /// The thread sampler's rows (see `ThreadSamplerBenchmark`).
    package var threadSampling: [ThreadSampling] = []
    /// Whether the live run ran (e2e, cpu and rss are its rows).
    package var liveRun = true
    /// The per-second history's rows (see `HistoryBenchmark`).
    package var history: [History] = []

    /// From just before a call to the first snapshot that shows it, for one kind of metric.
    package struct EndToEnd: Sendable, Equatable {
        /// "histogram", "counter" or "gauge".
        package var kind: String
        /// Microseconds.
        package var p50Micros: Double
        package var p99Micros: Double
        package var samples: Int
        package var name: String { "e2e.\(kind)" }
    }

    /// What the collector's thread sampler cost at `lanes` lanes held by live threads.
    package struct ThreadSampling: Sendable, Equatable {
        package var name: String
        package var lanes: Int
        package var processes: Int
        /// The sampler thread's CPU, in % of one core.
        package var cpuPercent: Double
        /// Rounds in the measured time; the most threads a round left for later (its budget spent).
        package var rounds: Int
        package var deferredMost: Int
        /// `/proc` files it kept open, and how many it might.
        package var keptDescriptors: Int
        package var keptDescriptorLimit: Int
    }

    /// What the per-second history costs: a row of `record` times, or of memory per series.
    package struct History: Sendable, Equatable {
        package var name: String
        /// Each round's `record`, in milliseconds (none for a memory row).
        package var millis: [Double]
        package var detail: String
        /// A memory row's bytes a series: by the store's count, and by the allocator's.
        package var storeBytesPerSeries: Double?
        package var allocatedBytesPerSeries: Double?

        package init(
            name: String, millis: [Double], detail: String, storeBytesPerSeries: Double? = nil, allocatedBytesPerSeries: Double? = nil
        ) {
            self.name = name
            self.millis = millis
            self.detail = detail
            self.storeBytesPerSeries = storeBytesPerSeries
            self.allocatedBytesPerSeries = allocatedBytesPerSeries
        }

        package var medianMillis: Double { Percentiles.value(at: 0.5, sorted: millis.sorted()) }
        package var maxMillis: Double { millis.max() ?? 0 }

        var json: JSON {
            func figure(_ value: Double?, _ scale: Double) -> JSON { value.map { .figure(($0 * scale).rounded() / scale) } ?? .null }
            return .object([
                ("name", .string(name)), ("median_ms", figure(millis.isEmpty ? nil : medianMillis, 1000)),
                ("max_ms", figure(millis.isEmpty ? nil : maxMillis, 1000)), ("rounds", .int(Int64(millis.count))),
                ("store_bytes_per_series", figure(storeBytesPerSeries, 1)),
                ("allocated_bytes_per_series", figure(allocatedBytesPerSeries, 1)),
            ])
        }

        var cells: [String] {
            if millis.isEmpty {
                let figures = [("store", storeBytesPerSeries), ("allocator", allocatedBytesPerSeries)].compactMap { name, value in
                    value.map { "\(name) \(Int($0.rounded())) B" }
                }
                return [name, figures.joined(separator: ", ") + " a series", detail]
            }
            return [
                name, "\(decimals(atMost: 3, medianMillis)) ms a record",
                "max \(decimals(atMost: 3, maxMillis)) ms, \(millis.count) rounds; \(detail)",
            ]
        }
    }

    package var json: JSON {
        var results: [JSON] = drains.map { drain in
            .object([
                ("name", .string(drain.name)), ("ns_per_record", .figure((drain.nanosPerRecord * 100).rounded() / 100)),
                ("records_per_s", .figure(drain.recordsPerSecond.rounded())),
                ("x_1ring", drain.overOneRing.map { .figure(($0 * 1000).rounded() / 1000) } ?? .null),
                ("x_baseline", drain.overBaseline.map { .figure(($0 * 1000).rounded() / 1000) } ?? .null),
                ("x_without_recorder", drain.overWithoutRecorder.map { .figure(($0 * 1000).rounded() / 1000) } ?? .null),
                ("recorder_peak_bytes", drain.recorderPeakBytes.map { .int(Int64($0)) } ?? .null),
                ("round_ns_per_record", .array(drain.roundNanosPerRecord.map { .figure(($0 * 100).rounded() / 100) })),
                ("wall_ns_per_record", .figure((drain.wallNanosPerRecord * 100).rounded() / 100)),
                ("round_wall_ns_per_record", .array(drain.roundWallNanosPerRecord.map { .figure(($0 * 100).rounded() / 100) })),
                ("records", .int(Int64(clamping: drain.records))), ("passes", .int(Int64(drain.passes))),
            ])
        }
        if liveRun {
            results += liveJSON
        }
        for row in threadSampling {
            results.append(
                .object([
                    ("name", .string(row.name)), ("percent", .figure((row.cpuPercent * 100).rounded() / 100)),
                    ("lanes", .int(Int64(row.lanes))), ("processes", .int(Int64(row.processes))), ("rounds", .int(Int64(row.rounds))),
                    ("deferred_most", .int(Int64(row.deferredMost))), ("kept_fds", .int(Int64(row.keptDescriptors))),
                    ("kept_fds_limit", .int(Int64(row.keptDescriptorLimit))),
                ]))
        }
        results += history.map(\.json)
        return .object([
            ("benchmark", .string("collector")), ("machine", machine.json), ("method", .string(method)),
            ("results", .array(results)),
        ])
    }

    private var liveJSON: [JSON] {
        endToEnd.map { row in
            .object([
                ("name", .string(row.name)), ("p50_us", .figure(row.p50Micros)),
                ("p99_us", .figure(row.p99Micros)), ("samples", .int(Int64(row.samples))),
            ])
        } + [
            .object([
                ("name", .string("cpu_at_1m_per_s")), ("percent", .figure((cpuPercent * 10).rounded() / 10)),
                ("records_per_s", .figure(loadRecordsPerSecond.rounded())),
                ("dropped", .int(Int64(clamping: loadDropped))),
            ]),
            .object([
                ("name", .string("rss")), ("mb", .figure((rssMegabytes * 10).rounded() / 10)),
                ("anon_mb", .figure((rssAnonMegabytes * 10).rounded() / 10)),
            ]),
        ]
    }

    package var table: String {
        var table = TextTable(columns: ["row", "result", "detail"])
        for drain in drains {
            let ratios = [("x1ring", drain.overOneRing), ("xbaseline", drain.overBaseline), ("xnorec", drain.overWithoutRecorder)]
                .compactMap { name, ratio in
                    ratio.map { "\(name) \(twoDecimals($0))" }
                }
            table.add([
                drain.name, twoDecimals(drain.nanosPerRecord) + " ns/record (" + EmitReport.rate(drain.recordsPerSecond) + "/s)",
                (ratios + [
                    "rounds " + EmitReport.range(drain.roundNanosPerRecord) + " ns",
                    "wall " + twoDecimals(drain.wallNanosPerRecord) + " ns",
                    "\(drain.records) records",
                ] + (drain.recorderPeakBytes.map { ["recorder at most \($0 >> 20) MiB"] } ?? [])
                    + (drain.rings > 0 ? ["\(drain.passes) passes"] : [])).joined(separator: ", "),
            ])
        }
        if liveRun {
            for row in endToEnd {
                table.add([row.name, "p50 \(formatMicros(row.p50Micros)), p99 \(formatMicros(row.p99Micros))", "\(row.samples) samples"])
            }
            table.add([
                "cpu_at_1m_per_s", oneDecimal(cpuPercent) + " % of a core",
                "at " + EmitReport.rate(loadRecordsPerSecond) + " records/s, \(loadDropped) dropped",
            ])
            table.add(["rss", oneDecimal(rssMegabytes) + " MB", "anonymous \(oneDecimal(rssAnonMegabytes)) MB"])
        }
        for row in threadSampling {
            table.add([
                row.name, twoDecimals(row.cpuPercent) + " % of a core",
                "\(row.lanes) lane threads of \(row.processes) process(es), \(row.rounds) rounds, at most \(row.deferredMost) deferred, "
                    + "\(row.keptDescriptors) of \(row.keptDescriptorLimit) files kept open",
            ])
        }
        for row in history { table.add(row.cells) }
        return "ringside-bench collector\nmachine: \(machine.line)\nmethod: \(method)\n\n" + table.text
    }
}

/// The result of `ringside-bench scrape`.
package struct ScrapeReport: Sendable {
    package struct Row: Sendable {
        package var name: String
        /// One time per scrape, milliseconds.
        package var millis: [Double]
        package var detail: String

        package var p50: Double { percentile(0.5) }
        package var p90: Double { percentile(0.9) }
        package var p99: Double { percentile(0.99) }
        package var max: Double { millis.max() ?? .nan }

        /// Nearest rank.
        func percentile(_ p: Double) -> Double {
            let sorted = millis.sorted()
            guard !sorted.isEmpty else { return .nan }
            return sorted[Swift.max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1)]
        }
    }

    package var machine: Machine
    package var method: String
    package var series: Int
    package var pageBytes: Int
    package var rows: [Row]

    package var json: JSON {
        .object([
            ("benchmark", .string("scrape")), ("machine", machine.json), ("method", .string(method)),
            ("series", .int(Int64(series))), ("page_bytes", .int(Int64(pageBytes))),
            (
                "results",
                .array(
                    rows.map { row in
                        .object([
                            ("name", .string(row.name)), ("p50_ms", .figure(Self.rounded(row.p50))),
                            ("p90_ms", .figure(Self.rounded(row.p90))), ("p99_ms", .figure(Self.rounded(row.p99))),
                            ("max_ms", .figure(Self.rounded(row.max))),
                            ("scrapes", .int(Int64(row.millis.count))),
                        ])
                    })
            ),
        ])
    }

    static func rounded(_ millis: Double) -> Double { (millis * 10).rounded() / 10 }

    package var table: String {
        var table = TextTable(columns: ["row", "p50 ms", "p90 ms", "p99 ms", "max ms", "scrapes", "what"])
        for row in rows {
            table.add([
                row.name, oneDecimal(row.p50), oneDecimal(row.p90), oneDecimal(row.p99), oneDecimal(row.max),
                String(row.millis.count), row.detail,
            ])
        }
        return "ringside-bench scrape\nmachine: \(machine.line)\nmethod: \(method)\n"
            + "page: \(series) series, \(oneDecimal(Double(pageBytes) / 1e6)) MB\n\n" + table.text
    }
}

/// The result of `ringside-bench burst`.
package struct BurstReport: Sendable {
    /// One burst: the calls, what the lane's records counted, and the quantiles.
    package struct Seed: Sendable {
        package var calls: UInt64
        /// The calls the drained records stand for (their weights).
        package var count: UInt64
        package var records: Int
        package var quantiles: [UInt64]
        package var trueQuantiles: [UInt64]
        /// measured / true - 1, for each of `BurstBenchmark.quantiles`.
        package var errors: [Double] { zip(quantiles, trueQuantiles).map { Double($0) / Double($1) - 1 } }
    }

    /// One way of filling the lane, over the seeds.
    package struct Row: Sendable {
        package var name: String
        package var sampleAbovePercent: Int
        package var seeds: [Seed] = []

        package var exactCounts: Int { seeds.filter { $0.count == $0.calls }.count }
        /// The calls counted, in all, over the calls made.
        package var countShare: Double {
            Double(seeds.reduce(0) { $0 + $1.count }) / Double(max(1, seeds.reduce(0) { $0 + $1.calls }))
        }
        /// Over the seeds: the mean of |error| and its largest, for the quantile at `index`.
        package func meanError(_ index: Int) -> Double {
            seeds.isEmpty ? .nan : seeds.reduce(0) { $0 + abs($1.errors[index]) } / Double(seeds.count)
        }
        package func worstError(_ index: Int) -> Double { seeds.map { abs($0.errors[index]) }.max() ?? .nan }
    }

    package var machine: Machine
    package var method: String
    package var rows: [Row]

    static func percent(_ value: Double) -> Double { (value * 10_000).rounded() / 100 }

    package var json: JSON {
        .object([
            ("benchmark", .string("burst")), ("machine", machine.json), ("method", .string(method)),
            (
                "results",
                .array(
                    rows.map { row in
                        .object([
                            ("name", .string(row.name)), ("sample_above_percent", .int(Int64(row.sampleAbovePercent))),
                            ("seeds", .int(Int64(row.seeds.count))), ("exact_counts", .int(Int64(row.exactCounts))),
                            ("count_percent", .figure(Self.percent(row.countShare))),
                            ("p50_error_mean_percent", .figure(Self.percent(row.meanError(0)))),
                            ("p50_error_max_percent", .figure(Self.percent(row.worstError(0)))),
                            ("p99_error_mean_percent", .figure(Self.percent(row.meanError(1)))),
                            ("p99_error_max_percent", .figure(Self.percent(row.worstError(1)))),
                        ])
                    })
            ),
        ])
    }

    package var table: String {
        var table = TextTable(columns: ["row", "counted", "exact", "p50 error", "p99 error", "records"])
        for row in rows {
            table.add([
                row.name, twoDecimals(Self.percent(row.countShare)) + " %", "\(row.exactCounts) of \(row.seeds.count)",
                "mean \(twoDecimals(Self.percent(row.meanError(0)))) %, max \(twoDecimals(Self.percent(row.worstError(0)))) %",
                "mean \(twoDecimals(Self.percent(row.meanError(1)))) %, max \(twoDecimals(Self.percent(row.worstError(1)))) %",
                String(row.seeds.reduce(0) { $0 + $1.records } / max(1, row.seeds.count)) + " a burst",
            ])
        }
        return "ringside-bench burst\nmachine: \(machine.line)\nmethod: \(method)\n\n" + table.text
    }
}
