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
