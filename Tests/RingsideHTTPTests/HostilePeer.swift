import RingsideSystem
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
    private let attacking = Locked<Int32>(-1)
    private let finished = DispatchSemaphore(value: 0)

    init(attack: @escaping @Sendable (_ send: ([UInt8]) -> Bool) -> Void) throws {
        (listener, port) = try listenOnLoopback("hostile peer")
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
            if readHTTPRequest(connection) != nil {
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
}

/// The attack of a peer that sends `head`, then `line` without end, as fast as the client reads.
func endless(_ head: String, _ line: String) -> @Sendable (_ send: ([UInt8]) -> Bool) -> Void {
    let head = Array(head.utf8), lines = Array(String(repeating: line, count: 256).utf8)
    return { send in
        guard send(head) else { return }
        while send(lines) {}
    }
}
