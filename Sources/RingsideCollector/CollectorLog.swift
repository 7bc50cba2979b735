#if canImport(Glibc)
import Glibc
#endif

/// How the log is written (`--log-format`).
public enum LogFormat: String, Sendable, CaseIterable {
    /// `2026-11-21T20:45:00.123Z message`: for people and journald.
    case text
    /// `{"time":"2026-11-21T20:45:00.123Z","level":"info","msg":"message"}`, one object a line:
    /// for log shippers (Loki, Elasticsearch, Vector).
    case json
}

/// How much a log line matters; only the JSON format writes it (the text format is unchanged).
public enum LogLevel: String, Sendable {
    /// Something that happened: a ring attached, a producer back, the collector stopping.
    case info
    /// Something to look at: a ring skipped or quarantined, records dropped, a cap reached, an SLO broken.
    case warn
    /// Something the collector could not do: serve HTTP, write the JSON dump.
    case error
}

/// The collector's log: one line per thing worth knowing, stamped with UTC time.
public struct CollectorLog: Sendable {
    private let format: LogFormat
    private let sink: @Sendable (String) -> Void

    /// A log that hands each stamped line (without its newline) to `sink`.
    public init(format: LogFormat = .text, _ sink: @escaping @Sendable (String) -> Void) {
        self.format = format
        self.sink = sink
    }

    /// Text lines to standard error.
    public static let standardError = CollectorLog.standardError(format: .text)

    /// Lines to standard error, one `write` each so threads never interleave within a line.
    public static func standardError(format: LogFormat) -> CollectorLog {
        CollectorLog(format: format) { line in
            let text = line + "\n"
            _ = text.withCString { write(2, $0, strlen($0)) }
        }
    }

    public func callAsFunction(_ message: String, level: LogLevel = .info) {
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

/// `2026-11-21T20:45:00.123Z`.
func utcTimestamp(realtimeNanos: UInt64? = nil) -> String {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    let nanos = realtimeNanos ?? UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    var seconds = time_t(nanos / 1_000_000_000)
    var parts = tm()
    gmtime_r(&seconds, &parts)
    func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
    let millis = Int(nanos / 1_000_000 % 1000)
    let millisText = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
    return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
        + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(millisText)Z"
}
