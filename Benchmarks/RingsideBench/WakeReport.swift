import RingsideCommandLine
import RingsideJSON
import RingsideText

/// What `ringside-bench wake` measured (see `WakeBenchmark`).
package struct WakeReport: Sendable {
    /// One record's way: until the drain had it, until `/latest` showed it.
    package struct Try: Sendable {
        package var drainedNanos: UInt64
        package var latestNanos: UInt64
    }

    package struct WakeRow: Sendable {
        package var name: String
        package var tries: [Try] = []
    }

    /// The collector's CPU with idle bots, by thread.
    package struct IdleRow: Sendable {
        package var name: String
        package var bots: Int
        package var seconds: Double
        /// Each thread name's CPU, in % of one core, the busiest first.
        package var threads: [(name: String, percent: Double)]
        package var percent: Double { threads.reduce(0) { $0 + $1.percent } }
    }

    package struct Start: Sendable {
        package var records: UInt64
        package var dropped: UInt64
    }

    package struct StartRow: Sendable {
        package var name: String
        package var starts: [Start] = []
        package var records: UInt64 { starts.reduce(0) { $0 + $1.records } }
        package var dropped: UInt64 { starts.reduce(0) { $0 + $1.dropped } }
        package var startsDropping: Int { starts.count { $0.dropped > 0 } }
        package var mostDropped: UInt64 { starts.map(\.dropped).max() ?? 0 }
    }

    package var machine: Machine
    package var method: String
    package var wakes: [WakeRow]
    package var idle: [IdleRow]
    package var starts: [StartRow]

    /// What bounds `/latest` after the drain: the snapshots' pace (`SnapshotPublisher`).
    static func latestPace(_ pollNanos: UInt64) -> String {
        "The snapshots' pace: one is begun at the pass that drained something new when the last began "
            + formatDuration(CollectorBenchmark.publishIntervalNanos(poll: pollNanos))
            + " ago or more (min(max(--poll, 10ms), 100ms), and at least ten times the last one's building), else when "
            + "that comes due: /latest shows a record at most that long after its drain, plus the page's rendering. "
    }

    /// p50, p90, p99 and max of the tries' times, in µs.
    static func summary(_ nanos: [UInt64]) -> (p50: Double, p90: Double, p99: Double, max: Double) {
        let sorted = nanos.sorted()
        func micros(_ p: Double) -> Double { Double(Percentiles.value(at: p, sorted: sorted)) / 1e3 }
        return (micros(0.5), micros(0.9), micros(0.99), Double(sorted.last ?? 0) / 1e3)
    }

    /// Each wake row's two measures: (name, times).
    private var wakeMeasures: [(name: String, nanos: [UInt64])] {
        wakes.flatMap { row in
            [(row.name + ".drained", row.tries.map(\.drainedNanos)), (row.name + ".latest", row.tries.map(\.latestNanos))]
        }
    }

    package var json: JSON {
        var results: [JSON] = wakeMeasures.map { name, nanos in
            let figures = Self.summary(nanos)
            return .object([
                ("name", .string(name)), ("p50_us", .figure((figures.p50 * 10).rounded() / 10)),
                ("p90_us", .figure((figures.p90 * 10).rounded() / 10)),
                ("p99_us", .figure((figures.p99 * 10).rounded() / 10)), ("max_us", .figure((figures.max * 10).rounded() / 10)),
                ("tries", .int(Int64(nanos.count))),
            ])
        }
        results += idle.map { row in
            .object([
                ("name", .string(row.name)), ("percent", .figure((row.percent * 1000).rounded() / 1000)),
                ("bots", .int(Int64(row.bots))), ("seconds", .figure((row.seconds * 10).rounded() / 10)),
                (
                    "threads",
                    .object(row.threads.map { ($0.name, .figure(($0.percent * 1000).rounded() / 1000)) })
                ),
            ])
        }
        results += starts.map { row in
            .object([
                ("name", .string(row.name)), ("records", .int(Int64(row.records))), ("dropped", .int(Int64(row.dropped))),
                ("starts", .int(Int64(row.starts.count))), ("starts_dropping", .int(Int64(row.startsDropping))),
                ("most_dropped", .int(Int64(row.mostDropped))),
            ])
        }
        return .object([
            ("benchmark", .string("wake")), ("machine", machine.json), ("method", .string(method)), ("results", .array(results)),
        ])
    }

    package var table: String {
        var table = TextTable(columns: ["row", "result", "detail"])
        for (name, nanos) in wakeMeasures {
            let figures = Self.summary(nanos)
            table.add([
                name, "p50 \(formatMicros(figures.p50)), p99 \(formatMicros(figures.p99))",
                "p90 \(formatMicros(figures.p90)), max \(formatMicros(figures.max)), \(nanos.count) tries",
            ])
        }
        for row in idle {
            let threads = row.threads.filter { $0.percent >= 0.0005 }.map { "\($0.name) \(decimals(atMost: 3, $0.percent))" }
            table.add([
                row.name, decimals(atMost: 3, row.percent) + " % of a core",
                "\(row.bots) bots, \(oneDecimal(row.seconds)) s; by thread (%): " + threads.joined(separator: ", "),
            ])
        }
        for row in starts {
            table.add([
                row.name, "\(row.dropped) of \(row.records) dropped",
                "\(row.startsDropping) of \(row.starts.count) starts dropped, at most \(row.mostDropped) in one",
            ])
        }
        return "ringside-bench wake\nmachine: \(machine.line)\nmethod: \(method)\n\n" + table.text
    }
}
