import CRingside
import Ringside
import RingsideCommandLine
import RingsideJSON
import RingsideSystem
import RingsideText
#if canImport(Glibc)
import Glibc
#endif

/// `ringside-dump watch [NAME]`: rates, backlog and drops, refreshed like `top`. Every figure is
/// the sum over the bot's lanes, but FILL: the fullest lane's (each lane has its own capacity).
enum WatchCommand {
    /// A ring's figures at one refresh, to compute rates at the next.
    private struct Sample {
        let status: RingStatus
        let nanos: UInt64
    }

    private struct Rates {
        let written: Double
        let consumed: Double
        let dropped: Double
    }

    static func run(_ name: String?, intervalNanos: UInt64, count: Int?, _ context: DumpContext) -> Int32 {
        let console = context.console
        var previous: [String: Sample] = [:]
        var refreshes = 0
        while true {
            let names: [String]
            if let name {
                names = [name]
            } else {
                do throws(RingError) { names = try context.ringNames() } catch { return context.fail(error) }
            }
            let now = Now()
            let clock = rs_clock_precise_ns()
            var rows: [(name: String, status: Result<RingStatus, RingError>, rates: Rates?)] = []
            var current: [String: Sample] = [:]
            for ring in names {
                do throws(RingError) {
                    let status = try context.inspector(ring).settledStatus()
                    let change = previous[ring].flatMap { Self.rates(from: $0, to: status, at: clock) }
                    current[ring] = Sample(status: status, nanos: clock)
                    rows.append((ring, .success(status), change))
                } catch {
                    // One ring asked for and missing from the start is an error; later it is shown as gone.
                    if name != nil && refreshes == 0 { return context.fail(error) }
                    rows.append((ring, .failure(error), nil))
                }
            }
            previous = current
            if context.json {
                console.print(frameJSON(rows, now: now).text)
            } else {
                if console.isTerminal { console.write("\u{1B}[H\u{1B}[2J") } else if refreshes > 0 { console.print() }
                frameText(rows, now: now, intervalNanos: intervalNanos, context).forEach { console.print($0) }
            }
            console.flush()
            refreshes += 1
            if let count, refreshes >= count { return ExitStatus.success }
            System.nanosleep(intervalNanos)
        }
    }

    private static func rates(from before: Sample, to status: RingStatus, at nanos: UInt64) -> Rates? {
        let old = before.status
        // A ring removed and created again starts its counts afresh: no rate this time.
        guard nanos > before.nanos, status.writeCursor >= old.writeCursor, status.readCursor >= old.readCursor,
            status.dropped >= old.dropped, status.createdRealtimeNanos == old.createdRealtimeNanos
        else { return nil }
        let seconds = Double(nanos - before.nanos) / 1e9
        return Rates(
            written: Double(status.writeCursor - old.writeCursor) / seconds,
            consumed: Double(status.readCursor - old.readCursor) / seconds,
            dropped: Double(status.dropped - old.dropped) / seconds)
    }

    private static func frameText(
        _ rows: [(name: String, status: Result<RingStatus, RingError>, rates: Rates?)],
        now: Now, intervalNanos: UInt64, _ context: DumpContext
    ) -> [String] {
        var lines = [
            "ringside-dump watch: \(rows.count) ring\(rows.count == 1 ? "" : "s") in \(context.directory.path) "
                + "at \(utcTimestamp(microseconds: true, realtimeNanos: now.realtime)), every \(formatDuration(intervalNanos))"
        ]
        var table = TextTable(
            [
                "RING", "PRODUCER", "CONSUMER", "LANES", "WRITTEN/S", "CONSUMED/S", "DROPPED/S", "BACKLOG", "FILL",
                "WRITTEN", "DROPPED", "HEARTBEAT",
            ],
            right: [
                "LANES", "WRITTEN/S", "CONSUMED/S", "DROPPED/S", "BACKLOG", "FILL", "WRITTEN", "DROPPED",
                "HEARTBEAT",
            ])
        var notes: [String] = []
        func rate(_ value: Double?) -> String { value.map { String(Int64($0.rounded())) } ?? "-" }
        for row in rows {
            switch row.status {
            case let .success(status):
                table.add([
                    row.name, ProducerLiveness(status: status).word, status.consumerAlive ? "attached" : "none",
                    "\(status.lanes.count)/\(status.maxLanes)", rate(row.rates?.written), rate(row.rates?.consumed),
                    rate(row.rates?.dropped),
                    "\(status.backlog)", oneDecimal(status.fillPercent) + "%", "\(status.writeCursor)", "\(status.dropped)",
                    now.age(ofMonotonic: status.heartbeatMonotonicNanos).map { formatDuration($0, approximate: true) } ?? "-",
                ])
            case let .failure(error):
                table.add([row.name, ListCommand.stateWord(error), "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"])
                notes.append("\(error)")
            }
        }
        if rows.isEmpty { lines.append("no rings") } else { lines += table.lines }
        return lines + notes
    }

    private static func frameJSON(_ rows: [(name: String, status: Result<RingStatus, RingError>, rates: Rates?)], now: Now) -> JSON {
        func rate(_ value: Double?) -> JSON { value.map { .double(($0 * 10).rounded() / 10) } ?? .null }
        let rings: [JSON] = rows.map { row in
            switch row.status {
            case let .success(status):
                return .object([
                    ("name", .string(row.name)), ("producer_alive", .bool(status.producerAlive)),
                    ("producer_pid", .int(Int64(status.producerPID))), ("consumer_alive", .bool(status.consumerAlive)),
                    ("written", .uint(status.writeCursor)), ("consumed", .uint(status.readCursor)), ("dropped", .uint(status.dropped)),
                    ("backlog", .uint(status.backlog)), ("capacity", .uint(status.capacity)),
                    ("fill_percent", .double(roundedPercent(status.fillPercent))),
                    ("lanes_allocated", .uint(UInt64(status.lanes.count))), ("max_lanes", .uint(UInt64(status.maxLanes))),
                    ("written_per_second", rate(row.rates?.written)), ("consumed_per_second", rate(row.rates?.consumed)),
                    ("dropped_per_second", rate(row.rates?.dropped)),
                    ("heartbeat_age_ns", now.age(ofMonotonic: status.heartbeatMonotonicNanos).map(JSON.uint) ?? .null),
                ])
            case let .failure(error):
                return .object([("name", .string(row.name)), ("error", errorJSON(error))])
            }
        }
        return .object([("time", .string(utcTimestamp(microseconds: true, realtimeNanos: now.realtime))), ("rings", .array(rings))])
    }
}

// MARK: - Its command line

extension WatchCommand: DumpCommand {
    static let name = "watch"
    static var options: OptionSpec { OptionSpec(valued: ["--interval", "--count"]) }
    static let usage = """
        usage: ringside-dump watch [NAME] [--interval DUR] [--count N] [--json]

        A refreshing view of every ring (or one): records written, consumed and dropped per
        second over every lane, lanes, backlog and fill (the fullest lane's). Redraws the screen
        on a terminal; otherwise prints one block per refresh (--json: one JSON object per line).
          --interval DUR  time between refreshes: seconds or 250ms, 2s, 1m (default 1s)
          --count N       stop after N refreshes (default: until interrupted)
        """

    static func run(parsing arguments: DumpArguments, _ context: DumpContext) throws(UsageError) -> Int32 {
        let intervalNanos =
            try arguments.value("--interval").map { text throws(UsageError) in
                guard let nanos = durationNanos(text, bareSeconds: true), nanos >= 10_000_000, nanos <= 86_400_000_000_000 else {
                    throw arguments.error("--interval \(text) is not an interval from 10ms to 24h (e.g. 1, 0.5, 250ms, 2s)")
                }
                return nanos
            } ?? UInt64(1_000_000_000)
        let count = try arguments.count("--count", 1...Int(Int32.max))
        return run(try arguments.ringName(), intervalNanos: intervalNanos, count: count, context)
    }
}
