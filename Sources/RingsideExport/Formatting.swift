#if canImport(Glibc)
import Glibc
#endif

// MARK: - How durations, quantiles and times are written, in every export

/// The shortest form of a duration: `1s`, `5s`, `1m`, `250ms`.
public func formatDuration(_ nanos: UInt64) -> String {
    let units: [(String, UInt64)] = [("h", 3_600_000_000_000), ("m", 60_000_000_000), ("s", 1_000_000_000),
                                     ("ms", 1_000_000), ("us", 1_000), ("ns", 1)]
    for (suffix, scale) in units where nanos % scale == 0 && nanos >= scale {
        return "\(nanos / scale)\(suffix)"
    }
    return "\(nanos)ns"
}

/// The JSON key and Prometheus-friendly name of a quantile: 0.5 → `p50`, 0.999 → `p999`.
public func quantileKey(_ quantile: Double) -> String {
    var digits = String(quantile.formatted6.dropFirst(2)) // "0.999" → "999"
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

/// `2026-11-21T20:45:00.123Z`.
package func utcTimestamp(realtimeNanos: UInt64? = nil) -> String {
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
