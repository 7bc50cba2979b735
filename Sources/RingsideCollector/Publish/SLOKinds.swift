import Ringside
import RingsideCommandLine

/// What a rule can judge, by the kind of series its selector meets:
///
/// | rule | histogram (unsigned or signed) | gauge | counter |
/// | --- | --- | --- | --- |
/// | `pNN`, `mean` | over one of the collector's windows | no | no |
/// | `max`, `min` | over one of the collector's windows | over any period, 1 s to 90 d | no |
/// | `rate` | no | no | over any period |
/// | `BAD/TOTAL` | no | no | over any period |
///
/// and a bound of time (`5ms`) needs a metric of time; a negative bound, a histogram of signed
/// values. A rule judges series of one kind, unit and scale together (`SLOSeriesKind`): the first
/// it meets decides. A series a rule's selector names and it cannot judge is refused at start
/// and at reload, and counted (`ringside_slo_unjudged_series`) and said once when it appears later.
package struct SLOSeriesKind: Sendable, Equatable {
    package let kind: MetricKind
    package let isSigned: Bool
    package let unit: MetricUnit
    package let scale: Int8

    package init(_ metric: MetricDescriptor) {
        kind = metric.kind
        isSigned = metric.isSigned
        unit = metric.unit
        scale = metric.scale
    }

    /// `a histogram`, `a histogram of signed values`, `a gauge`, `a counter`.
    package var name: String {
        switch kind {
        case .histogram: isSigned ? "a histogram of signed values" : "a histogram"
        case .gauge: "a gauge"
        case .counter: "a counter"
        }
    }

    /// Its name with its unit and step: `a histogram in ns`, `a gauge (no unit)`, `a counter in
    /// steps of 10^-2`.
    package var described: String {
        let unitText = unit == .none ? " (no unit)" : " in \(unit)"
        return name + unitText + (scale == 0 ? "" : " in steps of 10^\(scale)")
    }
}

extension SLORule {
    /// A quantile or a mean: histograms only, over one of the collector's windows.
    package var needsCollectorWindow: Bool {
        if case .distribution(_, .quantile, _, _) = objective { return true }
        if case .distribution(_, .mean, _, _) = objective { return true }
        return false
    }

    /// Why the rule's window cannot be judged with the collector's windows `windows`, or nil:
    /// a quantile's or a mean's must be one of them; a `max`'s or a `min`'s one of them (a
    /// histogram's) or a period of 1 s to 90 days (a gauge's).
    package func windowProblem(windows: [UInt64]) -> String? {
        guard case .distribution = objective, !windows.contains(windowNanos) else { return nil }
        let listed = windows.map { formatDuration($0) }.joined(separator: ",")
        if needsCollectorWindow {
            return "window \(formatDuration(windowNanos)) is not one of --windows \(listed)"
        }
        guard windowNanos < Self.shortestPeriodNanos || windowNanos > Self.longestPeriodNanos else { return nil }
        return
            "window \(formatDuration(windowNanos)) is neither one of --windows \(listed) (a histogram's) nor a period from 1s to 90d (a gauge's)"
    }

    /// Why the rule cannot judge series `metric` of bot `bot` (one that `selector`, one of its
    /// selectors, matches), given the collector's windows; nil when it can.
    package func problem(judging metric: MetricDescriptor, ofBot bot: String, windows: [UInt64]) -> String? {
        let series = SLOSeriesKind(metric)
        let named = "\(metric.name) of bot \(bot) is \(series.name)"
        switch objective {
        case .ratio:
            return series.kind == .counter ? nil : "\(named): a ratio's BAD and TOTAL are counters"
        case .rate:
            return series.kind == .counter ? nil : "\(named): rate judges counters (\(Self.whatJudges(series.kind)))"
        case let .distribution(_, statistic, threshold, isTime):
            switch series.kind {
            case .counter:
                return "\(named): \(statisticName) judges histograms\(statistic == .max || statistic == .min ? " and gauges" : ""); "
                    + "a counter takes rate (\(metric.name):rate>1@5m) or a ratio (\(metric.name)/TOTAL<1%@30d)"
            case .gauge where statistic != .max && statistic != .min:
                return "\(named): \(statisticName) judges histograms; a gauge takes max or min"
            case .histogram where !windows.contains(windowNanos):
                let listed = windows.map { formatDuration($0) }.joined(separator: ",")
                return "\(named): its \(statisticName) is judged over one of --windows \(listed), not \(formatDuration(windowNanos))"
            default:
                break
            }
            if isTime, metric.unit.nanoseconds == nil {
                return "\(named) \(metric.unit == .none ? "with no unit" : "in \(metric.unit)"), not a time: "
                    + "a bound of time needs a metric of time (give a number in its own unit)"
            }
            if series.kind == .histogram, !series.isSigned, threshold < 0 {
                return "\(named) of values 0 or more: a negative bound is never crossed by them (a signed histogram takes one)"
            }
            return nil
        }
    }

    /// Why the rule cannot judge every series of `all` its selectors match (each with its bot):
    /// the first that it cannot judge, or of another kind, unit or scale than the first it can;
    /// nil when it judges them all. What start and reload refuse a rule for.
    package func problem(judgingAll all: [(bot: String, metric: MetricDescriptor)], windows: [UInt64]) -> String? {
        for selector in selectors {
            var first: (bot: String, kind: SLOSeriesKind)?
            for (bot, metric) in all where selector.matches(ring: bot, metric: metric.name, labels: metric.labelDictionary) {
                if let problem = problem(judging: metric, ofBot: bot, windows: windows) { return problem }
                let kind = SLOSeriesKind(metric)
                guard let first else {
                    first = (bot, kind)
                    continue
                }
                if kind != first.kind { return Self.mixed(metric.name, first, (bot, kind)) }
            }
        }
        return nil
    }

    /// Why a series of `kind` (of bot `bot`) is not judged beside those of the kind first judged.
    static func mixed(_ name: String, _ first: (bot: String, kind: SLOSeriesKind), _ other: (bot: String, kind: SLOSeriesKind)) -> String {
        "\(name) of bot \(other.bot) is \(other.kind.described), of bot \(first.bot) \(first.kind.described): "
            + "a rule judges series of one kind and unit together (name one with {ring=\"\(other.bot)\"})"
    }

    /// What rules a kind takes, for a message.
    private static func whatJudges(_ kind: MetricKind) -> String {
        switch kind {
        case .histogram: "a histogram takes p99, mean, max or min"
        case .gauge: "a gauge takes max or min"
        case .counter: "a counter takes rate or a ratio"
        }
    }
}
