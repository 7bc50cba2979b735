/// A byte buffer that exporters append text to: cheaper than building Strings line by line.
struct TextBuffer {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 4096) {
        bytes.reserveCapacity(capacity)
    }

    mutating func append(_ text: String) {
        var text = text
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }

    mutating func append(bytes other: [UInt8]) {
        bytes.append(contentsOf: other)
    }

    mutating func append(_ byte: UInt8) {
        bytes.append(byte)
    }

    mutating func append(_ value: UInt64) {
        if value < 10 {
            bytes.append(UInt8(ascii: "0") + UInt8(value))
            return
        }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var rest = value
        withUnsafeMutableBytes(of: &digits) { raw in
            while rest > 0 {
                raw[19 - count] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
                count += 1
            }
            bytes.append(contentsOf: raw[(20 - count)...])
        }
    }

    mutating func append(_ value: Int) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        append(value.magnitude.asUInt64)
    }

    /// A number as Prometheus and JSON both read it; integers print without a fraction.
    /// Non-finite values print as Prometheus spells them (`+Inf`, `-Inf`, `NaN`).
    mutating func appendNumber(_ value: Double) {
        if value.isNaN { return append("NaN") }
        if value.isInfinite { return append(value > 0 ? "+Inf" : "-Inf") }
        if value == value.rounded(), abs(value) < 1e15 {
            return append(Int(value))
        }
        append(value.description)
    }
}

private extension UInt {
    var asUInt64: UInt64 { UInt64(self) }
}
