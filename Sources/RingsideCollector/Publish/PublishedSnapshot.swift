import RingsideSnapshot
import RingsideExport
import CRingside
import Ringside
import RingsideAggregation
import RingsideSystem
import Synchronization

/// What crosses threads: the latest snapshot the drain thread published, the thread sampler's
/// latest sample, and when the drain loop last finished a pass. The HTTP server and the daemon's
/// subscribers (history, `--hlog`, the JSON dump, the demo) read them; nothing else of the
/// collector is shared.
package final class PublishedSnapshot: Sendable {
    private let latest = Locked(Snapshot())
    private let threadHealth = Locked<ThreadHealthSample?>(nil)
    private let lastPass = Atomic<UInt64>(0)
    private let changes = Atomic<UInt64>(0)
    /// Woken after each change (the /metrics renderer's thread): a call that returns at once.
    private let watchers = Locked<[@Sendable () -> Void]>([])

    init() {}

    /// Moves whenever what `snapshot` returns may have changed: a snapshot published, the
    /// collector's figures brought up to date, a thread sample attached. Read it before
    /// `snapshot`, so what is read is at least as new as the revision.
    package var revision: UInt64 { changes.load(ordering: .acquiring) }

    /// Calls `wake` after every change, on the thread that made it (the drain thread or the
    /// thread sampler's): it must return at once, as signalling a semaphore does.
    package func watch(_ wake: @escaping @Sendable () -> Void) { watchers.withLock { $0.append(wake) } }

    private func changed() {
        changes.wrappingAdd(1, ordering: .releasing)
        for wake in watchers.withLock({ $0 }) { wake() }
    }

    /// The latest snapshot, carrying the latest thread sample (a copy; cheap, its arrays are
    /// shared). The sample comes on its own cadence: a quiet collector publishes snapshots every
    /// 10 s, and each one served still has the sample of the last round.
    package var snapshot: Snapshot {
        var snapshot = latest.withLock { $0 }
        snapshot.threadHealth = threadHealth.withLock { $0 }
        return snapshot
    }

    /// The latest thread sample alone (nil before the first, or with the sampler off).
    var threadSample: ThreadHealthSample? { threadHealth.withLock { $0 } }

    /// Replaces the thread sample (from the sampler's thread); the old one is freed outside the lock.
    func attach(_ sample: ThreadHealthSample) {
        var replaced: ThreadHealthSample? = sample
        threadHealth.withLock { swap(&$0, &replaced) }
        changed()
    }

    /// When the drain loop last finished a pass (CLOCK_MONOTONIC; 0: never), stored every pass,
    /// so `/health` follows the loop itself and not the snapshots, which are spaced out when
    /// publishing is costly.
    package var lastPassMonotonicNanos: UInt64 { lastPass.load(ordering: .acquiring) }

    func passed(atNanos nanos: UInt64) { lastPass.store(nanos, ordering: .releasing) }

    /// Replaces the snapshot; the old one (thousands of series) is freed by the caller, not under the lock.
    func publish(_ snapshot: inout Snapshot) {
        latest.withLock { swap(&$0, &snapshot) }
        changed()
    }

    /// Brings the collector's own figures up to date without a new snapshot (every ring quiet),
    /// and notes that its figures still hold (`currentRealtimeNanos`). The series' figures are
    /// counted when a snapshot is built: those of the snapshot stay.
    func update(_ stats: CollectorStats, currentRealtimeNanos: UInt64) {
        latest.withLock { snapshot in
            snapshot.currentRealtimeNanos = max(snapshot.currentRealtimeNanos, currentRealtimeNanos)
            var stats = stats
            stats.snapshotBuild = snapshot.collector.snapshotBuild
            snapshot.collector = stats
        }
        changed()
    }
}
