import Ringside
import RingsideAggregation
import RingsideSnapshot

// MARK: - Judging each kind: histograms' windows, gauges', rates' and ratios' periods

extension SLOState {
    /// Merges the rule's window of every histogram series it judges (of unsigned or of signed
    /// values, as the first it judged) and judges the statistic, in the metric's own unit.
    mutating func judgeHistograms(bots: [BotSeries], layout: WindowLayout, nowNanos now: UInt64, into outcome: inout Outcome) {
        guard case let .distribution(_, statistic, _, _) = rule.objective, let first = judged[0],
            let window = layout.index(ofWindowNanos: rule.windowNanos)
        else { return }
        if first.metric.isSigned {
            let merged = merge(\.signedHistograms, window: window, of: bots, nowNanos: now, into: &outcome)
            judge(merged, statistic, metric: first.metric, into: &outcome)
        } else {
            let merged = merge(\.histograms, window: window, of: bots, nowNanos: now, into: &outcome)
            judge(merged, statistic, metric: first.metric, into: &outcome)
        }
    }

    /// The rule's window of every series of `table` it judges, merged; counts the series matched and takes their bots.
    private func merge<Slice: WindowedHistogramSlice>(
        _ table: KeyPath<SeriesTables, [BotAggregator.Series<Windowed<Slice>>]>, window: Int, of bots: [BotSeries],
        nowNanos now: UInt64, into outcome: inout Outcome
    ) -> Slice {
        var merged = Slice()
        for bot in bots {
            let name = bot.name
            let matched = bot.aggregator.mergeHistograms(table, window: window, nowNanos: now, into: &merged) {
                judges($0, ofBot: name, selector: 0)
            }
            note(matched, of: name, in: &outcome)
        }
        return merged
    }

    private func note(_ matched: Int, of bot: String, in outcome: inout Outcome) {
        outcome.matchingSeries += matched
        if matched > 0 { outcome.bots.insert(bot) }
    }

    /// Judges a merged window: violated while it holds events and the statistic breaks the bound.
    private func judge(
        _ merged: some SLODistribution, _ statistic: SLORule.Statistic, metric: MetricDescriptor, into outcome: inout Outcome
    ) {
        outcome.unit = metric.unit
        outcome.events = merged.count
        guard let bound = rule.threshold(in: metric.unit) else { return }
        outcome.threshold = bound
        guard merged.count > 0 else { return }
        let observed = metric.inOwnUnit(merged.steps(at: statistic))
        outcome.observed = observed
        outcome.violated = !rule.isMet(by: observed, threshold: bound)
        let within = Double(merged.count(atOrBelowSteps: bound / metric.inOwnUnit(1))) / Double(merged.count)
        outcome.compliance = rule.isFloor ? 1 - within : within
    }

    /// Takes what the gauges it judges hold now and the extremes of the values set since the last
    /// evaluation, and judges the largest (`max`) or smallest (`min`) of the period: violated while a
    /// value held or set in it breaks the bound; no data while none was.
    ///
    /// The values set since the last evaluation are read from the shortest window at least that long,
    /// and only from a gauge set since shortly before it (the shortest window's length: a record
    /// drained a little late): a gauge left alone is not read again, so what its window still
    /// holds is not taken again as new, and a value stays in the period a period after it was
    /// taken (to within a checkpoint and the shortest window).
    mutating func judgeGauges(bots: [BotSeries], layout: WindowLayout, nowNanos now: UInt64, into outcome: inout Outcome) {
        guard case let .distribution(_, statistic, _, _) = rule.objective, let first = judged[0] else { return }
        let window = Self.window(covering: lastEvaluatedNanos.map { now &- $0 } ?? rule.windowNanos, in: layout)
        let setSince = lastEvaluatedNanos.map { $0 &- min($0, layout.windowNanos.min() ?? 0) } ?? 0
        var low = Double.infinity, high = -Double.infinity
        var holding: UInt64 = 0
        for bot in bots {
            let name = bot.name
            bot.aggregator.forEachGauge(where: { judges($0, ofBot: name, selector: 0) }) { _, windows, value in
                outcome.matchingSeries += 1
                outcome.bots.insert(name)
                if let value {
                    (low, high, holding) = (min(low, value), max(high, value), holding + 1)
                }
                guard windows.last != nil, windows.lastNanos >= setSince, let range = windows.range(window: window, nowNanos: now) else {
                    return
                }
                (low, high) = (min(low, range.min), max(high, range.max))
            }
        }
        var extremes = self.extremes ?? GaugeExtremes(periodNanos: rule.windowNanos)
        if low <= high { extremes.take(min: low, max: high, nowNanos: now) }
        self.extremes = extremes
        outcome.unit = first.metric.unit
        outcome.events = holding
        outcome.threshold = rule.threshold(in: first.metric.unit)
        guard let bound = outcome.threshold, let period = extremes.overPeriod(nowNanos: now) else { return }
        let observed = statistic == .min ? period.min : period.max
        outcome.observed = observed
        outcome.coveredNanos = period.coveredNanos
        outcome.violated = !rule.isMet(by: observed, threshold: bound)
        outcome.compliance = outcome.violated ? 0 : 1
    }

    /// The index of the shortest of the layout's windows at least `nanos` long (the longest if none is).
    static func window(covering nanos: UInt64, in layout: WindowLayout) -> Int {
        let windows = layout.windowNanos
        let long = windows.indices.filter { windows[$0] >= nanos }
        return long.min { windows[$0] < windows[$1] } ?? windows.indices.max { windows[$0] < windows[$1] } ?? 0
    }

    /// Takes the counters' totals and judges their increase over the period a second, in their
    /// unit, once the collector has seen the whole period (before, a floor would break at every
    /// start): violated while it breaks the bound, an increase of 0 too (a feed gone quiet).
    mutating func judgeRate(bots: [BotSeries], nowNanos now: UInt64, into outcome: inout Outcome) {
        guard case let .rate(_, bound) = rule.objective else { return }
        var totals: [String: UInt64] = [:]
        for bot in bots {
            let name = bot.name
            bot.aggregator.forEachCounter(where: { judges($0, ofBot: name, selector: 0) }) {
                totals[CounterIncreases.key(bot: name, $0)] = $1
                outcome.bots.insert(name)
            }
        }
        outcome.matchingSeries = totals.count
        outcome.threshold = bound
        var increases = self.increases ?? CounterIncreases(periodNanos: rule.windowNanos)
        increases.take(bad: [:], total: totals, nowNanos: now)
        let (_, increase, covered) = increases.overPeriod(nowNanos: now)
        self.increases = increases
        outcome.events = increase
        outcome.coveredNanos = covered
        guard let first = judged[0], !totals.isEmpty, covered >= rule.windowNanos else { return }
        outcome.unit = first.metric.unit
        let rate = first.metric.inOwnUnit(Double(increase)) / (Double(covered) / 1e9)
        outcome.observed = rate
        outcome.violated = !rule.isMet(by: rate, threshold: bound)
        outcome.compliance = outcome.violated ? 0 : 1
    }

    /// Takes the matching counters' totals and judges the first counters' share of the second's
    /// increase over the period (the bad events' share, below a ceiling; the good events', above
    /// a floor, whose bad events are the rest).
    mutating func judgeRatio(bots: [BotSeries], nowNanos now: UInt64, into outcome: inout Outcome) {
        guard case let .ratio(_, _, bound) = rule.objective else { return }
        outcome.threshold = bound
        var firstTotals: [String: UInt64] = [:], allTotals: [String: UInt64] = [:]
        for bot in bots {
            let name = bot.name
            bot.aggregator.forEachCounter(where: { judges($0, ofBot: name, selector: 0) }) {
                firstTotals[CounterIncreases.key(bot: name, $0)] = $1
                outcome.bots.insert(name)
            }
            bot.aggregator.forEachCounter(where: { judges($0, ofBot: name, selector: 1) }) {
                allTotals[CounterIncreases.key(bot: name, $0)] = $1
            }
        }
        outcome.matchingSeries = firstTotals.count + allTotals.count
        var increases = self.increases ?? CounterIncreases(periodNanos: rule.windowNanos)
        increases.take(bad: firstTotals, total: allTotals, nowNanos: now)
        let (firstIncrease, totalIncrease, covered) = increases.overPeriod(nowNanos: now)
        self.increases = increases
        outcome.eventsTotal = increases.total
        outcome.badEventsTotal = rule.isFloor ? increases.total - min(increases.bad, increases.total) : increases.bad
        outcome.coveredNanos = covered
        outcome.events = totalIncrease
        guard totalIncrease > 0 else { return }
        // More first events than events (counters that do not nest) is all of them, not more.
        let ratio = min(Double(firstIncrease) / Double(totalIncrease), 1)
        outcome.observed = ratio
        outcome.compliance = rule.isFloor ? ratio : 1 - ratio
        outcome.violated = !rule.isMet(by: ratio, threshold: bound)
    }
}

/// A merged window of histograms, as an SLO reads it: in the metric's steps.
protocol SLODistribution {
    var count: UInt64 { get }
    /// A statistic, in steps.
    func steps(at statistic: SLORule.Statistic) -> Double
    /// How many values are at or below `steps`.
    func count(atOrBelowSteps steps: Double) -> UInt64
}

extension Histogram: SLODistribution {
    func steps(at statistic: SLORule.Statistic) -> Double {
        switch statistic {
        case let .quantile(q): Double(value(atQuantile: q))
        case .max: Double(max)
        case .min: Double(min)
        case .mean: mean
        }
    }

    func count(atOrBelowSteps steps: Double) -> UInt64 {
        guard steps >= 0 else { return 0 }
        return cumulativeCounts(atUpperBounds: [UInt64(Swift.min(steps, Double(UInt64.max / 2)))])[0]
    }
}

extension SignedHistogram: SLODistribution {
    func steps(at statistic: SLORule.Statistic) -> Double {
        switch statistic {
        case let .quantile(q): Double(values(atQuantiles: [q])[0])
        case .max: Double(max)
        case .min: Double(min)
        case .mean: mean
        }
    }

    func count(atOrBelowSteps steps: Double) -> UInt64 {
        let bound = Swift.max(Swift.min(steps.rounded(.down), Double(Int64.max / 2)), Double(Int64.min / 2))
        return cumulativeCounts(atUpperBounds: [Int64(bound)])[0]
    }
}
