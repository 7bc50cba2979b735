#if canImport(Glibc)
import Glibc
#endif
import RingsideSystem
import Synchronization

/// A small HTTP/1.1 client for one request at a time: it connects (to each address the host
/// resolves to, in turn), writes the request, reads the response (its body by `Content-Length`,
/// chunked, or to the end of the connection) and closes. `Connection: close` on every request:
/// the exporter it serves sends one request every few seconds, and a fresh connection each time
/// never meets a peer that closed an idle one. `https://` with the caller's `HTTPClientTLS` (this
/// module links no TLS library): the handshake within the same deadline, the server's certificate
/// checked by it.
///
/// Every step is bounded by one deadline (`timeoutNanos` from the start), checked before each
/// read and write, not only when one would block: a peer that sends without end (interim
/// responses, trailers, a byte at a time) meets it as one that sends nothing does. The response's
/// size is bounded too (`HTTPResponseParser`). The name's resolution is the exception
/// (`getaddrinfo`, which has no timeout of its own): give an address, or a name the hosts file or
/// a local resolver answers.
///
/// Safe to call from any thread; each call has its own socket. Another thread ends calls at once
/// through their `HTTPClientCancellation`.
package enum HTTPClient {
    /// Headers the client writes itself: a caller's would contradict how the message is framed.
    package static let reservedHeaders: Set<String> = ["host", "content-length", "transfer-encoding", "connection"]

    /// The most of a response's body kept: the rest is not read (the connection is closed).
    package static let maxBodyBytes = 64 << 10

    /// Sends `request` and returns the response, whatever its status.
    /// - Parameters:
    ///   - timeoutNanos: how long connecting, writing and reading may take in all.
    ///   - cancellation: lets another thread end the call at once (`HTTPClientError.cancelled`).
    ///   - tls: what speaks TLS to an `https://` URL.
    /// - Throws: `HTTPClientError`: the host did not resolve, no address took the connection, the
    ///   deadline passed, the call was cancelled, TLS failed (or is not given for `https://`), the
    ///   connection failed or closed early, or the response is not HTTP/1.x or is past the
    ///   parser's bounds.
    package static func send(
        _ request: HTTPClientRequest, timeoutNanos: UInt64, cancellation: HTTPClientCancellation? = nil, tls: (any HTTPClientTLS)? = nil
    ) throws(HTTPClientError) -> HTTPClientResponse {
        let exchange = Exchange(
            deadline: Syscall.monotonicMillis() + Int64(clamping: timeoutNanos / 1_000_000), cancellation: cancellation,
            url: request.url)
        let fd = try connect(exchange)
        defer { exchange.close(fd) }
        let session = try secure(fd, tls, exchange)
        let bytes = request.head() + request.body
        try write(bytes, to: fd, session, exchange)
        return try read(from: fd, session, exchange)
    }

    /// For an `https://` URL, the TLS session over `fd`, its handshake done; nil for `http://`.
    private static func secure(
        _ fd: Int32, _ tls: (any HTTPClientTLS)?, _ exchange: Exchange
    ) throws(HTTPClientError) -> (any HTTPClientTLSSession)? {
        guard exchange.url.secure else { return nil }
        guard let tls else { throw .tls("https:// needs TLS, which this program does not speak") }
        let session = try tls.session(fd: fd, host: exchange.url.host)
        while try !session.handshake() {
            try wait(
                for: Int32(session.waitingFor ?? Int16(POLLIN)), on: fd, exchange,
                during: "in the TLS handshake with \(exchange.url.authority)")
        }
        return session
    }

    /// One call's deadline (CLOCK_MONOTONIC, ms), cancellation and URL.
    private struct Exchange {
        let deadline: Int64
        let cancellation: HTTPClientCancellation?
        let url: HTTPURL

        /// Throws once the call is cancelled or its deadline passed: before every step, so that a
        /// peer that never makes the client wait cannot hold it past either.
        func check(_ during: @autoclosure () -> String) throws(HTTPClientError) {
            if cancellation?.isCancelled == true { throw .cancelled }
            guard Syscall.monotonicMillis() < deadline else { throw .timedOut(during()) }
        }

        /// A socket for `family`, known to the cancellation from here on.
        func socket(family: Int32) throws(HTTPClientError) -> Int32 {
            let fd: Int32
            do { fd = try Syscall.tcpSocket(family: family) } catch { throw .systemCall(error.call, errno: error.errno.rawValue) }
            do { try cancellation?.register(fd) } catch {
                System.close(fd)
                throw error
            }
            return fd
        }

        /// Closes `fd`, once the cancellation no longer holds it (so it never shuts down a reused number).
        func close(_ fd: Int32) {
            cancellation?.unregister(fd)
            System.close(fd)
        }
    }

    /// A connected socket to the URL's host: the first of its addresses that takes the connection.
    private static func connect(_ exchange: Exchange) throws(HTTPClientError) -> Int32 {
        let url = exchange.url
        let addresses: [SocketAddress]
        switch Syscall.resolve(host: url.host, port: url.port, passive: false) {
        case .success(let found): addresses = found
        case .failure(let failure): throw .cannotResolve(host: url.host, reason: failure.message)
        }
        var lastError = HTTPClientError.cannotResolve(host: url.host, reason: "no address")
        for address in addresses {
            try exchange.check("connecting to \(address.description)")
            let fd = try exchange.socket(family: address.family)
            do {
                try connect(fd, to: address, exchange)
                Syscall.setNoDelay(fd)
                return fd
            } catch {
                exchange.close(fd)
                switch error {
                case .timedOut, .cancelled: throw error  // the deadline is the whole exchange's
                default: lastError = error
                }
            }
        }
        throw lastError
    }

    /// Connects `fd` to `address` within the exchange's deadline.
    private static func connect(_ fd: Int32, to address: SocketAddress, _ exchange: Exchange) throws(HTTPClientError) {
        let connected: Bool
        do { connected = try Syscall.connect(fd, to: address) } catch {
            throw .cannotConnect(address: address.description, errno: error.errno.rawValue)
        }
        guard !connected else { return }
        try wait(for: POLLOUT, on: fd, exchange, during: "connecting to \(address.description)")
        if let error = Syscall.connectionError(fd) { throw .cannotConnect(address: address.description, errno: error.rawValue) }
    }

    private static func write(
        _ bytes: [UInt8], to fd: Int32, _ session: (any HTTPClientTLSSession)?, _ exchange: Exchange
    ) throws(HTTPClientError) {
        var offset = 0
        while offset < bytes.count {
            try exchange.check("sending the request to \(exchange.url.authority)")
            let result = bytes.withUnsafeBytes { all in
                let rest = UnsafeRawBufferPointer(rebasing: all[offset...])
                return session?.write(rest) ?? Syscall.send(fd, rest)
            }
            switch result {
            case .bytes(let count): offset += count
            case .wouldBlock:
                let events = session?.waitingFor.map(Int32.init) ?? Int32(POLLOUT)
                try wait(for: events, on: fd, exchange, during: "sending the request to \(exchange.url.authority)")
            case .endOfStream: throw session?.failure.map(HTTPClientError.tls) ?? .closedEarly("while the request was sent")
            case .failed(let error): throw session?.failure.map(HTTPClientError.tls) ?? .connectionFailed("send", errno: error.rawValue)
            }
        }
    }

    private static func read(
        from fd: Int32, _ session: (any HTTPClientTLSSession)?, _ exchange: Exchange
    ) throws(HTTPClientError) -> HTTPClientResponse {
        var parser = HTTPResponseParser(maxBodyBytes: maxBodyBytes)
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            try exchange.check("waiting for the response from \(exchange.url.authority)")
            let result = buffer.withUnsafeMutableBytes { session?.read(into: $0) ?? Syscall.receive(fd, into: $0) }
            switch result {
            case .bytes(let count):
                if let response = try parser.take(buffer[..<count]) { return response }
            case .wouldBlock:
                let events = session?.waitingFor.map(Int32.init) ?? Int32(POLLIN)
                try wait(for: events, on: fd, exchange, during: "waiting for the response from \(exchange.url.authority)")
            case .endOfStream:
                if exchange.cancellation?.isCancelled == true { throw .cancelled }  // our own shutdown
                do { return try parser.finish() } catch { throw session?.failure.map(HTTPClientError.tls) ?? error }
            case .failed(let error):
                if exchange.cancellation?.isCancelled == true { throw .cancelled }
                throw session?.failure.map(HTTPClientError.tls) ?? .connectionFailed("recv", errno: error.rawValue)
            }
        }
    }

    /// Waits until `fd` is ready for `events`, the deadline passes or the call is cancelled (which
    /// shuts the socket down, so `poll` returns at once).
    private static func wait(
        for events: Int32, on fd: Int32, _ exchange: Exchange, during: @autoclosure () -> String
    ) throws(HTTPClientError) {
        while true {
            try exchange.check(during())
            let left = exchange.deadline - Syscall.monotonicMillis()
            var entry = [pollfd(fd: fd, events: Int16(events), revents: 0)]
            do {
                // Readiness, or an error or hang-up the next call will report.
                if try System.poll(&entry, timeoutMillis: Int32(clamping: max(left, 1))) > 0 { return }
            } catch {
                guard error == .interrupted else { throw .connectionFailed("poll", errno: error.rawValue) }
            }
        }
    }
}

/// Ends `HTTPClient.send` calls from another thread: `cancel()` shuts down the socket of each call
/// under way, so that a call waiting in `poll` wakes at once, and every call made with it from then
/// on fails at once. Once cancelled, it stays so.
///
/// Safe to use from any thread: a socket is shut down only while its call holds it (the call
/// lets go of it before closing it), never a descriptor number used again for something else.
package final class HTTPClientCancellation: Sendable {
    private let state = Locked((cancelled: false, sockets: Set<Int32>()))

    package init() {}

    package var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Cancels every call under way and every later one.
    package func cancel() {
        state.withLock { state in
            state.cancelled = true
            for fd in state.sockets { try? System.shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    func register(_ fd: Int32) throws(HTTPClientError) {
        let cancelled = state.withLock { state in
            if !state.cancelled { state.sockets.insert(fd) }
            return state.cancelled
        }
        if cancelled { throw .cancelled }
    }

    func unregister(_ fd: Int32) {
        _ = state.withLock { $0.sockets.remove(fd) }
    }
}

/// A request for `HTTPClient`: its method, URL, headers of the caller's, and body.
package struct HTTPClientRequest: Sendable {
    package var method: String
    package var url: HTTPURL
    /// Written after `Host`, in order; none may be one of `HTTPClient.reservedHeaders` (see
    /// `HTTPClientRequest.validate(header:value:)`).
    package var headers: [HTTPHeader]
    package var body: [UInt8]

    package init(method: String, url: HTTPURL, headers: [HTTPHeader], body: [UInt8]) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// The request line and headers, with `Host`, `Content-Length` and `Connection: close`.
    package func head() -> [UInt8] {
        var text = "\(method) \(url.path.isEmpty ? "/" : url.path) HTTP/1.1\r\nHost: \(url.authority)\r\n"
        for header in headers { text += "\(header.name): \(header.value)\r\n" }
        text += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(text.utf8)
    }

    /// Why `name: value` cannot be sent as a header, or nil when it can: a name must be a token
    /// (RFC 9110 §5.1) and not one the client writes itself; a value, visible ASCII, spaces and
    /// tabs, and other bytes of UTF-8 (no line breaks or other control characters).
    package static func validate(header name: String, value: String) -> String? {
        let tokenPunctuation = Set("!#$%&'*+-.^_`|~".utf8)
        guard !name.isEmpty,
            name.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || tokenPunctuation.contains($0) }
            )
        else { return "the name \"\(name)\" is not a header name (letters, digits and !#$%&'*+-.^_`|~)" }
        guard !HTTPClient.reservedHeaders.contains(name.lowercased()) else {
            return "\(name) is written by the client itself"
        }
        guard value.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }) else {
            return "the value has a control character (a line break?)"
        }
        return nil
    }
}

/// A response `HTTPClient` read: status, headers, and as much of the body as it kept.
package struct HTTPClientResponse: Sendable, Equatable {
    package var status: Int
    package var reason: String
    package var headers: [HTTPHeader]
    package var body: [UInt8]

    /// The first header named `name` (any case).
    package func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name.lowercased() == lowered }?.value
    }

    /// The body's first line (at most 200 bytes of it), for a log line.
    package var firstLineOfBody: String {
        let line = body.prefix { $0 != 0x0A && $0 != 0x0D }.prefix(200)
        return String(decoding: line, as: UTF8.self)
    }
}

/// Why `HTTPClient` got no response; each description says where it failed.
package enum HTTPClientError: Error, Equatable, Sendable, CustomStringConvertible {
    case cannotResolve(host: String, reason: String)
    /// The address refused the connection, or could not be reached.
    case cannotConnect(address: String, errno: Int32)
    /// The deadline passed; the text says during what.
    case timedOut(String)
    /// `send` or `recv` failed (a reset, for one).
    case connectionFailed(String, errno: Int32)
    /// TLS failed: the handshake (the server's certificate refused, the peer does not speak TLS)
    /// or a record; the text says why.
    case tls(String)
    /// The peer closed the connection before the response was complete.
    case closedEarly(String)
    /// What came back is not an HTTP/1.x response; the text says where.
    case malformedResponse(String)
    /// The response is past a bound of the client's (`HTTPResponseParser`); the text says which.
    case limitExceeded(String)
    /// `HTTPClientCancellation.cancel()` ended the call.
    case cancelled
    /// `socket` failed.
    case systemCall(String, errno: Int32)

    package var description: String {
        switch self {
        case let .cannotResolve(host, reason): "cannot resolve \(host): \(reason)"
        case let .cannotConnect(address, code): "cannot connect to \(address): \(Errno(rawValue: code))"
        case let .timedOut(what): "timed out \(what)"
        case let .connectionFailed(call, code): "the connection failed (\(call)): \(Errno(rawValue: code))"
        case let .tls(reason): "TLS failed: \(reason)"
        case let .closedEarly(when): "the connection was closed \(when)"
        case let .malformedResponse(what): "the response is not HTTP/1.x: \(what)"
        case let .limitExceeded(what): "the response is past the client's bounds: \(what)"
        case .cancelled: "the request was cancelled"
        case let .systemCall(call, code): "\(call) failed: \(Errno(rawValue: code))"
        }
    }
}
