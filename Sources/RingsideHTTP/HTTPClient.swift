#if canImport(Glibc)
import Glibc
#endif
import RingsideSystem

/// A small HTTP/1.1 client for one request at a time: it connects (to each address the host
/// resolves to, in turn), writes the request, reads the response (its body by `Content-Length`,
/// chunked, or to the end of the connection) and closes. `Connection: close` on every request:
/// the exporter it serves sends one request every few seconds, and a fresh connection each time
/// never meets a peer that closed an idle one. Plain `http://` only: TLS is left to a proxy or a
/// local OpenTelemetry Collector.
///
/// Every step is bounded by one deadline (`timeoutNanos` from the start), except the name's
/// resolution (`getaddrinfo`, which has no timeout of its own): give an address, or a name the
/// hosts file or a local resolver answers.
///
/// Safe to call from any thread; each call has its own socket.
public enum HTTPClient {
    /// Headers the client writes itself: a caller's would contradict how the message is framed.
    public static let reservedHeaders: Set<String> = ["host", "content-length", "transfer-encoding", "connection"]

    /// The most of a response's body kept: the rest is not read (the connection is closed).
    public static let maxBodyBytes = 64 << 10

    /// Sends `request` and returns the response, whatever its status.
    /// - Parameter timeoutNanos: how long connecting, writing and reading may take in all.
    /// - Throws: `HTTPClientError`: the host did not resolve, no address took the connection, the
    ///   deadline passed, the connection failed or closed early, or the response is not HTTP/1.x.
    public static func send(_ request: HTTPClientRequest, timeoutNanos: UInt64) throws(HTTPClientError) -> HTTPClientResponse {
        let deadline = Syscall.monotonicMillis() + Int64(clamping: timeoutNanos / 1_000_000)
        let fd = try connect(to: request.url, deadline: deadline)
        defer { System.close(fd) }
        let bytes = request.head() + request.body
        try write(bytes, to: fd, deadline: deadline, url: request.url)
        return try read(from: fd, deadline: deadline, url: request.url)
    }

    /// A connected socket to `url`'s host: the first of its addresses that takes the connection.
    private static func connect(to url: HTTPURL, deadline: Int64) throws(HTTPClientError) -> Int32 {
        let addresses: [SocketAddress]
        switch Syscall.resolve(host: url.host, port: url.port, passive: false) {
        case .success(let found): addresses = found
        case .failure(let failure): throw .cannotResolve(host: url.host, reason: failure.message)
        }
        var lastError = HTTPClientError.cannotResolve(host: url.host, reason: "no address")
        for address in addresses {
            let fd: Int32
            do { fd = try Syscall.tcpSocket(family: address.family) } catch {
                throw .systemCall(error.call, errno: error.errno.rawValue)
            }
            do {
                try connect(fd, to: address, deadline: deadline)
                Syscall.setNoDelay(fd)
                return fd
            } catch {
                System.close(fd)
                if case .timedOut = error { throw error }  // the deadline is the whole exchange's
                lastError = error
            }
        }
        throw lastError
    }

    /// Connects `fd` to `address` by `deadline`.
    private static func connect(_ fd: Int32, to address: SocketAddress, deadline: Int64) throws(HTTPClientError) {
        let connected: Bool
        do { connected = try Syscall.connect(fd, to: address) } catch {
            throw .cannotConnect(address: address.description, errno: error.errno.rawValue)
        }
        guard !connected else { return }
        try wait(for: POLLOUT, on: fd, deadline: deadline) { .timedOut("connecting to \(address.description)") }
        if let error = Syscall.connectionError(fd) { throw .cannotConnect(address: address.description, errno: error.rawValue) }
    }

    private static func write(_ bytes: [UInt8], to fd: Int32, deadline: Int64, url: HTTPURL) throws(HTTPClientError) {
        var offset = 0
        while offset < bytes.count {
            let result = bytes.withUnsafeBytes { Syscall.send(fd, UnsafeRawBufferPointer(rebasing: $0[offset...])) }
            switch result {
            case .bytes(let count): offset += count
            case .wouldBlock: try wait(for: POLLOUT, on: fd, deadline: deadline) { .timedOut("sending the request to \(url.authority)") }
            case .endOfStream: throw .closedEarly("while the request was sent")
            case .failed(let error): throw .connectionFailed("send", errno: error.rawValue)
            }
        }
    }

    private static func read(from fd: Int32, deadline: Int64, url: HTTPURL) throws(HTTPClientError) -> HTTPClientResponse {
        var parser = HTTPResponseParser(maxBodyBytes: maxBodyBytes)
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let result = buffer.withUnsafeMutableBytes { Syscall.receive(fd, into: $0) }
            switch result {
            case .bytes(let count):
                if let response = try parser.take(buffer[..<count]) { return response }
            case .wouldBlock:
                try wait(for: POLLIN, on: fd, deadline: deadline) { .timedOut("waiting for the response from \(url.authority)") }
            case .endOfStream:
                return try parser.finish()
            case .failed(let error):
                throw .connectionFailed("recv", errno: error.rawValue)
            }
        }
    }

    /// Waits until `fd` is ready for `events`, or throws `timedOut()` once `deadline` passes.
    private static func wait(for events: Int32, on fd: Int32, deadline: Int64, timedOut: () -> HTTPClientError) throws(HTTPClientError) {
        while true {
            let left = deadline - Syscall.monotonicMillis()
            guard left > 0 else { throw timedOut() }
            var entry = [pollfd(fd: fd, events: Int16(events), revents: 0)]
            do {
                // Readiness, or an error or hang-up the next call will report.
                if try System.poll(&entry, timeoutMillis: Int32(clamping: left)) > 0 { return }
            } catch {
                guard error == .interrupted else { throw .connectionFailed("poll", errno: error.rawValue) }
            }
        }
    }
}

/// A request for `HTTPClient`: its method, URL, headers of the caller's, and body.
public struct HTTPClientRequest: Sendable {
    public var method: String
    public var url: HTTPURL
    /// Written after `Host`, in order; none may be one of `HTTPClient.reservedHeaders` (see
    /// `HTTPClientRequest.validate(header:value:)`).
    public var headers: [HTTPHeader]
    public var body: [UInt8]

    public init(method: String, url: HTTPURL, headers: [HTTPHeader], body: [UInt8]) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// The request line and headers, with `Host`, `Content-Length` and `Connection: close`.
    func head() -> [UInt8] {
        var text = "\(method) \(url.path.isEmpty ? "/" : url.path) HTTP/1.1\r\nHost: \(url.authority)\r\n"
        for header in headers { text += "\(header.name): \(header.value)\r\n" }
        text += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(text.utf8)
    }

    /// Why `name: value` cannot be sent as a header, or nil when it can: a name must be a token
    /// (RFC 9110 §5.1) and not one the client writes itself; a value, visible ASCII, spaces and
    /// tabs, and other bytes of UTF-8 (no line breaks or other control characters).
    public static func validate(header name: String, value: String) -> String? {
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
public struct HTTPClientResponse: Sendable, Equatable {
    public var status: Int
    public var reason: String
    public var headers: [HTTPHeader]
    public var body: [UInt8]

    public init(status: Int, reason: String, headers: [HTTPHeader], body: [UInt8]) {
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
    }

    /// The first header named `name` (any case).
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name.lowercased() == lowered }?.value
    }

    /// The body's first line (at most 200 bytes of it), for a log line.
    public var firstLineOfBody: String {
        let line = body.prefix { $0 != 0x0A && $0 != 0x0D }.prefix(200)
        return String(decoding: line, as: UTF8.self)
    }
}

/// Why `HTTPClient` got no response; each description says where it failed.
public enum HTTPClientError: Error, Equatable, Sendable, CustomStringConvertible {
    case cannotResolve(host: String, reason: String)
    /// The address refused the connection, or could not be reached.
    case cannotConnect(address: String, errno: Int32)
    /// The deadline passed; the text says during what.
    case timedOut(String)
    /// `send` or `recv` failed (a reset, for one).
    case connectionFailed(String, errno: Int32)
    /// The peer closed the connection before the response was complete.
    case closedEarly(String)
    /// What came back is not an HTTP/1.x response; the text says where.
    case malformedResponse(String)
    /// `socket` failed.
    case systemCall(String, errno: Int32)

    public var description: String {
        switch self {
        case let .cannotResolve(host, reason): "cannot resolve \(host): \(reason)"
        case let .cannotConnect(address, code): "cannot connect to \(address): \(Errno(rawValue: code))"
        case let .timedOut(what): "timed out \(what)"
        case let .connectionFailed(call, code): "the connection failed (\(call)): \(Errno(rawValue: code))"
        case let .closedEarly(when): "the connection was closed \(when)"
        case let .malformedResponse(what): "the response is not HTTP/1.x: \(what)"
        case let .systemCall(call, code): "\(call) failed: \(Errno(rawValue: code))"
        }
    }
}
