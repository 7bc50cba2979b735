import RingsideExport
import Ringside
import RingsideCommandLine

/// A service-level objective, of one of three kinds, with options after it:
///
///     METRIC{LABEL="VALUE",...}:STAT OP THRESHOLD@WINDOW [severity=P2] [capture]   a statistic
///     order_fill_latency{symbol="AAPL"}:p99<100us@1m          a histogram's, over a window
///     slippage_bps:p95<50@5m                                  a signed histogram's, in its unit
///     kill_switch_active:max<1@1m severity=P0                 a gauge's, over any period
///     daily_pnl:min>-50000@1d
///
///     METRIC{...}:rate OP BOUND@PERIOD                        a counter's increase a second
///     orders:rate>1@5m
///
///     BAD{...}/TOTAL{...} OP BOUND@PERIOD                     a ratio of counters
///     orders_rejected/orders_total<0.05%@30d
///     orders_filled/orders_sent>=90%@1h
///
/// - A selector matches every series with that metric name whose labels include the given ones
///   (`ring` matches the bot's name); the rule is judged on all matching series merged. Braces
///   are optional.
/// - STAT: `pNN` (`p50`, `p99`: percent), `p999` / `p9999` (three or more digits: 0.999...),
///   `p99.9` (a percent with decimals) and `mean` judge histograms (of unsigned or signed
///   values) over one of the collector's windows; `max` and `min` judge histograms so, or gauges
///   over any period from 1 s to 90 days (the largest or smallest value the gauge held in it).
///   THRESHOLD: a number (negative ones too) in the metric's own unit, or with a unit (`ns`,
///   `us`, `ms`, `s`) for metrics of time.
/// - `rate` judges counters: their increase over PERIOD (1 s to 90 days) a second, in the
///   counter's unit; BOUND a number.
/// - A ratio: the first counters' increase over the second's, over PERIOD (1 s to 90 days):
///   BOUND a percentage (`0.05%`) or a fraction (`0.0005`).
/// - OP: `<`, `<=`, `>` or `>=`. Options: `severity=NAME` (letters, digits, `_`, `-`; P1 when
///   not given), carried as a label by the SLO's series, so that an alert routes by it;
///   `capture`: when it begins to be violated, the collector captures the flight recorder's
///   records of the bots whose series it reads (with `--capture-dir`).
///
/// Which kinds of series a rule can judge is `SLOKinds`'s; how each is judged, `SLOState`'s.
package struct SLORule: Sendable, Equatable {
    package enum Statistic: Sendable, Equatable {
        case quantile(Double)
        case max
        case min
        case mean
    }

    /// How the measure is held to the bound.
    package enum Comparison: String, Sendable, Equatable {
        case below = "<"
        case atMost = "<="
        case above = ">"
        case atLeast = ">="
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
        /// A statistic of the matching histograms' window, or (`max`, `min`) of the matching
        /// gauges' values over the period: the bound in nanoseconds if `thresholdIsTime`, else in
        /// the metric's unit.
        case distribution(Selector, Statistic, threshold: Double, thresholdIsTime: Bool)
        /// The matching counters' increase over the period a second, in their unit.
        case rate(Selector, bound: Double)
        /// The matching `bad` counters' increase over the `total` counters' increase, as a fraction.
        case ratio(bad: Selector, total: Selector, bound: Double)
    }

    /// The rule as written, without its options: the SLO's name in its series (`slo`).
    package let text: String
    package let objective: Objective
    package let comparison: Comparison
    /// The window (a histogram's, one of the collector's) or period (the others') it is judged over.
    package let windowNanos: UInt64
    /// Its alerts' severity: a label of its series.
    package let severity: String
    /// A violation's start asks for a capture of the bots it reads (the `capture` option).
    package let capture: Bool

    /// The shortest and longest period a gauge, a rate or a ratio is judged over.
    package static let shortestPeriodNanos: UInt64 = 1_000_000_000
    package static let longestPeriodNanos: UInt64 = 90 * 86_400 * 1_000_000_000
    package static let defaultSeverity = "P1"

    /// Why a rule does not parse.
    package struct ParseError: Error, Equatable {
        package let reason: String
    }

    package init(parsing written: String) throws(ParseError) {
        let (rule, options) = Self.splitOptions(Substring(written))
        (severity, capture) = try Self.parseOptions(options)
        text = String(rule)
        guard let at = rule.lastIndex(of: "@") else { throw ParseError(reason: "expected ...@WINDOW, e.g. @1m") }
        guard let window = durationNanos(String(rule[rule.index(after: at)...])), window > 0 else {
            throw ParseError(reason: "\(rule[rule.index(after: at)...]) is not a window duration (e.g. 1s, 5s, 1m, 30d)")
        }
        windowNanos = window
        let head = rule[..<at]
        let (measured, comparison, boundText) = try Self.splitComparison(head)
        self.comparison = comparison
        if let slash = Self.firstIndex(of: "/", outsideQuotesIn: measured) {
            try Self.checkPeriod(window, of: "a ratio")
            objective = .ratio(
                bad: try Self.parseSelector(measured[..<slash]), total: try Self.parseSelector(measured[measured.index(after: slash)...]),
                bound: try Self.parseRatioBound(boundText))
            return
        }
        guard let colon = measured.lastIndex(of: ":") else {
            throw ParseError(
                reason: "expected METRIC:STAT<THRESHOLD (e.g. latency:p99<100us), METRIC:rate>BOUND (e.g. orders:rate>1) "
                    + "or BAD/TOTAL<RATIO (e.g. errors/requests<0.1%)")
        }
        let selector = try Self.parseSelector(measured[..<colon])
        let statisticText = measured[measured.index(after: colon)...]
        if statisticText == "rate" {
            try Self.checkPeriod(window, of: "a rate")
            objective = .rate(selector, bound: try Self.parseRateBound(boundText))
            return
        }
        let statistic = try Self.parseStatistic(statisticText)
        let (threshold, isTime) = try Self.parseThreshold(boundText)
        objective = .distribution(selector, statistic, threshold: threshold, thresholdIsTime: isTime)
    }

    /// Whether it is a ratio of counters rather than a statistic or a rate.
    package var isRatio: Bool {
        if case .ratio = objective { return true }
        return false
    }

    /// `<=` or `>=`: the bound itself keeps the objective.
    package var inclusive: Bool { comparison == .atMost || comparison == .atLeast }

    /// `>` or `>=`: a floor rather than a ceiling.
    package var isFloor: Bool { comparison == .above || comparison == .atLeast }

    /// The fraction of events the objective wants good: a ratio's 1 - bound (a floor's bound), a
    /// quantile's quantile (a floor's 1 - quantile); nil for the others.
    package var objectiveRatio: Double? {
        switch objective {
        case let .ratio(_, _, bound): return isFloor ? bound : 1 - bound
        case let .distribution(_, .quantile(q), _, _): return isFloor ? 1 - q : q
        case .distribution, .rate: return nil
        }
    }

    /// The statistic's name as reported: `p99`, `p999`, `max`, `min`, `mean`; `rate`; `ratio`.
    package var statisticName: String {
        switch objective {
        case .ratio: return "ratio"
        case .rate: return "rate"
        case let .distribution(_, .quantile(q), _, _): return quantileKey(q)
        case .distribution(_, .max, _, _): return "max"
        case .distribution(_, .min, _, _): return "min"
        case .distribution(_, .mean, _, _): return "mean"
        }
    }

    /// The selectors it reads: one, or a ratio's two.
    package var selectors: [Selector] {
        switch objective {
        case let .distribution(selector, _, _, _), let .rate(selector, _): return [selector]
        case let .ratio(bad, total, _): return [bad, total]
        }
    }

    /// A statistic's threshold in a metric's unit, or nil if a time bound meets a metric that is
    /// not a time (or the rule is not a statistic's).
    package func threshold(in unit: MetricUnit) -> Double? {
        guard case let .distribution(_, _, threshold, thresholdIsTime) = objective else { return nil }
        guard thresholdIsTime else { return threshold }
        guard let nanosPerUnit = unit.nanoseconds else { return nil }
        return threshold / Double(nanosPerUnit)
    }

    /// Whether an observed value keeps the objective.
    package func isMet(by observed: Double, threshold bound: Double) -> Bool {
        switch comparison {
        case .below: observed < bound
        case .atMost: observed <= bound
        case .above: observed > bound
        case .atLeast: observed >= bound
        }
    }
}
