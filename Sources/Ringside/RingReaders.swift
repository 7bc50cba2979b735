import CRingside
#if canImport(Glibc)
import Glibc
#endif

/// One 32-byte record as stored in a lane (see `rs_record` in `ringside.h`).
package typealias RingRecord = rs_record

/// Who holds a lane (`state` in `ringside.h`). Public for the collector's export snapshots.
package enum LaneState: Sendable, Equatable, CustomStringConvertible {
    /// Allocated and never claimed yet.
    case unused
    /// A live thread writes it.
    case active
    /// Its thread exited: the next thread that needs a lane takes it over.
    case retired
    /// A value the format does not have.
    case invalid(UInt32)

    init(_ raw: UInt32) {
        switch raw {
        case RS_LANE_UNUSED: self = .unused
        case RS_LANE_ACTIVE: self = .active
        case RS_LANE_RETIRED: self = .retired
        default: self = .invalid(raw)
        }
    }

    public var description: String {
        switch self {
        case .unused: return "unused"
        case .active: return "active"
        case .retired: return "retired"
        case let .invalid(raw): return "invalid(\(raw))"
        }
    }
}

/// One lane (one thread's ring) as a reader sees it now; cursors are checked before they are shown.
package struct LaneStatus: Sendable, Equatable {
    package let index: Int
    package let state: LaneState
    /// The kernel thread id holding it (0 when retired).
    package let ownerTID: Int32
    /// Threads that have held it.
    package let claims: UInt32
    /// Records published ever; also the producer's cursor.
    package let writeCursor: UInt64
    /// Records consumed ever; also the consumer's cursor.
    package let readCursor: UInt64
    /// Records dropped because the lane was full.
    package let dropped: UInt64
    /// CLOCK_MONOTONIC_COARSE of the lane's last record (or claim).
    package let heartbeatMonotonicNanos: UInt64

    /// Records published and not yet consumed.
    package var backlog: UInt64 { writeCursor - readCursor }
}

/// A bot file's state as a reader sees it now; the bot's figures are its lanes' added up.
///
/// Exactly, from one status: records attempted (after sampling) == `writeCursor + dropped`, and
/// `writeCursor == readCursor + backlog`; so attempted == consumed + dropped + backlog.
package struct RingStatus: Sendable, Equatable {
    package let name: String
    package let path: String
    package let formatVersion: UInt32
    /// Records each lane holds.
    package let capacity: UInt64
    /// Metrics the registry holds.
    package let maxMetrics: Int
    /// Lanes the file may hold: threads recording at once.
    package let maxLanes: Int
    /// The file's size with its lanes now.
    package let fileSize: Int
    /// CLOCK_REALTIME and CLOCK_MONOTONIC when the file was created, to turn record times into wall time.
    package let createdRealtimeNanos: UInt64
    package let createdMonotonicNanos: UInt64
    /// Records published ever, in every lane.
    package let writeCursor: UInt64
    /// Records consumed ever, in every lane.
    package let readCursor: UInt64
    /// Records dropped: by full lanes, and by threads that found no lane (`unlanedDropped`).
    package let dropped: UInt64
    /// Of `dropped`, the records of threads that found every lane taken.
    package let unlanedDropped: UInt64
    /// Times a thread found every lane taken.
    package let lanesExhausted: UInt64
    package let metricCount: Int
    package let producerPID: Int32
    /// Whether a live process holds the producer lock.
    package let producerAlive: Bool
    package let producerStartRealtimeNanos: UInt64
    /// CLOCK_MONOTONIC_COARSE of the bot's last record in any lane (or its last attach or claim).
    package let heartbeatMonotonicNanos: UInt64
    package let producerAttaches: UInt32
    package let consumerPID: Int32
    package let consumerAlive: Bool
    /// Each lane, by index.
    package let lanes: [LaneStatus]

    /// Records published and not yet consumed, in every lane. The totals may each wrap (a lane's
    /// cursors are free-running); their difference, taken modulo 2^64, is still the lanes' sum.
    package var backlog: UInt64 { writeCursor &- readCursor }

    /// Wall-clock nanoseconds of a record's (monotonic) timestamp.
    package func realtimeNanos(ofMonotonic timestamp: UInt64) -> UInt64 {
        createdRealtimeNanos &+ (timestamp &- createdMonotonicNanos)
    }
}

// MARK: - Reading what every reader reads

extension MappedRingFile {
    /// Times a lane's cursors are loaded again while a consumer moves its read cursor.
    static let cursorLooks = 8

    /// A lane's cursors, checked: the write cursor is ahead of the read cursor by at most the capacity.
    /// - Parameter checkingTruncation: false for a caller that checks once after reading every lane.
    func checkedCursors(lane: Int, checkingTruncation: Bool = true) throws(RingError) -> (read: UInt64, write: UInt64) {
        // Read before write: the producer only moves write forward, so the pair stays consistent
        // while read stands still. An inspector's read cursor is the collector's, which may drain
        // (and the producer refill) between the loads: then the pair is not one moment's, so load
        // again; a read cursor that keeps moving is a live consumer's, judged by its last look.
        var read = readCursor(lane: lane)
        var write = writeCursor(lane: lane)
        for _ in 0..<Self.cursorLooks {
            let readAgain = readCursor(lane: lane)
            if readAgain == read { break }
            read = readAgain
            write = writeCursor(lane: lane)
        }
        if checkingTruncation || read > write || write - read > layout.capacity {
            try checkNotTruncated()  // zeros from a truncated file are not cursors
        }
        guard read <= write, write - read <= layout.capacity else {
            throw .corrupt(
                ring: name, path: path,
                problem: .cursorsOutOfRange(read: read, write: write, capacity: layout.capacity))
        }
        return (read, write)
    }

    /// The registry entries from `start` to the published count, decoded and checked.
    func metrics(from start: Int) throws(RingError) -> [MetricDescriptor] {
        let count = metricCount
        guard count <= layout.registryCapacity else {
            throw .corrupt(ring: name, path: path, problem: .badMetricCount(count: count, capacity: layout.registryCapacity))
        }
        var found: [MetricDescriptor] = []
        for index in min(start, Int(count))..<Int(count) {
            do { found.append(try MetricDescriptor(entry: registryEntry(index), index: index)) } catch {
                try checkNotTruncated()  // an entry read as zeros: the file shrank, say so
                throw .corrupt(ring: name, path: path, problem: error)
            }
        }
        try checkNotTruncated()
        return found
    }

    /// The file's state; `producerAlive` is checked with a system call unless given.
    func status(producerAlive knownAlive: Bool? = nil) throws(RingError) -> RingStatus {
        try mapNewLanes()
        var lanes: [LaneStatus] = []
        lanes.reserveCapacity(laneCount)
        var write: UInt64 = 0, read: UInt64 = 0, dropped: UInt64 = 0
        var heartbeat = heartbeatNanos
        for lane in 0..<laneCount {
            let cursors = try checkedCursors(lane: lane, checkingTruncation: false)  // checked once, below
            let status = LaneStatus(
                index: lane, state: LaneState(state(lane: lane)), ownerTID: ownerTID(lane: lane),
                claims: claims(lane: lane), writeCursor: cursors.write, readCursor: cursors.read,
                dropped: droppedTotal(lane: lane), heartbeatMonotonicNanos: heartbeatNanos(lane: lane))
            lanes.append(status)
            write &+= status.writeCursor
            read &+= status.readCursor
            dropped &+= status.dropped
            heartbeat = max(heartbeat, status.heartbeatMonotonicNanos)
        }
        let count = Int(min(metricCount, layout.registryCapacity))
        var unlanedDropped: UInt64 = 0
        for metric in 0..<count where registryKind(metric) != MetricKind.counter.rawValue {
            unlanedDropped &+= unlaned(metric: metric)
        }
        let fields = layoutFields
        let status = RingStatus(
            name: name, path: path, formatVersion: fields.version, capacity: layout.capacity,
            maxMetrics: Int(layout.registryCapacity), maxLanes: Int(layout.maxLanes), fileSize: mappedFileSize,
            createdRealtimeNanos: fields.created_realtime_ns, createdMonotonicNanos: fields.created_monotonic_ns,
            writeCursor: write, readCursor: read, dropped: dropped &+ unlanedDropped, unlanedDropped: unlanedDropped,
            lanesExhausted: lanesExhausted, metricCount: count, producerPID: producerPID,
            producerAlive: knownAlive ?? isLocked(byte: RS_LOCK_BYTE_PRODUCER),
            producerStartRealtimeNanos: producerStartNanos, heartbeatMonotonicNanos: heartbeat,
            producerAttaches: producerAttaches, consumerPID: consumerPID,
            consumerAlive: role == .consumer || isLocked(byte: RS_LOCK_BYTE_CONSUMER), lanes: lanes)
        try checkNotTruncated()
        return status
    }

    /// Every lane's problems, each named (`status()` stops at the first): more lanes than
    /// max_lanes, a file too short for its lanes, each lane's cursors out of range. The cursors
    /// are read from the file, not a mapping, so that lanes the reader would not map are looked at
    /// too and a short file cannot fault.
    func laneProblems() -> [LaneProblem] {
        guard let fileSize = currentFileSize else { return [] }
        let allocated = Int(lanesAllocated), maxLanes = Int(layout.maxLanes)
        var problems: [LaneProblem] = []
        if allocated > maxLanes {
            // The count itself is the problem (and the size it asks for may not fit in an Int).
            problems.append(.tooManyLanes(allocated: allocated, maxLanes: maxLanes))
        } else if fileSize < layout.fileSize(lanes: allocated) {
            problems.append(.truncated(fileSize: fileSize, lanes: allocated, needed: layout.fileSize(lanes: allocated)))
        }
        // Each lane the file and max_lanes both hold.
        let readable = min(allocated, maxLanes, max(0, (fileSize - layout.lanesOffset) / layout.laneSize))
        return problems + (0..<readable).compactMap(cursorProblem(lane:))
    }

    /// What is wrong with lane `lane`'s cursors as the file holds them, or nil.
    private func cursorProblem(lane: Int) -> LaneProblem? {
        for _ in 0..<Self.cursorLooks {
            // The read cursor before and after the write cursor: unchanged, the pair is one moment's.
            guard let read = readCursorOnFile(lane: lane), let write = writeCursorOnFile(lane: lane),
                let readAgain = readCursorOnFile(lane: lane)
            else { return nil }
            guard read == readAgain else { continue }  // a consumer is draining it: look again
            if read > write { return .readPastWrite(lane: lane, read: read, write: write) }
            if write - read > layout.capacity { return .overCapacity(lane: lane, read: read, write: write, capacity: layout.capacity) }
            return nil
        }
        return nil  // moving all along: a live consumer, not a corrupt lane
    }

    /// What the cells say of one metric now (see CELLS in `ringside.h`): a counter's total, a
    /// gauge's last value, and the records of a histogram or gauge that were dropped.
    func cells(of metric: MetricDescriptor) -> MetricCells {
        let index = Int(metric.index)
        var sum = unlaned(metric: index)
        for lane in 0..<laneCount { sum &+= laneCell(lane: lane, metric: index) }
        switch metric.kind {
        case .counter: return MetricCells(total: sum, dropped: 0, lastValue: nil)
        case .gauge: return MetricCells(total: 0, dropped: sum, lastValue: gaugeValue(metric: index))
        case .histogram: return MetricCells(total: 0, dropped: sum, lastValue: nil)
        }
    }
}

/// One metric's figures from the cells, exact whatever the lanes held.
package struct MetricCells: Sendable, Equatable {
    /// Counters: every increment, on every thread.
    package var total: UInt64
    /// Histograms and gauges: records dropped (full lanes, or threads without one).
    package var dropped: UInt64
    /// Gauges: the last value set, if any.
    package var lastValue: Double?

    package init(total: UInt64 = 0, dropped: UInt64 = 0, lastValue: Double? = nil) {
        self.total = total
        self.dropped = dropped
        self.lastValue = lastValue
    }
}

// MARK: - The consumer

/// A bot file's one consumer: drains every lane's records in batches and moves their read cursors.
///
/// Holds the consumer lock while open; a second consumer gets `RingError.consumerAlive`.
/// Not `Sendable`: one thread drains a bot.
package final class RingConsumer {
    private let file: MappedRingFile
    /// Each mapped lane's read cursor (the consumer is its only writer).
    private var cursors: [UInt64] = []
    /// The metrics known so far; `refreshMetrics()` adds those registered since.
    package private(set) var metrics: [MetricDescriptor]

    /// Opens the bot file `name` as its consumer.
    /// - Parameter allowedOwners: users besides our own whose files may be opened.
    package init(
        _ name: String, directory: RingDirectory = RingDirectory(),
        allowedOwners: Set<UInt32> = []
    ) throws(RingError) {
        file = try MappedRingFile.open(name: name, directory: directory, role: .consumer, allowedOwners: allowedOwners)
        metrics = try file.metrics(from: 0)
        try adoptNewLanes()
    }

    package var name: String { file.name }
    package var path: String { file.path }
    /// Records each lane holds.
    package var capacity: UInt64 { file.layout.capacity }
    package var identity: RingFileIdentity { file.identity }
    /// Lanes mapped so far.
    package var laneCount: Int { cursors.count }
    /// The file, for a `LaneWatch` in this module.
    var mappedFile: MappedRingFile { file }
    /// Where lane `lane` has been drained to.
    package func drainedCursor(lane: Int) -> UInt64 { cursors[lane] }

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

    /// Whether a lane holds records not drained yet, or a lane was seen added (by `drain` or
    /// `lookForNewLanes`): a load per lane, for a caller that visits thousands of idle bots.
    /// It does not read the header page: lanes added since the last look wait for the next one.
    package var hasWork: Bool {
        if newLanesSeen { return true }
        for lane in cursors.indices where file.writeCursor(lane: lane) != cursors[lane] { return true }
        return false
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
            cursors.append(try file.checkedCursors(lane: cursors.count).read)
        }
    }
}

// MARK: - The inspector

/// A read-only view of a bot file: status, registry, cells and a peek at the records. Holds no
/// lock, never writes, and never disturbs the producer or the consumer.
package final class RingInspector {
    private let file: MappedRingFile

    /// Opens the bot file `name` read-only.
    /// - Parameter allowedOwners: users besides our own whose files may be opened.
    package init(
        _ name: String, directory: RingDirectory = RingDirectory(),
        allowedOwners: Set<UInt32> = []
    ) throws(RingError) {
        file = try MappedRingFile.open(name: name, directory: directory, role: .inspector, allowedOwners: allowedOwners)
    }

    package var name: String { file.name }
    package var path: String { file.path }

    package func status() throws(RingError) -> RingStatus { try file.status() }

    package func metrics() throws(RingError) -> [MetricDescriptor] { try file.metrics(from: 0) }

    /// Every lane's problems, each named, where `status()` stops at the first (see
    /// `MappedRingFile.laneProblems()`); none for sound lanes.
    package func laneProblems() -> [LaneProblem] { file.laneProblems() }

    /// What the cells say of a metric now.
    package func cells(of metric: MetricDescriptor) throws(RingError) -> MetricCells {
        try file.mapNewLanes()
        return file.cells(of: metric)
    }

    /// A copy of the header's fields as they are now, for tools that show every one. The layout
    /// was validated at open; the producer's and consumer's lines are copied unchecked and may
    /// change at any moment: `status()` gives the checked values.
    package var header: rs_header { file.layoutFields }

    /// Every published registry entry, each decoded and checked on its own, so that a tool can
    /// name every bad entry and not only the first.
    /// - Throws: `.corrupt` when the metric count exceeds the registry's capacity.
    package func registryEntries() throws(RingError) -> [Result<MetricDescriptor, RingCorruption>] {
        let count = file.metricCount
        guard count <= file.layout.registryCapacity else {
            throw .corrupt(
                ring: file.name, path: file.path,
                problem: .badMetricCount(count: count, capacity: file.layout.registryCapacity))
        }
        let entries =
            (0..<Int(count)).map { index in
                do throws(RingCorruption) {
                    return .success(try MetricDescriptor(entry: file.registryEntry(index), index: index))
                } catch {
                    return .failure(error)
                }
            } as [Result<MetricDescriptor, RingCorruption>]
        try file.checkNotTruncated()
        return entries
    }

    /// Copies the records now in the lanes (the last `last` of each lane, if given), with their
    /// lane and cursor, oldest first by timestamp: the backlog, and `includingConsumed`, the
    /// records a consumer has passed that their slots still hold (while a collector drains, the
    /// backlog is mostly empty). Never moves a cursor and never returns a torn or replaced
    /// record: one the producer may have overwritten during the copy is left out.
    package func peek(last: Int? = nil, includingConsumed: Bool = false) throws(RingError) -> [PeekedRecord] {
        try file.mapNewLanes()
        var copied: [PeekedRecord] = []
        for lane in 0..<file.laneCount {
            let cursors = try file.checkedCursors(lane: lane)
            // A lane's slots hold its last `capacity` records: those the consumer has passed, then the backlog.
            var first = includingConsumed ? cursors.write - min(cursors.write, file.layout.capacity) : cursors.read
            if let last { first = max(first, cursors.write - min(cursors.write, UInt64(max(0, last)))) }
            copied += file.copyRecords(lane: lane, from: first, to: cursors.write).compactMap {
                includingConsumed || !$0.consumed
                    ? PeekedRecord(lane: lane, cursor: $0.cursor, record: $0.record, consumed: $0.consumed) : nil
            }
        }
        try file.checkNotTruncated()
        return copied.sorted { ($0.record.timestamp_ns, $0.lane, $0.cursor) < ($1.record.timestamp_ns, $1.lane, $1.cursor) }
    }
}

/// A record copied from a lane, with where it was.
package struct PeekedRecord {
    package let lane: Int
    package let cursor: UInt64
    package let record: RingRecord
    /// Whether the consumer had passed it when it was copied (only with `includingConsumed`).
    package let consumed: Bool

    package init(lane: Int, cursor: UInt64, record: RingRecord, consumed: Bool) {
        self.lane = lane
        self.cursor = cursor
        self.record = record
        self.consumed = consumed
    }
}
