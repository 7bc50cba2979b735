import Glibc
import RingsideHTTP

/// A blocking TCP client that sends exact bytes, so tests can send what no HTTP library would.
///
/// Every read and write has a socket timeout, so a server bug fails the test instead of hanging
/// the suite.
package final class RawClient {
    package struct Response {
        package var status: Int
        package var headers: [HTTPHeader]
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
    /// `receiveBuffer` shrinks SO_RCVBUF, so a test can make the server's writes block.
    package init(port: Int, timeoutSeconds: Int = 3, receiveBuffer: Int32? = nil) throws {
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
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
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

    /// Reads one response: the head, then `Content-Length` bytes of body unless `toHEAD`.
    package func readResponse(toHEAD: Bool = false) throws -> Response {
        let terminator: [UInt8] = [13, 10, 13, 10]
        var headEnd: Int?
        while headEnd == nil {
            headEnd = pending.indices.dropLast(3).first { Array(pending[$0..<($0 + 4)]) == terminator }
            if headEnd == nil { guard try fill() else { throw TestSupportError("closed before a full head") } }
        }
        let lines = String(decoding: pending[..<headEnd!], as: UTF8.self)
            .split(separator: "\r\n", omittingEmptySubsequences: false)  // CRLF is one Character
        pending.removeFirst(headEnd! + 4)
        let statusParts = lines[0].split(separator: " ", maxSplits: 2)
        guard statusParts.count >= 2, statusParts[0] == "HTTP/1.1", let status = Int(statusParts[1]) else {
            throw TestSupportError("bad status line: \(lines[0])")
        }
        let headers = lines.dropFirst().map { line -> HTTPHeader in
            let colon = line.firstIndex(of: ":")!
            return HTTPHeader(String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: " "))
        }
        var response = Response(status: status, headers: headers, body: [])
        let length = toHEAD ? 0 : Int(response.header("Content-Length") ?? "0")!
        while pending.count < length {
            guard try fill() else { throw TestSupportError("closed before the full body") }
        }
        response.body = Array(pending[..<length])
        pending.removeFirst(length)
        return response
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
            if n > 0 { total += n; continue }
            if n == 0 || errno == ECONNRESET { return total }
            return nil
        }
    }

    /// Everything until the server closes, or until the socket timeout passes.
    package func readAll() -> [UInt8] {
        var response = pending
        pending.removeAll()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(fd, &chunk, chunk.count, 0)
            if count <= 0 { return response }
            response += chunk[0..<count]
        }
    }

    /// The status code of the first response (read up to its status line, so a kept-alive
    /// connection does not wait for a close), or nil if the server closes without one.
    package func readStatus() -> Int? {
        while !pending.contains(10) {
            guard (try? fill()) == true else { break }
        }
        let text = String(decoding: pending, as: UTF8.self)
        guard text.hasPrefix("HTTP/1.") else { return nil }
        return Int(text.dropFirst(9).prefix(3))
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
