import Ringside
import RingsideTrace

/// A full chunk of one bot's recorded records, in drain order: immutable, so a capture on
/// another thread holds it without a copy while the recorder lets go of it.
// @unchecked: `records` changes only in `recycle`, which the recorder calls once it let go of the
// chunk and holds its only reference (no capture does): to anyone who can see it, it is immutable.
package final class RecordedChunk: @unchecked Sendable {
    package private(set) var records: ContiguousArray<TraceRecord>
    /// The earliest and latest of its records' times, each clamped when drained to the recorder's
    /// retention before that drain and to the drain's time (a producer's clock is untrusted).
    package let firstNanos: UInt64
    package let lastNanos: UInt64

    init(records: ContiguousArray<TraceRecord>, firstNanos: UInt64, lastNanos: UInt64) {
        self.records = records
        self.firstNanos = firstNanos
        self.lastNanos = lastNanos
    }

    /// Its storage, emptied, for the recorder's next chunk (no allocation, no page to fault in);
    /// only by the holder of its only reference.
    func recycle() -> ContiguousArray<TraceRecord> {
        var storage = ContiguousArray<TraceRecord>()
        swap(&storage, &records)
        storage.removeAll(keepingCapacity: true)
        return storage
    }

    /// Whether any of its records may fall in `from...to`.
    package func overlaps(fromNanos from: UInt64, toNanos to: UInt64) -> Bool { lastNanos >= from && firstNanos <= to }
}
