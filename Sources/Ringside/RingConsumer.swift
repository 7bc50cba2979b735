// The reader that drains: a bot file's one consumer, which hands the lanes' records over in
// batches and moves their read cursors.

import CRingside
#if canImport(Glibc)
import Glibc
#endif

/// What one histogram's gather cell on one lane gained since the consumer's last look (SAMPLING
/// in `ringside.h`): calls counted and written as no record, their exact sum, the largest of them
/// (taken from the cell), and the last one's value, where the calls no record stands for are placed.
package struct GatheredCalls: Sendable, Equatable {
    package var calls: UInt64
    package var sum: UInt64
    package var max: UInt64
    package var latest: UInt64

    package init(calls: UInt64, sum: UInt64, max: UInt64, latest: UInt64) {
        (self.calls, self.sum, self.max, self.latest) = (calls, sum, max, latest)
    }
}

/// A bot file's one consumer: drains every lane's records in batches and moves their read cursors.
///
/// Holds the consumer lock while open; a second consumer gets `RingError.consumerAlive`.
/// Not `Sendable`: one thread drains a bot.
package final class RingConsumer {
    private let file: MappedRingFile
    /// Each mapped lane's read cursor (the consumer is its only writer).
    private var cursors: [UInt64] = []
    /// Each lane's holder as last seen holding it, and the lane's claim count then: a thread that
    /// let go of its lane (owner_tid 0) after that is still named for its records (see thread(lane:)).
    private var lastHolders: [(id: Int32, claims: UInt32)] = []
    /// The metrics known so far; `refreshMetrics()` adds those registered since.
    package private(set) var metrics: [MetricDescriptor]
    /// Each mapped lane's `gathered` as last looked at, and its gather cells' calls and sums then,
    /// by metric (grown as metrics are: see `takeGathered`).
    private var gatheredSeen: [UInt64] = []
    private var gatherCellsSeen: [[(calls: UInt64, sum: UInt64)]] = []

    /// Opens the bot file `name` as its consumer.
    /// - Parameters:
    ///   - allowedOwners: users besides our own whose files may be opened.
    ///   - readsWeights: the caller takes the lanes' gathered calls (`takeGathered`) beside their
    ///     records (the collector does): the bot's producers may then sample a filling lane rather
    ///     than drop (SAMPLING in `ringside.h`). A consumer that counts records one by one leaves it
    ///     false, and sees drops.
    ///   - drainIntervalNanos: with `readsWeights`, the longest the caller expects to leave a
    ///     filling lane undrained: producers sample a lane only when it would fill before then.
    package init(
        _ name: String, directory: RingDirectory = RingDirectory(),
        allowedOwners: Set<UInt32> = [], readsWeights: Bool = false, drainIntervalNanos: UInt64 = 0
    ) throws(RingError) {
        file = try MappedRingFile.open(
            name: name, directory: directory, role: .consumer, allowedOwners: allowedOwners, readsWeights: readsWeights,
            drainIntervalNanos: drainIntervalNanos)
        metrics = try file.metrics(from: 0)
        try adoptNewLanes()
    }

    /// Why a file that `lstat` says is of `mode` (`st_mode`), owned by `owner`, of `size` bytes,
    /// cannot be opened as ring `name`'s consumer, found without opening it (so without an
    /// `IN_OPEN` for anyone watching the directory): not a regular file, another user's (not in
    /// `allowedOwners`), or empty (`.notReady`: being created). Nil when only an open can tell.
    package static func refusal(
        mode: mode_t, owner: uid_t, size: Int, name: String, directory: RingDirectory, allowedOwners: Set<UInt32>
    ) -> RingError? {
        let path = directory.filePath(for: name)
        if let refusal = RingFileHandle.refusal(mode: mode, owner: owner, name: name, path: path, allowedOwners: allowedOwners) {
            return refusal
        }
        return size == 0 ? .notReady(ring: name) : nil
    }

    package var name: String { file.name }
    package var path: String { file.path }
    /// Records each lane holds.
    package var capacity: UInt64 { file.layout.capacity }
    package var identity: RingFileIdentity { file.identity }
    /// The user that owns the file (nil: fstat failed when it was opened).
    package var owner: UInt32? { file.owner }
    /// Lanes mapped so far.
    package var laneCount: Int { cursors.count }
    /// The file, for a `LaneWatch` in this module.
    var mappedFile: MappedRingFile { file }
    /// Where lane `lane` has been drained to.
    package func drainedCursor(lane: Int) -> UInt64 { cursors[lane] }
    /// Whether lane `lane` holds no record left to drain (one acquire load).
    package func isDrained(lane: Int) -> Bool { lane < cursors.count && file.writeCursor(lane: lane) == cursors[lane] }
    /// Lane `lane`'s gathered calls as `takeGathered` last looked at them.
    package func gatheredSeen(lane: Int) -> UInt64 { gatheredSeen[lane] }

    /// The thread that wrote lane `lane`'s records: the one holding it now, or, if none does, the
    /// last one this consumer saw holding it, unless another has claimed the lane since; id 0 when
    /// unknown. Its name is the lane's (a retired lane keeps its last holder's name: see ringside.h).
    package func thread(lane: Int) -> (id: Int32, name: String) {
        guard lane < cursors.count else { return (0, "") }
        var id = file.ownerTID(lane: lane)
        if id == 0, lastHolders[lane].claims == file.claims(lane: lane) { id = lastHolders[lane].id }
        return (id, file.threadName(lane: lane))
    }

    /// Remembers lane `lane`'s holder, if one holds it: read between two equal claim counts, so
    /// the id is the claim's.
    private func noteHolder(lane: Int) {
        let claims = file.claims(lane: lane)
        let id = file.ownerTID(lane: lane)
        if id != 0, file.claims(lane: lane) == claims { lastHolders[lane] = (id, claims) }
    }

    /// Reads registry entries published since the last look; returns how many are new.
    @discardableResult
    package func refreshMetrics() throws(RingError) -> Int {
        guard file.metricCount != metrics.count else { return 0 }  // one load when nothing was registered
        let added = try file.metrics(from: metrics.count)
        metrics += added
        return added.count
    }

    /// Lets go of the strings of metric `index`'s descriptor (up to 488 bytes), keeping its
    /// index, kind, unit and sampling: a reader that gives a metric no series (a collector at its
    /// memory budget) need not hold them for every metric a registry may have.
    package func forgetStrings(ofMetric index: Int) {
        let metric = metrics[index]
        metrics[index] = MetricDescriptor(
            index: metric.index, name: "", kind: metric.kind, unit: metric.unit,
            encodedLabels: "", help: "", sampleEvery: metric.sampleEvery)
    }

    /// The file's state. `producerAlive`, when given, is used instead of asking the kernel (a
    /// system call), so a caller may check liveness less often than it reads the rest.
    package func status(producerAlive: Bool? = nil) throws(RingError) -> RingStatus {
        try file.status(producerAlive: producerAlive)
    }

    /// Whether a live process holds the producer lock (a system call).
    package var isProducerAlive: Bool { file.isLocked(byte: RS_LOCK_BYTE_PRODUCER) }

    /// Throws when the file was cut short under the lanes mapped, or has holes (see
    /// `RingFileHandle.checkIntact`): one `fstat`, for a caller told that the file changed.
    package func checkIntact() throws(RingError) { try file.checkIntact() }

    /// What the cells say of a metric now: exact counter totals, gauge values, per-metric drops.
    package func cells(of metric: MetricDescriptor) -> MetricCells { file.cells(of: metric) }

    /// The cells of the metric at `index` in `metrics`, without copying its descriptor.
    package func cells(ofMetric index: Int) -> MetricCells { file.cells(ofMetric: index, kind: metrics[index].kind) }

    /// Whether metric `index` (below `metrics.count`) is retired: its entry's `retired` word odd
    /// (RETIRING A SERIES in ringside.h; any word is read by its parity only).
    package func isRetired(metric index: Int) -> Bool { file.isRetired(index) }

    /// Whether a lane holds records not drained yet, or a lane was seen added (by `drain` or
    /// `lookForNewLanes`): a load per lane, for a caller that visits thousands of idle bots.
    /// It does not read the header page: lanes added since the last look wait for the next one.
    package var hasWork: Bool {
        if newLanesSeen { return true }
        for lane in cursors.indices where file.writeCursor(lane: lane) != cursors[lane] || file.gathered(lane: lane) != gatheredSeen[lane] {
            return true
        }
        return false
    }

    /// Hands each histogram's calls gathered on each lane since the last look (SAMPLING in
    /// `ringside.h`) to `body`, taking the largest of them from its cell. A lane's cells are read
    /// only when its `gathered` moved. Called after `drain`, it hands over every call gathered
    /// before the records drained (the producer stores a call's cell before it publishes a later
    /// record), so each record finds the calls it stands for (`GatherPlacement`).
    package func takeGathered(_ body: (_ metric: Int, _ lane: Int, _ gathered: GatheredCalls) -> Void) {
        for lane in cursors.indices {
            let total = file.gathered(lane: lane)
            guard total != gatheredSeen[lane] else { continue }
            gatheredSeen[lane] = total
            for metric in metrics.indices where metrics[metric].kind == .histogram {
                let cell = file.gatherCell(lane: lane, metric: metric)
                let seen = seenGatherCell(lane: lane, metric: metric)
                // Cumulative counts only grow; one that fell was written by no honest producer:
                // taken as the new start, counted as nothing.
                guard cell.calls != seen.calls else { continue }
                gatherCellsSeen[lane][metric] = (cell.calls, cell.sum)
                guard cell.calls > seen.calls else { continue }
                let max = file.takeGatheredMax(lane: lane, metric: metric)
                body(metric, lane, GatheredCalls(calls: cell.calls - seen.calls, sum: cell.sum &- seen.sum, max: max, latest: cell.latest))
            }
        }
    }

    /// What lane `lane`'s gather cell of `metric` held at the last look.
    private func seenGatherCell(lane: Int, metric: Int) -> (calls: UInt64, sum: UInt64) {
        if gatherCellsSeen[lane].count <= metric {
            // A metric registered since: counted from the start of its cell (none was gathered before
            // the consumer could know of it but by a producer this consumer has been reading).
            gatherCellsSeen[lane] += Array(repeating: (0, 0), count: metrics.count - gatherCellsSeen[lane].count)
        }
        return gatherCellsSeen[lane][metric]
    }

    /// Reads the header's lane count: whether lanes were added since the last look (then
    /// `hasWork` is true until the next `drain` maps them).
    @discardableResult
    package func lookForNewLanes() -> Bool {
        if file.lanesAllocated != cursors.count { newLanesSeen = true }
        return newLanesSeen
    }
    private var newLanesSeen = false

    /// Hands every lane's published records, oldest first within a lane, to `body` in batches
    /// of contiguous slots (a lane wraps), up to `limitPerLane` records a lane, then frees their
    /// slots for the producers.
    ///
    /// - Throws: `.corrupt` when a lane's cursors are out of range or the lane count is bad, or
    ///   `.truncated` when the file shrank under a mapping (its pages read as zeros since: see
    ///   `ringside.h`'s SIGBUS guard).
    ///
    /// The buffers are valid only during `body`; `firstCursor` is the cursor of the batch's first
    /// record in its lane (records carry it in `sequence`). The records' contents are untrusted.
    /// - Returns: the number of records drained.
    @discardableResult
    package func drain(
        limitPerLane: Int = .max,
        _ body: (_ records: UnsafeBufferPointer<RingRecord>, _ firstCursor: UInt64, _ lane: Int) -> Void
    ) throws(RingError) -> Int {
        try adoptNewLanes()
        let capacity = file.layout.capacity
        var drainedByLane: [(lane: Int, count: Int)] = []
        var total = 0
        for lane in cursors.indices {
            let write = file.writeCursor(lane: lane)
            let cursor = cursors[lane]
            guard write >= cursor, write - cursor <= capacity else {
                try file.checkNotTruncated()
                throw .corrupt(
                    ring: file.name, path: file.path,
                    problem: .cursorsOutOfRange(read: cursor, write: write, capacity: capacity))
            }
            let count = Int(min(write - cursor, UInt64(max(0, limitPerLane))))
            guard count > 0 else { continue }
            noteHolder(lane: lane)
            if total == 0, let size = file.currentFileSize, size < file.mappedFileSize {
                // A file cut short before this drain is reported before a single zero is handed over.
                throw .corrupt(
                    ring: file.name, path: file.path,
                    problem: .truncated(fileSize: size, expected: file.mappedFileSize))
            }
            file.forEachRun(lane: lane, from: cursor, count: count) { records, first in body(records, first, lane) }
            drainedByLane.append((lane, count))
            total += count
        }
        guard total > 0 else {
            try file.checkNotTruncated()  // a lane read as zeros has nothing to hand over: say why
            return 0
        }
        // Records read from a file truncated meanwhile were zeros (kind 0, which no metric has:
        // a validating body rejects them); the file is reported truncated, its cursors left alone.
        try file.checkNotTruncated()
        for (lane, count) in drainedByLane {
            cursors[lane] += UInt64(count)
            file.publishReadCursor(cursors[lane], lane: lane)
        }
        file.markConsumerHeartbeat()
        return total
    }

    /// `drain(limitPerLane:_:)` for a caller that does not need to know the lane (a file with
    /// one lane, or records judged by their cursor alone).
    @discardableResult
    package func drain(
        limit: Int = .max,
        _ body: (_ records: UnsafeBufferPointer<RingRecord>, _ firstCursor: UInt64) -> Void
    ) throws(RingError) -> Int {
        try drain(limitPerLane: limit) { records, first, _ in body(records, first) }
    }

    /// Maps lanes allocated since the last look and starts each at its published read cursor.
    private func adoptNewLanes() throws(RingError) {
        newLanesSeen = false
        try file.mapNewLanes()
        while cursors.count < file.laneCount {
            let lane = cursors.count
            let read = try file.checkedCursors(lane: lane).read
            cursors.append(read)
            lastHolders.append((0, 0))
            noteHolder(lane: lane)
            // What an earlier consumer drained (its read cursor moved) it counted, gathered calls
            // with it: they are where this consumer starts. A lane never drained starts at zero, so
            // a burst written before the first consumer came is counted whole.
            if read == 0 {
                gatheredSeen.append(0)
                gatherCellsSeen.append([])
            } else {
                gatheredSeen.append(file.gathered(lane: lane))
                gatherCellsSeen.append(
                    metrics.indices.map { metric in
                        guard metrics[metric].kind == .histogram else { return (0, 0) }
                        let cell = file.gatherCell(lane: lane, metric: metric)
                        return (cell.calls, cell.sum)
                    })
            }
        }
    }
}
