// The read-only reader: status, registry, cells and a peek at the records, for the tools.

import CRingside

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

    /// Whether a metric's entry says it is retired (RETIRING A SERIES in ringside.h).
    package func isRetired(_ metric: MetricDescriptor) -> Bool { file.isRetired(Int(metric.index)) }

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
    /// backlog is mostly empty). A value's exemplar records follow it (their timestamps hold the
    /// exemplar's bytes). Never moves a cursor and never returns a torn or replaced record: one
    /// the producer may have overwritten during the copy is left out.
    package func peek(last: Int? = nil, includingConsumed: Bool = false) throws(RingError) -> [PeekedRecord] {
        try file.mapNewLanes()
        var copied: [(time: UInt64, peeked: PeekedRecord)] = []
        for lane in 0..<file.laneCount {
            let cursors = try file.checkedCursors(lane: lane)
            // A lane's slots hold its last `capacity` records: those the consumer has passed, then the backlog.
            var first = includingConsumed ? cursors.write - min(cursors.write, file.layout.capacity) : cursors.read
            if let last { first = max(first, cursors.write - min(cursors.write, UInt64(max(0, last)))) }
            let records = file.copyRecords(lane: lane, from: first, to: cursors.write)
            // An exemplar's record sorts at the time of the value before it in its lane (parts
            // whose value is not here, at the lane's first value's), so a group stays together.
            var valueTime = records.first { !$0.record.isExemplarPart }?.record.timestamp_ns ?? 0
            for copy in records {
                let part = copy.record.isExemplarPart
                if !part { valueTime = copy.record.timestamp_ns }
                guard includingConsumed || !copy.consumed else { continue }
                copied.append((valueTime, PeekedRecord(lane: lane, cursor: copy.cursor, record: copy.record, consumed: copy.consumed)))
            }
        }
        try file.checkNotTruncated()
        return copied.sorted { ($0.time, $0.peeked.lane, $0.peeked.cursor) < ($1.time, $1.peeked.lane, $1.peeked.cursor) }.map(\.peeked)
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
