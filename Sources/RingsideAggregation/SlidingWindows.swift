/// Which sliding windows a series keeps and how finely each one slides.
///
/// Window `w` is cut into `slicesPerWindow` slices of `w / slicesPerWindow` nanoseconds, aligned
/// to multiples of the slice length on the CLOCK_MONOTONIC timeline (less the layout's phase, see
/// ``phased(byNanos:)``). At time `now` the window holds the slice containing `now` and the
/// `slicesPerWindow` slices before it, so it covers between `w` and `w` plus one slice: with the
/// standard layout and 4 slices, the 1 s window covers 1.00-1.25 s, the 5 s window 5.00-6.25 s and
/// the 1 min window 60-75 s, and a value leaves each window that long after it was recorded. Rates
/// divide by the span actually covered.
///
/// Every series of a bot keeps the same layout: its figures are held once, and a series holds one
/// reference to them (8 bytes, not four arrays' worth).
public struct WindowLayout: Sendable, Hashable {
    private final class Figures: Sendable {
        let windowNanos: [UInt64]
        let slicesPerWindow: Int
        let sliceNanos: [UInt64]
        let tickNanos: UInt64
        /// Each window's slices start this much before the multiples of its slice length.
        let slicePhaseNanos: [UInt64]

        init(windowNanos: [UInt64], slicesPerWindow: Int, sliceNanos: [UInt64], tickNanos: UInt64, phaseNanos: UInt64) {
            (self.windowNanos, self.slicesPerWindow, self.sliceNanos, self.tickNanos) = (
                windowNanos, slicesPerWindow, sliceNanos, tickNanos
            )
            slicePhaseNanos = sliceNanos.map { phaseNanos % $0 }
        }
    }

    private let figures: Figures

    /// Each window's nominal length in nanoseconds, in the order snapshots are asked for.
    public var windowNanos: [UInt64] { figures.windowNanos }
    /// How many slices make up a window: the sliding granularity is the window over this.
    public var slicesPerWindow: Int { figures.slicesPerWindow }
    /// Each window's slice length in nanoseconds.
    public var sliceNanos: [UInt64] { figures.sliceNanos }
    /// The greatest common divisor of the slice lengths: recent records gather in one slice of
    /// this length before being folded into every window at once.
    public var tickNanos: UInt64 { figures.tickNanos }
    /// How much earlier than the multiples of its slice length each window's slices start.
    public var slicePhaseNanos: [UInt64] { figures.slicePhaseNanos }

    /// 1 s, 5 s and 1 min windows sliding in quarters (250 ms, 1.25 s and 15 s).
    public static let standard = WindowLayout(
        windowNanos: [1_000_000_000, 5_000_000_000, 60_000_000_000], slicesPerWindow: 4)

    /// Makes a layout; each window must be a non-zero multiple of `slicesPerWindow` nanoseconds.
    public init(windowNanos: [UInt64], slicesPerWindow: Int = 4) {
        precondition(!windowNanos.isEmpty, "WindowLayout: no windows")
        precondition(slicesPerWindow >= 1, "WindowLayout: slicesPerWindow must be at least 1")
        let slices = UInt64(slicesPerWindow)
        precondition(
            windowNanos.allSatisfy { $0 > 0 && $0 % slices == 0 },
            "WindowLayout: every window must be a non-zero multiple of \(slicesPerWindow) ns")
        let sliceNanos = windowNanos.map { $0 / slices }
        figures = Figures(
            windowNanos: windowNanos, slicesPerWindow: slicesPerWindow, sliceNanos: sliceNanos,
            tickNanos: sliceNanos.dropFirst().reduce(sliceNanos[0], Self.greatestCommonDivisor), phaseNanos: 0)
    }

    private init(figures: Figures) {
        self.figures = figures
    }

    /// The same windows, their slices starting `phase` earlier (rounded down to a whole tick, so
    /// that a tick stays within one slice of each window). Windows of one phase slide at once:
    /// a collector gives each bot its own, so that a million series' minute windows do not all
    /// move a slice in the same snapshot (every series holding values changes then).
    public func phased(byNanos phase: UInt64) -> WindowLayout {
        WindowLayout(
            figures: Figures(
                windowNanos: windowNanos, slicesPerWindow: slicesPerWindow, sliceNanos: sliceNanos, tickNanos: tickNanos,
                phaseNanos: phase - phase % tickNanos))
    }

    /// The id of window `window`'s slice that holds `nanos`: slice `id` starts at `id *
    /// sliceNanos[window] - slicePhaseNanos[window]` (at 0 for the first).
    @inlinable @inline(__always)
    public func sliceID(window: Int, atNanos nanos: UInt64) -> UInt64 {
        let slice = sliceNanos[window]
        // Without an overflow: the remainder and the phase are each less than a slice.
        return nanos / slice + (nanos % slice + slicePhaseNanos[window]) / slice
    }

    /// When window `window`'s slice `id` starts (`UInt64.max` past the end of time).
    @inlinable
    public func sliceStartNanos(window: Int, sliceID id: UInt64) -> UInt64 {
        let (end, overflow) = id.multipliedReportingOverflow(by: sliceNanos[window])
        if overflow { return .max }
        let phase = slicePhaseNanos[window]
        return end > phase ? end - phase : 0
    }

    public static func == (lhs: WindowLayout, rhs: WindowLayout) -> Bool {
        lhs.figures === rhs.figures
            || (lhs.windowNanos == rhs.windowNanos && lhs.slicesPerWindow == rhs.slicesPerWindow
                && lhs.slicePhaseNanos == rhs.slicePhaseNanos)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(windowNanos)
        hasher.combine(slicesPerWindow)
        hasher.combine(slicePhaseNanos)
    }

    /// The index of the window `nanos` long, if the layout has one.
    public func index(ofWindowNanos nanos: UInt64) -> Int? {
        windowNanos.firstIndex(of: nanos)
    }

    static func greatestCommonDivisor(_ a: UInt64, _ b: UInt64) -> UInt64 {
        b == 0 ? a : greatestCommonDivisor(b, a % b)
    }
}

/// What a window slice holds: something that can be emptied for reuse and added to another.
public protocol WindowSlice: Sendable {
    init()
    mutating func reset()
    mutating func merge(_ other: Self)
    /// Empties the head (the newest tick's slice) for the next tick: `reset()` unless the slice
    /// readies itself for a busy tick.
    mutating func resetHead()
}

extension WindowSlice {
    public mutating func resetHead() { reset() }
}

/// A series over sliding windows (a histogram, counter or gauge): what a snapshot asks of it
/// before it computes a window's figures again.
public protocol SlidingSeries {
    /// The windows this series keeps.
    var layout: WindowLayout { get }
    /// Moves the current tick into the windows once `now` has passed it (reads are correct
    /// without), and lets the windows' slices go once none is in a window.
    /// - Returns: whether it let them go.
    @discardableResult
    mutating func advance(toNanos now: UInt64) -> Bool
    /// Whether window `window` may hold other records at `now` than at `earlier` (`earlier <=
    /// now`), when nothing was recorded between. False: the same records, so the same figures,
    /// but for a rate over the span it covers.
    func windowMayHaveChanged(_ window: Int, since earlier: UInt64, to now: UInt64) -> Bool
    /// With nothing recorded after `now`, until when window `window` holds the records it holds
    /// at `now` and the span it covers starts where it starts at `now` (its figures and the start
    /// of a rate over that span stay; the rate's end is the time it is read): while the series is
    /// younger than the window, until its first records leave it; after, the next slice.
    func holdsTheSameUntil(window: Int, nowNanos now: UInt64) -> UInt64
    /// Whether windows `window` and `other` hold exactly the same records at `now`, known without
    /// reading them (a series whose records are all in one tick that both hold): the same
    /// figures, but for a rate over the span each covers. False: they may hold other records.
    func holdsTheSameRecords(window: Int, as other: Int, nowNanos now: UInt64) -> Bool
}

/// The slicing and rotation shared by windowed histograms, counters and gauges.
///
/// Records in the newest tick (``WindowLayout/tickNanos``) go to one `head` slice: the hot path
/// is two comparisons and the caller's update. When a newer tick arrives, the head is merged into
/// each window's slice for it and into the all-time slice, then reused. A late record (older than
/// the head) goes straight into each window's slice for it while that slice is still held, and
/// always into the all-time slice.
///
/// Each window is a ring of `slicesPerWindow + 1` places reused in place: a place is claimed by
/// the newest slice that maps to it (`id % (slicesPerWindow + 1)`), so rotation is a reset when a
/// place is first written, never a pass over the ring. The places in use, of every window, are
/// one short list (``Slot``), made as ticks are folded: a series that recorded in two ticks holds
/// four to six slices, not fifteen, and one that recorded in its first tick alone holds none (its
/// head is every window's). The list is let go once every slice in it has left every window
/// (``advance(toNanos:)``): a series that records nothing for the longest window and a slice
/// (75 s with the standard layout) holds its all-time slice alone, and its head and windows cost
/// it no heap memory.
@usableFromInline
struct SlidingWindows<Slice: WindowSlice>: Sendable {
    /// A window's slice in use: which window, its id (`layout.sliceID`), its figures.
    @usableFromInline
    struct Slot: Sendable {
        @usableFromInline var window: Int
        @usableFromInline var id: UInt64
        @usableFromInline var slice: Slice

        @inlinable
        init(window: Int, id: UInt64, slice: Slice) {
            (self.window, self.id, self.slice) = (window, id, slice)
        }
    }

    @usableFromInline let layout: WindowLayout
    /// The windows' slices in use, at most `slicesPerWindow + 1` a window, in no order.
    @usableFromInline var slots: [Slot] = []
    /// Where each place's slice is in `slots`, 4 bits a place (place `window * (slicesPerWindow
    /// + 1) + id % (slicesPerWindow + 1)`): its index + 1, 0 for none, when the layout has at
    /// most 15 places (the standard one has 15); past that, `slots` is searched.
    @usableFromInline var placeIndex: UInt64 = 0
    /// Whether `placeIndex` holds the places: the index of any of 15 places fits in 4 bits.
    @inlinable var indexesPlaces: Bool { layout.windowNanos.count * (layout.slicesPerWindow + 1) <= 15 }
    /// The newest tick's records, not yet in the slots or `allTimeBeforeHead`.
    @usableFromInline var head = Slice()
    @usableFromInline var headStart: UInt64 = 1
    /// One past the head tick's last nanosecond; 0 until the first record (and after an advance),
    /// so the fast path misses.
    @usableFromInline var headEnd: UInt64 = 0
    @usableFromInline var headIsEmpty = true
    /// Whether `allTimeBeforeHead` was never written: with no slots, every record is in the head.
    @usableFromInline var allTimeBeforeHeadIsEmpty = true
    /// Everything ever recorded except the head.
    @usableFromInline var allTimeBeforeHead = Slice()
    /// The start of the first record's tick, `UInt64.max` before any record: rates do not count
    /// time before a series existed.
    @usableFromInline var originNanos: UInt64 = .max

    @inlinable
    init(layout: WindowLayout) {
        self.layout = layout
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
    @inlinable
    mutating func updateOutsideHead(atNanos t: UInt64, _ body: (inout Slice) -> Void) {
        let tick = layout.tickNanos
        let tickStart = t - t % tick
        originNanos = Swift.min(originNanos, tickStart)
        if headEnd == 0 || tickStart > headStart {
            // A head left unfolded (it holds every record) takes more of its own tick as it is.
            if tickStart != headStart { foldHead() }
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
            // A window drops the record if the place for its slice already holds a newer slice.
            for window in layout.sliceNanos.indices {
                updateSlot(window: window, sliceID: layout.sliceID(window: window, atNanos: t), body)
            }
            body(&allTimeBeforeHead)
            allTimeBeforeHeadIsEmpty = false
        }
    }

    /// Applies `body` to window `window`'s slice `id`, claiming its place if an older slice holds
    /// it; a slice too old for the ring (its place holds a newer one) is dropped.
    @inlinable
    mutating func updateSlot(window: Int, sliceID id: UInt64, _ body: (inout Slice) -> Void) {
        let places = UInt64(layout.slicesPerWindow + 1)
        let place = window * Int(places) + Int(id % places)
        guard let index = slotIndex(ofPlace: place, window: window, places: places) else {
            // A fold claims a slice in every window: room for them at once, not grown one by one.
            if slots.capacity == 0 { slots.reserveCapacity(layout.sliceNanos.count) }
            slots.append(Slot(window: window, id: id, slice: Slice()))
            if indexesPlaces { placeIndex |= UInt64(slots.count) << (4 * UInt64(place)) }
            body(&slots[slots.count - 1].slice)
            return
        }
        if slots[index].id != id {
            // An older occupant is at least a ring's length older, so no live window still needs it.
            guard slots[index].id < id else { return }
            slots[index].id = id
            slots[index].slice.reset()
        }
        body(&slots[index].slice)
    }

    /// The index in `slots` of the slice at `place` (of window `window`, `places` a window), if any.
    @inlinable
    func slotIndex(ofPlace place: Int, window: Int, places: UInt64) -> Int? {
        if indexesPlaces {
            let stored = Int((placeIndex >> (4 * UInt64(place))) & 0xF)
            return stored == 0 ? nil : stored - 1
        }
        return slots.firstIndex { $0.window == window && window * Int(places) + Int($0.id % places) == place }
    }

    /// Moves the head's records into every window and the all-time slice, then empties it.
    @inlinable
    mutating func foldHead() {
        guard !headIsEmpty else { return }
        do {
            // A copy of `head` (a reference to its counts, not their copy) for the closure, let
            // go before the head is emptied in place.
            let head = head
            for window in layout.sliceNanos.indices {
                updateSlot(window: window, sliceID: layout.sliceID(window: window, atNanos: headStart)) { $0.merge(head) }
            }
        }
        allTimeBeforeHead.merge(head)
        allTimeBeforeHeadIsEmpty = false
        head.resetHead()
        headIsEmpty = true
    }

    /// Whether every record is in the head (or there is none): the windows that hold its tick
    /// hold it alone, and ``allTime`` is it.
    @inlinable
    var headHoldsEveryRecord: Bool { slots.isEmpty && allTimeBeforeHeadIsEmpty }

    /// Whether window `window` holds the head's tick at `now`.
    @inlinable
    func holdsHead(window: Int, nowNanos now: UInt64) -> Bool {
        !headIsEmpty && layout.sliceID(window: window, atNanos: headStart) >= firstSliceID(window: window, nowNanos: now)
    }

    /// Adds `earlier` to the all-time slice only (not to any window).
    @inlinable
    mutating func seedAllTime(_ earlier: Slice) {
        allTimeBeforeHead.merge(earlier)
        allTimeBeforeHeadIsEmpty = false
    }

    /// Folds the head away once `now` has passed its tick, so reads need not merge it. The next
    /// record places the head at its own tick: records drained after a snapshot's advance but
    /// written before it (a backlog) then stay on the fast path, instead of each one going late
    /// into every window and the all-time slice. Lets the windows' slices and the head's storage
    /// go once no window holds any of them at `now` (reads are at `now` or later).
    ///
    /// A head that holds every record (a series' first tick) is not folded: every window and the
    /// all-time slice read it as it is, no slice is made for it in each window (a million new
    /// series made three each, a third of a gigabyte of new heap), and it is folded by the next
    /// record of a later tick, or moved to the all-time slice once it has left every window.
    /// - Returns: whether it let them go.
    @inlinable @inline(__always) @discardableResult
    mutating func advance(toNanos now: UInt64) -> Bool {
        if headEnd != 0, now >= headEnd {
            if !headHoldsEveryRecord { foldHead() }
            headEnd = 0
        }
        guard headEnd == 0 else { return false }
        guard !slots.isEmpty else { return moveHeadToAllTimeOnceItLeft(nowNanos: now) }
        // A plain loop: it is specialized with the type (see `Windowed`), a closure-taking
        // algorithm may not be.
        for slot in slots where slot.id >= firstSliceID(window: slot.window, nowNanos: now) { return false }
        slots = []
        placeIndex = 0
        head = Slice()
        return true
    }

    /// Moves a head that holds every record, and that no window holds at `now` any more, to the
    /// all-time slice (which holds nothing: a move, not a merge).
    /// - Returns: whether it moved it.
    @inlinable
    mutating func moveHeadToAllTimeOnceItLeft(nowNanos now: UInt64) -> Bool {
        guard !headIsEmpty, allTimeBeforeHeadIsEmpty else { return false }
        // The longest window last in the layout's order (the standard one's): asked first.
        for window in layout.sliceNanos.indices.reversed() where holdsHead(window: window, nowNanos: now) { return false }
        allTimeBeforeHead = head
        allTimeBeforeHeadIsEmpty = false
        head = Slice()
        headIsEmpty = true
        return true
    }

    /// The first slice id window `window` holds at `now`.
    @inlinable
    func firstSliceID(window: Int, nowNanos now: UInt64) -> UInt64 {
        let current = layout.sliceID(window: window, atNanos: now)
        let back = UInt64(layout.slicesPerWindow)
        return current > back ? current - back : 0
    }

    /// The values of window `window` at `now`: its slices merged into a new one, or the only one
    /// as it is when it holds one (shared until either is written: a young series' windows are
    /// its head alone, and merging it would copy its counts once per window).
    @inlinable
    func merged(window: Int, nowNanos now: UInt64) -> Slice {
        let firstID = firstSliceID(window: window, nowNanos: now)
        let holdsHead = holdsHead(window: window, nowNanos: now)
        var held = holdsHead ? 1 : 0
        var lastHeld = 0
        for index in slots.indices where slots[index].window == window && slots[index].id >= firstID {
            held += 1
            lastHeld = index
        }
        if held == 1 { return holdsHead ? head : slots[lastHeld].slice }
        var result = Slice()
        merge(window: window, nowNanos: now, into: &result)
        return result
    }

    /// Merges the slices of window `window` at `now` into `result`.
    @inlinable
    func merge(window: Int, nowNanos now: UInt64, into result: inout Slice) {
        let firstID = firstSliceID(window: window, nowNanos: now)
        for slot in slots where slot.window == window && slot.id >= firstID {
            result.merge(slot.slice)
        }
        if holdsHead(window: window, nowNanos: now) {
            result.merge(head)
        }
    }

    /// Whether window `window` may hold other records at `now` than at `earlier` (`earlier <=
    /// now`), when nothing was recorded between: a slice of it left, or its slices were let go
    /// (what they held is not known then). False: it holds exactly the same records.
    @inlinable @inline(__always)
    func windowMayHaveChanged(_ window: Int, since earlier: UInt64, to now: UInt64) -> Bool {
        let (held, holds) = (firstSliceID(window: window, nowNanos: earlier), firstSliceID(window: window, nowNanos: now))
        guard held != holds else { return false }
        // No slots and no head: they were let go (a head that holds every record is never folded away).
        guard !slots.isEmpty || !headIsEmpty else { return true }
        for slot in slots where slot.window == window && slot.id >= held && slot.id < holds { return true }
        let headSlice = layout.sliceID(window: window, atNanos: headStart)
        return !headIsEmpty && headSlice >= held && headSlice < holds
    }

    /// The nanoseconds window `window` covers at `now`: from `coveredFromNanos` to `now`; 0 if
    /// `now` is before it.
    @inlinable
    func coveredNanos(window: Int, nowNanos now: UInt64) -> UInt64 {
        let start = coveredFromNanos(window: window, nowNanos: now)
        return now > start ? now - start : 0
    }

    /// Where the span window `window` covers at `now` starts: its first slice's start, or the
    /// first record's tick if later.
    @inlinable
    func coveredFromNanos(window: Int, nowNanos now: UInt64) -> UInt64 {
        Swift.max(layout.sliceStartNanos(window: window, sliceID: firstSliceID(window: window, nowNanos: now)), originNanos)
    }

    /// With nothing recorded after `now`, until when window `window` holds the records it holds
    /// at `now`, its covered span starting where it starts at `now` (see ``SlidingSeries``).
    @inlinable
    func holdsTheSameUntil(window: Int, nowNanos now: UInt64) -> UInt64 {
        if originNanos != .max {
            // When the first record's slice leaves the window: every record is at or after its
            // tick, so until then the window holds them all, and its span starts at that tick.
            let originSlice = layout.sliceID(window: window, atNanos: originNanos)
            let firstRecordLeaves = layout.sliceStartNanos(window: window, sliceID: originSlice + UInt64(layout.slicesPerWindow) + 1)
            if now < firstRecordLeaves { return firstRecordLeaves }
        }
        // Older than the window: its start moves with each slice.
        return layout.sliceStartNanos(window: window, sliceID: layout.sliceID(window: window, atNanos: now) + 1)
    }

    /// Whether windows `window` and `other` hold exactly the same records at `now`, known
    /// without reading them: every record is in the head, and both hold its tick. False: they
    /// may hold other records.
    @inlinable
    func holdsTheSameRecords(window: Int, as other: Int, nowNanos now: UInt64) -> Bool {
        headHoldsEveryRecord && holdsHead(window: window, nowNanos: now) && holdsHead(window: other, nowNanos: now)
    }

    /// Everything ever recorded, including the head (the head itself, shared, when it holds
    /// every record).
    @inlinable
    var allTime: Slice {
        if headIsEmpty { return allTimeBeforeHead }
        if headHoldsEveryRecord { return head }
        var result = allTimeBeforeHead
        result.merge(head)
        return result
    }
}
