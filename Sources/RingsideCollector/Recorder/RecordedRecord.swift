import Ringside

/// One raw record as the drain took it: the file of its bot it came from (the bot's source
/// index, as `RingAggregator` numbers its files), its lane, and the record as the lane held it,
/// untrusted and unvalidated. Exemplar records are kept too, in lane order, so a reader can put
/// exemplars back together.
package struct RecordedRecord: Sendable {
    package var source: UInt32
    package var lane: UInt32
    package var record: RingRecord

    package init(source: UInt32, lane: UInt32, record: RingRecord) {
        self.source = source
        self.lane = lane
        self.record = record
    }
}

/// A full chunk of one bot's recorded records, in drain order: immutable, so a capture on
/// another thread holds it without a copy while the recorder lets go of it.
// @unchecked: `records` changes only in `recycle`, which the recorder calls once it let go of the
// chunk and holds its only reference (no capture does): to anyone who can see it, it is immutable.
package final class RecordedChunk: @unchecked Sendable {
    package private(set) var records: ContiguousArray<RecordedRecord>
    /// The earliest and latest of its records' times, each clamped when drained to the recorder's
    /// retention before that drain and to the drain's time (a producer's clock is untrusted).
    package let firstNanos: UInt64
    package let lastNanos: UInt64

    init(records: ContiguousArray<RecordedRecord>, firstNanos: UInt64, lastNanos: UInt64) {
        self.records = records
        self.firstNanos = firstNanos
        self.lastNanos = lastNanos
    }

    /// Its storage, emptied, for the recorder's next chunk (no allocation, no page to fault in);
    /// only by the holder of its only reference.
    func recycle() -> ContiguousArray<RecordedRecord> {
        var storage = ContiguousArray<RecordedRecord>()
        swap(&storage, &records)
        storage.removeAll(keepingCapacity: true)
        return storage
    }

    /// Whether any of its records may fall in `from...to`.
    package func overlaps(fromNanos from: UInt64, toNanos to: UInt64) -> Bool { lastNanos >= from && firstNanos <= to }
}
