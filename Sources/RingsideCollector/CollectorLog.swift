#if canImport(Glibc)
import Glibc
#endif

/// The collector's log: one line per thing worth knowing, stamped with UTC time.
public struct CollectorLog: Sendable {
    private let sink: @Sendable (String) -> Void

    /// A log that hands each stamped line to `sink`.
    public init(_ sink: @escaping @Sendable (String) -> Void) {
        self.sink = sink
    }

    /// Lines go to standard error, one `write` each so threads never interleave within a line.
    public static let standardError = CollectorLog { line in
        let text = line + "\n"
        _ = text.withCString { write(2, $0, strlen($0)) }
    }

    public func callAsFunction(_ message: String) {
        sink(utcTimestamp() + " " + message)
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
