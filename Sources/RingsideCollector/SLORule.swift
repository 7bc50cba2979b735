import RingsideExport
import Ringside
import RingsideCommandLine

/// A service-level objective over a histogram metric:
///
///     METRIC{LABEL="VALUE",...}:STAT OP THRESHOLD@WINDOW
///     order_fill_latency{symbol="AAPL"}:p99<100us@1m
///     market_data_latency:p99.9<=10us@5s
///     order_fill_latency{ring="bot-a"}:max<5ms@1s
///
/// - The selector matches every histogram series with that metric name whose labels include
///   the given ones (`ring` matches the ring's name); the rule is judged on all matching series
///   merged. Braces are optional.
/// - STAT: `pNN` (`p50`, `p99`: percent), `p999` / `p9999` (three or more digits: 0.999...),
///   `p99.9` (a percent with decimals), `max` or `mean`.
/// - OP: `<` or `<=`. THRESHOLD: a number with a unit (`ns`, `us`, `ms`, `s`) for time metrics,
///   or a bare number in the metric's own unit.
/// - WINDOW: one of the collector's windows.
///
/// The objective is violated while the window holds events and the statistic breaks the bound.
public struct SLORule: Sendable, Equatable {
    public enum Statistic: Sendable, Equatable {
        case quantile(Double)
        case max
        case mean
    }

    /// The rule as written.
    public let text: String
    public let metric: String
    /// Labels the series must have (`ring` names the ring).
    public let labels: [String: String]
    public let statistic: Statistic
    /// `<=` rather than `<`.
    public let inclusive: Bool
    /// The bound: nanoseconds if `thresholdIsTime`, else in the metric's unit.
    public let threshold: Double
    public let thresholdIsTime: Bool
    public let windowNanos: UInt64

    /// Why a rule does not parse.
    public struct ParseError: Error, Equatable {
        public let reason: String
    }

    public init(parsing text: String) throws(ParseError) {
        func fail(_ reason: String) -> ParseError { ParseError(reason: reason) }
        self.text = text
        guard let at = text.lastIndex(of: "@") else { throw fail("expected ...@WINDOW, e.g. @1m") }
        guard let window = durationNanos(String(text[text.index(after: at)...])) else {
            throw fail("\(text[text.index(after: at)...]) is not a window duration (e.g. 1s, 5s, 1m)")
        }
        windowNanos = window
        let head = text[..<at]
        guard let colon = head.lastIndex(of: ":") else { throw fail("expected METRIC:STAT<THRESHOLD, e.g. latency:p99<100us") }
        let selector = head[..<colon]
        let condition = head[head.index(after: colon)...]

        // The selector: name and optional {labels}.
        var name = selector
        var labels: [String: String] = [:]
        if let brace = selector.firstIndex(of: "{") {
            guard selector.hasSuffix("}") else { throw fail("the label set must end with '}'") }
            name = selector[..<brace]
            let body = selector[selector.index(after: brace)..<selector.index(before: selector.endIndex)]
            labels = try Self.parseLabels(body)
        }
        if let problem = MetricDescriptor.problem(withName: String(name)) { throw fail("metric: \(problem)") }
        metric = String(name)
        self.labels = labels

        // The condition: STAT OP THRESHOLD.
        guard let opIndex = condition.firstIndex(of: "<") else { throw fail("expected '<' or '<=' after the statistic") }
        let statText = condition[..<opIndex]
        var thresholdText = condition[condition.index(after: opIndex)...]
        inclusive = thresholdText.hasPrefix("=")
        if inclusive { thresholdText = thresholdText.dropFirst() }
        statistic = try Self.parseStatistic(statText)
        if let nanos = durationNanos(String(thresholdText)) {
            threshold = Double(nanos)
            thresholdIsTime = true
        } else if let value = Double(thresholdText), value.isFinite, value >= 0 {
            threshold = value
            thresholdIsTime = false
        } else {
            throw fail("\(thresholdText) is not a threshold (a number, with ns, us, ms or s for times)")
        }
    }

    /// The statistic's name as reported: `p99`, `p999`, `max`, `mean`.
    public var statisticName: String {
        switch statistic {
        case let .quantile(q): return quantileKey(q)
        case .max: return "max"
        case .mean: return "mean"
        }
    }

    /// The threshold in a metric's unit, or nil if a time bound meets a metric that is not a time.
    public func threshold(in unit: MetricUnit) -> Double? {
        guard thresholdIsTime else { return threshold }
        guard let nanosPerUnit = unit.nanoseconds else { return nil }
        return threshold / Double(nanosPerUnit)
    }

    /// Whether a series (its ring, name and labels) is one the rule judges.
    public func matches(ring: String, metric name: String, labels seriesLabels: [String: String]) -> Bool {
        guard name == metric else { return false }
        for (key, value) in labels {
            if key == "ring" { if value != ring { return false } } else if seriesLabels[key] != value { return false }
        }
        return true
    }

    /// Whether an observed value keeps the objective.
    public func isMet(by observed: Double, threshold bound: Double) -> Bool {
        inclusive ? observed <= bound : observed < bound
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
