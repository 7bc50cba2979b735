/// How often the cells of rings that show no sign of change are sampled.
///
/// A record drained or a counter's `cell_writes` moving has a ring's cells looked at at once;
/// what moves no such word (an increment by a thread without a lane, a value clamped, an
/// operator's switch, the counters of a producer too old to move it) is seen when they are looked at anyway:
/// once a second while that costs at most a tenth of the drain thread, less often beyond, so
/// that a million idle series (about a microsecond each to look at) do not keep it busy. Nothing
/// is lost meanwhile: the cells keep their totals, only when they are seen moves.
struct CellSamplingPace {
    /// Nanoseconds a metric's cells took to look at, smoothed over the last looks.
    private(set) var nanosPerMetric = 0.0
    /// The share of the drain thread idle looks may take.
    static let share = 0.1

    /// Notes a look at `metrics` metrics' cells that took `nanos`.
    mutating func note(nanos: UInt64, metrics: Int) {
        guard metrics > 0 else { return }
        let observed = Double(nanos) / Double(metrics)
        nanosPerMetric = nanosPerMetric == 0 ? observed : 0.8 * nanosPerMetric + 0.2 * observed
    }

    /// How long to leave a ring's cells unseen when nothing says they moved, with `metrics`
    /// metrics in every ring together.
    func intervalNanos(metrics: Int) -> UInt64 {
        let round = nanosPerMetric * Double(metrics) / Self.share
        return max(DrainTiming.livenessIntervalNanos, round < 3.6e12 ? UInt64(round) : 3_600_000_000_000)
    }
}
