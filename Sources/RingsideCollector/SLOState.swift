import RingsideExport
import RingsideSnapshot
import Ringside
import RingsideAggregation
import RingsideCommandLine

/// One SLO rule's judgement over time: violated or not, and how often it broke.
struct SLOState {
    /// What one evaluation found.
    struct Outcome {
        var events: UInt64 = 0
        var matchingSeries = 0
        var observed: Double?
        var threshold: Double?
        var unit: MetricUnit = .none
        var compliance = 1.0
        var violated = false
    }

    let rule: SLORule
    private(set) var violated = false
    private(set) var violations: UInt64 = 0
    private var warnedUnits = false

    init(rule: SLORule) {
        self.rule = rule
    }

    /// Merges the rule's window of every matching histogram series and judges it.
    func evaluate(bots: [BotSeries], layout: WindowLayout, nowNanos now: UInt64) -> Outcome {
        var outcome = Outcome()
        guard let window = layout.index(ofWindowNanos: rule.windowNanos) else { return outcome }
        var merged = Histogram()
        var bound: Double?
        var unit: MetricUnit?
        for bot in bots {
            let name = bot.name
            outcome.matchingSeries += bot.aggregator.mergeHistograms(window: window, nowNanos: now, into: &merged) { metric in
                guard rule.matches(ring: name, metric: metric.name, labels: metric.labelDictionary),
                    let threshold = rule.threshold(in: metric.unit)
                else { return false }
                // Series of different units cannot be merged; the first one's unit decides.
                if let unit, metric.unit != unit { return false }
                unit = metric.unit
                bound = threshold
                return true
            }
        }
        outcome.unit = unit ?? .none
        outcome.events = merged.count
        outcome.threshold = bound
        guard let bound, merged.count > 0 else { return outcome }
        let observed: Double
        switch rule.statistic {
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

    /// Takes in an outcome; returns the log line for a transition, if there is one.
    mutating func record(_ outcome: Outcome) -> String? {
        guard outcome.violated != violated else { return nil }
        violated = outcome.violated
        let figures =
            "\(rule.statisticName) \(formatMeasure(outcome.observed ?? 0, unit: outcome.unit)), bound "
            + "\(formatMeasure(outcome.threshold ?? 0, unit: outcome.unit)), \(outcome.events) events, "
            + "compliance \(percent(outcome.compliance))"
        if violated {
            violations += 1
            return "SLO violated: \(rule.text): \(figures)"
        }
        return "SLO recovered: \(rule.text): " + (outcome.events == 0 ? "no events in the window" : figures)
    }

    func snapshot(_ outcome: Outcome) -> SLOSnapshot {
        SLOSnapshot(
            rule: rule.text, statistic: rule.statisticName, window: formatDuration(rule.windowNanos),
            violated: violated, violations: violations, compliance: outcome.compliance,
            observed: outcome.observed, threshold: outcome.threshold, events: outcome.events,
            matchingSeries: outcome.matchingSeries)
    }
}

private func percent(_ fraction: Double) -> String {
    oneDecimalAtMost(fraction * 100) + "%"
}
