import Ringside

extension TrackedRing {
    /// What is known of a ring's producer, and when it was last asked: the tracker's to write
    /// (`RingTracker`), through the named steps below; the others read it.
    struct Liveness {
        private(set) var status: RingStatus?
        /// When `status` was read, and when liveness was last asked of the kernel.
        private(set) var statusNanos: UInt64 = 0
        private(set) var lastObservedNanos: UInt64 = 0
        /// Records drained or cells changed since `status` was read: it is read again before it is shown.
        private(set) var activitySinceStatus = false
        private(set) var producerAlive = false
        /// Alive, but its process is stopped (`T` or `t` in /proc/PID/stat).
        private(set) var producerStopped = false
        /// When it was attached (by this collector, or taken up again).
        private(set) var attachedNanos: UInt64 = 0
        /// When its file was last opened (by this collector at attach, or by anyone, as inotify
        /// says), closed or changed: not released for `DrainTiming.releaseGraceNanos` after (0: never).
        private(set) var touchedNanos: UInt64 = 0

        /// Attached (or taken up again) at `now`.
        mutating func attached(nowNanos now: UInt64) { attachedNanos = now }

        /// Its status read afresh at `now` (nil: at attach or release, when no time is kept for it).
        mutating func read(_ status: RingStatus, nowNanos now: UInt64?) {
            self.status = status
            if let now { statusNanos = now }
            activitySinceStatus = false
        }

        /// Its liveness asked of the kernel at `now`.
        mutating func observed(nowNanos now: UInt64) { lastObservedNanos = now }

        /// Its liveness to be asked in the next pass.
        mutating func observeSoon() { lastObservedNanos = 0 }

        /// Records drained or cells changed: the status is read again before it is shown.
        mutating func moved() { activitySinceStatus = true }

        /// Its status is as current as the ring's last look (a release that read nothing new).
        mutating func settled() { activitySinceStatus = false }

        mutating func producer(alive: Bool) { producerAlive = alive }
        mutating func producer(stopped: Bool) { producerStopped = stopped }

        /// Its file opened, closed or changed at `now`.
        mutating func touched(nowNanos now: UInt64) { touchedNanos = now }
    }
}
