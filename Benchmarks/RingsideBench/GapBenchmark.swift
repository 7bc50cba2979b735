import CRingside
import Foundation
import Ringside
import RingsideAggregation
import RingsideCollector
import RingsideJSON
import RingsideSystem
import RingsideText

/// `ringside-bench gap`: the drain's gaps (how long records of a filling ring wait between two
/// drains, as the collector measures them: `ringside_collector_drain_gap_seconds`) and what a
/// paced producer drops, at lane sizes around the sizing rule of docs/operations.md. Each row is a
/// producer thread paced as `ringside-test-producer blast` is (a millisecond's records at once,
/// then a sleep until the next is due; late, it catches up at once) into one lane of the size,
/// sampling off (a full lane drops), beside a collector started as the daemon starts it; the rows
/// run in turn, round after round, so the machine's load falls on each alike.
package enum GapBenchmark {
    /// The rows: records a second, and the lane's records; each with the drain thread's slice
    /// of 0.1 ms (as the collector asks) and with the kernel's default.
    package static let shapes: [(rate: Int, capacity: Int)] = [
        (2_000_000, 4_096), (2_000_000, 8_192), (2_000_000, 16_384), (2_000_000, 32_768), (500_000, 1_024), (500_000, 4_096),
    ]
    static let slices: [UInt64] = [100_000, 0]

    package static func run(_ settings: BenchSettings, progress: (String) -> Void = { _ in }) throws(BenchError) -> GapReport {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let rounds = max(1, settings.rounds)
        let seconds = max(0.25, settings.seconds / Double(rounds))
        var rows = shapes.flatMap { shape in slices.map { GapReport.Row(rate: shape.rate, capacity: shape.capacity, drainSliceNanos: $0) } }
        let loadBefore = loadAverage()
        for round in 1...rounds {
            for index in rows.indices {
                progress("\(rows[index].name): round \(round) of \(rounds)")
                let directory = try scratch.subdirectory("gap-\(round)-\(index)")
                rows[index].rounds.append(try run(rows[index], seconds: seconds, directory: directory))
            }
        }
        let method =
            "Each row: Collector.start() as the daemon starts it (the default --poll 100ms), and a producer thread of this "
            + "process paced as ringside-test-producer blast is: RATE/1000 records at once, then a sleep until the next "
            + "batch is due (after a late wake-up, the next batch at once), into one lane of CAPACITY records of a bot "
            + "attached with sampling off, so a full lane drops; the drain thread asking for a scheduler slice of 0.1 ms "
            + "(as the collector does) or not (the kernel's default); \(rounds) rounds of \(oneDecimal(seconds)) s, the "
            + "rows in turn each round; threads not pinned. gap = the collector's drain gaps (the time a filling ring's "
            + "records could wait between two drains: since its last drain, or since the last pass that found nothing "
            + "new in it), over every round; dropped = the lane's drops over its records; largest burst = the most "
            + "records the producer wrote between two of its sleeps (batches that came due while it was late). Load average (1 min) "
            + "\(loadBefore) before, \(loadAverage()) after: other processes shared the machine."
        return GapReport(machine: Machine.current(pinned: false), method: method, rows: rows)
    }

    /// One round of one row: the producer for `seconds`, then the collector stopped.
    static func run(_ row: GapReport.Row, seconds: Double, directory: String) throws(BenchError) -> GapReport.Round {
        var options = CollectorOptions()
        options.directory = RingDirectory(directory)
        let collector: Collector
        do { collector = try Collector(options: options, log: CollectorBenchmark.quietLog) } catch { throw BenchError("\(error)") }
        collector.drainSliceNanos = row.drainSliceNanos
        let stop = StopFlag()
        let rate = Double(row.rate)
        let producer = try BackgroundThread(name: "bench-paced", cpu: -1) {
            () throws(BenchError) -> (() -> (attempts: UInt64, dropped: UInt64, burst: UInt64)) in
            let bot: Bot
            let histogram: Bot.Histogram
            do {
                bot = try Bot.attach("paced", directory: directory, options: .init(laneCapacity: row.capacity, sampleAbovePercent: 100))
                histogram = try bot.histogram("paced")
            } catch { throw BenchError("attaching bot paced in \(directory): \(error)") }
            return {
                let lane = bot.currentThreadLane
                let droppedBefore = lane.recordsDropped
                let batch = UInt64(max(1, row.rate / 1_000))
                let start = rs_clock_precise_ns()
                var attempts: UInt64 = 0
                // The largest burst: records written between two sleeps (batches that came due
                // while the thread was late, written back to back).
                var burst: UInt64 = 0, largestBurst: UInt64 = 0
                while !stop.isSet {
                    for _ in 0..<batch { histogram.record(attempts &+ 1) }
                    attempts &+= batch
                    burst &+= batch
                    let due = start &+ UInt64(Double(attempts) / rate * 1e9)
                    let now = rs_clock_precise_ns()
                    if due > now {
                        largestBurst = max(largestBurst, burst)
                        burst = 0
                        usleep(useconds_t(min(due - now, 100_000_000) / 1_000))
                    }
                }
                return (attempts, lane.recordsDropped &- droppedBefore, max(largestBurst, burst))
            }
        }
        collector.start()
        // The collector has found the bot and drained its first records: its rate is known.
        System.nanosleep(200_000_000)
        producer.start()
        System.nanosleep(UInt64(seconds * 1e9))
        stop.set()
        let counts = try producer.join()
        System.nanosleep(50_000_000)
        collector.stop()
        return GapReport.Round(
            attempts: counts.attempts, dropped: counts.dropped, largestBurst: counts.burst, gaps: collector.drainGapsSinceStart)
    }

    /// `/proc/loadavg`'s first figure, as written there.
    static func loadAverage() -> String {
        let text = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? ""
        return text.split(separator: " ").first.map(String.init) ?? "?"
    }
}

/// What `ringside-bench gap` measured.
package struct GapReport: Sendable {
    /// One row: a rate and a lane size, over rounds.
    package struct Row: Sendable {
        package var rate: Int
        package var capacity: Int
        /// The drain thread's scheduler slice (0: the kernel's default).
        package var drainSliceNanos: UInt64
        package var rounds: [Round] = []

        package var name: String {
            let rateText = rate % 1_000_000 == 0 ? "\(rate / 1_000_000)M" : "\(rate / 1_000)k"
            return "\(rateText)/s into \(capacity), " + (drainSliceNanos == 0 ? "default slice" : "slice \(drainSliceNanos / 1_000) µs")
        }
        /// How long the lane holds at the rate.
        package var roomMilliseconds: Double { Double(capacity) / Double(rate) * 1e3 }
        package var attempts: UInt64 { rounds.reduce(0) { $0 + $1.attempts } }
        package var dropped: UInt64 { rounds.reduce(0) { $0 + $1.dropped } }
        package var dropPercents: [Double] { rounds.map { Double($0.dropped) / Double(max(1, $0.attempts)) * 100 } }
        package var largestBurst: UInt64 { rounds.map(\.largestBurst).max() ?? 0 }
        /// Every round's gaps together.
        package var gaps: Histogram {
            var all = Histogram()
            for round in rounds { all.merge(round.gaps) }
            return all
        }
    }

    package struct Round: Sendable {
        package var attempts: UInt64
        package var dropped: UInt64
        /// The most records the producer wrote between two of its sleeps.
        package var largestBurst: UInt64
        package var gaps: Histogram
    }

    package var machine: Machine
    package var method: String
    package var rows: [Row]

    static let quantiles = [0.5, 0.99, 0.999]

    package var json: JSON {
        .object([
            ("benchmark", .string("gap")), ("machine", machine.json), ("method", .string(method)),
            (
                "results",
                .array(
                    rows.map { row in
                        let gaps = row.gaps
                        let values = gaps.values(atQuantiles: Self.quantiles)
                        return .object([
                            ("name", .string(row.name)), ("rate", .int(Int64(row.rate))), ("capacity", .int(Int64(row.capacity))),
                            ("drain_slice_ns", .int(Int64(row.drainSliceNanos))),
                            ("room_ms", .figure(row.roomMilliseconds)), ("records", .int(Int64(row.attempts))),
                            ("dropped", .int(Int64(row.dropped))), ("rounds_dropping", .int(Int64(row.rounds.count { $0.dropped > 0 }))),
                            ("drop_percent_max", .figure(row.dropPercents.max() ?? 0)), ("gaps", .int(Int64(gaps.count))),
                            ("largest_burst", .int(Int64(row.largestBurst))),
                            ("gap_p50_us", .figure(Double(values[0]) / 1e3)), ("gap_p99_us", .figure(Double(values[1]) / 1e3)),
                            ("gap_p999_us", .figure(Double(values[2]) / 1e3)), ("gap_max_us", .figure(Double(gaps.max) / 1e3)),
                        ])
                    })
            ),
        ])
    }

    package var table: String {
        var table = TextTable(
            columns: ["row", "room", "dropped", "rounds dropping", "gap p50", "p99", "p99.9", "max", "gaps", "largest burst"])
        for row in rows {
            let gaps = row.gaps
            let values = gaps.values(atQuantiles: Self.quantiles)
            func micros(_ nanos: UInt64) -> String { formatMicros(Double(nanos) / 1e3, millis: false) }
            table.add([
                row.name, twoDecimals(row.roomMilliseconds) + " ms",
                "\(row.dropped) of \(row.attempts) (\(String(format: "%.3f", Double(row.dropped) / Double(max(1, row.attempts)) * 100)) %)",
                "\(row.rounds.count { $0.dropped > 0 }) of \(row.rounds.count)", micros(values[0]), micros(values[1]),
                micros(values[2]), micros(gaps.max), String(gaps.count), String(row.largestBurst),
            ])
        }
        return "ringside-bench gap\nmachine: \(machine.line)\nmethod: \(method)\n\n" + table.text
    }
}
