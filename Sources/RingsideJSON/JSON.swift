/// A JSON value written by hand, shared by the tools and the benchmark: objects keep their keys
/// in the order given, so documents read in a stable order, and 64-bit counts stay exact (a
/// `Double` would round them past 2^53).
package indirect enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    /// Written as ``JSONOutput/writeJSONNumber(_:)-(Double?)`` writes it.
    case double(Double)
    /// A number written out already, as JSON reads it: an exact decimal (`-3.25`).
    case number(String)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    package static func == (lhs: JSON, rhs: JSON) -> Bool { lhs.text == rhs.text }

    /// The value as compact JSON text on one line.
    package var text: String {
        var out: [UInt8] = []
        write(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.write("null")
        case let .bool(value): out.write(value ? "true" : "false")
        case let .int(value): out.writeJSONNumber(value)
        case let .uint(value): out.writeJSONNumber(value)
        case let .double(value): out.writeJSONNumber(value)
        case let .number(text): out.write(text)
        case let .string(value): out.writeJSONString(value)
        case let .array(values):
            out.write(UInt8(ascii: "["))
            for (offset, value) in values.enumerated() {
                if offset > 0 { out.write(UInt8(ascii: ",")) }
                value.write(to: &out)
            }
            out.write(UInt8(ascii: "]"))
        case let .object(members):
            out.write(UInt8(ascii: "{"))
            for (offset, member) in members.enumerated() {
                if offset > 0 { out.write(UInt8(ascii: ",")) }
                out.writeJSONString(member.0)
                out.write(UInt8(ascii: ":"))
                member.1.write(to: &out)
            }
            out.write(UInt8(ascii: "}"))
        }
    }
}

/// Where JSON text goes: a byte array here, the collector's page buffer in RingsideExport. Both
/// write strings (and numbers) through the functions below, so the JSON policy is written once.
package protocol JSONOutput {
    mutating func write(_ byte: UInt8)
    mutating func write(_ text: String)
}

extension [UInt8]: JSONOutput {
    package mutating func write(_ byte: UInt8) { append(byte) }
    package mutating func write(_ text: String) { append(contentsOf: text.utf8) }
}

extension JSONOutput {
    /// A JSON string, quotes included: `"` and `\` escaped, control bytes as `\n`, `\r`, `\t`
    /// or `\u00XX`, everything else as its UTF-8 bytes.
    @inlinable
    package mutating func writeJSONString(_ value: String) {
        write(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): write("\\\"")
            case UInt8(ascii: "\\"): write("\\\\")
            case UInt8(ascii: "\n"): write("\\n")
            case UInt8(ascii: "\r"): write("\\r")
            case UInt8(ascii: "\t"): write("\\t")
            case 0..<0x20:
                write("\\u00")
                write(Self.hexDigit(byte >> 4))
                write(Self.hexDigit(byte & 0xF))
            default: write(byte)
            }
        }
        write(UInt8(ascii: "\""))
    }

    /// A whole number with all its digits: counts, nanoseconds and ids never pass through a
    /// `Double`, which would round them past 2^53.
    @inlinable
    package mutating func writeJSONNumber(_ value: some BinaryInteger) {
        write(String(value))
    }

    /// A measure: `null` when absent or not finite (JSON has no NaN or infinity), a whole value
    /// below 10^15 without a fraction (`2`, not `2.0`), else the shortest text that reads back
    /// exactly (`1.5`, `2.5e+20`). (Where a value set to NaN or infinity must not read as absent,
    /// see `Double.nonFiniteText`.)
    @inlinable
    package mutating func writeJSONNumber(_ value: Double?) {
        guard let value, value.isFinite else { return write("null") }
        if value == value.rounded(), abs(value) < 1e15 { return writeJSONNumber(Int64(value)) }
        write(value.description)
    }

    @inlinable
    static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}

extension Double {
    /// How Prometheus writes a value that is not finite, in its text formats and, as a string, in
    /// its HTTP API's JSON: `NaN`, `+Inf`, `-Inf`; nil for a finite value.
    @inlinable
    package var nonFiniteText: String? {
        if isNaN { return "NaN" }
        return isInfinite ? (self > 0 ? "+Inf" : "-Inf") : nil
    }
}

extension JSON {
    /// An object from ordered members, leaving out those whose value is nil.
    package static func members(_ members: [(String, JSON?)]) -> JSON {
        .object(members.compactMap { key, value in value.map { (key, $0) } })
    }
}

extension JSON {
    /// A measured figure: a whole number without a fraction, else rounded to three decimals.
    package static func figure(_ value: Double) -> JSON {
        .double((value * 1000).rounded() / 1000)
    }

    /// A figure as text: `12`, `6.25`.
    package static func figureText(_ value: Double) -> String { figure(value).text }
}
