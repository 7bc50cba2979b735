extension Histogram: WindowedHistogramSlice {}

/// A histogram of unsigned values over sliding windows (see ``Windowed``).
package typealias WindowedHistogram = Windowed<Histogram>

/// A signed histogram series (slippage, PnL: a histogram registered with signed values) over
/// sliding windows, each slice a ``SignedHistogram``. An unsigned series pays nothing for it: it
/// stays a ``WindowedHistogram``.
package typealias WindowedSignedHistogram = Windowed<SignedHistogram>

/// What a windowed histogram's slices are: ``Histogram`` (values `UInt64`) or ``SignedHistogram``
/// (values `Int64`, and a largest value that may be absent).
public protocol WindowedHistogramSlice: WindowSlice {
    associatedtype Value
    associatedtype Largest
    mutating func record(_ value: Value, count: UInt64)
    mutating func place(_ value: Value, count: UInt64)
    mutating func addSum(_ sum: Value, raisingMaxTo max: Largest)
    var count: UInt64 { get }
    var allocatedBytes: Int { get }
}

/// A histogram series over sliding windows (by default 1 s, 5 s and 1 min) plus all time, fed
/// by CLOCK_MONOTONIC-stamped records that may arrive slightly late or out of order.
///
/// Each window is a ring of per-slice histograms merged on read, as HdrHistogram's maintainers
/// recommend; see ``WindowLayout`` for what a window covers (the standard 1 s window slides in
/// 250 ms steps). Recording touches one histogram, the current tick's, in O(1) without
/// allocating once the slices have warmed up; every tick (250 ms by default) that histogram is
/// merged into each window's ring. A record older than a window is left out of it, never out
/// of ``cumulative``.
///
/// Memory: `windows * (slicesPerWindow + 1) + 2` histograms (17 with the standard layout), each
/// as described in ``Histogram``; a slot keeps its capacity across rotations, so a busy series
/// stays at the high-water mark of what its slices have needed, and an idle one (nothing in any
/// window) holds its all-time histogram alone: its slices are let go. Measured over 3 minutes of lognormal
/// latencies (sigma 1) with the standard layout: about 50 KiB per series at 10 records/s,
/// 240 KiB at 100/s, 500 KiB at 1000/s, 0.85-1 MiB at 10,000/s and above (1.7 MiB for a spread
/// 2.5 times wider); fewer windows or slices cut this proportionally.
///
/// The recording calls and the reads a snapshot makes are inlinable, and the type public (not
/// `package`: Swift 6.3 specializes a generic type's inlinable code in another module only then),
/// so the drain's hot path and the publisher's are specialized in the collector (unspecialized,
/// looking up the generic types at run time took a ninth of the drain thread at a million series).
///
/// A value type: safe to send across threads, not to mutate from two at once.
public struct Windowed<Slice: WindowedHistogramSlice>: SlidingSeries, Sendable {
    @usableFromInline var windows: SlidingWindows<Slice>

    /// Makes an empty series with the given windows (inlinable, as the reads are: a million new
    /// series each made one).
    @inlinable
    public init(layout: WindowLayout = .standard) {
        windows = SlidingWindows(layout: layout)
    }

    /// The windows this series keeps.
    public var layout: WindowLayout { windows.layout }

    /// Records `count` occurrences of `value` observed at `t` (CLOCK_MONOTONIC nanoseconds).
    ///
    /// The caller should clamp timestamps it does not trust to its own clock: a record from far
    /// in the future would make every later record look too old for the windows.
    @inlinable
    public mutating func record(_ value: Slice.Value, count: UInt64 = 1, atNanos t: UInt64) {
        windows.update(atNanos: t) { $0.record(value, count: count) }
    }

    /// Places `count` gathered calls at `value` at `t` (see ``Histogram/place(_:count:)``).
    @inlinable
    public mutating func place(_ value: Slice.Value, count: UInt64, atNanos t: UInt64) {
        guard count != 0 else { return }
        windows.update(atNanos: t) { $0.place(value, count: count) }
    }

    /// Adds gathered calls' exact sum and largest value at `t`, where their counts were placed.
    @inlinable
    public mutating func addSum(_ sum: Slice.Value, raisingMaxTo max: Slice.Largest, atNanos t: UInt64) {
        windows.update(atNanos: t) { $0.addSum(sum, raisingMaxTo: max) }
    }

    /// Moves the current tick's records into the windows once `now` has passed the tick, so that
    /// reading ``cumulative`` does not copy; reads are correct without it. Lets the windows'
    /// slices go once none of them is in a window any more (see ``SlidingWindows``).
    /// - Returns: whether it let them go (the series' memory fell).
    @inlinable @discardableResult
    public mutating func advance(toNanos now: UInt64) -> Bool {
        windows.advance(toNanos: now)
    }

    /// The values recorded in window `window` (an index into ``WindowLayout/windowNanos``) as of
    /// `now`, as one histogram.
    @inlinable
    public func snapshot(window: Int, nowNanos now: UInt64) -> Slice {
        windows.merged(window: window, nowNanos: now)
    }

    /// Whether window `window` may hold other values at `now` than at `earlier`, nothing
    /// recorded between (see ``SlidingSeries``).
    @inlinable
    public func windowMayHaveChanged(_ window: Int, since earlier: UInt64, to now: UInt64) -> Bool {
        windows.windowMayHaveChanged(window, since: earlier, to: now)
    }

    /// Until when window `window` holds what it holds at `now` (see ``SlidingSeries``).
    @inlinable
    public func holdsTheSameUntil(window: Int, nowNanos now: UInt64) -> UInt64 {
        windows.holdsTheSameUntil(window: window, nowNanos: now)
    }

    /// Whether windows `window` and `other` hold the same records at `now` (see ``SlidingSeries``).
    @inlinable
    public func holdsTheSameRecords(window: Int, as other: Int, nowNanos now: UInt64) -> Bool {
        windows.holdsTheSameRecords(window: window, as: other, nowNanos: now)
    }

    /// Where the span window `window` covers at `now` starts (CLOCK_MONOTONIC): its first slice's
    /// start, or the first record's tick if later.
    @inlinable
    public func coveredFromNanos(window: Int, nowNanos now: UInt64) -> UInt64 {
        windows.coveredFromNanos(window: window, nowNanos: now)
    }

    /// The nanoseconds of history window `window` holds at `now`, to turn its count into a rate.
    @inlinable
    public func coveredNanos(window: Int, nowNanos now: UInt64) -> UInt64 {
        windows.coveredNanos(window: window, nowNanos: now)
    }

    /// Every value ever recorded, for cumulative Prometheus buckets.
    @inlinable
    public var cumulative: Slice { windows.allTime }

    /// How many values were ever recorded (``cumulative``'s count), without merging anything.
    @inlinable
    public var cumulativeCount: UInt64 {
        let (total, overflow) = windows.allTimeBeforeHead.count.addingReportingOverflow(windows.headIsEmpty ? 0 : windows.head.count)
        return overflow ? .max : total
    }

    /// Adds `earlier` to the all-time histogram only (not to any window): what an earlier run of
    /// the collector kept of this series.
    public mutating func seedAllTime(_ earlier: Slice) {
        windows.seedAllTime(earlier)
    }

    /// Heap bytes held by the series' histograms.
    @inlinable
    public var allocatedBytes: Int {
        var bytes = windows.head.allocatedBytes + windows.allTimeBeforeHead.allocatedBytes
        // A plain loop, as in `SlidingWindows.advance`.
        for slot in windows.slots { bytes += slot.slice.allocatedBytes }
        return bytes
    }
}
