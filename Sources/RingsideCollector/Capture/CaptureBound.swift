import Ringside
import RingsideAggregation
import RingsideCommandLine

/// A bound that asks for a capture when a value goes above it (`--capture-when`):
///
///     METRIC{LABEL="VALUE",...}>THRESHOLD
///     order_fill_latency{symbol="AAPL"}>5ms
///
/// The selector is an SLO's (`ring` names the bot); THRESHOLD is a number with a unit (`ns`,
/// `us`, `ms`, `s`) for time metrics, or a bare number in the metric's own unit. The bound is
/// judged at each snapshot on the largest value of the matching histograms' shortest window: a
/// capture of their bots is asked for when it goes above, once until it comes back under.
struct CaptureBound: Sendable, Equatable {
    /// The bound as written: the trigger's detail.
    let text: String
    let selector: SLORule.Selector
    let threshold: Double
    let thresholdIsTime: Bool

    init(parsing written: String) throws(SLORule.ParseError) {
        text = written
        guard let greater = SLORule.firstIndex(of: ">", outsideQuotesIn: Substring(written)) else {
            throw SLORule.ParseError(reason: "expected METRIC>THRESHOLD, e.g. order_fill_latency{symbol=\"AAPL\"}>5ms")
        }
        selector = try SLORule.parseSelector(written[..<greater])
        let bound = String(written[written.index(after: greater)...])
        if let nanos = durationNanos(bound) {
            threshold = Double(nanos)
            thresholdIsTime = true
        } else if let value = Double(bound), value.isFinite {
            threshold = value
            thresholdIsTime = false
        } else {
            throw SLORule.ParseError(reason: "\(bound) is not a threshold (a number, with ns, us, ms or s for times)")
        }
    }

    /// The threshold in a metric's unit; nil when a time bound meets a metric that is not a time.
    func threshold(in unit: MetricUnit) -> Double? {
        guard thresholdIsTime else { return threshold }
        return unit.nanoseconds.map { threshold / Double($0) }
    }

    /// The matching histograms' largest value in the shortest window, against the bound: whether
    /// it is above, and the bots whose series went above.
    func judge(bots: [BotSeries], nowNanos now: UInt64) -> (above: Bool, bots: Set<String>) {
        var above: Set<String> = []
        for bot in bots {
            let name = bot.name
            var merged = Histogram()
            var bound: Double?
            _ = bot.aggregator.mergeHistograms(\.histograms, window: 0, nowNanos: now, into: &merged) { metric in
                guard !metric.isSigned, selector.matches(ring: name, metric: metric.name, labels: metric.labelDictionary),
                    let threshold = threshold(in: metric.unit)
                else { return false }
                if let bound, bound != threshold { return false }  // one unit per bot: the first series' decides
                bound = threshold
                return true
            }
            if let bound, merged.count > 0, Double(merged.max) > bound { above.insert(name) }
        }
        return (!above.isEmpty, above)
    }
}

/// Each `--capture-when` bound's state: a capture is asked for when it goes above, not again
/// until it has come back under.
struct CaptureBoundState {
    let bound: CaptureBound
    private(set) var above = false

    init(bound: CaptureBound) { self.bound = bound }

    /// Judges the bound now; the bots to capture when it has just gone above.
    mutating func evaluate(bots: [BotSeries], nowNanos now: UInt64) -> Set<String>? {
        let judged = bound.judge(bots: bots, nowNanos: now)
        defer { above = judged.above }
        return judged.above && !above ? judged.bots : nil
    }
}
