// MARK: - How quantiles are named and written, in every export
// (durations: `formatDuration`, beside the duration grammar in RingsideCommandLine; numbers,
// times and measures for people, and wall-clock times: RingsideText)

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
