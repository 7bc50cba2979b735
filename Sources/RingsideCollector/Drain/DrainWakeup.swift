#if canImport(Glibc)
import Glibc
#endif
import CRingside
import Ringside

/// What the drain thread sleeps on between passes: its own watch on the ring directory, for the
/// files it holds being opened, closed or changed (a producer attaching again to a released ring,
/// detaching or dying, adding a lane, or a file cut short under us), woken too by discovery
/// (a ring found, a file removed or replaced) and by `stop`. Without inotify it is a plain timed
/// sleep.
///
/// Events about any other file (a pile of bogus files, and the files discovery opens to look
/// at) are read and dropped a bounded number at a time: they never end a sleep, nor make a
/// pass look at the directory. Touched by the drain thread only, but for `signal`.
final class DrainWakeup {
    /// IN_MODIFY: a lane added (fallocate), or a file cut short or hole-punched under us;
    /// IN_OPEN: a producer attaching again to a ring whose file the collector let go of;
    /// IN_CLOSE_WRITE: a producer detaching or dying (its lock goes with its last descriptor).
    let watch = DirectoryWatch(events: UInt32(IN_MODIFY | IN_ATTRIB | IN_OPEN) | UInt32(IN_CLOSE_WRITE))
    /// Rings whose files were written to, changed, opened or closed since `takeTouched`, by name,
    /// with what happened (`IN_MODIFY`, `IN_ATTRIB`, `IN_OPEN`, `IN_CLOSE_WRITE`, or'd), and
    /// whether events were lost (the queue overflowed): then any ring may have been touched.
    private var touched: [String: UInt32] = [:]
    private var overflowed = false
    /// Reads of events (16 KiB, some 340 events) at one look: a flood of events about other files
    /// is read over several looks, between which the rings are drained.
    static let readsPerLook = 4

    /// Whether the directory is watched: if not, the drain asks after its rings more often.
    var isWatching: Bool { watch.isWatching }

    /// Wakes a `wait` now (from another thread).
    func signal() { watch.signal() }

    /// Sleeps until a file the drain holds (`holds` says which names) is touched, events are lost,
    /// `signal` is called, or `timeoutNanos` pass. Returns whether a held file was touched (or
    /// events were lost).
    func wait(timeoutNanos: UInt64, holds: (String) -> Bool) -> Bool {
        let deadline = rs_clock_precise_ns() &+ timeoutNanos
        while true {
            let now = rs_clock_precise_ns()
            let woken = watch.wait(timeoutNanos: deadline > now ? deadline - now : 0)
            // Events about other files only: the sleep goes on, unless a signal came with them
            // (discovery found a ring as the producer wrote its file: the signal must not be lost).
            let touched = woken.events && collect(holds: holds)
            if touched || woken.signalled || !woken.events || rs_clock_precise_ns() >= deadline { return touched }
        }
    }

    /// Reads the events waiting (a bounded number, see `readsPerLook`) without sleeping; returns
    /// whether one touched a held file or events were lost.
    @discardableResult
    func collect(holds: (String) -> Bool) -> Bool {
        var relevant = false
        let outcome = watch.readEvents(maxReads: Self.readsPerLook) { name, mask in
            let kinds = mask & UInt32(IN_MODIFY | IN_ATTRIB | IN_OPEN | IN_CLOSE_WRITE)
            guard kinds != 0 else { return }
            let ring = String(decoding: name, as: UTF8.self)
            guard holds(ring) else { return }
            touched[ring, default: 0] |= kinds
            relevant = true
        }
        if outcome.overflowed { overflowed = true }
        return relevant || outcome.overflowed
    }

    /// The rings touched since the last call (see `touched`), and whether events were lost.
    func takeTouched() -> (events: [String: UInt32], overflowed: Bool) {
        defer {
            touched.removeAll(keepingCapacity: true)
            overflowed = false
        }
        return (touched, overflowed)
    }

    /// Whether `kinds` (a touched ring's events) hold more than a close: an open, a write, a change.
    static func moreThanClosed(_ kinds: UInt32) -> Bool { kinds & ~UInt32(IN_CLOSE_WRITE) != 0 }
}
