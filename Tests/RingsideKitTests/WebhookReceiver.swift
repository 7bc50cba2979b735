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
    private let deliveries = Mutex<[Delivery]>([])
    private let finished = DispatchSemaphore(value: 0)

    init() throws {
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
            throw TestSupportError("webhook receiver: bind or listen on 127.0.0.1:0: \(reason)")
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
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
            guard more() else { return nil }
            headEnd = data.indices.dropLast(3).first { Array(data[$0..<$0 + 4]) == separator }
        }
        let head = String(decoding: data[..<headEnd!], as: UTF8.self).components(separatedBy: "\r\n")
        let path = head.first?.split(separator: " ").dropFirst().first.map(String.init) ?? ""
        let length =
            head.dropFirst().compactMap { line -> Int? in
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                return Int(parts[1].trimmingCharacters(in: .whitespaces))
            }.first ?? 0
        let bodyStart = headEnd! + 4
        while data.count < bodyStart + length {
            guard more() else { return nil }
        }
        let body = Data(data[bodyStart..<bodyStart + length])
        return Delivery(path: path, document: (try? JSONSerialization.jsonObject(with: body)) as? [String: Any])
    }
}
