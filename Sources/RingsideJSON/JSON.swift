/// A JSON value written by hand, shared by the tools and the benchmark: objects keep their keys
/// in the order given, so documents read in a stable order, and 64-bit counts stay exact (a
/// `Double` would round them past 2^53).
package indirect enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    /// Written as `null` when not finite: JSON has no NaN or infinity.
    case double(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    package static func == (lhs: JSON, rhs: JSON) -> Bool { lhs.text == rhs.text }

    /// The value as compact JSON text on one line.
    package var text: String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case let .bool(value): out += value ? "true" : "false"
        case let .int(value): out += String(value)
        case let .uint(value): out += String(value)
        case let .double(value):
            guard value.isFinite else { out += "null"; return }
            // Swift prints the shortest text that reads back exactly, in JSON's syntax: "1.5", "2.0", "2.5e+20".
            out += "\(value)"
        case let .string(value): Self.writeString(value, to: &out)
        case let .array(values):
            out += "["
            for (offset, value) in values.enumerated() {
                if offset > 0 { out += "," }
                value.write(to: &out)
            }
            out += "]"
        case let .object(members):
            out += "{"
            for (offset, member) in members.enumerated() {
                if offset > 0 { out += "," }
                Self.writeString(member.0, to: &out)
                out += ":"
                member.1.write(to: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ value: String, to out: inout String) {
        out += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
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
        guard value.isFinite else { return .null }
        let rounded = (value * 1000).rounded() / 1000
        return rounded == rounded.rounded() && abs(rounded) < 1e15 ? .int(Int64(rounded)) : .double(rounded)
    }

    /// A figure as text: `12`, `6.25`.
    package static func figureText(_ value: Double) -> String { figure(value).text }
}
