import CRingside
import Ringside
import RingsideJSON
import RingsideSnapshot

// MARK: - A metric's values, from its steps (VALUES in ringside.h) to what every export writes

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

/// A record's value as the metric means it: an unsigned count or observation, or a gauge's double.
package enum MetricValue: Equatable, Sendable {
    case unsigned(UInt64)
    case double(Double)
    /// A histogram's or counter's value with a resolution, or signed: whole steps of 10^scale.
    case steps(Int128, scale: Int8)

    /// The record's value read by its kind (a gauge's bits are a double).
    package init(bits: UInt64, kind: MetricKind?) {
        self = kind == .gauge ? .double(Double(bitPattern: bits)) : .unsigned(bits)
    }

    /// The record's value read as its metric says: a gauge's bits are a double, a signed
    /// histogram's are offset binary, and a value with a resolution is a number of its steps
    /// (`kind`, a record's own, when the metric is not known).
    package init(bits: UInt64, metric: MetricDescriptor?, kind: MetricKind? = nil) {
        guard let metric, metric.kind != .gauge, metric.hasSteps else {
            self.init(bits: bits, kind: metric?.kind ?? kind)
            return
        }
        self = .steps(metric.isSigned ? Int128(OffsetBinary.value(bits)) : Int128(bits), scale: metric.scale)
    }

    package var json: JSON {
        switch self {
        case let .unsigned(value): return .uint(value)
        case let .double(value): return .double(value)
        case .steps: return .number(text)
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
    /// The metric as people write it: `name{key="value",...}` (Prometheus style).
    package var displayName: String {
        let pairs = labels
        guard !pairs.isEmpty else { return name }
        return name + "{" + pairs.map { "\($0.key)=\"\(prometheusEscapedLabelValue($0.value))\"" }.joined(separator: ",") + "}"
    }
}

extension SeriesSnapshot {
    /// Whether its metric records: neither it nor its bot is switched off (CONTROL in ringside.h).
    package var isEnabled: Bool { self.control & (RS_CONTROL_OFF | RS_CONTROL_BOT_OFF) == 0 }

    /// The operator's sampling of a histogram, 1 call in this many written (1: none), on top of its
    /// registered `sample_every`.
    package var controlSampleEvery: UInt64 { UInt64(1) << UInt64(min(self.control & RS_CONTROL_SAMPLE, RS_WEIGHT_LOG2_MAX)) }

    /// A histogram's all-time sum, or a counter's total, in steps: sign and magnitude, exactly.
    package var exactSumSteps: (negative: Bool, magnitude: UInt128) {
        self.metric.isSigned ? (self.cumulativeSignedSum < 0, self.cumulativeSignedSum.magnitude) : (false, self.cumulativeExactSum)
    }
}
