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

/// Overwrites bytes of a ring file at `offset` (the tests' way of corrupting one).
func patch<T>(_ path: String, at offset: Int, with value: T) {
    let fd = open(path, O_WRONLY)
    precondition(fd >= 0, "open \(path) for patching")
    defer { close(fd) }
    var copy = value
    let written = withUnsafeBytes(of: &copy) { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
    precondition(written == MemoryLayout<T>.size, "patch \(path)")
}

/// The offset of a header field, from the C layout.
func headerOffset<T>(_ field: KeyPath<rs_header, T>) -> Int { MemoryLayout<rs_header>.offset(of: field)! }
