import Glibc

/// Why a loopback connection could not be made.
public struct LoopbackConnectError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// A blocking TCP connection to 127.0.0.1:`port` whose reads time out after `timeoutSeconds`:
/// how the tests and ringside-bench reach a server without an HTTP library. The caller closes it.
public func connectToLoopback(port: Int, timeoutSeconds: Int) throws(LoopbackConnectError) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw LoopbackConnectError(description: "socket: \(String(cString: strerror(errno)))") }
    var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        let reason = String(cString: strerror(errno))
        close(fd)
        throw LoopbackConnectError(description: "connect to port \(port): \(reason)")
    }
    return fd
}
