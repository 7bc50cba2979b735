import Foundation
import Glibc
import RingsideTestSupport
import Synchronization

/// A loopback server on an ephemeral port that reads each request whole (its head, then
/// `Content-Length` bytes), then answers with `attack(send)`: `send` writes bytes and returns
/// false once the client closed the connection or the peer is stopped, so an attack loops while it
/// returns true. One connection at a time, on a thread of its own.
final class HostilePeer: Sendable {
    let port: Int
    private let listener: Int32
    private let stopping = Atomic(false)
    private let attacking = Mutex<Int32>(-1)
    private let finished = DispatchSemaphore(value: 0)

    init(attack: @escaping @Sendable (_ send: ([UInt8]) -> Bool) -> Void) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound, listen(fd, 16) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw TestSupportError("hostile peer: bind or listen on 127.0.0.1:0: \(reason)")
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in
            serve(attack)
            finished.signal()
        }
    }

    /// Stops the attack under way and accepting (the serving thread returns), and closes the socket.
    func stop() {
        stopping.store(true, ordering: .relaxed)
        attacking.withLock { if $0 >= 0 { shutdown($0, Int32(SHUT_RDWR)) } }
        shutdown(listener, Int32(SHUT_RDWR))
        finished.wait()
        close(listener)
    }

    private func serve(_ attack: (_ send: ([UInt8]) -> Bool) -> Void) {
        while !stopping.load(ordering: .relaxed) {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return  // shut down
            }
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            attacking.withLock { $0 = connection }
            if Self.readRequest(connection) {
                attack { bytes in
                    guard !stopping.load(ordering: .relaxed) else { return false }
                    var offset = 0
                    while offset < bytes.count {
                        let sent = bytes[offset...].withUnsafeBytes {
                            Glibc.send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                        }
                        guard sent > 0 else { return false }
                        offset += sent
                    }
                    return true
                }
            }
            attacking.withLock { $0 = -1 }
            close(connection)
        }
    }

    /// Reads one request (its head, then `Content-Length` bytes of body); false if the client goes
    /// away or stalls first.
    private static func readRequest(_ fd: Int32) -> Bool {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        func more() -> Bool {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { return false }
            data += buffer[0..<count]
            return true
        }
        let separator = Array("\r\n\r\n".utf8)
        var headEnd: Int?
        while headEnd == nil {
            guard more() else { return false }
            headEnd = data.indices.dropLast(3).first { data[$0..<$0 + 4].elementsEqual(separator) }
        }
        let head = String(decoding: data[..<headEnd!], as: UTF8.self).lowercased().components(separatedBy: "\r\n")
        let lengths = head.compactMap { line in
            line.hasPrefix("content-length:") ? Int(line.dropFirst(15).trimmingCharacters(in: .whitespaces)) : nil
        }
        let length = lengths.first ?? 0
        while data.count < headEnd! + 4 + length {
            guard more() else { return false }
        }
        return true
    }
}

/// The attack of a peer that sends `head`, then `line` without end, as fast as the client reads.
func endless(_ head: String, _ line: String) -> @Sendable (_ send: ([UInt8]) -> Bool) -> Void {
    let head = Array(head.utf8), lines = Array(String(repeating: line, count: 256).utf8)
    return { send in
        guard send(head) else { return }
        while send(lines) {}
    }
}
