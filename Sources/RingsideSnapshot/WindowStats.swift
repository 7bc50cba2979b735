import RingsideAggregation

/// A series' statistics over one window.
package struct WindowStats: Sendable {
    // Histograms (count is scaled by sampling) ...
    package var count: UInt64 = 0
    /// In steps, as `mean`.
    package var sum: Double = 0
    package var min: Int128 = 0, max: Int128 = 0
    package var mean: Double = 0
    /// One value per configured quantile.
    package var quantileValues: [Int128] = []
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

    /// Histograms: the values recorded per second over the span the window covers at `now`
    /// (CLOCK_MONOTONIC, as `coveredFromNanos`; the snapshot's `monotonicNanos`), at least `tickNanos`.
    package func valuesPerSecond(atNanos now: UInt64, tickNanos: UInt64) -> Double {
        guard count > 0 else { return 0 }
        return Double(count) * 1e9 / Double(Swift.max(now > coveredFromNanos ? now - coveredFromNanos : 0, tickNanos))
    }
}
