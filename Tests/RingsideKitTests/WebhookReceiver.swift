import RingsideSystem
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RingsideTestSupport
import Synchronization

/// An HTTP endpoint for Alertmanager's webhooks: a loopback server on an ephemeral port that
/// answers every request with 200 and keeps its path and body, one connection at a time.
final class WebhookReceiver: Sendable {
    /// A request received: its path and its body parsed as a JSON object (nil if it is not one).
    struct Delivery: @unchecked Sendable {
        let path: String
        let document: [String: Any]?
    }

    let port: Int
    private let listener: Int32
    private let deliveries = Locked<[Delivery]>([])
    private let finished = DispatchSemaphore(value: 0)

    init() throws {
        (listener, port) = try listenOnLoopback("webhook receiver")
        Thread.detachNewThread { [self] in
            serve()
            finished.signal()
        }
    }

    /// What was received so far, in order.
    var received: [Delivery] { deliveries.withLock { $0 } }

    /// Stops accepting (the serving thread returns) and closes the socket.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        finished.wait()
        close(listener)
    }

    private func serve() {
        while true {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return  // shut down
            }
            if let delivery = Self.readRequest(connection) {
                deliveries.withLock { $0.append(delivery) }
                let response = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                _ = response.withCString { send(connection, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            }
            close(connection)
        }
    }

    /// Reads one request (its head, then `Content-Length` bytes of body); nil if the client
    /// goes away or stalls for 5 s first.
    private static func readRequest(_ fd: Int32) -> Delivery? {
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard let (head, body) = readHTTPRequest(fd) else { return nil }
        let path = head.first?.split(separator: " ").dropFirst().first.map(String.init) ?? ""
        return Delivery(path: path, document: (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any])
    }
}
