import RingsideJSON
import RingsideText

/// One sample of the soak, taken every `--interval`: the collector's process, its drain, and the
/// OTLP receiver's count of pushes so far.
package struct SoakSample: Sendable {
    /// Seconds since the producers started.
    package var elapsed: Double
    package var rssKiB: Int
    package var anonKiB: Int
    package var shmemKiB: Int
    package var descriptors: Int
    package var mappings: Int
    /// The collector's CPU time over the interval before, as a share of one core.
    package var cpuPercent: Double
    /// Records drained a second over the interval before (`ringside_collector_records_drained_total`).
    package var drainedPerSecond: Double
    /// Records written and not yet drained, over every file (`ringside_ring_backlog_records`).
    package var backlog: Double
    /// Ring files the collector holds (`ringside_collector_rings`): the bots' and the live workers'.
    package var files: Double
    /// The receiver's pushes so far: taken, and refused (503) or cut (closed unanswered).
    package var otlpTaken: Int
    package var otlpRefused: Int
    package var receiverFailing: Bool
}

/// One line of the verdict.
package struct SoakCheck: Sendable {
    package var name: String
    package var passed: Bool
    package var detail: String
}

extension SoakCheck {
    /// Passes when `problems` is empty (and `counted`: there was something to check), saying
    /// `passing` then, and otherwise its first four problems.
    init(name: String, problems: [String], counted: Bool, passing: @autoclosure () -> String) {
        self.init(
            name: name, passed: problems.isEmpty && counted,
            detail: problems.isEmpty ? passing() : problems.prefix(4).joined(separator: "; "))
    }
}

/// What one producer did, as it said at the end.
package struct SoakProducerResult: Sendable {
    package var bot: String
    /// Calls, records written and dropped (its lanes' counters), counter increments; workers it
    /// recycled (0 for a blast).
    package var attempts: UInt64
    package var written: UInt64
    package var dropped: UInt64
    package var increments: UInt64
    package var workers: UInt64
}

/// What `ringside-bench soak` measured, and its verdict.
package struct SoakReport: Sendable {
    package var machine: Machine
    package var method: String
    package var settings: SoakSettings
    package var samples: [SoakSample]
    package var producers: [SoakProducerResult]
    package var checks: [SoakCheck]

    package var passed: Bool { !checks.isEmpty && checks.allSatisfy(\.passed) }

    /// The samples the table shows: every one for a run of at most 60, else one a minute (the
    /// first of each: 1:00, 2:00, ...), and the last.
    var shownSamples: [SoakSample] {
        guard samples.count > 60 else { return samples }
        var shown: [SoakSample] = []
        for (index, sample) in samples.enumerated() {
            let minute = Int(sample.elapsed / 60)
            if index == 0 || index == samples.count - 1 || Int(samples[index - 1].elapsed / 60) != minute { shown.append(sample) }
        }
        return shown
    }

    package var table: String {
        var table = TextTable(columns: [
            "elapsed", "RSS MiB", "anon MiB", "shmem MiB", "fds", "maps", "CPU %", "drained/s", "backlog", "files", "OTLP taken",
            "refused", "receiver",
        ])
        for sample in shownSamples { table.add(Self.row(sample)) }
        var verdict = TextTable(["check", "verdict", "detail"])
        for check in checks { verdict.add([check.name, check.passed ? "pass" : "FAIL", check.detail]) }
        var producerTable = TextTable(columns: ["bot", "attempts", "written", "dropped", "increments", "workers"])
        for producer in producers {
            producerTable.add([
                producer.bot, String(producer.attempts), String(producer.written), String(producer.dropped), String(producer.increments),
                String(producer.workers),
            ])
        }
        let every = samples.count > 60 ? " (one a minute; --json has every one)" : ""
        return "ringside-bench soak\nmachine: \(machine.line)\nmethod: \(method)\n\nsamples\(every):\n" + table.text
            + "\nproducers:\n" + producerTable.text + "\nverdict: " + (passed ? "PASS" : "FAIL") + "\n" + verdict.text
    }

    static func row(_ sample: SoakSample) -> [String] {
        func mebibytes(_ kib: Int) -> String { oneDecimal(Double(kib) / 1024) }
        return [
            formatElapsed(sample.elapsed), mebibytes(sample.rssKiB), mebibytes(sample.anonKiB), mebibytes(sample.shmemKiB),
            String(sample.descriptors), String(sample.mappings), oneDecimal(sample.cpuPercent), EmitReport.rate(sample.drainedPerSecond),
            String(Int64(sample.backlog)), String(Int64(sample.files)), String(sample.otlpTaken), String(sample.otlpRefused),
            sample.receiverFailing ? "failing" : "up",
        ]
    }

    /// `1:05:10`, `5:10`.
    static func formatElapsed(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded())
        let (hours, minutes, rest) = (whole / 3600, whole / 60 % 60, whole % 60)
        let tail = String(format: "%02d", rest)
        return hours > 0 ? "\(hours):" + String(format: "%02d", minutes) + ":" + tail : "\(minutes):" + tail
    }

    package var json: JSON {
        .object([
            ("benchmark", .string("soak")), ("machine", machine.json), ("method", .string(method)),
            (
                "settings",
                .object([
                    ("duration_s", .figure(settings.seconds)), ("interval_s", .figure(settings.intervalSeconds)),
                    ("producers", .int(Int64(settings.producers))), ("workers", .int(Int64(settings.workers))),
                    ("warmup_s", .figure(settings.warmupSeconds)), ("window_s", .figure(SoakSettings.windowSeconds)),
                ])
            ),
            ("passed", .bool(passed)),
            (
                "checks",
                .array(checks.map { .object([("name", .string($0.name)), ("passed", .bool($0.passed)), ("detail", .string($0.detail))]) })
            ),
            (
                "producers",
                .array(
                    producers.map {
                        .object([
                            ("bot", .string($0.bot)), ("attempts", .uint($0.attempts)), ("written", .uint($0.written)),
                            ("dropped", .uint($0.dropped)), ("increments", .uint($0.increments)), ("workers", .uint($0.workers)),
                        ])
                    })
            ),
            (
                "samples",
                .array(
                    samples.map {
                        .object([
                            ("elapsed_s", .figure($0.elapsed)), ("rss_kib", .int(Int64($0.rssKiB))), ("anon_kib", .int(Int64($0.anonKiB))),
                            ("shmem_kib", .int(Int64($0.shmemKiB))), ("fds", .int(Int64($0.descriptors))),
                            ("maps", .int(Int64($0.mappings))), ("cpu_percent", .figure($0.cpuPercent)),
                            ("drained_per_s", .figure($0.drainedPerSecond.rounded())), ("backlog", .figure($0.backlog)),
                            ("files", .figure($0.files)), ("otlp_taken", .int(Int64($0.otlpTaken))),
                            ("otlp_refused", .int(Int64($0.otlpRefused))), ("receiver_failing", .bool($0.receiverFailing)),
                        ])
                    })
            ),
        ])
    }
}

// MARK: - The flatness checks

/// Whether memory and descriptors stayed flat: the samples of the minute after the warm-up (the
/// baseline) against those of the last minute.
enum SoakFlatness {
    /// The samples of each window: (warm-up, warm-up + window] and (end - window, end].
    static func windows(_ samples: [SoakSample], settings: SoakSettings) -> (baseline: [SoakSample], last: [SoakSample]) {
        let start = settings.warmupSeconds, end = settings.seconds, window = SoakSettings.windowSeconds
        return (
            samples.filter { $0.elapsed > start && $0.elapsed <= start + window },
            samples.filter { $0.elapsed > end - window && $0.elapsed <= end + settings.intervalSeconds }
        )
    }

    /// The median of `values` (the mean of the middle two for an even count).
    static func median(_ values: [Int]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? Double(sorted[middle]) : Double(sorted[middle - 1] + sorted[middle]) / 2
    }

    /// RSS: the last minute's median over the baseline minute's, less 1, under `limit` (1 %).
    static func memory(_ samples: [SoakSample], settings: SoakSettings, limit: Double = 0.01) -> SoakCheck {
        let (baseline, last) = windows(samples, settings: settings)
        guard !baseline.isEmpty, !last.isEmpty else {
            return SoakCheck(name: "RSS flat", passed: false, detail: "too few samples after the warm-up")
        }
        let before = median(baseline.map(\.rssKiB)), after = median(last.map(\.rssKiB))
        let growth = after / before - 1
        let anonGrowth = median(last.map(\.anonKiB)) / max(1, median(baseline.map(\.anonKiB))) - 1
        let highest = Double(last.map(\.rssKiB).max() ?? 0) / before - 1
        return SoakCheck(
            name: "RSS flat", passed: growth < limit,
            detail: "median RSS \(oneDecimal(before / 1024)) MiB in the minute after the warm-up, \(oneDecimal(after / 1024)) MiB "
                + "in the last: \(percent(growth)) (under \(percent(limit)) passes); RssAnon \(percent(anonGrowth)); "
                + "the last minute's highest \(percent(highest))")
    }

    /// Descriptors and mappings: the last minute's fewest no more than the baseline minute's most.
    static func descriptors(_ samples: [SoakSample], settings: SoakSettings) -> SoakCheck {
        let (baseline, last) = windows(samples, settings: settings)
        guard !baseline.isEmpty, !last.isEmpty else {
            return SoakCheck(name: "fds flat", passed: false, detail: "too few samples after the warm-up")
        }
        func range(_ values: [Int]) -> String { "\(values.min() ?? 0)-\(values.max() ?? 0)" }
        let fds = (baseline.map(\.descriptors), last.map(\.descriptors))
        let maps = (baseline.map(\.mappings), last.map(\.mappings))
        let passed = (fds.1.min() ?? 0) <= (fds.0.max() ?? 0) && (maps.1.min() ?? 0) <= (maps.0.max() ?? 0)
        return SoakCheck(
            name: "fds flat", passed: passed,
            detail: "descriptors \(range(fds.0)) in the minute after the warm-up, \(range(fds.1)) in the last; mappings "
                + "\(range(maps.0)), \(range(maps.1)) (passes when the last minute's fewest is no more than the first's most)")
    }

    static func percent(_ ratio: Double) -> String {
        (ratio < 0 ? "-" : "+") + twoDecimals(abs(ratio) * 100) + " %"
    }
}
