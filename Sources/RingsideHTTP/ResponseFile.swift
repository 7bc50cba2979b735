import RingsideSystem
import Synchronization

/// A file sent as a response's body from the file itself, never read into memory: with
/// `sendfile` on a plain connection (the kernel copies from the page cache), a TLS record
/// (16 KiB) at a time under TLS. So a large file costs no copy per client, however many read it
/// and however slowly: what one connection holds is one record at most.
///
/// Owns its descriptor, closed when the last response holding it goes (sent, or its connection
/// closed). At most `maxOpen` are open at once in the process, so downloads cannot take the
/// descriptors the collector needs for its rings: past it, `init` returns nil, and the caller
/// answers `503`.
package final class ResponseFile: Sendable {
    /// The open file, read with `pread` and `sendfile` (its offset is never used).
    package let descriptor: Int32
    /// The bytes sent: the file's length when it was opened. A file that shrinks meanwhile
    /// closes the connection once its end is reached (the length is announced in the head).
    package let length: Int

    /// Files open for responses at most, in the process.
    package static let maxOpen = 16
    private static let openCount = Atomic<Int>(0)

    /// Takes `descriptor` (a regular file open to read) and its `length`; nil, the descriptor left
    /// to the caller to close, when `maxOpen` files are being sent.
    package init?(descriptor: Int32, length: Int) {
        guard Self.openCount.add(1, ordering: .relaxed).newValue <= Self.maxOpen else {
            Self.openCount.subtract(1, ordering: .relaxed)
            return nil
        }
        self.descriptor = descriptor
        self.length = length
    }

    deinit {
        System.close(descriptor)
        Self.openCount.subtract(1, ordering: .relaxed)
    }

    /// Files open for responses now.
    package static var open: Int { openCount.load(ordering: .relaxed) }
}
