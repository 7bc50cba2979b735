import Glibc

/// A blocking TCP client that sends exact bytes, so tests can send what no HTTP library would.
///
/// Every read and write has a socket timeout, so a server bug fails the test instead of hanging
/// the suite.
package final class RawClient {
    package struct Response {
        package var status: Int
        package var headers: [(name: String, value: String)]
        package var body: [UInt8]

        package var text: String { String(decoding: body, as: UTF8.self) }

        package func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

    package let fd: Int32
    private var pending: [UInt8] = []

    /// Connects to 127.0.0.1:`port`; throws with errno if the connection is refused.
    ///
    /// `receiveBuffer` shrinks SO_RCVBUF, so a test can make the server's writes block; `source`
    /// (e.g. `"127.0.0.2"`) is the loopback address the connection comes from, so the server
    /// sees another client host.
    package init(port: Int, timeoutSeconds: Int = 3, receiveBuffer: Int32? = nil, source: String? = nil) throws {
        // The descriptor is stored only once connected: if `init` throws after `self.fd` is set,
        // deinit runs and would close a number that another test's socket may already reuse.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError("socket: errno \(errno)") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        if let source {
            var local = loopbackAddress(port: 0)
            inet_pton(AF_INET, source, &local.sin_addr)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                let code = errno
                close(fd)
                throw TestSupportError("bind \(source): errno \(code)")
            }
        }
        var address = loopbackAddress(port: port)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if rc != 0 {
            let code = errno
            close(fd)
            throw TestSupportError("connect to port \(port): errno \(code)")
        }
        self.fd = fd
    }

    deinit { close(fd) }

    package func send(_ text: String) throws { try send(Array(text.utf8)) }

    package func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TestSupportError("send: errno \(errno)") }
            offset += n
        }
    }

    /// Reads one response: the status line and headers, then the body as the head frames it
    /// (`Content-Length` bytes, chunks joined, or everything until the server closes), or no body
    /// if `toHEAD`.
    package func readResponse(toHEAD: Bool = false) throws -> Response {
        let statusLine = try readLine()
        guard let status = statusCode(statusLine) else { throw TestSupportError("bad status line: \(statusLine)") }
        var response = Response(status: status, headers: [], body: [])
        while true {
            let line = try readLine()
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: ":") else { throw TestSupportError("bad header line: \(line)") }
            response.headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: " ")))
        }
        if toHEAD { return response }
        if let length = response.header("Content-Length") {
            response.body = try take(Int(length)!)
        } else if response.header("Transfer-Encoding")?.lowercased() == "chunked" {
            // Prometheus sends large answers so: each chunk's size in hex, then its bytes.
            while true {
                let sizeLine = try readLine()
                guard let size = Int(sizeLine.split(separator: ";").first ?? "", radix: 16) else {
                    throw TestSupportError("bad chunk size: \(sizeLine)")
                }
                if size == 0 { break }
                response.body += try take(size)
                _ = try readLine()
            }
            while try !readLine().isEmpty {}  // trailers
        } else {
            while try fill() {}
            response.body = pending
            pending.removeAll()
        }
        return response
    }

    /// Reads one response's head and skips its `Content-Length` body without keeping it, so a
    /// load test's client costs little CPU beside the server it measures. Returns the status and
    /// the body's length.
    package func readResponseSkippingBody() throws -> (status: Int, bodyBytes: Int) {
        let statusLine = try readLine()
        guard let status = statusCode(statusLine) else { throw TestSupportError("bad status line: \(statusLine)") }
        var length = 0
        while true {
            let line = try readLine()
            if line.isEmpty { break }
            if line.lowercased().hasPrefix("content-length:") { length = Int(line.dropFirst(15).trimmingCharacters(in: " ")) ?? 0 }
        }
        var left = length
        let buffered = min(left, pending.count)
        pending.removeFirst(buffered)
        left -= buffered
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while left > 0 {
            let n = recv(fd, &chunk, min(chunk.count, left), 0)
            if n == 0 { throw TestSupportError("closed before the full body") }
            guard n > 0 else { throw TestSupportError("recv: errno \(errno) (timeout is EAGAIN \(EAGAIN))") }
            left -= n
        }
        return (status, length)
    }

    /// The next line of the head, without its CRLF.
    private func readLine() throws -> String {
        while true {
            if let end = pending.indices.dropLast().first(where: { pending[$0] == 13 && pending[$0 + 1] == 10 }) {
                defer { pending.removeFirst(end + 2) }
                return String(decoding: pending[..<end], as: UTF8.self)
            }
            guard try fill() else { throw TestSupportError("closed before the end of a line") }
        }
    }

    /// The next `count` bytes.
    private func take(_ count: Int) throws -> [UInt8] {
        while pending.count < count {
            guard try fill() else { throw TestSupportError("closed before the full body") }
        }
        defer { pending.removeFirst(count) }
        return Array(pending[..<count])
    }

    /// The code of a status line such as "HTTP/1.1 200 OK", or nil if it is not one.
    private func statusCode(_ line: String) -> Int? {
        guard line.hasPrefix("HTTP/1.") else { return nil }
        return Int(line.dropFirst(9).prefix(3))
    }

    /// True if the server closes the connection (EOF or reset) with no further bytes within the
    /// socket timeout; false if it sends bytes or stays open.
    package func isClosedByServer() -> Bool {
        guard pending.isEmpty else { return false }
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, 0)
        return n == 0 || (n < 0 && errno == ECONNRESET)
    }

    /// Reads until the server ends the stream (EOF or reset). Returns the byte count, or nil if
    /// the stream was still open when the socket timeout passed.
    package func readUntilServerCloses() -> Int? {
        var total = pending.count
        pending.removeAll()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n > 0 {
                total += n
                continue
            }
            if n == 0 || errno == ECONNRESET { return total }
            return nil
        }
    }

    /// The status code of the first response (read up to its status line, so a kept-alive
    /// connection does not wait for a close), or nil if the server closes without one.
    package func readStatus() -> Int? {
        while !pending.contains(10) {
            guard (try? fill()) == true else { break }
        }
        return statusCode(String(decoding: pending, as: UTF8.self))
    }

    /// Sends FIN: the server sees the end of the request stream.
    package func finishSending() { shutdown(fd, Int32(SHUT_WR)) }

    /// Whether the server has closed the connection already (a read sees end of file at once).
    package var isClosedNow: Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) == 0
    }

    /// Appends whatever arrives; false at end of stream.
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &chunk, chunk.count, 0)
        if n == 0 { return false }
        guard n > 0 else { throw TestSupportError("recv: errno \(errno) (timeout is EAGAIN \(EAGAIN))") }
        pending += chunk[..<n]
        return true
    }
}

/// 127.0.0.1:`port` as a socket address.
private func loopbackAddress(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return address
}

/// A loopback TCP port free at the time of asking (the kernel's pick for port 0), for a server
/// such as Prometheus that cannot report the port it took.
package func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestSupportError("socket: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var address = loopbackAddress(port: 0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else { throw TestSupportError("bind 127.0.0.1:0: \(String(cString: strerror(errno)))") }
    return Int(UInt16(bigEndian: address.sin_port))
}

extension Substring {
    fileprivate func trimmingCharacters(in blank: Character) -> String {
        String(drop { $0 == blank }.reversed().drop { $0 == blank }.reversed())
    }
}

/// Seconds since an arbitrary point, for generous "completed promptly" bounds.
package func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}
