import Glibc
import RingsideSystem

/// One client connection's state between wake-ups of the event loop. Owned by the server thread.
///
/// A connection alternates between reading a head and writing its response; it never reads the
/// next request while a response is pending (at the render worker or being sent), so pipelined
/// requests are answered in order, and a pipelining client that does not read its responses
/// cannot make the server buffer without bound.
final class Connection {
    enum Phase: Equatable {
        /// Waiting for a complete request head; `deadline` bounds how long.
        case reading
        /// Its request is at the render worker; the response is framed so when it comes back.
        /// Nothing is read meanwhile, and no deadline runs: the queue's bound limits the wait.
        case rendering(headOnly: Bool, disposition: ConnectionDisposition)
        /// Sending `output`; afterwards read the next request, or linger and close.
        case writing(closeAfter: Bool)
        /// Our FIN is sent; discarding what the client still sends until it closes or
        /// `deadline` passes, so a close does not reset the connection before the client has
        /// read our last response.
        case lingering
    }

    let fd: Int32
    var parser: RequestParser
    var phase = Phase.reading
    /// What is left to send, in order (a response's head, then its body); `written` bytes of the
    /// first are sent.
    var output: [[UInt8]] = []
    var written = 0
    /// Monotonic milliseconds after which the current phase has taken too long.
    var deadline: Int64
    /// When the connection last became idle: accepted, or done with a response.
    var idleSince: Int64
    private(set) var isClosed = false

    init(fd: Int32, maxHeadBytes: Int, deadline: Int64, now: Int64) {
        self.fd = fd
        self.parser = RequestParser(maxHeadBytes: maxHeadBytes)
        self.deadline = deadline
        idleSince = now
    }

    /// Sent nothing since it was accepted or answered (or is only lingering): evicting it loses no request.
    var isIdle: Bool {
        !isClosed && ((phase == .reading && parser.buffer.isEmpty) || phase == .lingering)
    }

    /// The `poll` events this phase waits for (none while rendering: `poll` still reports an
    /// error or a hang-up).
    var pollEvents: Int16 {
        switch phase {
        case .reading, .lingering: Int16(POLLIN)
        case .writing: Int16(POLLOUT)
        case .rendering: 0
        }
    }

    /// Writes as much of `output` as the socket takes, `slice` bytes at most. Returns true once
    /// all of it is sent; closes the connection if the peer is gone.
    func flush(slice: Int) -> Bool {
        var allowed = slice
        while let part = output.first {
            while written < part.count {
                guard allowed > 0 else { return false }
                let end = min(part.count, written + allowed)
                let result = part.withUnsafeBytes { Syscall.send(fd, UnsafeRawBufferPointer(rebasing: $0[written..<end])) }
                switch result {
                case .bytes(let n):
                    written += n
                    allowed -= n
                case .wouldBlock: return false
                case .endOfStream, .failed:
                    close()
                    return false
                }
            }
            output.removeFirst()
            written = 0
        }
        return true
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        System.close(fd)
    }
}
