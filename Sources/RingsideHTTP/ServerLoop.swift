import Glibc
import RingsideSystem
import RingsideHTTPClient

/// The server thread's event loop: one `poll` over the wake-up pipe, the listening socket and
/// every connection, with a deadline per connection.
///
/// Everything here runs on the server thread and nothing blocks: sockets are non-blocking, and a
/// slow or idle client only occupies a slot in the poll set until its deadline. Each request goes
/// first to `quick`, on this thread; what it declines goes to the render worker, whose answers come
/// back through the wake-up pipe. `poll` rather than `epoll` because at the connection bound
/// (about a thousand) rebuilding and scanning the set costs microseconds, and one call with no
/// registration state is easier to get right.
final class ServerLoop {
    private let listenFD: Int32
    private let wakeup: LoopWakeup
    private let quick: @Sendable (HTTPRequest) -> HTTPResponse?
    private let worker: Worker<HTTPRequest, HTTPResponse>
    /// The password worker and the web configuration, with `--web-config-file`.
    let passwords: Worker<AccessRules.Verification, Bool>?
    let security: WebSecurity?
    let limits: HTTPServerLimits
    let log: HTTPServerLog
    private var connections: [Connection] = []
    /// The connections whose request is at the worker, by the ticket it carries. A connection
    /// closed meanwhile stays here until its answer comes back, and the answer is dropped.
    private var rendering: [UInt64: Connection] = [:]
    /// The connections whose password waits for its check (`desk`), by ticket, as `rendering`.
    var verifying: [UInt64: Connection] = [:]
    /// Which password is checked next: fairly between clients (see `PasswordDesk`).
    let desk = PasswordDesk()
    /// How long a request may wait for its password's check before it is answered `429`.
    let verificationWaitMillis: Int64 = 10_000
    /// Failed handshakes and refused passwords: counted always, logged at most once a minute.
    private var handshakeFailures = OccasionalLog(what: "TLS handshakes failed")
    var authFailures = OccasionalLog(what: "requests refused with 401")
    var throttled = OccasionalLog(what: "requests refused with 429 (too many passwords waiting for their check)")
    var lastTicket: UInt64 = 0
    /// While descriptors are short and no remedy is left, the listening socket stays readable;
    /// skipping it until this time keeps the loop from spinning.
    private var acceptPausedUntil: Int64 = 0
    private var shortage = DescriptorShortage()
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 16)

    /// How long a closing connection may keep sending before we close it regardless.
    private let lingerMillis: Int64 = 1000
    /// Accepts per wake-up, so a connection flood cannot starve the connections already open.
    private let acceptBatch = 64
    /// Bytes sent to one connection per wake-up, so a few large responses cannot make one turn
    /// of the loop long, and a probe waits for at most a short turn. (On loopback a send also
    /// runs the receiver's side of TCP: 32 clients taking cached 3.7 MB history pages made
    /// `/-/ready` wait up to 370 ms whole; in 64 KiB slices, up to 150 ms, the rest being the
    /// clients' own CPU on a 2-core machine.)
    let writeSlice = 64 * 1024
    /// The request budget (`limits.maxRequestsPerSecond`), spent a tenth of a second at a time.
    private var budgetWindowEnd: Int64 = 0
    private var budgetLeft = Int.max
    /// Where the next wake-up starts servicing, so connections take turns when the budget is short.
    private var firstServiced = 0

    init(
        listenFD: Int32, wakeup: LoopWakeup, limits: HTTPServerLimits, log: @escaping HTTPServerLog,
        quick: @escaping @Sendable (HTTPRequest) -> HTTPResponse?, worker: Worker<HTTPRequest, HTTPResponse>,
        passwords: Worker<AccessRules.Verification, Bool>?, security: WebSecurity?
    ) {
        self.listenFD = listenFD
        self.wakeup = wakeup
        self.limits = limits
        self.log = log
        self.quick = quick
        self.worker = worker
        self.passwords = passwords
        self.security = security
    }

    deinit { scratch.deallocate() }

    /// Serves until `stop()` is requested, then closes every connection. The listening socket and
    /// the wake-up pipe belong to `HTTPServer`, which closes them.
    func run() {
        // OpenSSL writes to sockets with `write`, which raises SIGPIPE when the peer hung up:
        // blocked on this thread, the write fails with EPIPE instead.
        System.pthreadSigmask(SIG_BLOCK, [SIGPIPE])
        _ = shortage.holdSpare()
        var fds: [pollfd] = []
        while true {
            var now = Syscall.monotonicMillis()
            if let perSecond = limits.maxRequestsPerSecond {
                if now >= budgetWindowEnd {
                    budgetWindowEnd = now + 100
                    budgetLeft = max(1, perSecond / 10)
                } else if budgetLeft <= 0 {
                    // Spent: wait for the next window, handing back what the worker answers meanwhile.
                    var wake = [pollfd(fd: wakeup.readFD, events: Int16(POLLIN), revents: 0)]
                    _ = try? System.poll(&wake, timeoutMillis: Int32(clamping: budgetWindowEnd - now))
                    if wake[0].revents != 0 {
                        wakeup.drain()
                        if wakeup.isStopRequested { break }
                        deliverAnswers(now: Syscall.monotonicMillis())
                    }
                    now = Syscall.monotonicMillis()
                    continue
                }
            }
            fds.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: wakeup.readFD, events: Int16(POLLIN), revents: 0))
            let accepting = now >= acceptPausedUntil
            // poll ignores negative descriptors: the slot stays so indices line up.
            fds.append(pollfd(fd: accepting ? listenFD : -1, events: Int16(POLLIN), revents: 0))
            var nextDeadline = accepting ? Int64.max : acceptPausedUntil
            for connection in connections {
                fds.append(pollfd(fd: connection.fd, events: connection.pollEvents, revents: 0))
                nextDeadline = min(nextDeadline, connection.deadline)
            }
            let timeout = nextDeadline == .max ? -1 : Int32(clamping: max(0, nextDeadline - now))

            do { _ = try System.poll(&fds, timeoutMillis: timeout) } catch {
                // EINTR is routine; ENOMEM is transient. Either way, try again shortly.
                if error != .interrupted { System.nanosleep(10_000_000) }
                continue
            }
            let after = Syscall.monotonicMillis()
            if fds[0].revents != 0 {
                wakeup.drain()
                if wakeup.isStopRequested { break }
                deliverAnswers(now: after)
            }

            // In turn from where the last wake-up stopped, while the request budget lasts.
            let count = connections.count
            let start = count == 0 ? 0 : firstServiced % count
            for step in 0..<count where budgetLeft > 0 {
                let index = (start + step) % count
                if fds[index + 2].revents != 0 { service(connections[index], now: after) }
                firstServiced = index + 1
            }
            if fds[1].revents != 0 { acceptConnections(now: after) }
            for connection in connections where !connection.isClosed && connection.deadline <= after {
                expire(connection, now: after)
            }
            connections.removeAll { $0.isClosed }
        }
        for connection in connections { connection.close() }
        connections.removeAll()
        rendering.removeAll()
        verifying.removeAll()
        shortage.releaseSpare()
    }

    // MARK: - Accepting

    private func acceptConnections(now: Int64) {
        var evicted = 0  // closed in this call, still in `connections` until the loop prunes them
        defer { connections.removeAll { $0.isClosed } }
        let accepted = connections.count  // those before this turn's newcomers, which are appended
        var remedied = false  // the last accept was helped by freeing a descriptor
        // A newcomer gets the web configuration of now: a rotated certificate is served at once.
        security?.refresh(now: now, log: log)
        let tlsContext = security?.tlsContext
        for _ in 0..<acceptBatch {
            switch Syscall.accept(listenFD) {
            case .accepted(let fd):
                if !remedied { shortage.acceptedFreely(now: now, log: log) }
                remedied = false
                if connections.count - evicted >= limits.maxConnections {
                    guard let idlest = idlestConnection(of: accepted) else {
                        refuse(fd, plain: tlsContext == nil)  // every connection is mid-request
                        continue
                    }
                    idlest.close()  // removed from the list at the end of this turn
                    evicted += 1
                }
                Syscall.setNoDelay(fd)
                var tls: TLSStream?
                if let tlsContext {
                    guard let stream = tlsContext.stream(fd: fd) else {
                        System.close(fd)  // OpenSSL had no memory for it
                        continue
                    }
                    tls = stream
                }
                // The head timeout bounds the TLS handshake too: a silent client holds its slot no longer.
                connections.append(
                    Connection(
                        fd: fd, tls: tls, host: Syscall.peerAddress(fd)?.hostKey ?? [], maxHeadBytes: limits.maxHeadBytes,
                        postPaths: limits.postPaths, deadline: now + limits.headTimeout.wholeMilliseconds, now: now))
            case .retry:
                continue
            case .empty:
                return
            case .exhausted(let code) where code == .tooManyOpenFiles || code == .tooManyOpenFilesInSystem:
                // Linux says EMFILE before it looks at the queue: free nothing for no one.
                guard Syscall.hasPendingConnection(listenFD) else { return }
                // Out of descriptors: free one for the newcomer rather than leave it (and maybe a
                // scraper behind it) in the kernel's queue until some connection times out.
                if let idlest = idlestConnection(of: accepted) {
                    idlest.close()
                    evicted += 1
                    remedied = true
                    shortage.needed(.evictedIdle, code: code, now: now, log: log)
                    continue
                }
                switch refuseOnSpare(plain: tlsContext == nil) {
                case .accepted:
                    shortage.needed(.refused, code: code, now: now, log: log)
                    continue
                case .retry:
                    continue
                case .empty:
                    return
                case .exhausted:
                    shortage.needed(.paused, code: code, now: now, log: log)
                    acceptPausedUntil = now + 100
                    return
                }
            case .exhausted:
                // Out of memory (ENOBUFS, ENOMEM): nothing of ours to free; try again shortly.
                acceptPausedUntil = now + 100
                return
            }
        }
    }

    /// The connection idle longest (one that has sent nothing since it was accepted or answered,
    /// or is lingering) of the first `candidates`: closing it loses no request. The caller leaves
    /// out those it accepted in this turn: they have had no chance to send, and newcomers evicting
    /// each other would serve none of them.
    private func idlestConnection(of candidates: Int) -> Connection? {
        connections.prefix(candidates).lazy.filter(\.isIdle).min { $0.idleSince < $1.idleSince }
    }

    /// With every descriptor taken and nothing idle: frees the spare, accepts the newcomer on its
    /// number, refuses it, and takes the spare again. `.exhausted` when there was no spare to free
    /// or the newcomer still found no descriptor (another thread took it first).
    private func refuseOnSpare(plain: Bool) -> AcceptResult {
        guard shortage.holdSpare() else { return .exhausted(.tooManyOpenFiles) }
        shortage.releaseSpare()
        let result = Syscall.accept(listenFD)
        if case .accepted(let fd) = result { refuse(fd, plain: plain) }
        _ = shortage.holdSpare()
        return result
    }

    /// No room for the newcomer: one best-effort 503 so the client knows to retry, then close at
    /// once. On a TLS port, just the close: plain text would read as a broken handshake.
    private func refuse(_ fd: Int32, plain: Bool) {
        guard plain else {
            System.close(fd)
            return
        }
        var response = refusalResponse(status: 503, message: "too many connections; retry shortly")
        response.headers.append(HTTPHeader("Retry-After", "1"))
        let bytes = encodedBytes(response)
        _ = bytes.withUnsafeBytes { Syscall.send(fd, $0) }
        System.close(fd)
    }

    // MARK: - Serving

    private func service(_ connection: Connection, now: Int64) {
        switch connection.phase {
        case .handshaking:
            handshake(connection, now: now)
        case .reading:
            read(connection, now: now)
        case .writing:
            if connection.flush(slice: writeSlice) {
                finishResponse(connection, now: now)
                process(connection, now: now)
            }
        case .lingering:
            switch connection.receive(into: scratch) {
            case .bytes, .wouldBlock: break
            case .endOfStream, .failed: connection.close()
            }
        case .rendering:
            // Polled for no events, so this is an error or a hang-up: no one is left to answer.
            connection.close()
        case .verifying:
            withdrawCheck(of: connection)
            connection.close()
        }
    }

    /// Reads what the connection has (with TLS, every byte OpenSSL took from the socket, which
    /// `poll` would not report again), then answers the requests it completes.
    private func read(_ connection: Connection, now: Int64) {
        var received = false
        reading: repeat {
            switch connection.receive(into: scratch) {
            case .bytes(let n):
                connection.parser.append(UnsafeRawBufferPointer(rebasing: scratch[..<n]))
                received = true
            case .wouldBlock:
                break reading
            case .endOfStream, .failed:
                connection.close()
                return
            }
        } while connection.hasBufferedInput
        if received { process(connection, now: now) }
    }

    /// Takes the TLS handshake as far as the socket allows; once done, the connection reads its
    /// first request, with the head timeout started afresh.
    private func handshake(_ connection: Connection, now: Int64) {
        guard let tls = connection.tls else { return connection.close() }
        switch tls.handshake() {
        case .inProgress:
            break
        case .done:
            connection.phase = .reading
            connection.deadline = now + limits.headTimeout.wholeMilliseconds
            connection.idleSince = now
            read(connection, now: now)
        case let .failed(reason, plainHTTP):
            security?.countHandshakeFailure()
            handshakeFailures.note(reason, now: now, log: log)
            guard plainHTTP else { return connection.close() }
            // A browser or curl sent http:// to the TLS port: tell it so, in its own protocol.
            connection.abandonTLS()
            let response = refusalResponse(status: 400, message: "this port speaks TLS (--web-config-file): use https://")
            startResponse(connection, response, headOnly: false, disposition: .close, now: now)
            if connection.flush(slice: writeSlice) { finishResponse(connection, now: now) }
        }
    }

    /// Answers every complete request in the buffer, one at a time, until the head is
    /// incomplete, a request goes to the worker, a response is left waiting for the socket, or
    /// the connection is closing.
    func process(_ connection: Connection, now: Int64) {
        while connection.phase == .reading && !connection.isClosed {
            switch connection.parser.next() {
            case .needMore:
                return
            case let .request(request, keepAlive):
                budgetLeft -= 1
                let headOnly = request.method == "HEAD"
                let disposition: ConnectionDisposition =
                    !keepAlive ? .close : request.minorVersion == 0 ? .keepAliveAnnounced : .keepAlive
                guard answer(connection, request, headOnly: headOnly, disposition: disposition, now: now) else { return }
            case let .refuse(status, message):
                let response = refusalResponse(status: status, message: message)
                startResponse(connection, response, headOnly: false, disposition: .close, now: now)
            }
            guard connection.flush(slice: writeSlice) else { return }
            finishResponse(connection, now: now)
        }
    }

    /// Starts the response to a request that may be answered: `quick`'s, else the render
    /// worker's (false: the connection waits for it), else 503 when its queue is full.
    func dispatch(
        _ connection: Connection, _ request: HTTPRequest, headOnly: Bool, disposition: ConnectionDisposition, now: Int64
    ) -> Bool {
        if let response = quick(request) {
            startResponse(connection, response, headOnly: headOnly, disposition: disposition, now: now)
            return true
        }
        guard rendering.count < limits.maxQueuedRequests else {
            startResponse(connection, Self.busy, headOnly: headOnly, disposition: disposition, now: now)
            return true
        }
        lastTicket += 1
        rendering[lastTicket] = connection
        connection.phase = .rendering(headOnly: headOnly, disposition: disposition)
        connection.deadline = .max
        worker.submit(.init(ticket: lastTicket, input: request))
        return false
    }

    /// The worker's queue is full: come back in a second.
    private static let busy = HTTPResponse(
        status: 503, text: "503 Service Unavailable: busy rendering other pages; retry shortly\n",
        headers: [HTTPHeader("Retry-After", "1")])

    /// No credentials, or wrong ones: the same answer, so it tells nothing about the users.
    static let unauthorized = HTTPResponse(
        status: 401, text: "401 Unauthorized: a user and password are needed (basic auth, --web-config-file)\n",
        headers: [HTTPHeader("WWW-Authenticate", "Basic")])

    /// Hands each answer the workers finished to its connection: a page to send, or a password
    /// checked (then the request is answered, or refused with 401); sends what the socket takes,
    /// and goes on with the connection's next request.
    private func deliverAnswers(now: Int64) {
        for answer in worker.takeAnswers() {
            guard let connection = rendering.removeValue(forKey: answer.ticket), !connection.isClosed,
                case let .rendering(headOnly, disposition) = connection.phase
            else { continue }
            startResponse(connection, answer.output, headOnly: headOnly, disposition: disposition, now: now)
            if connection.flush(slice: writeSlice) {
                finishResponse(connection, now: now)
                process(connection, now: now)
            }
        }
        deliverPasswordChecks(now: now)
    }

    /// Puts `response` in the connection's output; the write timeout starts.
    func startResponse(
        _ connection: Connection, _ response: HTTPResponse, headOnly: Bool,
        disposition: ConnectionDisposition, now: Int64
    ) {
        var response = response
        if let security { response.headers += security.rules.headers }  // http_server_config.headers
        // A body that is not chunked and of no announced length ends with the connection.
        let disposition = response.stream?.chunked == false && !headOnly ? .close : disposition
        let (head, body) = encodeResponse(response, headOnly: headOnly, disposition: disposition)
        connection.output = [head] + body
        connection.fileBody = headOnly ? nil : response.file.map { ($0, 0, $0.length) }
        connection.streamBody = headOnly ? nil : response.stream
        connection.phase = .writing(closeAfter: disposition == .close)
        connection.deadline = now + limits.writeTimeout.wholeMilliseconds
    }

    /// After a response is fully sent: wait for the next request, or send FIN and linger.
    func finishResponse(_ connection: Connection, now: Int64) {
        if connection.phase == .writing(closeAfter: true) {
            connection.shutdownWrite()
            connection.phase = .lingering
            connection.deadline = now + lingerMillis
        } else {
            connection.phase = .reading
            connection.deadline = now + limits.headTimeout.wholeMilliseconds
        }
        connection.idleSince = now
    }

    /// A deadline passed. A client that sent part of a head gets a best-effort 408 so a person
    /// typing into `nc` sees why; an idle keep-alive connection is just closed (RFC 9112 §9.8).
    private func expire(_ connection: Connection, now: Int64) {
        if case .verifying = connection.phase {
            giveUpCheck(connection, now: now)
        } else if connection.phase == .handshaking {
            security?.countHandshakeFailure()
            handshakeFailures.note("no handshake within the head timeout (\(limits.headTimeout))", now: now, log: log)
        } else if connection.phase == .reading && !connection.parser.buffer.isEmpty {
            let response = refusalResponse(status: 408, message: "request head not received within the timeout")
            let bytes = encodedBytes(response)
            _ = bytes.withUnsafeBytes { connection.send($0) }
        }
        connection.close()
    }
}
