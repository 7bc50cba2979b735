/// A counter slice: the (scaled) increments that fell in it.
struct CounterSlice: WindowSlice {
    var sum = 0.0

    mutating func reset() { sum = 0 }
    mutating func merge(_ other: CounterSlice) { sum += other.sum }
}

/// A gauge slice: the extremes set in it (`min > max` when nothing was).
struct GaugeSlice: WindowSlice {
    var min = Double.infinity
    var max = -Double.infinity

    mutating func reset() { self = GaugeSlice() }
    mutating func merge(_ other: GaugeSlice) {
        min = Swift.min(min, other.min)
        max = Swift.max(max, other.max)
    }
}

/// A counter or gauge: its ``SlidingSeries`` answers, and its rotation, are its windows'.
protocol SeriesOverSlidingWindows: SlidingSeries {
    associatedtype Slice: WindowSlice
    var windows: SlidingWindows<Slice> { get set }
}

extension SeriesOverSlidingWindows {
    /// The windows this series keeps.
    package var layout: WindowLayout { windows.layout }

    /// Moves the current tick into the windows once `now` has passed it (reads are correct
    /// without), and lets the windows' slices go once none is in a window.
    /// - Returns: whether it let them go.
    @discardableResult
    package mutating func advance(toNanos now: UInt64) -> Bool {
        windows.advance(toNanos: now)
    }

    /// Whether window `window` may hold other values at `now` than at `earlier` (see ``SlidingSeries``).
    package func windowMayHaveChanged(_ window: Int, since earlier: UInt64, to now: UInt64) -> Bool {
        windows.windowMayHaveChanged(window, since: earlier, to: now)
    }

    /// Until when window `window` holds what it holds at `now` (see ``SlidingSeries``).
    package func holdsTheSameUntil(window: Int, nowNanos now: UInt64) -> UInt64 {
        windows.holdsTheSameUntil(window: window, nowNanos: now)
    }

    /// Whether windows `window` and `other` hold the same records at `now` (see ``SlidingSeries``).
    package func holdsTheSameRecords(window: Int, as other: Int, nowNanos now: UInt64) -> Bool {
        windows.holdsTheSameRecords(window: window, as: other, nowNanos: now)
    }
}

/// A counter series: an all-time total for Prometheus and per-window sums for rates, with the
/// same windows and rotation as ``WindowedHistogram``.
///
/// Every increment is multiplied by ``samplingFactor``, so a producer that records one event in
/// `n` still counts all of them. A value type: safe to send, not to mutate from two threads.
package struct WindowedCounter: SeriesOverSlidingWindows, Sendable {
    var windows: SlidingWindows<CounterSlice>
    /// What each increment is multiplied by: `n` for a producer that samples one event in `n`.
    package var samplingFactor: Double

    /// Makes a counter at zero.
    package init(layout: WindowLayout = .standard, samplingFactor: Double = 1) {
        windows = SlidingWindows(layout: layout)
        self.samplingFactor = samplingFactor
    }

    /// Adds `increment` times ``samplingFactor``, observed at `t` (CLOCK_MONOTONIC nanoseconds).
    package mutating func add(_ increment: UInt64 = 1, atNanos t: UInt64) {
        let amount = Double(increment) * samplingFactor
        windows.update(atNanos: t) { $0.sum += amount }
    }

    /// Everything ever added, scaled.
    package var total: Double { windows.allTimeBeforeHead.sum + windows.head.sum }

    /// What was added in window `window` as of `now`, scaled.
    package func sum(window: Int, nowNanos now: UInt64) -> Double {
        var result = CounterSlice()
        windows.merge(window: window, nowNanos: now, into: &result)
        return result.sum
    }

    /// The rate per second over window `window` at `now`: its sum over the time it covers (at
    /// least one tick, and not counting time before the first increment's tick).
    package func rate(window: Int, nowNanos now: UInt64) -> Double {
        let nanos = Swift.max(windows.coveredNanos(window: window, nowNanos: now), windows.layout.tickNanos)
        return sum(window: window, nowNanos: now) * 1e9 / Double(nanos)
    }
}

/// A gauge series: the last value set, and each window's minimum and maximum, with the same
/// windows and rotation as ``WindowedHistogram``.
///
/// A value type: safe to send, not to mutate from two threads.
package struct WindowedGauge: SeriesOverSlidingWindows, Sendable {
    var windows: SlidingWindows<GaugeSlice>
    /// The value with the latest timestamp (the later call on a tie); `nil` before the first.
    package private(set) var last: Double?
    /// The timestamp of ``last``.
    package private(set) var lastNanos: UInt64 = 0

    /// Makes a gauge that has not been set.
    package init(layout: WindowLayout = .standard) {
        windows = SlidingWindows(layout: layout)
    }

    /// Sets the gauge to `value` at `t` (CLOCK_MONOTONIC nanoseconds); NaN is ignored, and a late
    /// value updates the windows it falls in but not ``last``.
    package mutating func set(_ value: Double, atNanos t: UInt64) {
        guard !value.isNaN else { return }
        if last == nil || t >= lastNanos {
            last = value
            lastNanos = t
        }
        windows.update(atNanos: t) { slice in
            slice.min = Swift.min(slice.min, value)
            slice.max = Swift.max(slice.max, value)
        }
    }

    /// The smallest and largest values set in window `window` as of `now`; `nil` if none was.
    package func range(window: Int, nowNanos now: UInt64) -> (min: Double, max: Double)? {
        var result = GaugeSlice()
        windows.merge(window: window, nowNanos: now, into: &result)
        return result.min <= result.max ? (result.min, result.max) : nil
    }

    /// The smallest and largest values ever set; `nil` before the first.
    package var allTimeRange: (min: Double, max: Double)? {
        let all = windows.allTime
        return all.min <= all.max ? (all.min, all.max) : nil
    }
}
