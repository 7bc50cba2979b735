/// A signed histogram series (slippage, PnL: a histogram registered with signed values) over
/// sliding windows plus all time: ``WindowedHistogram``'s windows, each slice a ``SignedHistogram``.
/// An unsigned series pays nothing for it: it stays a ``WindowedHistogram``.
///
/// A value type: safe to send across threads, not to mutate from two at once.
package struct WindowedSignedHistogram: Sendable {
    var windows: SlidingWindows<SignedHistogram>

    /// Makes an empty series with the given windows.
    package init(layout: WindowLayout = .standard) {
        windows = SlidingWindows(layout: layout)
    }

    /// The windows this series keeps.
    package var layout: WindowLayout { windows.layout }

    /// Records `count` occurrences of `value` observed at `t` (CLOCK_MONOTONIC nanoseconds).
    package mutating func record(_ value: Int64, count: UInt64 = 1, atNanos t: UInt64) {
        windows.update(atNanos: t) { $0.record(value, count: count) }
    }

    /// Places `count` gathered calls at `value` at `t` (see ``SignedHistogram/place(_:count:)``).
    package mutating func place(_ value: Int64, count: UInt64, atNanos t: UInt64) {
        guard count != 0 else { return }
        windows.update(atNanos: t) { $0.place(value, count: count) }
    }

    /// Adds gathered calls' exact sum and largest value at `t`, where their counts were placed.
    package mutating func addSum(_ sum: Int64, raisingMaxTo max: Int64?, atNanos t: UInt64) {
        windows.update(atNanos: t) { $0.addSum(sum, raisingMaxTo: max) }
    }

    /// Moves the current tick's records into the windows once `now` has passed the tick.
    package mutating func advance(toNanos now: UInt64) {
        windows.advance(toNanos: now)
    }

    /// The values recorded in window `window` as of `now`, merged into a new histogram.
    package func snapshot(window: Int, nowNanos now: UInt64) -> SignedHistogram {
        var result = SignedHistogram()
        windows.merge(window: window, nowNanos: now, into: &result)
        return result
    }

    /// The nanoseconds of history window `window` holds at `now`, to turn its count into a rate.
    package func coveredNanos(window: Int, nowNanos now: UInt64) -> UInt64 {
        windows.coveredNanos(window: window, nowNanos: now)
    }

    /// Every value ever recorded.
    package var cumulative: SignedHistogram { windows.allTime }

    /// Adds `earlier` to the all-time histogram only: what an earlier run of the collector kept.
    package mutating func seedAllTime(_ earlier: SignedHistogram) {
        windows.allTimeBeforeHead.merge(earlier)
    }

    /// Heap bytes held by the series' histograms.
    package var allocatedBytes: Int {
        var total = windows.head.allocatedBytes + windows.allTimeBeforeHead.allocatedBytes
        for ring in windows.rings {
            total += ring.slices.reduce(0) { $0 + $1.allocatedBytes }
        }
        return total
    }
}
