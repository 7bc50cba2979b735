import RingsideAggregation

/// A series' statistics over one window.
package struct WindowStats: Sendable {
    // Histograms (count is scaled by sampling) ...
    package var count: UInt64 = 0
    /// In steps, as `mean`: 0 when the window is empty (a sum of nothing is 0).
    package var sum: Double = 0
    /// The figures of the window's values, kept whatever the window holds; read through `min`,
    /// `max`, `mean` and `quantileValues`, which say when there are none.
    private var lowest: Int128 = 0, highest: Int128 = 0
    private var average: Double = 0
    private var quantileList: [Int128] = []
    // ... counters ...
    /// What was added in the window (scaled by sampling).
    package var increase: Double = 0
    /// Counters: the increase per second over the span the window covered when it last moved
    /// (less than its length while the series is young). Histograms: see `valuesPerSecond`.
    package var rate: Double = 0
    // ... and gauges: the extremes set in the window, nil when nothing was.
    package var gaugeMin: Double?
    package var gaugeMax: Double?
    /// Histograms: the largest values recorded with an exemplar in the window, largest first
    /// (at most 5): the first is the maximum's when the maximum had one.
    package var exemplars: [KeptExemplar] = []
    /// Histograms: where the span the window covers starts (CLOCK_MONOTONIC: its first slice's
    /// start, or the series' first record's tick if later; 0 when empty). A rate over it moves
    /// with every read while the series is younger than the window, so it is read, not kept: a
    /// million young series would otherwise be made again at every slice for their rates alone.
    package var coveredFromNanos: UInt64 = 0

    package init() {}

    /// Histograms: whether any value fell in the window. The one place a window's emptiness is
    /// decided: when none did, its `min`, `max`, `mean` and `quantileValues` are nil (no data:
    /// NaN on /metrics, null on /latest, `-` in a table), never 0, while its `count`, `sum` and
    /// rate are 0 (a count of nothing).
    package var hasValues: Bool { count > 0 }

    /// The smallest and largest value in the window, in steps; nil when it is empty.
    package var min: Int128? {
        get { hasValues ? lowest : nil }
        set { lowest = newValue ?? 0 }
    }
    package var max: Int128? {
        get { hasValues ? highest : nil }
        set { highest = newValue ?? 0 }
    }
    /// The mean of the window's values, in steps; nil when it is empty.
    package var mean: Double? {
        get { hasValues ? average : nil }
        set { average = newValue ?? 0 }
    }
    /// One value per configured quantile, in steps; nil when the window is empty.
    package var quantileValues: [Int128]? {
        get { hasValues ? quantileList : nil }
        set { quantileList = newValue ?? [] }
    }

    /// Histograms: the values recorded per second over the span the window covers at `now`
    /// (CLOCK_MONOTONIC, as `coveredFromNanos`; the snapshot's `monotonicNanos`), at least `tickNanos`.
    package func valuesPerSecond(atNanos now: UInt64, tickNanos: UInt64) -> Double {
        guard count > 0 else { return 0 }
        return Double(count) * 1e9 / Double(Swift.max(now > coveredFromNanos ? now - coveredFromNanos : 0, tickNanos))
    }
}
