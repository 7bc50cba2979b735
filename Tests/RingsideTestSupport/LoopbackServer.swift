import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A listening TCP socket on 127.0.0.1 and an ephemeral port, for a test's own server: its
/// descriptor and port. `what` names the server in the error when it cannot bind or listen.
package func listenOnLoopback(_ what: String) throws -> (fd: Int32, port: Int) {
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
        throw TestSupportError("\(what): bind or listen on 127.0.0.1:0: \(reason)")
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// Reads one HTTP request from a test server's connection: its head's lines, then `Content-Length`
/// bytes of body; nil if the client goes away, or stalls past the socket's receive timeout, first.
package func readHTTPRequest(_ fd: Int32) -> (head: [String], body: [UInt8])? {
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
        headEnd = data.indices.dropLast(3).first { data[$0..<$0 + 4].elementsEqual(separator) }
    }
    let head = String(decoding: data[..<headEnd!], as: UTF8.self).components(separatedBy: "\r\n")
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
    return (head, Array(data[bodyStart..<bodyStart + length]))
}
