// What every reader reads from a mapped bot file, checked: a lane's cursors, the registry, the
// status, each lane's problems (for `check`) and the metric cells. The consumer and the inspector
// both read through these.

import CRingside

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
            var status = LaneStatus(
                index: lane, state: LaneState(state(lane: lane)), ownerTID: ownerTID(lane: lane), threadName: threadName(lane: lane),
                claims: claims(lane: lane), writeCursor: cursors.write, readCursor: cursors.read,
                dropped: droppedTotal(lane: lane), heartbeatMonotonicNanos: heartbeatNanos(lane: lane))
            status.gathered = gathered(lane: lane)
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
        var status = RingStatus(
            name: name, path: path, formatVersion: fields.version, capacity: layout.capacity,
            maxMetrics: Int(layout.registryCapacity), maxLanes: Int(layout.maxLanes), fileSize: mappedFileSize,
            createdRealtimeNanos: fields.created_realtime_ns, createdMonotonicNanos: fields.created_monotonic_ns,
            writeCursor: write, readCursor: read, dropped: dropped &+ unlanedDropped, unlanedDropped: unlanedDropped,
            lanesExhausted: lanesExhausted, workersRefused: workersRefused, metricCount: count, producerPID: producerPID,
            producerAlive: knownAlive ?? isLocked(byte: RS_LOCK_BYTE_PRODUCER),
            producerStartRealtimeNanos: producerStartNanos, heartbeatMonotonicNanos: heartbeat,
            producerAttaches: producerAttaches, consumerPID: consumerPID,
            consumerAlive: role == .consumer || isLocked(byte: RS_LOCK_BYTE_CONSUMER),
            sampleAbove: sampleAbove, consumerReadsWeights: consumerPID != 0 && weightsReaderPID == consumerPID, lanes: lanes)
        status.drainIntervalNanos = drainIntervalNanos
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
    func cells(of metric: MetricDescriptor) -> MetricCells { cells(ofMetric: Int(metric.index), kind: metric.kind) }

    /// `cells(of:)` by the metric's index and kind, for a caller that visits a million metrics
    /// (a descriptor's copy, its strings retained and released, cost more than reading its cells).
    func cells(ofMetric index: Int, kind: MetricKind) -> MetricCells {
        // Saturating: a sum past 2^64 (only a hostile or broken writer's) reads as the ceiling, never lower.
        var sum = unlaned(metric: index)
        for lane in 0..<laneCount {
            let (added, overflow) = sum.addingReportingOverflow(laneCell(lane: lane, metric: index))
            sum = overflow ? .max : added
        }
        let control = control(metric: index)
        let refused = refusals(metric: index)
        switch kind {
        case .counter: return MetricCells(total: sum, dropped: 0, lastValue: nil, clamped: refused.clamped, control: control)
        case .gauge:
            return MetricCells(total: 0, dropped: sum, lastValue: gaugeValue(metric: index), clamped: refused.clamped, control: control)
        case .histogram:
            // The dropped values' sum and largest (see SAMPLING: DROPPED VALUES in `ringside.h`).
            var (droppedSum, droppedMax) = unlanedValues(metric: index)
            for lane in 0..<laneCount {
                let dropped = gatherDropped(lane: lane, metric: index)
                droppedSum &+= dropped.sum
                droppedMax = max(droppedMax, dropped.max)
            }
            return MetricCells(
                total: 0, dropped: sum, droppedSum: droppedSum, droppedMax: droppedMax, clamped: refused.clamped,
                exemplarsRefused: refused.exemplars, control: control)
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
    /// Histograms: the values of the records dropped, their sum (modulo 2^64) and the largest.
    package var droppedSum: UInt64
    package var droppedMax: UInt64
    /// Values clamped to what the metric holds, rounded, or not recorded (a NaN; a binding's value
    /// that is no number, a gauge's too).
    package var clamped: UInt64
    /// Histograms: exemplars refused (malformed, or given to a signed histogram), their values
    /// recorded without them.
    package var exemplarsRefused: UInt64
    /// The operator's switches (CONTROL in ringside.h): off, the bot off, sampled 1 in 2^n.
    package var control: UInt32

    package init(
        total: UInt64 = 0, dropped: UInt64 = 0, lastValue: Double? = nil, droppedSum: UInt64 = 0, droppedMax: UInt64 = 0,
        clamped: UInt64 = 0, exemplarsRefused: UInt64 = 0, control: UInt32 = 0
    ) {
        self.clamped = clamped
        self.exemplarsRefused = exemplarsRefused
        self.control = control
        self.total = total
        self.dropped = dropped
        self.lastValue = lastValue
        self.droppedSum = droppedSum
        self.droppedMax = droppedMax
    }
}
