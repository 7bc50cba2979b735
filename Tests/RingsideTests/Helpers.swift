import CRingside
#if canImport(Glibc)
import Glibc
#endif
@testable import Ringside

/// Drains everything in the ring; returns the records with the cursors they were read at.
func drainAll(_ consumer: RingConsumer) throws -> [(cursor: UInt64, record: RingRecord)] {
    var drained: [(cursor: UInt64, record: RingRecord)] = []
    try consumer.drain { records, first in
        for (offset, record) in records.enumerated() { drained.append((first + UInt64(offset), record)) }
    }
    return drained
}
