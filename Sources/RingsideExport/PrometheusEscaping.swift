import RingsideText

// The one Prometheus escaper (its rule, `prometheusEscapeLetter`, is in RingsideText, where the
// tools' metric names use it too): label values and HELP texts, and the registry's encoded
// labels written as label pairs.

extension TextBuffer {
    /// Escapes `\\`, newlines and (in label values) `"`, as the text format requires
    /// (`prometheusEscapeLetter`), for label values and HELP texts alike.
    func appendEscaped(_ value: String, inLabel: Bool) {
        appendEscaped(bytes: value.utf8, inLabel: inLabel)
    }

    func appendEscaped(bytes value: some Sequence<UInt8>, inLabel: Bool) {
        for byte in value {
            if let letter = prometheusEscapeLetter(byte, inLabel: inLabel) {
                append(UInt8(ascii: "\\"))
                append(letter)
            } else {
                append(byte)
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
