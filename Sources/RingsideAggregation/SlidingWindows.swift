/// Which sliding windows a series keeps and how finely each one slides.
///
/// Window `w` is cut into `slicesPerWindow` slices of `w / slicesPerWindow` nanoseconds, aligned
/// to multiples of the slice length on the CLOCK_MONOTONIC timeline. At time `now` the window
/// holds the slice containing `now` and the `slicesPerWindow` slices before it, so it covers
/// between `w` and `w` plus one slice: with the standard layout and 4 slices, the 1 s window
/// covers 1.00-1.25 s, the 5 s window 5.00-6.25 s and the 1 min window 60-75 s, and a value leaves
/// each window that long after it was recorded. Rates divide by the span actually covered.
package struct WindowLayout: Sendable, Hashable {
    /// Each window's nominal length in nanoseconds, in the order snapshots are asked for.
    package let windowNanos: [UInt64]
    /// How many slices make up a window: the sliding granularity is the window over this.
    package let slicesPerWindow: Int
    /// Each window's slice length in nanoseconds.
    package let sliceNanos: [UInt64]
    /// The greatest common divisor of the slice lengths: recent records gather in one slice of
    /// this length before being folded into every window at once.
    package let tickNanos: UInt64

    /// 1 s, 5 s and 1 min windows sliding in quarters (250 ms, 1.25 s and 15 s).
    package static let standard = WindowLayout(
        windowNanos: [1_000_000_000, 5_000_000_000, 60_000_000_000], slicesPerWindow: 4)

    /// Makes a layout; each window must be a non-zero multiple of `slicesPerWindow` nanoseconds.
    package init(windowNanos: [UInt64], slicesPerWindow: Int = 4) {
        precondition(!windowNanos.isEmpty, "WindowLayout: no windows")
        precondition(slicesPerWindow >= 1, "WindowLayout: slicesPerWindow must be at least 1")
        let slices = UInt64(slicesPerWindow)
        precondition(
            windowNanos.allSatisfy { $0 > 0 && $0 % slices == 0 },
            "WindowLayout: every window must be a non-zero multiple of \(slicesPerWindow) ns")
        self.windowNanos = windowNanos
        self.slicesPerWindow = slicesPerWindow
        self.sliceNanos = windowNanos.map { $0 / slices }
        self.tickNanos = sliceNanos.dropFirst().reduce(sliceNanos[0], Self.greatestCommonDivisor)
    }

    /// The index of the window `nanos` long, if the layout has one.
    package func index(ofWindowNanos nanos: UInt64) -> Int? {
        windowNanos.firstIndex(of: nanos)
    }

    static func greatestCommonDivisor(_ a: UInt64, _ b: UInt64) -> UInt64 {
        b == 0 ? a : greatestCommonDivisor(b, a % b)
    }
}

/// What a window slice holds: something that can be emptied for reuse and added to another.
@usableFromInline
package protocol WindowSlice: Sendable {
    init()
    mutating func reset()
    mutating func merge(_ other: Self)
    /// Empties the head (the newest tick's slice) for the next tick: `reset()` unless the slice
    /// readies itself for a busy tick.
    mutating func resetHead()
}

extension WindowSlice {
    package mutating func resetHead() { reset() }
}

/// A ring of slices for one window, reused in place: a slot is claimed by the newest slice that
/// maps to it, so rotation is a reset when a slot is first written, never a pass over the ring.
struct SliceRing<Slice: WindowSlice>: Sendable {
    let sliceNanos: UInt64
    /// The slice id (`time / sliceNanos`) each slot holds, `UInt64.max` for a slot never used.
    var ids: [UInt64]
    var slices: [Slice]

    init(sliceNanos: UInt64, slots: Int) {
        self.sliceNanos = sliceNanos
        ids = [UInt64](repeating: .max, count: slots)
        slices = (0..<slots).map { _ in Slice() }
    }

    /// Applies `body` to slice `id`, claiming its slot if it holds an older slice; a slice too old
    /// for the ring (its slot holds a newer one) is dropped.
    mutating func update(sliceID id: UInt64, _ body: (inout Slice) -> Void) {
        let slot = Int(id % UInt64(ids.count))
        if ids[slot] != id {
            // An older occupant is at least a ring's length older, so no live window still needs it.
            guard ids[slot] == .max || ids[slot] < id else { return }
            ids[slot] = id
            slices[slot].reset()
        }
        body(&slices[slot])
    }

    /// Calls `body` with every slice whose id is at least `firstID`.
    func forEach(fromSliceID firstID: UInt64, _ body: (Slice) -> Void) {
        for slot in ids.indices where ids[slot] != .max && ids[slot] >= firstID {
            body(slices[slot])
        }
    }
}

/// The slicing and rotation shared by windowed histograms, counters and gauges.
///
/// Records in the newest tick (``WindowLayout/tickNanos``) go to one `head` slice: the hot path
/// is two comparisons and the caller's update. When a newer tick arrives, the head is merged into
/// each window's ring and into the all-time slice, then reused. A late record (older than the
/// head) goes straight into each ring whose slice for it is still held, and always into the
/// all-time slice. Memory is fixed by the layout: one head, one all-time slice and
/// `slicesPerWindow + 1` slices per window.
@usableFromInline
struct SlidingWindows<Slice: WindowSlice>: Sendable {
    let layout: WindowLayout
    var rings: [SliceRing<Slice>]
    /// The newest tick's records, not yet in `rings` or `allTimeBeforeHead`.
    @usableFromInline var head = Slice()
    @usableFromInline var headStart: UInt64 = 1
    /// One past the head tick's last nanosecond; 0 until the first record (and after an advance),
    /// so the fast path misses.
    @usableFromInline var headEnd: UInt64 = 0
    @usableFromInline var headIsEmpty = true
    /// Everything ever recorded except the head.
    var allTimeBeforeHead = Slice()
    /// The start of the first record's tick, `UInt64.max` before any record: rates do not count
    /// time before a series existed.
    var originNanos: UInt64 = .max

    init(layout: WindowLayout) {
        self.layout = layout
        rings = layout.sliceNanos.map { SliceRing(sliceNanos: $0, slots: layout.slicesPerWindow + 1) }
    }

    /// Applies `body` to every slice that a record at `t` belongs to.
    @inlinable @inline(__always)
    mutating func update(atNanos t: UInt64, _ body: (inout Slice) -> Void) {
        if t >= headStart && t < headEnd {
            headIsEmpty = false
            body(&head)
        } else {
            updateOutsideHead(atNanos: t, body)
        }
    }

    /// The rare path of ``update(atNanos:_:)``: the first record, a new tick, or a late record.
    @usableFromInline
    mutating func updateOutsideHead(atNanos t: UInt64, _ body: (inout Slice) -> Void) {
        let tick = layout.tickNanos
        let tickStart = t - t % tick
        originNanos = Swift.min(originNanos, tickStart)
        if headEnd == 0 || tickStart > headStart {
            foldHead()
            headStart = tickStart
            let (end, overflow) = tickStart.addingReportingOverflow(tick)
            headEnd = overflow ? .max : end
            headIsEmpty = false
            body(&head)
        } else if tickStart == headStart {
            // Only reachable in the last tick before UInt64.max, whose end does not fit.
            headIsEmpty = false
            body(&head)
        } else {
            // A ring drops the record if the slot for its slice already holds a newer slice.
            for index in rings.indices {
                rings[index].update(sliceID: t / rings[index].sliceNanos, body)
            }
            body(&allTimeBeforeHead)
        }
    }

    /// Moves the head's records into every ring and the all-time slice, then empties it.
    mutating func foldHead() {
        guard !headIsEmpty else { return }
        Self.merge(head, startingAt: headStart, into: &rings)
        allTimeBeforeHead.merge(head)
        head.resetHead()
        headIsEmpty = true
    }

    /// Merges `head` into each ring's slice for `start`; static so `head` is borrowed while the
    /// rings are mutated.
    static func merge(_ head: Slice, startingAt start: UInt64, into rings: inout [SliceRing<Slice>]) {
        for index in rings.indices {
            rings[index].update(sliceID: start / rings[index].sliceNanos) { $0.merge(head) }
        }
    }

    /// Folds the head away once `now` has passed its tick, so reads need not merge it. The next
    /// record places the head at its own tick: records drained after a snapshot's advance but
    /// written before it (a backlog) then stay on the fast path, instead of each one going late
    /// into every ring and the all-time slice.
    mutating func advance(toNanos now: UInt64) {
        guard headEnd != 0, now >= headEnd else { return }
        foldHead()
        headEnd = 0
    }

    /// The first slice id window `window` holds at `now`.
    func firstSliceID(window: Int, nowNanos now: UInt64) -> UInt64 {
        let current = now / layout.sliceNanos[window]
        let back = UInt64(layout.slicesPerWindow)
        return current > back ? current - back : 0
    }

    /// Merges the slices of window `window` at `now` into `result`.
    func merge(window: Int, nowNanos now: UInt64, into result: inout Slice) {
        let firstID = firstSliceID(window: window, nowNanos: now)
        rings[window].forEach(fromSliceID: firstID) { result.merge($0) }
        if !headIsEmpty && headStart / layout.sliceNanos[window] >= firstID {
            result.merge(head)
        }
    }

    /// The nanoseconds window `window` covers at `now`: from its first slice's start (or the first
    /// record's tick, if later) to `now`; 0 if `now` is before both.
    func coveredNanos(window: Int, nowNanos now: UInt64) -> UInt64 {
        let windowStart = firstSliceID(window: window, nowNanos: now) * layout.sliceNanos[window]
        let start = Swift.max(windowStart, originNanos)
        return now > start ? now - start : 0
    }

    /// Everything ever recorded, including the head.
    var allTime: Slice {
        if headIsEmpty { return allTimeBeforeHead }
        var result = allTimeBeforeHead
        result.merge(head)
        return result
    }
}
