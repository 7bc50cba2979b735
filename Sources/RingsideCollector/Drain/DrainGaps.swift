import RingsideAggregation
import RingsideSnapshot

/// The drain's gaps: how long records of busy rings could wait for the drain (see
/// `DrainGapFigures`), kept over the last minute and since the start, within 0.1 %. The sizing
/// rule of docs/operations.md rests on them. Touched by the drain thread only.
struct DrainGaps {
    private var gaps = WindowedHistogram(layout: WindowLayout(windowNanos: [DrainTiming.gapWindowNanos]))

    /// Records one gap of `nanos`, seen at `now` (CLOCK_MONOTONIC).
    mutating func record(_ nanos: UInt64, atNanos now: UInt64) {
        gaps.record(nanos, atNanos: now)
    }

    /// The last minute's figures, in seconds.
    func figures(nowNanos now: UInt64) -> DrainGapFigures {
        let recent = gaps.snapshot(window: 0, nowNanos: now)
        var figures = DrainGapFigures()
        figures.count = recent.count
        guard recent.count > 0 else { return figures }
        let values = recent.values(atQuantiles: [0.5, 0.99, 0.999])
        (figures.p50, figures.p99, figures.p999) = (Double(values[0]) / 1e9, Double(values[1]) / 1e9, Double(values[2]) / 1e9)
        figures.max = Double(recent.max) / 1e9
        return figures
    }

    /// Every gap since the start (for benchmarks, which read it once the drain has stopped).
    var sinceStart: Histogram { gaps.cumulative }
}
