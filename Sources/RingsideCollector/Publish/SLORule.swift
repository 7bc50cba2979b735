import RingsideExport
import Ringside
import RingsideCommandLine

/// A service-level objective, of one of two kinds, with options after it:
///
///     METRIC{LABEL="VALUE",...}:STAT OP THRESHOLD@WINDOW [severity=P2]      a distribution's
///     order_fill_latency{symbol="AAPL"}:p99<100us@1m
///     market_data_latency:p99.9<=10us@5s severity=P2
///     order_fill_latency{ring="bot-a"}:max<5ms@1s
///
///     BAD{...}/TOTAL{...} OP BOUND@PERIOD [severity=P0]                     a ratio of counters
///     orders_rejected/orders_total<0.05%@30d
///
/// - A selector matches every series with that metric name whose labels include the given ones
///   (`ring` matches the bot's name); the rule is judged on all matching series merged. Braces
///   are optional.
/// - A distribution's objective is judged over one of the collector's windows on its histograms:
///   STAT: `pNN` (`p50`, `p99`: percent), `p999` / `p9999` (three or more digits: 0.999...),
///   `p99.9` (a percent with decimals), `max` or `mean`. THRESHOLD: a number with a unit (`ns`,
///   `us`, `ms`, `s`) for time metrics, or a bare number in the metric's own unit.
/// - A ratio's objective (availability: the bad events' share of all events) is judged over
///   PERIOD, any length from 1 s to 90 days, on the counters' increases: BOUND is a percentage
///   (`0.05%`) or a fraction (`0.0005`).
/// - OP: `<` or `<=`. Options: `severity=NAME` (letters, digits, `_`, `-`; P1 when not given),
///   carried as a label by the SLO's series, so that an alert routes by it; `capture`: when it
///   begins to be violated, the collector captures the flight recorder's records of the bots
///   whose series it reads (with `--capture-dir`).
///
/// A distribution's objective is violated while its window holds events and the statistic breaks
/// the bound; a ratio's while its period holds events and the ratio breaks the bound.
package struct SLORule: Sendable, Equatable {
    package enum Statistic: Sendable, Equatable {
        case quantile(Double)
        case max
        case mean
    }

    /// Which series a rule reads: a metric name and the labels they must have (`ring` names the bot).
    package struct Selector: Sendable, Equatable {
        package let metric: String
        package let labels: [String: String]

        /// Whether a series (its bot, name and labels) is one the selector reads.
        package func matches(ring: String, metric name: String, labels seriesLabels: [String: String]) -> Bool {
            guard name == metric else { return false }
            for (key, value) in labels {
                if key == "ring" { if value != ring { return false } } else if seriesLabels[key] != value { return false }
            }
            return true
        }
    }

    /// What is held to the bound.
    package enum Objective: Sendable, Equatable {
        /// A statistic of the matching histograms' window: the bound in nanoseconds if
        /// `thresholdIsTime`, else in the metric's unit.
        case distribution(Selector, Statistic, threshold: Double, thresholdIsTime: Bool)
        /// The matching `bad` counters' increase over the `total` counters' increase, as a fraction.
        case ratio(bad: Selector, total: Selector, bound: Double)
    }

    /// The rule as written, without its options: the SLO's name in its series (`slo`).
    package let text: String
    package let objective: Objective
    /// `<=` rather than `<`.
    package let inclusive: Bool
    /// The window (a distribution's, one of the collector's) or period (a ratio's) it is judged over.
    package let windowNanos: UInt64
    /// Its alerts' severity: a label of its series.
    package let severity: String
    /// A violation's start asks for a capture of the bots it reads (the `capture` option).
    package let capture: Bool

    /// The longest period a ratio is judged over.
    package static let longestPeriodNanos: UInt64 = 90 * 86_400 * 1_000_000_000
    package static let defaultSeverity = "P1"

    /// Why a rule does not parse.
    package struct ParseError: Error, Equatable {
        package let reason: String
    }

    package init(parsing written: String) throws(ParseError) {
        func fail(_ reason: String) -> ParseError { ParseError(reason: reason) }
        // Options follow the rule after white space (a label value in quotes may hold spaces).
        var rest = Substring(written)
        var rule = Substring("")
        var quoted = false
        while let character = rest.first, quoted || character != " " {
            if character == "\"" { quoted.toggle() }
            rule.append(character)
            rest = rest.dropFirst()
        }
        var severity = Self.defaultSeverity
        var capture = false
        for option in rest.split(separator: " ") {
            if option == "capture" {
                capture = true
                continue
            }
            guard option.hasPrefix("severity="), option.count > "severity=".count else {
                throw fail("\(option) is not an option (severity=P0, P1, P2, ..., or capture)")
            }
            let name = option.dropFirst("severity=".count)
            guard name.utf8.allSatisfy({ Self.isNameByte($0) }) else {
                throw fail("severity \(name): letters, digits, '_' and '-' only")
            }
            severity = String(name)
        }
        self.severity = severity
        self.capture = capture
        text = String(rule)

        guard let at = rule.lastIndex(of: "@") else { throw fail("expected ...@WINDOW, e.g. @1m") }
        guard let window = durationNanos(String(rule[rule.index(after: at)...])), window > 0 else {
            throw fail("\(rule[rule.index(after: at)...]) is not a window duration (e.g. 1s, 5s, 1m, 30d)")
        }
        windowNanos = window
        let head = rule[..<at]
        guard let opIndex = Self.firstIndex(of: "<", outsideQuotesIn: head) else {
            throw fail("expected '<' or '<=' before the bound")
        }
        var boundText = head[head.index(after: opIndex)...]
        inclusive = boundText.hasPrefix("=")
        if inclusive { boundText = boundText.dropFirst() }
        let measured = head[..<opIndex]

        if let slash = Self.firstIndex(of: "/", outsideQuotesIn: measured) {
            // BAD/TOTAL<BOUND@PERIOD
            let bad = try Self.parseSelector(measured[..<slash])
            let total = try Self.parseSelector(measured[measured.index(after: slash)...])
            guard window >= 1_000_000_000, window <= Self.longestPeriodNanos else {
                throw fail("a ratio's period must be from 1s to 90d")
            }
            let fraction: Double?
            if boundText.hasSuffix("%") {
                fraction = Double(boundText.dropLast()).map { $0 / 100 }
            } else {
                fraction = Double(boundText)
            }
            guard let fraction, fraction.isFinite, fraction > 0, fraction < 1 else {
                throw fail("\(boundText) is not a ratio bound between 0 and 1 (0.05% or 0.0005)")
            }
            objective = .ratio(bad: bad, total: total, bound: fraction)
            return
        }

        // METRIC:STAT<THRESHOLD@WINDOW
        guard let colon = measured.lastIndex(of: ":") else {
            throw fail("expected METRIC:STAT<THRESHOLD (e.g. latency:p99<100us) or BAD/TOTAL<RATIO (e.g. errors/requests<0.1%)")
        }
        let selector = try Self.parseSelector(measured[..<colon])
        let statistic = try Self.parseStatistic(measured[measured.index(after: colon)...])
        if let nanos = durationNanos(String(boundText)) {
            objective = .distribution(selector, statistic, threshold: Double(nanos), thresholdIsTime: true)
        } else if let value = Double(boundText), value.isFinite, value >= 0 {
            objective = .distribution(selector, statistic, threshold: value, thresholdIsTime: false)
        } else {
            throw fail("\(boundText) is not a threshold (a number, with ns, us, ms or s for times)")
        }
    }

    /// Whether it is a ratio of counters (judged over any period) rather than a distribution's
    /// statistic (judged over one of the collector's windows).
    package var isRatio: Bool {
        if case .ratio = objective { return true }
        return false
    }

    /// The fraction of events the objective wants good: a ratio's 1 - bound, a quantile's
    /// quantile; nil for `max` and `mean`.
    package var objectiveRatio: Double? {
        switch objective {
        case let .ratio(_, _, bound): return 1 - bound
        case let .distribution(_, .quantile(q), _, _): return q
        case .distribution: return nil
        }
    }

    /// The statistic's name as reported: `p99`, `p999`, `max`, `mean`; `ratio` for a ratio's.
    package var statisticName: String {
        switch objective {
        case .ratio: return "ratio"
        case let .distribution(_, .quantile(q), _, _): return quantileKey(q)
        case .distribution(_, .max, _, _): return "max"
        case .distribution(_, .mean, _, _): return "mean"
        }
    }

    /// A distribution's threshold in a metric's unit, or nil if a time bound meets a metric that
    /// is not a time (or the rule is a ratio's).
    package func threshold(in unit: MetricUnit) -> Double? {
        guard case let .distribution(_, _, threshold, thresholdIsTime) = objective else { return nil }
        guard thresholdIsTime else { return threshold }
        guard let nanosPerUnit = unit.nanoseconds else { return nil }
        return threshold / Double(nanosPerUnit)
    }

    /// Whether an observed value keeps the objective.
    package func isMet(by observed: Double, threshold bound: Double) -> Bool {
        inclusive ? observed <= bound : observed < bound
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
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

    private static func parseStatistic(_ text: Substring) throws(ParseError) -> Statistic {
        switch text {
        case "max": return .max
        case "mean": return .mean
        default: break
        }
        guard text.hasPrefix("p"), text.count > 1 else {
            throw ParseError(reason: "\(text) is not a statistic (p50, p99, p999, p99.9, max or mean)")
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
