import Foundation
import RingsideExport
import RingsideSnapshot
import Ringside
import RingsideAggregation
import RingsideCommandLine
import RingsideText

/// One SLO rule's judgement over time: violated or not, how often it broke, which series it
/// judges, and what the log said of it.
///
/// Judged (`SLOState+Judging`) on the series its selectors match of the kind it judges (the
/// first judgeable series' decides, `SLOSeriesKind`); the others it names are counted as
/// unjudged, and logged once. No data (a window without events, a period no gauge held a value
/// in, a rate's period not yet seen whole, a ratio's without events, or no matching series yet)
/// is neither met nor violated, and its compliance is none (not 1), until data judges it again.
struct SLOState {
    /// What one evaluation found.
    struct Outcome {
        var events: UInt64 = 0
        var matchingSeries = 0
        /// Series its selectors match that it cannot judge, and why the first of them.
        var unjudgedSeries = 0
        var unjudgedProblem: String?
        /// The statistic judged, nil when there was nothing to judge (no data).
        var observed: Double?
        var threshold: Double?
        var unit: MetricUnit = .none
        /// The fraction of the events within the bound, nil with no data.
        var compliance: Double?
        var violated = false
        /// A ratio's counts since the collector started; how much of its period a gauge, a rate or
        /// a ratio has seen.
        var eventsTotal: UInt64?
        var badEventsTotal: UInt64?
        var coveredNanos: UInt64?
        /// The bots whose series it read.
        var bots: Set<String> = []

        /// Whether there were events to judge the rule on.
        var hasData: Bool { observed != nil }
    }

    /// What the log said of the rule, once each.
    struct Logged {
        var noSeries = false
        var matchedSince = false
        var unjudged = false
    }

    let rule: SLORule
    private(set) var violated = false
    private(set) var violations: UInt64 = 0
    /// Each selector's first series it can judge (its bot and metric): the kind, unit and scale
    /// it judges from then on.
    var judged: [(bot: String, metric: MetricDescriptor)?]
    /// A rate's or a ratio's counters over its period.
    var increases: CounterIncreases?
    /// A gauge rule's values over its period.
    var extremes: GaugeExtremes?
    /// When it was last evaluated: a gauge's values set since are read from a window at least that long.
    var lastEvaluatedNanos: UInt64?
    private var logged = Logged()

    init(rule: SLORule) {
        self.rule = rule
        judged = Array(repeating: nil, count: rule.selectors.count)
    }

    /// Judges the rule on the bots' series now.
    mutating func evaluate(bots: [BotSeries], layout: WindowLayout, nowNanos now: UInt64) -> Outcome {
        var outcome = Outcome()
        sortSeries(bots: bots, windows: layout.windowNanos, into: &outcome)
        switch rule.objective {
        case .distribution:
            if judged[0].map({ $0.metric.kind == .gauge }) == true {
                judgeGauges(bots: bots, layout: layout, nowNanos: now, into: &outcome)
            } else {
                judgeHistograms(bots: bots, layout: layout, nowNanos: now, into: &outcome)
            }
        case .rate:
            judgeRate(bots: bots, nowNanos: now, into: &outcome)
        case .ratio:
            judgeRatio(bots: bots, nowNanos: now, into: &outcome)
        }
        lastEvaluatedNanos = now
        return outcome
    }

    /// Counts the series its selectors match that it cannot judge (a wrong kind, or another kind,
    /// unit or scale than the first it judges), and takes each selector's first judgeable one.
    private mutating func sortSeries(bots: [BotSeries], windows: [UInt64], into outcome: inout Outcome) {
        for (index, selector) in rule.selectors.enumerated() {
            for bot in bots {
                let name = bot.name
                bot.aggregator.forEachMetric(named: selector.metric) { metric in
                    guard selector.matches(ring: name, metric: metric.name, labels: metric.labelDictionary) else { return }
                    var problem = rule.problem(judging: metric, ofBot: name, windows: windows)
                    if problem == nil, let first = judged[index], SLOSeriesKind(first.metric) != SLOSeriesKind(metric) {
                        problem = SLORule.mixed(metric.name, (first.bot, SLOSeriesKind(first.metric)), (name, SLOSeriesKind(metric)))
                    }
                    guard let problem else {
                        if judged[index] == nil { judged[index] = (name, metric) }
                        return
                    }
                    outcome.unjudgedSeries += 1
                    if outcome.unjudgedProblem == nil { outcome.unjudgedProblem = problem }
                }
            }
        }
    }

    /// Whether selector `index` matches series `metric` of bot `bot` and the rule judges it.
    func judges(_ metric: MetricDescriptor, ofBot bot: String, selector index: Int) -> Bool {
        guard let first = judged[index], rule.selectors[index].matches(ring: bot, metric: metric.name, labels: metric.labelDictionary)
        else { return false }
        return SLOSeriesKind(first.metric) == SLOSeriesKind(metric)
    }

    /// The lines to log of an outcome, once each: the first series it cannot judge; that it matches
    /// no series yet (once the bots found at the start are shown), and that it does at last.
    mutating func logLines(for outcome: Outcome, startSettled: Bool) -> [String] {
        var lines: [String] = []
        if outcome.unjudgedSeries > 0, !logged.unjudged, let problem = outcome.unjudgedProblem {
            logged.unjudged = true
            lines.append(
                "SLO \(rule.text) names \(outcome.unjudgedSeries) series it cannot judge: \(problem); "
                    + "they are not judged (ringside_slo_unjudged_series counts them)")
        }
        if startSettled, outcome.matchingSeries == 0, outcome.unjudgedSeries == 0, !logged.noSeries {
            logged.noSeries = true
            lines.append("SLO \(rule.text) matches no series yet (a name or label not written by any bot, or a bot not started)")
        } else if logged.noSeries, !logged.matchedSince, outcome.matchingSeries > 0 {
            logged.matchedSince = true
            lines.append("SLO \(rule.text) matches \(outcome.matchingSeries) series now")
        }
        return lines
    }

    /// Takes in an outcome; returns the log line for a transition into or out of violation, if
    /// there is one (no data ends a violation: it is not judged broken on nothing).
    mutating func record(_ outcome: Outcome) -> String? {
        guard outcome.violated != violated else { return nil }
        violated = outcome.violated
        if violated {
            violations += 1
            return "SLO violated: \(rule.text) (severity \(rule.severity)): \(figures(outcome))"
        }
        guard outcome.observed != nil else {
            return "SLO has no data: \(rule.text): no events in its window, so neither met nor violated until events come"
        }
        return "SLO recovered: \(rule.text): " + figures(outcome)
    }

    /// An outcome's figures, for the log.
    private func figures(_ outcome: Outcome) -> String {
        let observed = outcome.observed ?? 0, bound = outcome.threshold ?? 0
        let covered = formatDuration(outcome.coveredNanos ?? 0, approximate: true)
        switch rule.objective {
        case .ratio:
            return "ratio \(ratioPercent(observed)), bound \(ratioPercent(bound)), \(outcome.events) events over \(covered)"
        case .rate:
            return "rate \(formatRate(observed))/s, bound \(formatRate(bound))/s, an increase of \(outcome.events) over \(covered)"
        case .distribution where judged[0]?.metric.kind == .gauge:
            let over = (outcome.coveredNanos ?? 0) >= 1_000_000_000 ? "over \(covered), " : ""
            return
                "\(rule.statisticName) \(formatMeasure(observed, unit: outcome.unit)), bound \(formatMeasure(bound, unit: outcome.unit)), "
                + "\(over)\(outcome.matchingSeries) gauges"
        case .distribution:
            return "\(rule.statisticName) \(formatMeasure(observed, unit: outcome.unit)), bound "
                + "\(formatMeasure(bound, unit: outcome.unit)), \(outcome.events) events, compliance \(percent(outcome.compliance ?? 0))"
        }
    }

    func snapshot(_ outcome: Outcome) -> SLOSnapshot {
        var snapshot = SLOSnapshot(
            rule: rule.text, statistic: rule.statisticName, window: formatDuration(rule.windowNanos),
            violated: outcome.hasData ? violated : nil, violations: violations, compliance: outcome.compliance,
            observed: outcome.observed, threshold: outcome.threshold, events: outcome.events,
            matchingSeries: outcome.matchingSeries)
        snapshot.severity = rule.severity
        snapshot.objectiveRatio = rule.objectiveRatio
        snapshot.eventsTotal = outcome.eventsTotal
        snapshot.badEventsTotal = outcome.badEventsTotal
        snapshot.coveredSeconds = outcome.coveredNanos.map { Double($0) / 1e9 }
        snapshot.unjudgedSeries = outcome.unjudgedSeries
        snapshot.unjudgedProblem = outcome.unjudgedProblem
        return snapshot
    }
}

private func percent(_ fraction: Double) -> String {
    oneDecimalAtMost(fraction * 100) + "%"
}

/// A ratio as a percentage to four significant digits: 0.0005 is "0.05%".
private func ratioPercent(_ fraction: Double) -> String {
    String(format: "%.4g%%", fraction * 100)
}

/// A rate to four significant digits.
private func formatRate(_ value: Double) -> String {
    String(format: "%.4g", value)
}
