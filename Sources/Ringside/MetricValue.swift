// MARK: - A metric's values: what a stored value means (VALUES in ringside.h), decided here once
// for every reader (the tools, the trace, the collector's history and exporters)

/// Whole numbers of steps of 10^exponent, as exact decimal text: (-350, -2) is `-3.5`, (2, 3)
/// is `2000`, (1350, -9) is `0.00000135`. Never through a `Double`: a sum of cents prints the
/// cents it holds.
package enum ExactDecimal {
    package static func text(_ steps: Int128, exponent: Int) -> String {
        text(negative: steps < 0, magnitude: steps.magnitude, exponent: exponent)
    }

    package static func text(negative: Bool, magnitude: UInt128, exponent: Int) -> String {
        var digits = String(magnitude)
        if magnitude != 0, exponent > 0 {
            digits += String(repeating: "0", count: exponent)
        } else if magnitude != 0, exponent < 0 {
            let places = -exponent
            if digits.count <= places { digits = String(repeating: "0", count: places - digits.count + 1) + digits }
            var fraction = digits.suffix(places)
            while fraction.last == "0" { fraction.removeLast() }
            digits = String(digits.dropLast(places)) + (fraction.isEmpty ? "" : "." + fraction)
        }
        return (negative && magnitude != 0 ? "-" : "") + digits
    }
}

/// A stored value as its metric means it: an unsigned count or observation, a gauge's double, or
/// whole steps of 10^scale (`MetricDescriptor.value(ofStored:)` decides which).
package enum MetricValue: Equatable, Sendable {
    case unsigned(UInt64)
    case double(Double)
    /// A histogram's or counter's value with a resolution, or signed: whole steps of 10^scale.
    case steps(Int128, scale: Int8)

    /// `stored` as `metric` means it; when the metric is not known (a record naming no registered
    /// metric), as `kind`, a record's own, says: a gauge's bits are a double, the rest unsigned.
    package init(stored: UInt64, of metric: MetricDescriptor?, kind: MetricKind? = nil) {
        if let metric {
            self = metric.value(ofStored: stored)
        } else {
            self = kind == .gauge ? .double(Double(bitPattern: stored)) : .unsigned(stored)
        }
    }

    package var text: String {
        switch self {
        case let .unsigned(value): return String(value)
        case let .double(value): return "\(value)"
        case let .steps(steps, scale): return ExactDecimal.text(steps, exponent: Int(scale))
        }
    }

    /// The value followed by its unit, unless the unit is `none`.
    package func text(unit: MetricUnit?) -> String {
        guard let unit, unit != .none else { return text }
        return text + " " + unit.description
    }
}

extension MetricDescriptor {
    /// Whether its values are not whole units of its own: signed, or of a step other than 1.
    package var hasSteps: Bool { isSigned || scale != 0 }

    /// One step of its values in its unit, as exact decimal: `0.01`, `1`, `1000` (the tools' and
    /// `/latest`'s `resolution`).
    package var resolutionText: String { ExactDecimal.text(1, exponent: Int(scale)) }

    /// What a value stored for this metric (a record's value, a cell's total, a history point)
    /// means: a gauge's bits are a double; a metric with steps holds a number of steps of
    /// 10^scale; the others an unsigned whole number of their unit.
    package func value(ofStored stored: UInt64) -> MetricValue {
        if kind == .gauge { return .double(Double(bitPattern: stored)) }
        return hasSteps ? .steps(steps(ofStored: stored), scale: scale) : .unsigned(stored)
    }

    /// A histogram's or counter's stored value as a number of its steps: a signed histogram's is
    /// an `Int64` in offset binary, the others' the number itself.
    package func steps(ofStored stored: UInt64) -> Int128 {
        isSigned ? Int128(OffsetBinary.value(stored)) : Int128(stored)
    }
}
