import CRingside
#if canImport(Glibc)
import Glibc
#endif

/// One 32-byte record as stored in the ring (see `rs_record` in `ringside.h`).
public typealias RingRecord = rs_record

/// A ring's state as a reader sees it now; cursors and counts are checked before they are shown.
public struct RingStatus: Sendable, Equatable {
    public let name: String
    public let path: String
    public let formatVersion: UInt32
    /// Records the ring holds.
    public let capacity: UInt64
    /// Metrics the registry holds.
    public let maxMetrics: Int
    public let fileSize: Int
    /// CLOCK_REALTIME and CLOCK_MONOTONIC when the file was created, to turn record times into wall time.
    public let createdRealtimeNanos: UInt64
    public let createdMonotonicNanos: UInt64
    /// Records published ever; also the producer's cursor.
    public let writeCursor: UInt64
    /// Records consumed ever; also the consumer's cursor.
    public let readCursor: UInt64
    /// Records dropped because the ring was full.
    public let dropped: UInt64
    public let metricCount: Int
    public let producerPID: Int32
    /// Whether a live process holds the producer lock.
    public let producerAlive: Bool
    public let producerStartRealtimeNanos: UInt64
    /// CLOCK_MONOTONIC_COARSE of the producer's last write (or attach).
    public let heartbeatMonotonicNanos: UInt64
    public let producerAttaches: UInt32
    public let consumerPID: Int32
    public let consumerAlive: Bool

    /// Records published and not yet consumed.
    public var backlog: UInt64 { writeCursor - readCursor }

    /// Wall-clock nanoseconds of a record's (monotonic) timestamp.
    public func realtimeNanos(ofMonotonic timestamp: UInt64) -> UInt64 {
        createdRealtimeNanos &+ (timestamp &- createdMonotonicNanos)
    }
}

// MARK: - Reading what every reader reads

extension MappedRingFile {
    /// The cursors, checked: the write cursor is ahead of the read cursor by at most the capacity.
    func checkedCursors() throws(RingError) -> (read: UInt64, write: UInt64) {
        // Read before write: the producer only moves write forward, so the pair stays consistent.
        let read = readCursor
        let write = writeCursor
        try checkNotTruncated() // zeros from a truncated file are not cursors
        guard read <= write, write - read <= layout.capacity else {
            throw .corrupt(ring: name, path: path,
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
                try checkNotTruncated() // an entry read as zeros: the file shrank, say so
                throw .corrupt(ring: name, path: path, problem: error)
            }
        }
        try checkNotTruncated()
        return found
    }

    func status() throws(RingError) -> RingStatus {
        let cursors = try checkedCursors()
        let fields = layoutFields
        let status = RingStatus(
            name: name, path: path, formatVersion: fields.version, capacity: layout.capacity,
            maxMetrics: Int(layout.registryCapacity), fileSize: layout.fileSize,
            createdRealtimeNanos: fields.created_realtime_ns, createdMonotonicNanos: fields.created_monotonic_ns,
            writeCursor: cursors.write, readCursor: cursors.read, dropped: droppedTotal,
            metricCount: Int(min(metricCount, layout.registryCapacity)), producerPID: producerPID,
            producerAlive: isLocked(byte: RS_LOCK_BYTE_PRODUCER), producerStartRealtimeNanos: producerStartNanos,
            heartbeatMonotonicNanos: heartbeatNanos, producerAttaches: producerAttaches,
            consumerPID: consumerPID, consumerAlive: role == .consumer || isLocked(byte: RS_LOCK_BYTE_CONSUMER))
        try checkNotTruncated()
        return status
    }
}

// MARK: - The consumer

/// A ring's one consumer: drains records in batches and moves the read cursor.
///
/// Holds the consumer lock while open; a second consumer gets `RingError.consumerAlive`.
/// Not `Sendable`: one thread drains a ring.
package final class RingConsumer {
    private let file: MappedRingFile
    private var cursor: UInt64
    /// The metrics known so far; `refreshMetrics()` adds those registered since.
    package private(set) var metrics: [MetricDescriptor]

    /// Opens the ring `name` as its consumer.
    /// - Parameter allowedOwners: users besides our own whose rings may be opened.
    package init(_ name: String, directory: RingDirectory = RingDirectory(),
                 allowedOwners: Set<UInt32> = []) throws(RingError) {
        file = try MappedRingFile.open(name: name, directory: directory, role: .consumer, allowedOwners: allowedOwners)
        cursor = try file.checkedCursors().read
        metrics = try file.metrics(from: 0)
    }

    package var name: String { file.name }
    package var path: String { file.path }
    package var capacity: UInt64 { file.layout.capacity }
    package var identity: RingFileIdentity { file.identity }

    /// Reads registry entries published since the last look; returns how many are new.
    @discardableResult
    package func refreshMetrics() throws(RingError) -> Int {
        let added = try file.metrics(from: metrics.count)
        metrics += added
        return added.count
    }

    package func status() throws(RingError) -> RingStatus { try file.status() }

    /// Hands the published records, oldest first, to `body` in at most two contiguous batches
    /// (the ring wraps), up to `limit` records, then frees their slots for the producer.
    ///
    /// - Throws: `.corrupt` when the cursors are out of range, or `.truncated` when the file
    ///   shrank under the mapping (its pages read as zeros since: see `ringside.h`'s SIGBUS guard).
    ///
    /// The buffers are valid only during `body`; `firstCursor` is the cursor of the batch's
    /// first record (records carry it in `sequence`). The records' contents are untrusted.
    /// - Returns: the number of records drained.
    @discardableResult
    package func drain(limit: Int = .max,
                       _ body: (_ records: UnsafeBufferPointer<RingRecord>, _ firstCursor: UInt64) -> Void) throws(RingError) -> Int {
        let write = file.writeCursor
        try file.checkNotTruncated()
        guard write >= cursor, write - cursor <= file.layout.capacity else {
            throw .corrupt(ring: file.name, path: file.path,
                           problem: .cursorsOutOfRange(read: cursor, write: write, capacity: file.layout.capacity))
        }
        let total = Int(min(write - cursor, UInt64(max(0, limit))))
        guard total > 0 else { return 0 }
        // A file cut short before this drain is reported before a single zero is handed over.
        if let size = file.currentFileSize, size < file.layout.fileSize {
            throw .corrupt(ring: file.name, path: file.path, problem: .truncated(fileSize: size, expected: file.layout.fileSize))
        }
        let capacity = Int(file.layout.capacity)
        var remaining = total
        while remaining > 0 {
            let slot = Int(cursor & (file.layout.capacity - 1))
            let count = min(remaining, capacity - slot)
            body(UnsafeBufferPointer(start: file.records + slot, count: count), cursor)
            cursor += UInt64(count)
            remaining -= count
        }
        // Records read from a file truncated meanwhile were zeros (kind 0, which no metric has:
        // a validating body rejects them); the ring is reported truncated, its cursor left alone.
        try file.checkNotTruncated()
        file.publishReadCursor(cursor)
        return total
    }
}

// MARK: - The inspector

/// A read-only view of a ring: status, registry and a peek at the records. Holds no lock, never
/// writes, and never disturbs the producer or the consumer.
package final class RingInspector {
    private let file: MappedRingFile

    /// Opens the ring `name` read-only.
    /// - Parameter allowedOwners: users besides our own whose rings may be opened.
    package init(_ name: String, directory: RingDirectory = RingDirectory(),
                 allowedOwners: Set<UInt32> = []) throws(RingError) {
        file = try MappedRingFile.open(name: name, directory: directory, role: .inspector, allowedOwners: allowedOwners)
    }

    package var name: String { file.name }
    package var path: String { file.path }

    package func status() throws(RingError) -> RingStatus { try file.status() }

    package func metrics() throws(RingError) -> [MetricDescriptor] { try file.metrics(from: 0) }

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
            throw .corrupt(ring: file.name, path: file.path,
                           problem: .badMetricCount(count: count, capacity: file.layout.registryCapacity))
        }
        let entries = (0..<Int(count)).map { index in
            do throws(RingCorruption) {
                return .success(try MetricDescriptor(entry: file.registryEntry(index), index: index))
            } catch {
                return .failure(error)
            }
        } as [Result<MetricDescriptor, RingCorruption>]
        try file.checkNotTruncated()
        return entries
    }

    /// Copies the records now in the ring (the last `last` of them, if given), oldest first,
    /// with their cursors. Never moves a cursor and never returns a torn record: a record the
    /// producer may have overwritten during the copy is left out.
    package func peek(last: Int? = nil) throws(RingError) -> [(cursor: UInt64, record: RingRecord)] {
        let cursors = try file.checkedCursors()
        var first = cursors.read
        if let last { first = max(first, cursors.write - min(cursors.write, UInt64(max(0, last)))) }
        var copied: [(cursor: UInt64, record: RingRecord)] = []
        copied.reserveCapacity(Int(cursors.write - first))
        let mask = file.layout.capacity - 1
        for cursor in first..<cursors.write {
            copied.append((cursor, file.records[Int(cursor & mask)]))
        }
        // The copies above complete before the cursor is read again (a seqlock reader's fence).
        rs_fence_acquire()
        // The producer rewrites slot c only after the consumer passes c, so the records at or
        // past the consumer's cursor now were not rewritten while we copied them.
        let stillUnread = file.readCursor
        try file.checkNotTruncated()
        return copied.filter { $0.cursor >= stillUnread }
    }
}
