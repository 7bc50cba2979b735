// The one Prometheus escaper: label values and HELP texts, and the registry's encoded labels
// written as label pairs.

/// A label value as the text format writes it between its quotes, for the tools' `name{key="value"}`.
package func prometheusEscapedLabelValue(_ value: String) -> String {
    let text = TextBuffer(capacity: value.utf8.count + 8)
    text.appendEscaped(value, inLabel: true)
    return String(decoding: text.bytes, as: UTF8.self)
}

extension TextBuffer {
    /// Escapes `\\`, newlines and (in label values) `"`, as the text format requires: the one
    /// Prometheus escaper, for label values and HELP texts alike.
    func appendEscaped(_ value: String, inLabel: Bool) {
        appendEscaped(bytes: value.utf8, inLabel: inLabel)
    }

    func appendEscaped(bytes value: some Sequence<UInt8>, inLabel: Bool) {
        for byte in value {
            switch byte {
            case UInt8(ascii: "\\"): append("\\\\")
            case UInt8(ascii: "\n"): append("\\n")
            case UInt8(ascii: "\"") where inLabel: append("\\\"")
            default: append(byte)
            }
        }
    }

    /// Labels as the registry stores them (sorted `key=value` lines), each as `,key="value"`;
    /// a key the exporter uses itself becomes `exported_<key>`.
    func appendEncodedLabels(_ encoded: String) {
        var encoded = encoded
        encoded.withUTF8 { bytes in
            var start = 0
            while start < bytes.count {
                let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
                let equals = bytes[start..<end].firstIndex(of: UInt8(ascii: "=")) ?? end
                let key = UnsafeBufferPointer(rebasing: bytes[start..<equals])
                append(UInt8(ascii: ","))
                if PrometheusExporter.reservedLabelNames.contains(where: { $0.elementsEqual(key) }) { append("exported_") }
                append(key)
                append("=\"")
                appendEscaped(bytes: bytes[min(equals + 1, end)..<end], inLabel: true)
                append(UInt8(ascii: "\""))
                start = end + 1
            }
        }
    }
}
