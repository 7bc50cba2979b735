import Synchronization

/// A body written as it is sent, a part at a time (a page too large to hold whole): sent with
/// `Transfer-Encoding: chunked`, each part a chunk, so a client sees a body cut short (by the
/// write timeout, or the peer gone) as cut short. An HTTP/1.0 client cannot read chunks: its
/// body (`chunked` false) ends with the connection, which the server closes after it.
///
/// `nextPart` runs on the server's thread as the socket takes the previous part: a part should
/// cost milliseconds. At most `maxOpen` are open at once in the process (each holds what its
/// parts are written from): past it, `init` returns nil, and the caller answers otherwise.
package final class ResponseStream: Sendable {
    private let next: @Sendable () -> [UInt8]?
    /// In chunks (HTTP/1.1), or ended by closing the connection (HTTP/1.0).
    package let chunked: Bool

    /// Streams open for responses at most, in the process.
    package static let maxOpen = 4
    private static let openCount = Atomic<Int>(0)

    /// A stream whose parts `next` writes, one a call, nil once the body is done; for a request
    /// of HTTP/1.`minorVersion` (1: in chunks; 0: ended by the connection's close).
    package init?(minorVersion: Int = 1, _ next: @escaping @Sendable () -> [UInt8]?) {
        guard Self.openCount.add(1, ordering: .relaxed).newValue <= Self.maxOpen else {
            Self.openCount.subtract(1, ordering: .relaxed)
            return nil
        }
        self.next = next
        chunked = minorVersion >= 1
    }

    deinit { Self.openCount.subtract(1, ordering: .relaxed) }

    /// The next part (never empty), or nil once the body is done.
    package func nextPart() -> [UInt8]? {
        while let part = next() {
            if !part.isEmpty { return part }
        }
        return nil
    }
}
