// MARK: - Numbers and sizes for people
// (durations: `formatDuration`, beside the duration grammar in RingsideCommandLine)

/// `12.3`, with exactly one decimal; `-` for a value that is not finite.
package func oneDecimal(_ value: Double) -> String {
    guard value.isFinite else { return "-" }
    let tenths = Int64((value * 10).rounded())
    return (tenths < 0 && tenths > -10 ? "-" : "") + "\(tenths / 10).\(abs(tenths % 10))"
}

/// `1.07`, with exactly two decimals, for a ratio or a share; `-` for a value that is negative
/// or not finite.
package func twoDecimals(_ value: Double) -> String {
    guard value.isFinite, value >= 0 else { return "-" }
    let hundredths = Int64((value * 100).rounded())
    let fraction = hundredths % 100
    return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
}

/// One decimal at most: `12`, `12.5`.
package func oneDecimalAtMost(_ value: Double) -> String { decimals(atMost: 1, value) }

/// `value` rounded to `places` decimals, without a fraction when it is whole: `12`, `6.25`.
package func decimals(atMost places: Int, _ value: Double) -> String {
    var scale = 1.0
    for _ in 0..<places { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    return rounded == rounded.rounded() && abs(rounded) < 1e15 ? String(Int64(rounded)) : String(rounded)
}

/// A size for people: `512 B`, `4.0 KiB`, `4.1 MiB`, `1.0 GiB`.
package func humanBytes(_ bytes: Int) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes)
    var unit = 0
    while value >= 1024 && unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    return unit == 0 ? "\(bytes) B" : "\(oneDecimal(value)) \(units[unit])"
}
