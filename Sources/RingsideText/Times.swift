#if canImport(Glibc)
import Glibc
#endif
import Ringside

// MARK: - Times for people
// (durations as the command line writes and reads them: `formatDuration`, in RingsideCommandLine)

/// Nanoseconds in the largest unit they reach, to a tenth at most, no space: `17ns`, `123.4us`,
/// `2.1ms`, `1.5s` (the collector's logs and SLO lines, the demo's table).
package func formatNanos(_ nanos: Double) -> String {
    switch nanos {
    case ..<1_000: return oneDecimalAtMost(nanos) + "ns"
    case ..<1_000_000: return oneDecimalAtMost(nanos / 1e3) + "us"
    case ..<1_000_000_000: return oneDecimalAtMost(nanos / 1e6) + "ms"
    default: return oneDecimalAtMost(nanos / 1e9) + "s"
    }
}

/// Seconds to a hundredth: `1.3 s`, `0.25 s`.
package func formatSeconds(_ seconds: Double) -> String {
    "\((seconds * 100).rounded() / 100) s"
}

/// Microseconds to a tenth: `12.5 µs`, and from a thousand (unless `millis` is false) in
/// milliseconds, `1.2 ms` (the benchmark's tables).
package func formatMicros(_ micros: Double, millis: Bool = true) -> String {
    millis && micros >= 1000 ? oneDecimal(micros / 1000) + " ms" : oneDecimal(micros) + " µs"
}

/// A chart axis's nanoseconds, to a thousandth at most: `100 ns`, `1 µs`, `10 ms`.
package func nanosLabel(_ nanos: Double) -> String {
    switch nanos {
    case ..<1000: return decimals(atMost: 3, nanos) + " ns"
    case ..<1_000_000: return decimals(atMost: 3, nanos / 1000) + " µs"
    default: return decimals(atMost: 3, nanos / 1_000_000) + " ms"
    }
}

// MARK: - Wall-clock times, and values in their metric's unit

/// A wall-clock time as ISO 8601 in UTC: `2026-11-21T20:45:00.123Z`, or with `microseconds`
/// `2026-11-21T20:45:00.123456Z`; now when no time is given.
package func utcTimestamp(microseconds: Bool = false, realtimeNanos: UInt64? = nil) -> String {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    let nanos = realtimeNanos ?? UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    var seconds = time_t(nanos / 1_000_000_000)
    var parts = tm()
    guard gmtime_r(&seconds, &parts) != nil else { return "\(nanos)ns" }
    func pad(_ value: some BinaryInteger, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
    let fraction = microseconds ? pad(nanos % 1_000_000_000 / 1_000, 6) : pad(nanos % 1_000_000_000 / 1_000_000, 3)
    return "\(pad(Int(parts.tm_year) + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
        + "T\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(fraction)Z"
}

/// A value in a metric's unit, for people: `123.4us`, `2.1ms`, `512 bytes`, `17`.
package func formatMeasure(_ value: Double, unit: MetricUnit) -> String {
    guard let nanosPerUnit = unit.nanoseconds else {
        return oneDecimalAtMost(value) + (unit == .bytes ? " bytes" : "")
    }
    return formatNanos(value * Double(nanosPerUnit))
}
