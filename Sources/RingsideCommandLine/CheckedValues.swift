// Range-checked option values: durations, sizes and counts. Each reads an option's text, checks
// it lies in its range, and throws the option's own message otherwise, so that a parser reads as
// a list of options and their bounds. The messages stay each option's own: tests and operators
// know them.

/// A duration (see `durationNanos`) given to `flag`, within `range` and a whole number of `step`.
/// - Parameters:
///   - zeroIsOff: the text `0` is read as 0 (the option's "off"), whatever the range.
///   - message: the error for a duration out of range, given the text.
/// - Throws: `UsageError`: "FLAG: TEXT is not a duration (...)" for text that is not one, else `message(text)`.
package func parseDuration(
    _ text: String, flag: String, bareSeconds: Bool = false, in range: ClosedRange<UInt64>, step: UInt64 = 1,
    zeroIsOff: Bool = false, else message: (String) -> String
) throws(UsageError) -> UInt64 {
    if zeroIsOff && text == "0" { return 0 }
    let nanos = try parseDuration(text, flag: flag, bareSeconds: bareSeconds)
    guard range.contains(nanos), nanos % step == 0 else { throw UsageError(message(text)) }
    return nanos
}

/// Bytes in `text`: digits, optionally followed by K, M or G (powers of 1024); nil otherwise.
package func parseByteSize(_ text: String) -> UInt64? {
    let scales: [Character: UInt64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
    var digits = Substring(text)
    var scale: UInt64 = 1
    if let last = text.last, let unit = scales[last] {
        digits = digits.dropLast()
        scale = unit
    }
    guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber), let number = UInt64(digits) else { return nil }
    let (bytes, overflow) = number.multipliedReportingOverflow(by: scale)
    return overflow ? nil : bytes
}

/// A size in bytes (see `parseByteSize`) within `range`.
/// - Throws: `UsageError(message(text))` for text that is not a size, or one out of range.
package func parseByteSize(_ text: String, in range: ClosedRange<UInt64>, else message: (String) -> String) throws(UsageError) -> UInt64 {
    guard let bytes = parseByteSize(text), range.contains(bytes) else { throw UsageError(message(text)) }
    return bytes
}

/// A whole number within `range`.
/// - Throws: `UsageError(message(text))` for text that is not a number, or one out of range.
package func parseCount(_ text: String, in range: ClosedRange<Int>, else message: (String) -> String) throws(UsageError) -> Int {
    guard let count = Int(text), range.contains(count) else { throw UsageError(message(text)) }
    return count
}
