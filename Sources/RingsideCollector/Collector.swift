import CRingside
import Dispatch
import Foundation
import Ringside
import RingsideAggregation
import Synchronization

/// Finds rings, drains them on a thread of its own, aggregates their records into windowed
/// series, judges the SLO rules, and publishes a `Snapshot` for the exporters.
///
/// The drain thread owns every ring and series; other threads only read the published snapshot,
/// so an HTTP client can never stall a drain. `runPass` does one pass on the caller's thread,
/// for tests that want to step time themselves.
public final class Collector: @unchecked Sendable {
    // @unchecked: the mutable state below is touched only by the drain thread (or by a test
    // driving `runPass` while no thread runs); what others see goes through `published`.
    public let options: CollectorOptions
    let layout: WindowLayout
    private let log: CollectorLog
    private var tracked: [String: TrackedRing] = [:]
    private var skipped: [String: SkippedRing] = [:]
    private var sloStates: [SLOState]
    private var stats = CollectorStats()
    private var lastDiscoveryNanos: UInt64 = 0
    private var lastPublishNanos: UInt64 = 0
    private var hasUnpublishedChanges = false
    private var directoryProblem: String?
    private var rateMark: (nanos: UInt64, drained: UInt64) = (0, 0)
    private var generation: UInt64 = 0
    private var seriesVersions = VersionCounter()

    private let published = Mutex(Snapshot())
    private let stopRequested = Atomic<Bool>(false)
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private var isRunning = false

    /// How often the directory is scanned for new, removed or replaced rings.
    static let discoveryIntervalNanos: UInt64 = 250_000_000
    /// How soon to try again a ring that could not be attached.
    static let retryNanos: UInt64 = 5_000_000_000
    /// The least time between two log lines about drops (or rejections) of one ring.
    static let dropLogIntervalNanos: UInt64 = 10_000_000_000

    public init(options: CollectorOptions, log: CollectorLog = .standardError) {
        self.options = options
        self.log = log
        layout = WindowLayout(windowNanos: options.windowNanos)
        sloStates = options.sloRules.map { SLOState(rule: $0) }
        stats.startedRealtimeNanos = rs_clock_realtime_ns()
    }

    /// The latest snapshot (a copy; cheap, its arrays are shared).
    public var snapshot: Snapshot { published.withLock { $0 } }

    // MARK: - The drain thread

    /// Starts the drain thread.
    public func start() {
        precondition(!isRunning, "the collector is already running")
        isRunning = true
        let thread = Thread { [self] in
            while !stopRequested.load(ordering: .acquiring) {
                let drained = runPass(nowNanos: rs_clock_precise_ns())
                // Busy rings are drained again at once; idle ones are looked at every poll, or
                // sooner when drained records still wait to be published.
                if drained == 0 {
                    _ = wake.wait(timeout: .now() + .nanoseconds(Int(sleepNanos(nowNanos: rs_clock_precise_ns()))))
                }
            }
            finished.signal()
        }
        thread.name = "ringside-drain"
        thread.start()
    }

    /// Stops the drain thread after one last pass, and releases every ring: records not yet
    /// drained stay in their rings for the next collector.
    public func stop() {
        guard isRunning else { return }
        stopRequested.store(true, ordering: .releasing)
        wake.signal()
        finished.wait()
        isRunning = false
        _ = runPass(nowNanos: rs_clock_precise_ns(), forcePublish: true)
        for name in tracked.keys.sorted() { log("ring \(name) released") }
        tracked.removeAll()
    }

    // MARK: - One pass

    /// Discovers rings (now and then), drains every ring, and publishes a snapshot when one is due.
    /// - Returns: the number of records drained.
    @discardableResult
    public func runPass(nowNanos now: UInt64, forcePublish: Bool = false) -> Int {
        let passStart = rs_clock_precise_ns()
        if lastDiscoveryNanos == 0 || now &- lastDiscoveryNanos >= Self.discoveryIntervalNanos {
            discover(nowNanos: now)
            lastDiscoveryNanos = now
        }
        var drained = 0
        var changed = false
        for name in tracked.keys.sorted() {
            guard let ring = tracked[name] else { continue }
            drained += drain(ring, nowNanos: now)
            changed = observe(ring, nowNanos: now) || changed
        }
        stats.recordsDrained += UInt64(drained)
        stats.passes += 1
        stats.lastPassMonotonicNanos = rs_clock_precise_ns()
        stats.lastPassSeconds = Double(stats.lastPassMonotonicNanos &- passStart) / 1e9
        if now &- rateMark.nanos >= 1_000_000_000 {
            if rateMark.nanos != 0 {
                stats.drainRate = Double(stats.recordsDrained - rateMark.drained) / (Double(now &- rateMark.nanos) / 1e9)
            }
            rateMark = (now, stats.recordsDrained)
        }
        if drained > 0 || changed { hasUnpublishedChanges = true }
        let sinceLast = now &- lastPublishNanos
        if forcePublish || lastPublishNanos == 0 || (hasUnpublishedChanges && sinceLast >= publishIntervalNanos)
            || sinceLast >= max(Self.idleRefreshNanos, publishSpacingNanos) {
            let publishStart = rs_clock_precise_ns()
            publish(nowNanos: now)
            lastPublishCostNanos = rs_clock_precise_ns() &- publishStart
            lastPublishNanos = now
            hasUnpublishedChanges = false
        }
        return drained
    }

    /// Snapshots are published at most this often while records arrive (publishing costs a
    /// pass over every series): at most one poll interval, so a record is visible within one;
    /// but never sooner than `publishSpacingNanos`.
    private var publishIntervalNanos: UInt64 {
        max(min(max(options.pollNanos, 10_000_000), 100_000_000), publishSpacingNanos)
    }
    /// What the last publish took, and the spacing that keeps publishing to a tenth of the drain
    /// thread's time: a few microseconds for a few series, but with 10,000 busy series a publish
    /// takes tens of milliseconds, which would otherwise take the CPU that scrapes need.
    private var lastPublishCostNanos: UInt64 = 0
    private var publishSpacingNanos: UInt64 { 10 * lastPublishCostNanos }
    /// Windows slide even when nothing arrives: publish at least this often.
    static let idleRefreshNanos: UInt64 = 250_000_000

    /// How long the drain thread may sleep: a poll, or less when drained records wait to be published.
    private func sleepNanos(nowNanos now: UInt64) -> UInt64 {
        guard hasUnpublishedChanges else { return options.pollNanos }
        let due = lastPublishNanos &+ publishIntervalNanos
        return min(options.pollNanos, due > now ? due - now : 0)
    }

    // MARK: - Discovery

    private func discover(nowNanos now: UInt64) {
        let directory = options.directory
        // A missing or unreadable directory is said once (and once more when it comes back).
        let problem = directory.accessProblem()
        if problem != directoryProblem {
            log(problem.map { "ring directory \(directory.path): \($0); waiting for it" }
                ?? "ring directory \(directory.path) is readable")
            directoryProblem = problem
        }
        // Rings removed or replaced under the same name: drain what is left, then let go.
        for name in tracked.keys.sorted() {
            guard let ring = tracked[name] else { continue }
            let identity = directory.fileIdentity(of: name)
            guard identity != ring.consumer.identity else { continue }
            _ = drain(ring, nowNanos: now)
            tracked[name] = nil
            log("ring \(name) detached: its file was \(identity == nil ? "removed" : "replaced by a new ring")")
        }
        let names = options.rings.isEmpty ? directory.ringNames() : options.rings
        for name in names where tracked[name] == nil {
            if let skip = skipped[name], now < skip.retryAtNanos { continue }
            attach(name, nowNanos: now)
        }
        // A skipped ring whose file is gone is forgotten.
        for name in skipped.keys where directory.fileIdentity(of: name) == nil && !options.rings.contains(name) {
            skipped[name] = nil
        }
    }

    private func attach(_ name: String, nowNanos now: UInt64) {
        do {
            let consumer = try RingConsumer(name, directory: options.directory, allowedOwners: Set(options.allowedUIDs))
            let ring = TrackedRing(consumer: consumer, aggregator: RingAggregator(ring: name, layout: layout))
            ring.aggregator.add(consumer.metrics)
            let status = try consumer.status()
            ring.status = status
            ring.producerAlive = status.producerAlive
            ring.lastDropped = status.dropped
            ring.lastRejected = 0
            tracked[name] = ring
            skipped[name] = nil
            log("ring \(name) attached: producer pid \(status.producerPID) \(status.producerAlive ? "alive" : "dead"), "
                + "\(status.capacity) records, \(consumer.metrics.count) metrics, backlog \(status.backlog)")
        } catch {
            skip(name, error, nowNanos: now)
        }
    }

    private func skip(_ name: String, _ error: RingError, nowNanos now: UInt64) {
        let problem = "\(error)"
        switch error {
        case .notReady:
            // Being created: look again at the next discovery, quietly.
            skipped[name] = SkippedRing(problem: problem, retryAtNanos: now, isQuiet: true)
            return
        default:
            break
        }
        if skipped[name]?.problem != problem { log("skipping ring \(name): \(problem)") }
        skipped[name] = SkippedRing(problem: problem, retryAtNanos: now + Self.retryNanos, isQuiet: false)
    }

    // MARK: - Draining

    /// Drains one ring into its series; a ring whose cursors turn out corrupt is let go.
    private func drain(_ ring: TrackedRing, nowNanos now: UInt64) -> Int {
        do {
            let count = try ring.consumer.drain(limit: Int(ring.consumer.capacity)) { records, first in
                var offset = 0
                while offset < records.count {
                    let rest = UnsafeBufferPointer(rebasing: records[offset...])
                    offset += ring.aggregator.consume(rest, firstCursor: first + UInt64(offset), nowNanos: now)
                    guard offset < records.count else { break }
                    // A metric registered after the last look: read the registry again.
                    let known = ring.consumer.metrics.count
                    if (try? ring.consumer.refreshMetrics()) ?? 0 > 0 {
                        ring.aggregator.add(Array(ring.consumer.metrics[known...]))
                    } else {
                        ring.aggregator.reject()
                        offset += 1
                    }
                }
            }
            ring.drained += UInt64(count)
            if count > 0 { stats.lagSeconds = Double(now &- min(now, ring.aggregator.oldestInLastBatchNanos)) / 1e9 }
            return count
        } catch {
            tracked[ring.consumer.name] = nil
            skip(ring.consumer.name, error, nowNanos: now)
            return 0
        }
    }

    /// Reads a ring's status and logs what changed: the producer's death or return, drops,
    /// rejected records. Returns whether something changed that the snapshot should show.
    private func observe(_ ring: TrackedRing, nowNanos now: UInt64) -> Bool {
        let name = ring.consumer.name
        guard let status = try? ring.consumer.status() else { return false }
        ring.status = status
        var changed = false
        if status.producerAlive != ring.producerAlive {
            changed = true
            ring.producerAlive = status.producerAlive
            log(status.producerAlive ? "ring \(name): producer pid \(status.producerPID) attached"
                : "ring \(name): producer pid \(status.producerPID) died; draining what it left (backlog \(status.backlog))")
        }
        if status.dropped > ring.lastDropped, now &- ring.lastDropLogNanos >= Self.dropLogIntervalNanos {
            log("ring \(name): producer dropped \(status.dropped - ring.lastDropped) records, the ring was full "
                + "(\(status.dropped) in all)")
            ring.lastDropped = status.dropped
            ring.lastDropLogNanos = now
            changed = true
        }
        let rejected = ring.aggregator.rejected
        if rejected > ring.lastRejected, now &- ring.lastRejectLogNanos >= Self.dropLogIntervalNanos {
            log("ring \(name): rejected \(rejected - ring.lastRejected) invalid records (unknown metric, kind "
                + "or sequence; \(rejected) in all)")
            ring.lastRejected = rejected
            ring.lastRejectLogNanos = now
        }
        return changed
    }

    // MARK: - Publishing

    private func publish(nowNanos now: UInt64) {
        var snapshot = Snapshot()
        generation += 1
        snapshot.generation = generation
        snapshot.generatedRealtimeNanos = rs_clock_realtime_ns()
        snapshot.windowNanos = options.windowNanos
        snapshot.quantiles = options.quantiles
        for name in tracked.keys.sorted() {
            guard let ring = tracked[name] else { continue }
            ring.aggregator.advance(toNanos: now)
            snapshot.series += ring.seriesSnapshots(nowNanos: now, quantiles: options.quantiles, versions: &seriesVersions)
            snapshot.rings.append(ring.ringSnapshot(nowNanos: now))
        }
        for name in skipped.keys.sorted() where tracked[name] == nil {
            guard let skip = skipped[name], !skip.isQuiet else { continue }
            snapshot.rings.append(RingSnapshot(name: name, state: .skipped, problem: skip.problem))
        }
        snapshot.slos = evaluateSLOs(nowNanos: now)
        snapshot.collector = stats
        // Swapped, so the old snapshot (thousands of series) is freed here, not under the lock.
        published.withLock { swap(&$0, &snapshot) }
    }

    private func evaluateSLOs(nowNanos now: UInt64) -> [SLOSnapshot] {
        let rings = tracked.keys.sorted().compactMap { tracked[$0] }
        return sloStates.indices.map { index in
            let state = sloStates[index]
            let outcome = state.evaluate(rings: rings, layout: layout, nowNanos: now)
            if let transition = sloStates[index].record(outcome) { log(transition) }
            return sloStates[index].snapshot(outcome)
        }
    }
}

/// A ring the collector could not attach, and when to try again.
struct SkippedRing {
    var problem: String
    var retryAtNanos: UInt64
    /// Not worth showing (a ring still being created).
    var isQuiet: Bool
}

/// A ring the collector drains, with its series and what was last logged about it.
final class TrackedRing {
    let consumer: RingConsumer
    var aggregator: RingAggregator
    var status: RingStatus?
    var drained: UInt64 = 0
    var producerAlive = false
    var lastDropped: UInt64 = 0
    var lastDropLogNanos: UInt64 = 0
    var lastRejected: UInt64 = 0
    var lastRejectLogNanos: UInt64 = 0

    init(consumer: RingConsumer, aggregator: RingAggregator) {
        self.consumer = consumer
        self.aggregator = aggregator
    }

    func ringSnapshot(nowNanos now: UInt64) -> RingSnapshot {
        var snapshot = RingSnapshot(name: consumer.name, state: producerAlive ? .live : .producerDead)
        guard let status else { return snapshot }
        snapshot.producerPID = status.producerPID
        snapshot.capacity = status.capacity
        snapshot.backlog = status.backlog
        snapshot.recordsTotal = status.writeCursor
        snapshot.droppedTotal = status.dropped
        snapshot.drainedTotal = drained
        snapshot.rejectedTotal = aggregator.rejected
        snapshot.metricCount = status.metricCount
        // The heartbeat is coarse monotonic time, which may lag `now` by a tick.
        snapshot.heartbeatAgeSeconds = Double(now &- min(now, status.heartbeatMonotonicNanos)) / 1e9
        return snapshot
    }
}
