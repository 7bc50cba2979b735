import Foundation
import RingsideExport
import RingsideSnapshot
import Ringside
import RingsideAggregation
import RingsideCommandLine
import RingsideText

/// One SLO rule's judgement over time: violated or not, and how often it broke. A window with
/// no events (a quiet symbol, or no matching series yet) is no data: the rule is then neither
/// met nor violated, and its compliance is none (not 1), until events judge it again.
struct SLOState {
    /// What one evaluation found.
    struct Outcome {
        var events: UInt64 = 0
        var matchingSeries = 0
        /// The statistic judged, nil when there was nothing to judge (no data).
        var observed: Double?
        var threshold: Double?
        var unit: MetricUnit = .none
        /// The fraction of the events within the bound, nil with no data.
        var compliance: Double?
        var violated = false
        /// A ratio's counts since the collector started, and how much of its period it has seen.
        var eventsTotal: UInt64?
        var badEventsTotal: UInt64?
        var coveredNanos: UInt64?
        /// The bots whose series it read.
        var bots: Set<String> = []

        /// Whether there were events to judge the rule on.
        var hasData: Bool { observed != nil }
    }

    let rule: SLORule
    private(set) var violated = false
    private(set) var violations: UInt64 = 0
    /// A ratio rule's counters over its period.
    private var increases: CounterIncreases?

    init(rule: SLORule) {
        self.rule = rule
        if case .ratio = rule.objective { increases = CounterIncreases(periodNanos: rule.windowNanos) }
    }

    /// Judges the rule on the bots' series now.
    mutating func evaluate(bots: [BotSeries], layout: WindowLayout, nowNanos now: UInt64) -> Outcome {
        switch rule.objective {
        case .distribution:
            return evaluateDistribution(bots: bots, layout: layout, nowNanos: now)
        case let .ratio(bad, total, bound):
            return evaluateRatio(bad: bad, total: total, bound: bound, bots: bots, nowNanos: now)
        }
    }

    /// Merges the rule's window of every matching histogram series and judges it.
    private func evaluateDistribution(bots: [BotSeries], layout: WindowLayout, nowNanos now: UInt64) -> Outcome {
        var outcome = Outcome()
        guard case let .distribution(selector, statistic, _, _) = rule.objective,
            let window = layout.index(ofWindowNanos: rule.windowNanos)
        else { return outcome }
        var merged = Histogram()
        var bound: Double?
        var unit: MetricUnit?
        for bot in bots {
            let name = bot.name
            let matched = bot.aggregator.mergeHistograms(window: window, nowNanos: now, into: &merged) { metric in
                guard selector.matches(ring: name, metric: metric.name, labels: metric.labelDictionary),
                    let threshold = rule.threshold(in: metric.unit)
                else { return false }
                // Series of different units cannot be merged; the first one's unit decides.
                if let unit, metric.unit != unit { return false }
                unit = metric.unit
                bound = threshold
                return true
            }
            outcome.matchingSeries += matched
            if matched > 0 { outcome.bots.insert(name) }
        }
        outcome.unit = unit ?? .none
        outcome.events = merged.count
        outcome.threshold = bound
        guard let bound, merged.count > 0 else { return outcome }
        let observed: Double
        switch statistic {
        case let .quantile(q): observed = Double(merged.value(atQuantile: q))
        case .max: observed = Double(merged.max)
        case .mean: observed = merged.mean
        }
        outcome.observed = observed
        outcome.violated = !rule.isMet(by: observed, threshold: bound)
        let within = merged.cumulativeCounts(atUpperBounds: [UInt64(min(bound, Double(UInt64.max / 2)))])[0]
        outcome.compliance = Double(within) / Double(merged.count)
        return outcome
    }

    /// Takes the matching counters' totals and judges the bad ones' share of the total's increase
    /// over the period.
    private mutating func evaluateRatio(
        bad: SLORule.Selector, total: SLORule.Selector, bound: Double, bots: [BotSeries], nowNanos now: UInt64
    ) -> Outcome {
        var outcome = Outcome(threshold: bound)
        var badTotals: [String: UInt64] = [:], allTotals: [String: UInt64] = [:]
        for bot in bots {
            let name = bot.name
            bot.aggregator.forEachCounter(where: { bad.matches(ring: name, metric: $0.name, labels: $0.labelDictionary) }) {
                badTotals[CounterIncreases.key(bot: name, $0)] = $1
                outcome.bots.insert(name)
            }
            bot.aggregator.forEachCounter(where: { total.matches(ring: name, metric: $0.name, labels: $0.labelDictionary) }) {
                allTotals[CounterIncreases.key(bot: name, $0)] = $1
            }
        }
        outcome.matchingSeries = badTotals.count + allTotals.count
        guard var increases else { return outcome }
        increases.take(bad: badTotals, total: allTotals, nowNanos: now)
        let (badIncrease, totalIncrease, covered) = increases.overPeriod(nowNanos: now)
        self.increases = increases
        outcome.eventsTotal = increases.total
        outcome.badEventsTotal = increases.bad
        outcome.coveredNanos = covered
        outcome.events = totalIncrease
        guard totalIncrease > 0 else { return outcome }
        // More bad events than events (counters that do not nest) is all bad, not more.
        let ratio = min(Double(badIncrease) / Double(totalIncrease), 1)
        outcome.observed = ratio
        outcome.compliance = 1 - ratio
        outcome.violated = !rule.isMet(by: ratio, threshold: bound)
        return outcome
    }

    /// Takes in an outcome; returns the log line for a transition into or out of violation, if
    /// there is one (no data ends a violation: it is not judged broken on nothing).
    mutating func record(_ outcome: Outcome) -> String? {
        guard outcome.violated != violated else { return nil }
        violated = outcome.violated
        guard let observed = outcome.observed else {
            return "SLO has no data: \(rule.text): no events in its window, so neither met nor violated until events come"
        }
        let figures: String
        if rule.isRatio {
            figures =
                "ratio \(ratioPercent(observed)), bound \(ratioPercent(outcome.threshold ?? 0)), \(outcome.events) events over "
                + formatDuration(outcome.coveredNanos ?? 0)
        } else {
            figures =
                "\(rule.statisticName) \(formatMeasure(observed, unit: outcome.unit)), bound "
                + "\(formatMeasure(outcome.threshold ?? 0, unit: outcome.unit)), \(outcome.events) events, "
                + "compliance \(percent(outcome.compliance ?? 0))"
        }
        if violated {
            violations += 1
            return "SLO violated: \(rule.text) (severity \(rule.severity)): \(figures)"
        }
        return "SLO recovered: \(rule.text): " + figures
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
        return snapshot
    }
}

/// A ratio SLO's counters: how much its bad and total counters grew since the collector started,
/// and checkpoints of that over its period, so that the increase over the period is a
/// subtraction. A counter that goes back started again (its bot's file was made anew): its new
/// total is its increase, as Prometheus' `increase` takes it. A series seen at the first look
/// counts from there (what it held before is not this collector's to judge); one that appears
/// later counts from zero (a bot or a label that is new since).
struct CounterIncreases {
    /// Checkpoints kept: the period is judged to within one step of it (1/4096, at least 1 s).
    static let checkpoints = 4096

    let periodNanos: UInt64
    private let stepNanos: UInt64
    /// Each series' total at the last look.
    private var lastBad: [String: UInt64] = [:]
    private var lastTotal: [String: UInt64] = [:]
    private var looked = false
    /// The increases since the collector started (never lower than before).
    private(set) var bad: UInt64 = 0
    private(set) var total: UInt64 = 0
    /// (when, bad, total), oldest first, one per step at most, the period's and one more.
    private var history: [(nanos: UInt64, bad: UInt64, total: UInt64)] = []
    private var head = 0

    init(periodNanos: UInt64) {
        self.periodNanos = periodNanos
        stepNanos = max(periodNanos / UInt64(Self.checkpoints), 1_000_000_000)
    }

    /// A series' key: its bot, name and labels.
    static func key(bot: String, _ metric: MetricDescriptor) -> String {
        bot + "\u{0}" + metric.name + "\u{0}" + metric.encodedLabels
    }

    /// Takes the matching series' totals now.
    mutating func take(bad badTotals: [String: UInt64], total allTotals: [String: UInt64], nowNanos now: UInt64) {
        bad = Self.add(badTotals, last: &lastBad, to: bad, baseline: !looked)
        total = Self.add(allTotals, last: &lastTotal, to: total, baseline: !looked)
        looked = true
        if history.isEmpty || now >= history[history.count - 1].nanos &+ stepNanos {
            history.append((now, bad, total))
            // Drop what lies before the period's start, keeping the checkpoint at or before it.
            while head + 1 < history.count, history[head + 1].nanos &+ periodNanos <= now { head += 1 }
            if head > Self.checkpoints {
                history.removeFirst(head)
                head = 0
            }
        }
    }

    /// The increases over the period (since the first look, until the collector has run that
    /// long), and the time they cover.
    func overPeriod(nowNanos now: UInt64) -> (bad: UInt64, total: UInt64, coveredNanos: UInt64) {
        guard head < history.count else { return (0, 0, 0) }
        // The latest checkpoint at or before the period's start (the earliest one, if none is).
        let start = history[head]
        return (bad &- start.bad, total &- start.total, now &- start.nanos)
    }

    private static func add(_ totals: [String: UInt64], last: inout [String: UInt64], to sum: UInt64, baseline: Bool) -> UInt64 {
        var sum = sum
        for (key, now) in totals {
            let before = last[key] ?? (baseline ? now : 0)
            let grown = now >= before ? now - before : now
            sum = sum.addingReportingOverflow(grown).overflow ? .max : sum + grown
            last[key] = now
        }
        return sum
    }
}

private func percent(_ fraction: Double) -> String {
    oneDecimalAtMost(fraction * 100) + "%"
}

/// A ratio as a percentage to four significant digits: 0.0005 is "0.05%".
private func ratioPercent(_ fraction: Double) -> String {
    String(format: "%.4g%%", fraction * 100)
}
