import RingsideSnapshot
import CRingside
import Ringside

extension RingTracker {
    /// Rings that wait for something: released rings to take up again (a process opened their
    /// files, or events were lost); rings `observe` found dead and drained, let go of at the end
    /// of the pass; released workers' rings whose files could not go (their fold could not be
    /// written), tried again at each sweep; and when every ring was last swept for new lanes.
    struct WaitingRings {
        var toReacquire: Set<String> = []
        var releases: [TrackedRing] = []
        var unretired: Set<String> = []
        private var sweptNanos: UInt64 = 0

        /// Whether every ring is to be looked at for new lanes now (a file grows by each lane it
        /// adds, which the drain's watch reports; this is for a lost event), and without inotify
        /// at each pass; if so, the sweep is noted as made.
        mutating func sweepIsDue(nowNanos now: UInt64, watching: Bool) -> Bool {
            guard !watching || now &- sweptNanos >= DrainTiming.identityCheckNanos else { return false }
            sweptNanos = now
            return true
        }

        /// The rings to let go of at the pass's end, no longer waiting.
        mutating func takeReleases() -> [TrackedRing] {
            defer { releases.removeAll() }
            return releases
        }
    }

    /// The directory's lock and the state kept in it: what the bots' workers that are gone left,
    /// kept across restarts (opening it takes the lock); why another collector holds the
    /// directory (said once), while it does; when its state was last tried.
    struct DirectoryClaim {
        let state: CollectorState
        private let directory: RingDirectory
        private let log: CollectorLog
        private var heldBy: String?
        private var triedNanos: UInt64 = 0

        init(state: CollectorState, directory: RingDirectory, log: CollectorLog) {
            self.state = state
            self.directory = directory
            self.log = log
        }

        /// Whether this collector may attach the directory's rings: its state is open (the
        /// directory's lock taken), or cannot be (a directory unsafe for it: the rings are collected,
        /// the workers' files kept). Not while another collector holds the directory: said once.
        mutating func mayCollect(nowNanos now: UInt64) -> Bool {
            // Open, or tried less than a second ago (a directory unsafe for a state stays so).
            if state.isOpen || now &- triedNanos < 1_000_000_000 { return heldBy == nil }
            triedNanos = now
            do {
                try state.open()
                if heldBy != nil { log("ring directory \(directory.path) is free again; collecting it") }
                heldBy = nil
                return true
            } catch {
                if heldBy != "\(error)" { log("ring directory \(directory.path): \(error); waiting for it", level: .error) }
                heldBy = "\(error)"
                return false
            }
        }
    }

    /// The rings this collector may hold open (the descriptor limit less a reserve for HTTP
    /// clients), and how many are open as discovery was last told: it opens no more than the
    /// limit leaves.
    struct DescriptorBudget {
        let ringLimit: Int
        private var toldOpen = 0

        init(ringLimit: Int) { self.ringLimit = ringLimit }

        /// Tells discovery that `open` rings are open, if that changed; returns whether fewer
        /// are than it was last told (rings may wait for a descriptor).
        mutating func tell(_ handoff: DiscoveryHandoff, open: Int) -> Bool {
            guard open != toldOpen else { return false }
            defer { toldOpen = open }
            handoff.setRingsOpen(open)
            return open < toldOpen
        }
    }

    /// What the next snapshot should show that no record says: a ring came, went or changed
    /// state; and when a ring was last attached or taken up again (its producer is about to
    /// write, and add lanes: the drain loop sleeps briefly meanwhile).
    struct RingChanges {
        private var changed = false
        private var attachedNanos: UInt64 = 0

        mutating func note() { changed = true }

        mutating func attached(nowNanos now: UInt64) {
            attachedNanos = now
            changed = true
        }

        /// Whether something changed since the last call.
        mutating func take() -> Bool {
            defer { changed = false }
            return changed
        }

        /// How long the drain loop may sleep for their sake.
        func sleepNanos(nowNanos now: UInt64) -> UInt64 {
            attachedNanos != 0 && now &- attachedNanos < DrainTiming.newRingNanos ? DrainTiming.newRingSleepNanos : .max
        }
    }
}
