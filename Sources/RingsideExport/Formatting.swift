#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideText

// MARK: - How quantiles, times and measures are written, in every export
// (durations: `formatDuration`, beside the duration grammar in RingsideCommandLine; numbers and
// times for people: RingsideText)

/// The JSON key and Prometheus-friendly name of a quantile: 0.5 → `p50`, 0.999 → `p999`.
package func quantileKey(_ quantile: Double) -> String {
    var digits = String(quantile.formatted6.dropFirst(2))  // "0.999" → "999"
    while digits.count < 2 { digits += "0" }
    return "p" + digits
}

extension Double {
    /// Up to six decimals without trailing zeros: `0.5`, `0.999`, `0.9999`.
    package var formatted6: String {
        var text = String(self)
        if text.contains("e") { text = String(format6: self) }
        return text
    }
}

private extension String {
    init(format6 value: Double) {
        let scaled = Int((value * 1_000_000).rounded())
        var fraction = String(scaled % 1_000_000)
        while fraction.count < 6 { fraction = "0" + fraction }
        while fraction.hasSuffix("0") { fraction.removeLast() }
        self = "\(scaled / 1_000_000)." + (fraction.isEmpty ? "0" : fraction)
    }
}

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
