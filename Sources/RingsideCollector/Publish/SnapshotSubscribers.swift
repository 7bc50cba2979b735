import RingsideSystem
import RingsideSnapshot
import RingsideExport
import Synchronization

/// A part that follows the collector's published snapshots from the daemon's loop, off the
/// drain thread: the history (`/api/history`), the latency log (`--hlog`), the JSON dump, the
/// OTLP exporter (`--otlp-endpoint`).
/// Whatever they cost, the drain never waits for them.
protocol SnapshotSubscriber {
    /// The latest snapshot, at each turn of the daemon's loop (the same one again when none was
    /// published since).
    mutating func receive(_ snapshot: Snapshot, nowNanos: UInt64)
    /// The last snapshot, made after the collector's last pass; `stopRequestedNanos` is when the
    /// stop was asked for (CLOCK_MONOTONIC), for a subscriber that must be done soon after.
    mutating func finish(_ snapshot: Snapshot, stopRequestedNanos: UInt64)
    /// Adds what it reports of itself to the collector's figures (errors, what it holds).
    func report(into stats: inout CollectorStats)
}

extension SnapshotSubscriber {
    mutating func finish(_ snapshot: Snapshot, stopRequestedNanos: UInt64) { receive(snapshot, nowNanos: .max) }
    func report(into stats: inout CollectorStats) {}
}

/// What the subscribers report of themselves (the history's series, the latency log's errors),
/// shown with every snapshot served: written by the daemon's loop, read by the HTTP threads.
package final class SubscriberFigures: Sendable {
    private let figures = Locked(CollectorStats())
    /// The HTTP listener's figures (`--web-config-file`), read when a snapshot is served.
    private let webSecurity = Locked<(@Sendable () -> WebSecurityStats)?>(nil)

    init() {}

    func update(from subscribers: [any SnapshotSubscriber]) {
        var stats = CollectorStats()
        for subscriber in subscribers { subscriber.report(into: &stats) }
        figures.withLock { $0 = stats }
    }

    /// `snapshot` with the subscribers' figures in its collector's.
    func apply(to snapshot: inout Snapshot) {
        let stats = figures.withLock { $0 }
        snapshot.collector.hlogErrors = stats.hlogErrors
        snapshot.collector.history = stats.history
        snapshot.collector.otlp = stats.otlp
        snapshot.collector.webSecurity = webSecurity.withLock { $0 }?()
    }

    /// Where the HTTP listener's figures come from (the daemon's server, with `--web-config-file`).
    func setWebSecuritySource(_ source: @escaping @Sendable () -> WebSecurityStats) {
        webSecurity.withLock { $0 = source }
    }
}

/// The history `/api/history` serves, fed each snapshot.
struct HistorySubscriber: SnapshotSubscriber {
    let store: HistoryStore
    let limit: Int

    func receive(_ snapshot: Snapshot, nowNanos: UInt64) {
        store.record(snapshot)  // at once when the snapshot's generation was already recorded
    }

    func report(into stats: inout CollectorStats) {
        let counts = store.counts
        stats.history = (counts.series, counts.refused, limit, store.bytes)
    }
}

extension JSONDumpWriter: SnapshotSubscriber {
    mutating func receive(_ snapshot: Snapshot, nowNanos now: UInt64) { writeIfDue(snapshot, nowNanos: now) }
    mutating func finish(_ snapshot: Snapshot, stopRequestedNanos: UInt64) { write(snapshot) }
}

extension HistogramLogWriter: SnapshotSubscriber {
    func receive(_ snapshot: Snapshot, nowNanos now: UInt64) { writeIfDue(snapshot, nowNanos: now) }

    func finish(_ snapshot: Snapshot, stopRequestedNanos: UInt64) {
        write(snapshot)
        close()
    }

    func report(into stats: inout CollectorStats) { stats.hlogErrors = errors }
}
