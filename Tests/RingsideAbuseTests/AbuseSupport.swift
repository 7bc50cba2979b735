import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Synchronization

/// Whether the long runs were asked for (`RINGSIDE_LONG_TESTS=1`).
let longTests = ProcessInfo.processInfo.environment["RINGSIDE_LONG_TESTS"] == "1"

/// A process's resident set, from /proc (kB), or nil if it is gone.
func residentKilobytes(of pid: Int32) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "")
    }
    return nil
}

/// Monotonic seconds, for measuring latencies.
func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// Raises this process's soft descriptor limit to at least `wanted` (as far as the hard limit
/// allows, raising that too when we may); returns the soft limit now in force.
@discardableResult
func raiseDescriptorLimit(to wanted: rlim_t) -> rlim_t {
    var limit = rlimit()
    getrlimit(RLIMIT_NOFILE_VALUE, &limit)
    guard limit.rlim_cur < wanted else { return limit.rlim_cur }
    var raised = limit
    raised.rlim_cur = wanted
    raised.rlim_max = max(limit.rlim_max, wanted)
    if setrlimit(RLIMIT_NOFILE_VALUE, &raised) != 0 {
        raised.rlim_max = limit.rlim_max
        raised.rlim_cur = min(wanted, limit.rlim_max)
        setrlimit(RLIMIT_NOFILE_VALUE, &raised)
    }
    getrlimit(RLIMIT_NOFILE_VALUE, &limit)
    return limit.rlim_cur
}

#if os(Linux)
let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#endif

/// A TCP connection to 127.0.0.1:`port` that sends exact bytes and reads whatever comes back,
/// with socket timeouts so a server bug fails the test instead of hanging it.
final class RawConnection {
    let fd: Int32

    init(port: Int, timeoutSeconds: Int = 5) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError("socket: \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            let code = errno
            close(fd)
            throw TestSupportError("connect to port \(port): \(String(cString: strerror(code)))")
        }
        self.fd = fd
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return } // the server may close on us mid-way: what it said is read next
            offset += n
        }
    }

    func send(_ text: String) { send(Array(text.utf8)) }

    /// Everything until the server closes (or the timeout passes).
    func readAll() -> [UInt8] {
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(fd, &chunk, chunk.count, 0)
            if count <= 0 { break }
            response += chunk[0..<count]
        }
        return response
    }

    /// The status code of the first response the server sends (read up to its status line, so a
    /// kept-alive connection does not wait for a close), or nil if it closes without one.
    func readStatus() -> Int? {
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !received.contains(10) {
            let count = recv(fd, &chunk, chunk.count, 0)
            if count <= 0 { break }
            received += chunk[0..<count]
        }
        let text = String(decoding: received, as: UTF8.self)
        guard text.hasPrefix("HTTP/1.") else { return nil }
        return Int(text.dropFirst(9).prefix(3))
    }

    /// Sends FIN: the server sees the end of the request stream.
    func finishSending() { shutdown(fd, Int32(SHUT_WR)) }

    /// Whether the server has closed the connection (a read sees end of file at once).
    var isClosedByServer: Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) == 0
    }
}
