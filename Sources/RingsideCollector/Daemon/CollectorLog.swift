#if canImport(Glibc)
import Glibc
#endif
import CRingside
import RingsideText
import RingsideJSON
import RingsideSystem
import Synchronization

/// How the log is written (`--log-format`).
package enum LogFormat: String, Sendable, CaseIterable {
    /// `2026-11-21T20:45:00.123Z message`: for people and journald.
    case text
    /// `{"time":"2026-11-21T20:45:00.123Z","level":"info","msg":"message"}`, one object a line:
    /// for log shippers (Loki, Elasticsearch, Vector).
    case json
}

/// How much a log line matters; only the JSON format writes it (the text format is unchanged).
package enum LogLevel: String, Sendable {
    /// Something that happened: a ring attached, a producer back, the collector stopping.
    case info
    /// Something to look at: a ring skipped or quarantined, records dropped, a cap reached, an SLO broken.
    case warn
    /// Something the collector could not do: serve HTTP, write the JSON dump.
    case error
}

/// The collector's log: one line per thing worth knowing, stamped with UTC time.
package struct CollectorLog: Sendable {
    private let format: LogFormat
    private let sink: @Sendable (String) -> Void

    /// A log that hands each stamped line (without its newline) to `sink`.
    package init(format: LogFormat = .text, _ sink: @escaping @Sendable (String) -> Void) {
        self.format = format
        self.sink = sink
    }

    /// Text lines to standard error.
    package static let standardError = CollectorLog.standardError(format: .text)

    /// Lines to standard error, one `write` each (unless the first is cut short) so threads
    /// never interleave within a line.
    package static func standardError(format: LogFormat) -> CollectorLog {
        CollectorLog(format: format) { line in
            try? System.writeAll(STDERR_FILENO, line + "\n")
        }
    }

    package func callAsFunction(_ message: String, level: LogLevel = .info) {
        sink(Self.line(message, level: level, format: format, time: utcTimestamp()))
    }

    /// One line of the log, without its newline.
    static func line(_ message: String, level: LogLevel, format: LogFormat, time: String) -> String {
        switch format {
        case .text:
            return time + " " + message
        case .json:
            let json = JSONWriter()
            json.object {
                json.field("time", time)
                json.field("level", level.rawValue)
                json.field("msg", message)
            }
            return String(decoding: json.bytes, as: UTF8.self)
        }
    }
}

/// A budget for a kind of line that thousands of rings can each cause (attached, detached,
/// dropped, quarantined): `burst` lines at once and `perSecond` after, so hostile or short-lived
/// bots cannot flood the log. Lines past it are counted, not written; a line admitted at least
/// `summaryNanos` after the last summary says how many were left out since.
struct LogBudget {
    /// The budget of lines about rings (`RingLog`).
    static let ringsPerSecond: Double = 20
    let perSecond: Double
    let burst: Double
    static let summaryNanos: UInt64 = 10_000_000_000
    private var tokens: Double
    private var refilledNanos: UInt64 = 0
    private var summaryNanos: UInt64 = 0
    /// Lines left out, ever (exported), and since the last summary.
    private(set) var suppressedTotal: UInt64 = 0
    private var suppressedSinceSummary = 0

    init(perSecond: Double, burst: Double) {
        self.perSecond = perSecond
        self.burst = burst
        tokens = burst
    }

    /// Whether a line may be written now; if so, also how many were left out to say first (0: none now).
    mutating func admit(nowNanos now: UInt64) -> (admitted: Bool, leftOut: Int) {
        if refilledNanos != 0 { tokens = min(burst, tokens + Double(now &- refilledNanos) / 1e9 * perSecond) }
        refilledNanos = now
        guard tokens >= 1 else {
            suppressedTotal += 1
            suppressedSinceSummary += 1
            return (false, 0)
        }
        tokens -= 1
        guard suppressedSinceSummary > 0, now &- summaryNanos >= Self.summaryNanos else { return (true, 0) }
        summaryNanos = now
        defer { suppressedSinceSummary = 0 }
        return (true, suppressedSinceSummary)
    }
}

/// The log's lines about single rings, within a `LogBudget` (by default 20 a second and 200 at
/// once): a line past it is counted, and the next admitted line after a while says how many were
/// left out. Shared by the drain thread and discovery's.
final class RingLog: Sendable {
    private let log: CollectorLog
    private let budget: Locked<LogBudget>
    /// What the summary line calls the lines left out, and their pace (for its words).
    private let kind: String
    private let perSecond: Double

    init(_ log: CollectorLog, kind: String = "lines about rings", perSecond: Double = LogBudget.ringsPerSecond, burst: Double = 200) {
        self.log = log
        self.kind = kind
        self.perSecond = perSecond
        budget = Locked(LogBudget(perSecond: perSecond, burst: burst))
    }

    /// Lines left out, ever (exported as ringside_collector_log_lines_suppressed_total).
    var suppressedTotal: UInt64 { budget.withLock { $0.suppressedTotal } }

    /// Writes `message` if the budget admits it (it is made only then: thousands of rings may
    /// each have a line at once).
    func callAsFunction(_ message: @autoclosure () -> String, level: LogLevel = .info) {
        let (admitted, leftOut) = budget.withLock { $0.admit(nowNanos: rs_clock_precise_ns()) }
        if leftOut > 0 {
            let pace = perSecond >= 1 ? "\(Int(perSecond)) a second" : "one every \(Int((1 / perSecond).rounded())) s"
            log(
                "\(leftOut) \(kind) were left out of this log lately (more than \(pace)); "
                    + "/health and /latest show every ring's state, ringside_collector_log_lines_suppressed_total counts them",
                level: .warn)
        }
        if admitted { log(message(), level: level) }
    }
}
