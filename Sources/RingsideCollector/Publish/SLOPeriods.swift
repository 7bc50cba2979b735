import Ringside

// MARK: - What a gauge, a rate or a ratio keeps of its period: checkpoints, bounded

/// A ratio's or a rate's counters: how much its bad and total counters grew since the collector started,
/// and checkpoints of that over its period, so that the increase over the period is a
/// subtraction. A counter that goes back started again (its bot's file was made anew): its new
/// total is its increase, as Prometheus' `increase` takes it. A series seen at the first take
/// counts from there (what it held before is not this collector's to judge); one that appears
/// later counts from zero (a bot or a label that is new since).
struct CounterIncreases {
    /// Checkpoints kept: the period is judged to within one step of it (1/4096, at least 1 s).
    static let checkpoints = 4096

    let periodNanos: UInt64
    private let stepNanos: UInt64
    /// Each series' total at the last take, and whether there was one (the first is the baseline).
    private var lastBad: [String: UInt64] = [:]
    private var lastTotal: [String: UInt64] = [:]
    private var hasBaseline = false
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
        bad = Self.add(badTotals, last: &lastBad, to: bad, baseline: !hasBaseline)
        total = Self.add(allTotals, last: &lastTotal, to: total, baseline: !hasBaseline)
        hasBaseline = true
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

    /// The increases over the period (since the first take, until the collector has run that
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

/// A gauge SLO's values over its period: the smallest and largest value its gauges held or were
/// set to, in checkpoints of one step each (the period's 4,096th, at least 1 s), so that the
/// period's extremes are a fold of at most 4,098 checkpoints, whatever the period and however
/// many gauges it reads. At each evaluation the publisher gives it what the gauges hold then and the
/// extremes of the values set since the last evaluation (a window of the series at least that long).
struct GaugeExtremes {
    let periodNanos: UInt64
    private let stepNanos: UInt64
    /// (since when, min, max), oldest first, one per step at most, the period's and one more.
    private var history: [(nanos: UInt64, min: Double, max: Double)] = []
    private var head = 0

    init(periodNanos: UInt64) {
        self.periodNanos = periodNanos
        stepNanos = max(periodNanos / UInt64(CounterIncreases.checkpoints), 1_000_000_000)
    }

    /// Takes values seen now (the smallest and the largest).
    mutating func take(min low: Double, max high: Double, nowNanos now: UInt64) {
        if let last = history.indices.last, now < history[last].nanos &+ stepNanos {
            history[last].min = Swift.min(history[last].min, low)
            history[last].max = Swift.max(history[last].max, high)
        } else {
            history.append((now, low, high))
        }
        // Drop the checkpoints that end before the period's start.
        while head + 1 < history.count, history[head + 1].nanos &+ periodNanos <= now { head += 1 }
        if head > CounterIncreases.checkpoints {
            history.removeFirst(head)
            head = 0
        }
    }

    /// The smallest and largest values of the period (to within one step at its start), and the
    /// time they cover; nil when no value was seen in it.
    func overPeriod(nowNanos now: UInt64) -> (min: Double, max: Double, coveredNanos: UInt64)? {
        var head = head
        while head < history.count, head + 1 < history.count, history[head + 1].nanos &+ periodNanos <= now { head += 1 }
        guard head < history.count, history[history.count - 1].nanos &+ periodNanos > now else { return nil }
        var low = Double.infinity, high = -Double.infinity
        for checkpoint in history[head...] {
            low = Swift.min(low, checkpoint.min)
            high = Swift.max(high, checkpoint.max)
        }
        return (low, high, now &- history[head].nanos)
    }
}
