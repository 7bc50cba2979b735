import Ringside
import RingsideCommandLine

// MARK: - The parts of a rule as written: options, comparison, selectors, statistics, bounds

extension SLORule {
    /// The rule and its options: options follow it after white space (a label value in quotes
    /// may hold spaces).
    static func splitOptions(_ written: Substring) -> (rule: Substring, options: Substring) {
        var rest = written
        var rule = Substring("")
        var quoted = false
        while let character = rest.first, quoted || character != " " {
            if character == "\"" { quoted.toggle() }
            rule.append(character)
            rest = rest.dropFirst()
        }
        return (rule, rest)
    }

    /// `severity=NAME` and `capture`, in any order.
    static func parseOptions(_ options: Substring) throws(ParseError) -> (severity: String, capture: Bool) {
        var severity = Self.defaultSeverity
        var capture = false
        for option in options.split(separator: " ") {
            if option == "capture" {
                capture = true
                continue
            }
            guard option.hasPrefix("severity="), option.count > "severity=".count else {
                throw ParseError(reason: "\(option) is not an option (severity=P0, P1, P2, ..., or capture)")
            }
            let name = option.dropFirst("severity=".count)
            guard name.utf8.allSatisfy({ Self.isNameByte($0) }) else {
                throw ParseError(reason: "severity \(name): letters, digits, '_' and '-' only")
            }
            severity = String(name)
        }
        return (severity, capture)
    }

    /// What is measured, the comparison (the first `<` or `>` outside quotes, with `=` after it
    /// or not), and the bound's text.
    static func splitComparison(_ head: Substring) throws(ParseError) -> (Substring, Comparison, Substring) {
        let below = firstIndex(of: "<", outsideQuotesIn: head)
        let above = firstIndex(of: ">", outsideQuotesIn: head)
        guard let index = [below, above].compactMap({ $0 }).min() else {
            throw ParseError(reason: "expected '<', '<=', '>' or '>=' before the bound")
        }
        var bound = head[head.index(after: index)...]
        let orEqual = bound.hasPrefix("=")
        if orEqual { bound = bound.dropFirst() }
        let comparison: Comparison =
            head[index] == "<" ? (orEqual ? .atMost : .below) : (orEqual ? .atLeast : .above)
        return (head[..<index], comparison, bound)
    }

    /// A gauge's, a rate's or a ratio's period: 1 s to 90 days.
    static func checkPeriod(_ nanos: UInt64, of what: String) throws(ParseError) {
        guard nanos >= shortestPeriodNanos, nanos <= longestPeriodNanos else {
            throw ParseError(reason: "\(what)'s period must be from 1s to 90d")
        }
    }

    /// A ratio's bound: a percentage or a fraction, between 0 and 1 (exclusive).
    static func parseRatioBound(_ text: Substring) throws(ParseError) -> Double {
        let fraction = text.hasSuffix("%") ? Double(text.dropLast()).map { $0 / 100 } : Double(text)
        guard let fraction, fraction.isFinite, fraction > 0, fraction < 1 else {
            throw ParseError(reason: "\(text) is not a ratio bound between 0 and 1 (0.05% or 0.0005)")
        }
        return fraction
    }

    /// A rate's bound: a number of the counter's units a second, 0 or more.
    static func parseRateBound(_ text: Substring) throws(ParseError) -> Double {
        guard let value = Double(text), value.isFinite, value >= 0 else {
            throw ParseError(reason: "\(text) is not a rate: a number of the counter's units a second, 0 or more (orders:rate>1@5m)")
        }
        return value
    }

    /// A statistic's threshold: a time (in nanoseconds, negative ones too), or a number in the
    /// metric's own unit.
    static func parseThreshold(_ text: Substring) throws(ParseError) -> (value: Double, isTime: Bool) {
        let negative = text.hasPrefix("-")
        if let nanos = durationNanos(String(negative ? text.dropFirst() : text)) {
            return (negative ? -Double(nanos) : Double(nanos), true)
        }
        guard let value = Double(text), value.isFinite else {
            throw ParseError(reason: "\(text) is not a threshold (a number, negative ones too, with ns, us, ms or s for times)")
        }
        return (value, false)
    }

    static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "_"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }

    /// The first `character` of `text` that is not inside a label value's double quotes.
    static func firstIndex(of character: Character, outsideQuotesIn text: Substring) -> Substring.Index? {
        var quoted = false
        for index in text.indices {
            if text[index] == "\"" { quoted.toggle() }
            if !quoted, text[index] == character { return index }
        }
        return nil
    }

    /// `name` or `name{KEY="VALUE",...}`.
    static func parseSelector(_ selector: Substring) throws(ParseError) -> Selector {
        var name = selector
        var labels: [String: String] = [:]
        if let brace = selector.firstIndex(of: "{") {
            guard selector.hasSuffix("}") else { throw ParseError(reason: "the label set must end with '}'") }
            name = selector[..<brace]
            let body = selector[selector.index(after: brace)..<selector.index(before: selector.endIndex)]
            labels = try Self.parseLabels(body)
        }
        if let problem = MetricDescriptor.problem(withName: String(name)) { throw ParseError(reason: "metric: \(problem)") }
        return Selector(metric: String(name), labels: labels)
    }

    static func parseStatistic(_ text: Substring) throws(ParseError) -> Statistic {
        switch text {
        case "max": return .max
        case "min": return .min
        case "mean": return .mean
        default: break
        }
        guard text.hasPrefix("p"), text.count > 1 else {
            throw ParseError(reason: "\(text) is not a statistic (p50, p99, p999, p99.9, max, min, mean, or rate of a counter)")
        }
        let digits = text.dropFirst()
        let quantile: Double?
        if digits.contains(".") || digits.count <= 2 {
            // Rounded to 12 places so that p99.9 is exactly 0.999.
            quantile = Double(digits).map { ($0 / 100 * 1e12).rounded() / 1e12 }
        } else {
            // p999, p9999: nines after "0."; anything else of three digits (p100) is not a percentile.
            quantile = digits.allSatisfy(\.isNumber) && digits.hasPrefix("99") ? Double("0." + digits) : nil
        }
        guard let quantile, quantile > 0, quantile < 1 else {
            throw ParseError(reason: "\(text) is not a percentile between p0 and p100 (exclusive)")
        }
        return .quantile(quantile)
    }

    private static func parseLabels(_ body: Substring) throws(ParseError) -> [String: String] {
        var labels: [String: String] = [:]
        var rest = body
        while !rest.isEmpty {
            guard let equals = rest.firstIndex(of: "=") else { throw ParseError(reason: "a label needs KEY=\"VALUE\"") }
            let key = String(rest[..<equals]).trimmingSpaces
            rest = rest[rest.index(after: equals)...]
            guard rest.first == "\"", let close = rest.dropFirst().firstIndex(of: "\"") else {
                throw ParseError(reason: "the value of label \(key) must be in double quotes")
            }
            labels[key] = String(rest[rest.index(after: rest.startIndex)..<close])
            rest = rest[rest.index(after: close)...]
            if rest.first == "," {
                rest = rest.dropFirst()
            } else if !rest.isEmpty {
                throw ParseError(reason: "labels are separated by ','")
            }
        }
        return labels
    }
}

private extension String {
    var trimmingSpaces: String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
