import Foundation
import RingsideSystem
import Synchronization

/// Gives the heap's free pages back to the kernel after the windows of many series were let go
/// (they went idle: see `SlidingWindows`): freed in bulk, their memory would otherwise stay in
/// the collector's resident set, since the allocator keeps what it was given. Due once
/// `seriesAtLeast` series let theirs go since the last trim, and once none has for
/// `intervalNanos` (the burst is over) unless a trim came that long after the last; never sooner
/// than `intervalNanos` after the last. The trim after the burst is the one that matters: the
/// snapshot that showed those series busy, and their figures, are freed after their let-go (when
/// the next is published, and by the threads that still read it), so a wave trimmed at once, as
/// a whole bot's series let go in one pass, is trimmed again once it is over.
///
/// A trim walks the whole heap (165 ms for a million free chunks, measured), so it runs on a
/// thread of its own, one at a time, never on the drain thread: a thread that allocates in an
/// arena while it is trimmed waits for it, which a bulk release, once, may cost the drain.
struct HeapTrim {
    static let seriesAtLeast = 1_000
    static let intervalNanos: UInt64 = 10_000_000_000
    private static let running = Atomic<Bool>(false)

    /// Trims started.
    private(set) var trims = 0
    private var letGo = 0
    private var lastTrimNanos: UInt64 = 0
    private var lastLetGoNanos: UInt64 = 0
    /// A trim came `intervalNanos` or more after the last let-go (or none was ever let go).
    private var settled = true

    /// Counts `count` more series whose windows were let go (0: none, as of `now`), and trims the
    /// heap when due. Asked at every pass, not only when a snapshot is published: a collector whose
    /// series all went idle publishes every 10 s at most, and the trim after the burst is then the
    /// one that gives back what its last series let go.
    mutating func note(letGo count: Int, nowNanos now: UInt64) {
        guard isDue(afterLetGo: count, nowNanos: now),
            Self.running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        trimmed(nowNanos: now)
        let started = PartThread.runDetached(name: "ringside-trim") {
            System.trimHeap()
            Self.running.store(false, ordering: .releasing)
        }
        if case .failure = started { Self.running.store(false, ordering: .releasing) }  // the next one tries again
    }

    /// Counts `count` more series let go at `now`, and says whether a trim is due.
    private mutating func isDue(afterLetGo count: Int, nowNanos now: UInt64) -> Bool {
        if count > 0 {
            letGo += count
            lastLetGoNanos = now
            settled = false
        }
        guard now &- lastTrimNanos >= Self.intervalNanos else { return false }
        return letGo >= Self.seriesAtLeast || (!settled && now &- lastLetGoNanos >= Self.intervalNanos)
    }

    /// Starts counting again: the trim `isDue` asked for is made.
    private mutating func trimmed(nowNanos now: UInt64) {
        trims += 1
        letGo = 0
        lastTrimNanos = now
        if now &- lastLetGoNanos >= Self.intervalNanos { settled = true }
    }
}
