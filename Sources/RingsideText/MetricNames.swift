import Ringside

// MARK: - A metric's name as people write it, and the one Prometheus escaper's rule

/// The one Prometheus escaper's rule (the text format's), for label values and HELP texts alike:
/// the letter a backslash is followed by in place of `byte`, or nil when `byte` stays as it is.
/// A backslash becomes `\\`, a newline `\n`, and in a label value (`inLabel`) a quote `\"`.
/// Inlined into the exporters' page writer, which calls it for every byte of every label value.
@inlinable
package func prometheusEscapeLetter(_ byte: UInt8, inLabel: Bool) -> UInt8? {
    switch byte {
    case UInt8(ascii: "\\"): return UInt8(ascii: "\\")
    case UInt8(ascii: "\n"): return UInt8(ascii: "n")
    case UInt8(ascii: "\"") where inLabel: return UInt8(ascii: "\"")
    default: return nil
    }
}

/// A label value as the text format writes it between its quotes, for the tools' `name{key="value"}`.
package func prometheusEscapedLabelValue(_ value: String) -> String {
    var escaped: [UInt8] = []
    escaped.reserveCapacity(value.utf8.count + 8)
    for byte in value.utf8 {
        if let letter = prometheusEscapeLetter(byte, inLabel: true) {
            escaped += [UInt8(ascii: "\\"), letter]
        } else {
            escaped.append(byte)
        }
    }
    return String(decoding: escaped, as: UTF8.self)
}

extension MetricDescriptor {
    /// The metric as people write it: `name{key="value",...}` (Prometheus style).
    package var displayName: String {
        let pairs = labels
        guard !pairs.isEmpty else { return name }
        return name + "{" + pairs.map { "\($0.key)=\"\(prometheusEscapedLabelValue($0.value))\"" }.joined(separator: ",") + "}"
    }
}
