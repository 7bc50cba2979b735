import Glibc
import RingsideSystem
import RingsideHTTPClient

/// One client connection's state between wake-ups of the event loop. Owned by the server thread.
///
/// With TLS, its bytes go through its `TLSStream`, whose handshake comes first; the phases are
/// the same, and `pollEvents` waits for what TLS waits for (a read may need to write, and the
/// reverse).
///
/// A connection alternates between reading a head and writing its response; it never reads the
/// next request while a response is pending (at the render worker or being sent), so pipelined
/// requests are answered in order, and a pipelining client that does not read its responses
/// cannot make the server buffer without bound.
final class Connection {
    enum Phase: Equatable {
        /// The TLS handshake is under way; `deadline` (the head timeout) bounds it.
        case handshaking
        /// Waiting for a complete request head; `deadline` bounds how long.
        case reading
        /// Its request is at the render worker; the response is framed so when it comes back.
        /// Nothing is read meanwhile, and no deadline runs: the queue's bound limits the wait.
        case rendering(headOnly: Bool, disposition: ConnectionDisposition)
        /// Its request's password is at the password worker (bcrypt); then it is answered as any other.
        case verifying(HTTPRequest, headOnly: Bool, disposition: ConnectionDisposition)
        /// Sending `output`; afterwards read the next request, or linger and close.
        case writing(closeAfter: Bool)
        /// Our FIN is sent; discarding what the client still sends until it closes or
        /// `deadline` passes, so a close does not reset the connection before the client has
        /// read our last response.
        case lingering
    }

    let fd: Int32
    /// The connection's TLS; nil for plain HTTP.
    private(set) var tls: TLSStream?
    /// The client's host (`SocketAddress.hostKey`), by which its password checks wait their turn.
    let host: [UInt8]
    var parser: RequestParser
    var phase: Phase
    /// What is left to send, in order (a response's head, then its body); `written` bytes of the
    /// first are sent.
    var output: [[UInt8]] = []
    var written = 0
    /// A file sent after `output` (a response's `file`), from `offset` to `end`.
    var fileBody: (file: ResponseFile, offset: Int, end: Int)?
    /// A body written as it is sent, after `output` (a response's `stream`), in chunks.
    var streamBody: ResponseStream?
    /// Monotonic milliseconds after which the current phase has taken too long.
    var deadline: Int64
    /// When the connection last became idle: accepted, or done with a response.
    var idleSince: Int64
    private(set) var isClosed = false

    init(
        fd: Int32, tls: TLSStream? = nil, host: [UInt8] = [], maxHeadBytes: Int, postPaths: Set<String> = [], deadline: Int64, now: Int64
    ) {
        self.fd = fd
        self.tls = tls
        self.host = host
        phase = tls == nil ? .reading : .handshaking
        self.parser = RequestParser(maxHeadBytes: maxHeadBytes, postPaths: postPaths)
        self.deadline = deadline
        idleSince = now
    }

    /// Sent nothing since it was accepted or answered (or is only lingering, or still shaking
    /// hands): evicting it loses no request.
    var isIdle: Bool {
        !isClosed && ((phase == .reading && parser.buffer.isEmpty) || phase == .lingering || phase == .handshaking)
    }

    /// The `poll` events this phase waits for (none while at a worker: `poll` still reports an
    /// error or a hang-up), or what its TLS waits for.
    var pollEvents: Int16 {
        switch phase {
        case .rendering, .verifying: 0
        case .handshaking, .reading, .lingering: tls?.waitingFor ?? Int16(POLLIN)
        case .writing: tls?.waitingFor ?? Int16(POLLOUT)
        }
    }

    /// Reads what the socket (or TLS) has, into `buffer`.
    func receive(into buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        tls?.read(into: buffer) ?? Syscall.receive(fd, into: buffer)
    }

    /// Whether TLS holds bytes read from the socket and not yet taken: `poll` will not report them.
    var hasBufferedInput: Bool { tls?.hasBufferedInput ?? false }

    /// Writes what the socket (or TLS: a record at most) takes of `bytes`.
    func send(_ bytes: UnsafeRawBufferPointer) -> IOResult {
        tls?.write(bytes) ?? Syscall.send(fd, bytes)
    }

    /// After the last response: TLS's close_notify, then our FIN.
    func shutdownWrite() {
        tls?.shutdown()
        Syscall.shutdownWrite(fd)
    }

    /// Writes as much of `output`, then of `fileBody` or `streamBody`, as the socket takes, `slice` bytes at most.
    /// Returns true once all of it is sent; closes the connection if the peer is gone (or the
    /// file ended before the length its response announced).
    func flush(slice: Int) -> Bool {
        var allowed = slice
        while true {
            while let part = output.first {
                while written < part.count {
                    guard allowed > 0 else { return false }
                    // TLS takes a record at a time, and its retry must be as long as the write it retries.
                    let end = tls == nil ? min(part.count, written + allowed) : part.count
                    let result = part.withUnsafeBytes { send(UnsafeRawBufferPointer(rebasing: $0[written..<end])) }
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
            if let stream = streamBody {
                guard allowed > 0 else { return false }
                // The next part only once the last is sent: one part held per connection.
                if let part = stream.nextPart() {
                    output = stream.chunked ? [chunkHead(part.count), part, chunkTail] : [part]
                } else {
                    output = stream.chunked ? [chunkedEnd] : []
                    streamBody = nil  // done: what its parts were written from goes
                }
                continue
            }
            guard let body = fileBody else { return true }
            guard body.offset < body.end else {
                fileBody = nil  // sent: its descriptor closes
                return true
            }
            guard allowed > 0 else { return false }
            guard tls == nil else {
                // Under TLS a file goes a record at a time through `output`: 16 KiB held per connection.
                guard takeFileChunk() else { return false }
                continue
            }
            var offset = body.offset
            let result = Syscall.sendFile(fd, from: body.file.descriptor, offset: &offset, count: min(allowed, body.end - offset))
            fileBody?.offset = offset
            switch result {
            case .bytes(let n): allowed -= n
            case .wouldBlock: return false
            case .endOfStream, .failed:
                close()  // the file shrank below the length announced, or the peer is gone
                return false
            }
        }
    }

    /// The file's next TLS record's worth, read into `output`; false (the connection closed) when
    /// the file cannot be read or ended early.
    private func takeFileChunk() -> Bool {
        guard let body = fileBody else { return true }
        var chunk = [UInt8](repeating: 0, count: min(Self.fileChunkBytes, body.end - body.offset))
        let count = chunk.withUnsafeMutableBytes { buffer in (try? System.pread(body.file.descriptor, into: buffer, at: body.offset)) ?? 0 }
        guard count > 0 else {
            close()
            return false
        }
        chunk.removeLast(chunk.count - count)
        fileBody?.offset += count
        output.append(chunk)
        return true
    }

    /// A file's bytes read at a time under TLS: one record's.
    static let fileChunkBytes = 16 * 1024

    /// Goes on in plain text after a failed handshake (a client that spoke plain HTTP), to say why.
    func abandonTLS() { tls = nil }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        tls = nil  // frees OpenSSL's state now, not when the loop lets go of the connection
        fileBody = nil  // and the file's descriptor
        streamBody = nil
        output = []
        System.close(fd)
    }
}
