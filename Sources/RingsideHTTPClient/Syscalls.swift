// The HTTP client's and server's calls (RingsideHTTPClient, RingsideHTTP), named after what they
// do: the sockets' outcomes as the event loop tells them apart, over RingsideSystem's thin
// wrappers (which read errno and make a call again after EINTR), and the library calls with error
// conventions of their own (`getaddrinfo`), made here; threads are RingsideSystem's `PartThread`.
// Everyone else sees `IOResult`, `SyscallError` and plain `Int32` descriptors. Here, not in RingsideHTTP, so that the
// client is linked without OpenSSL (the operator's tools link it).
//
// Swift's Glibc module is built without _GNU_SOURCE, so the Linux calls that take flags (the
// accept and pipe that set close-on-exec and non-blocking at once) are not visible. This file
// uses the POSIX forms instead: `accept` then `fcntl`, and a self-pipe made by `pipe` then
// `fcntl` (CRingsideSystem, the C module for what Swift cannot call, keeps to calls that have no
// such form). The gap before FD_CLOEXEC matters only if another thread forks and execs in that
// instant; the collector does so once, with `--demo`, to start its demo bot (which could then
// hold a connection accepted in that instant open).

#if canImport(Glibc)
import Glibc
#else
#error("RingsideHTTPClient uses Glibc sockets and poll; build it on Linux.")
#endif
import RingsideSystem

/// A failed system call: its name and the errno it left.
package struct SyscallError: Error, Equatable {
    package var call: String
    package var errno: Errno

    package init(call: String, errno: Errno) {
        self.call = call
        self.errno = errno
    }
}

/// What a non-blocking read or write did: the three outcomes the event loop tells apart, plus
/// end of stream for reads.
package enum IOResult: Equatable {
    case bytes(Int)
    case wouldBlock
    case endOfStream
    case failed(Errno)
}

/// What `accept` (then `fcntl`) did on the non-blocking listening socket.
package enum AcceptResult: Equatable {
    case accepted(Int32)
    /// The queue is empty: wait for the next readiness.
    case empty
    /// A per-connection failure (the peer reset before we took it): try the next.
    case retry
    /// The process or system is out of descriptors (`EMFILE`, `ENFILE`: the loop frees one, see
    /// `DescriptorShortage`) or memory (it stops accepting for a while), else the level-triggered
    /// listening socket would spin the loop.
    case exhausted(Errno)
}

/// A resolved socket address, copied out of `getaddrinfo`'s list so nothing dangles.
package struct SocketAddress {
    package var storage = sockaddr_storage()
    package var length: socklen_t = 0

    package var family: Int32 { Int32(storage.ss_family) }
}

/// The calls, named after what they do; each documents the C function it makes.
package enum Syscall {
    /// `body`'s result, or its errno as a `SyscallError` naming `call`.
    private static func named<T>(_ call: String, _ body: () throws(Errno) -> T) throws(SyscallError) -> T {
        do { return try body() } catch { throw SyscallError(call: call, errno: error) }
    }

    /// A new non-blocking, close-on-exec TCP socket. The corresponding C function is `socket`.
    package static func tcpSocket(family: Int32) throws(SyscallError) -> Int32 {
        let type =
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
            | Int32(SOCK_CLOEXEC.rawValue)
        return try named("socket") { () throws(Errno) in try System.socket(family, type) }
    }

    /// Lets a restarted collector rebind its port while old connections sit in TIME_WAIT.
    /// The corresponding C function is `setsockopt(SO_REUSEADDR)`.
    package static func setReuseAddress(_ fd: Int32) throws(SyscallError) {
        try named("setsockopt(SO_REUSEADDR)") { () throws(Errno) in try System.setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, 1) }
    }

    /// Sends each response as soon as it is written instead of waiting on the peer's ACK; our
    /// responses are single writes, so Nagle only adds latency. Failure is harmless and ignored.
    package static func setNoDelay(_ fd: Int32) {
        try? System.setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
    }

    /// The corresponding C function is `bind`.
    package static func bind(_ fd: Int32, to address: SocketAddress) throws(SyscallError) {
        var storage = address.storage
        let result = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                Result { () throws(Errno) in try System.bind(fd, pointer, address.length) }
            }
        }
        try named("bind") { () throws(Errno) in try result.get() }
    }

    /// Starts connecting the non-blocking socket `fd` to `address`: true when it connected at
    /// once, false when the connection goes on (`EINPROGRESS`, or `EINTR`, after which it goes on
    /// too): `poll` for `POLLOUT`, then `connectionError`. The corresponding C function is `connect`.
    package static func connect(_ fd: Int32, to address: SocketAddress) throws(SyscallError) -> Bool {
        var storage = address.storage
        let result = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                Result { () throws(Errno) in try System.connect(fd, pointer, address.length) }
            }
        }
        switch result {
        case .success: return true
        case .failure(let error) where error.rawValue == EINPROGRESS || error == .interrupted: return false
        case .failure(let error): throw SyscallError(call: "connect", errno: error)
        }
    }

    /// How a connection `connect` left going on ended: nil once connected, else why it failed.
    /// The corresponding C function is `getsockopt(SO_ERROR)`.
    package static func connectionError(_ fd: Int32) -> Errno? {
        do {
            let code = try System.getsockopt(fd, SOL_SOCKET, SO_ERROR)
            return code == 0 ? nil : Errno(rawValue: code)
        } catch {
            return error
        }
    }

    /// The corresponding C function is `listen`.
    package static func listen(_ fd: Int32, backlog: Int32) throws(SyscallError) {
        try named("listen") { () throws(Errno) in try System.listen(fd, backlog: backlog) }
    }

    /// The address the kernel actually bound, which carries the port it chose for port 0.
    /// The corresponding C function is `getsockname`.
    package static func localAddress(_ fd: Int32) throws(SyscallError) -> SocketAddress {
        var address = SocketAddress()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &address.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                Result { () throws(Errno) in try System.getsockname(fd, pointer, &length) }
            }
        }
        try named("getsockname") { () throws(Errno) in try result.get() }
        address.length = length
        return address
    }

    /// Takes one pending connection as a non-blocking, close-on-exec socket.
    /// The corresponding C functions are `accept` and `fcntl`.
    package static func accept(_ listenFD: Int32) -> AcceptResult {
        let fd: Int32
        do { fd = try System.accept(listenFD) } catch {
            switch error {
            case .resourceTemporarilyUnavailable, .wouldBlock: return .empty
            case .tooManyOpenFiles, .tooManyOpenFilesInSystem, .noBufferSpace, .noMemory: return .exhausted(error)
            default: return .retry  // ECONNABORTED, EPROTO and the network errors Linux passes on
            }
        }
        do { try setNonBlockingCloseOnExec(fd) } catch {
            System.close(fd)
            return .retry
        }
        return .accepted(fd)
    }

    /// The address of the accepted socket's peer; nil when the kernel cannot say (it hung up).
    /// The corresponding C function is `getpeername`.
    package static func peerAddress(_ fd: Int32) -> SocketAddress? {
        var address = SocketAddress()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &address.storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                Result { () throws(Errno) in try System.getpeername(fd, pointer, &length) }
            }
        }
        guard case .success = result else { return nil }
        address.length = length
        return address
    }

    /// Whether a connection waits in the listening socket's queue, without taking it.
    /// The corresponding C function is `poll` with no timeout.
    package static func hasPendingConnection(_ listenFD: Int32) -> Bool {
        var probe = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)]
        return (try? System.poll(&probe, timeoutMillis: 0)) == 1 && probe[0].revents & Int16(POLLIN) != 0
    }

    /// The corresponding C function is `recv`.
    package static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        do {
            let n = try System.recv(fd, into: buffer, flags: Int32(MSG_DONTWAIT))
            return n > 0 ? .bytes(n) : .endOfStream
        } catch {
            return error == .resourceTemporarilyUnavailable || error == .wouldBlock ? .wouldBlock : .failed(error)
        }
    }

    /// Writes without ever raising SIGPIPE: a client that hung up is an `EPIPE` result, not a
    /// dead daemon. The corresponding C function is `send` with `MSG_NOSIGNAL`.
    package static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> IOResult {
        do {
            return .bytes(try System.send(fd, bytes, flags: Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)))
        } catch {
            return error == .resourceTemporarilyUnavailable || error == .wouldBlock ? .wouldBlock : .failed(error)
        }
    }

    /// Sends at most `count` bytes of the regular file `file` from `offset` (moved past them) to
    /// the socket, from the page cache, never copied through this process nor raising SIGPIPE
    /// (the loop thread blocks it); `.endOfStream` when the file ends before `offset`.
    /// The corresponding C function is `sendfile`.
    package static func sendFile(_ fd: Int32, from file: Int32, offset: inout Int, count: Int) -> IOResult {
        do {
            let sent = try System.sendfile(fd, from: file, offset: &offset, count: count)
            return sent > 0 ? .bytes(sent) : .endOfStream
        } catch {
            return error == .resourceTemporarilyUnavailable || error == .wouldBlock ? .wouldBlock : .failed(error)
        }
    }

    /// Sends our FIN while still reading, so a client whose request we did not read in full gets
    /// the response before a reset. The corresponding C function is `shutdown(SHUT_WR)`.
    package static func shutdownWrite(_ fd: Int32) {
        try? System.shutdown(fd, Int32(SHUT_WR))
    }

    /// Sets O_NONBLOCK and FD_CLOEXEC. The corresponding C function is `fcntl`.
    private static func setNonBlockingCloseOnExec(_ fd: Int32) throws(Errno) {
        let flags = try System.fcntl(fd, F_GETFL)
        _ = try System.fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        _ = try System.fcntl(fd, F_SETFD, FD_CLOEXEC)
    }

    /// A self-pipe: `stop()` writes a byte to `write` so the event loop, polling `read`, wakes
    /// from `poll` at once. The corresponding C function is `pipe`.
    package static func makeWakeup() throws(SyscallError) -> (read: Int32, write: Int32) {
        let ends = try named("pipe") { () throws(Errno) in try System.pipe() }
        do {
            try setNonBlockingCloseOnExec(ends.read)
            try setNonBlockingCloseOnExec(ends.write)
        } catch {
            System.close(ends.read)
            System.close(ends.write)
            throw SyscallError(call: "fcntl", errno: error)
        }
        return ends
    }

    /// Makes the wake-up pipe readable. The pipe is non-blocking: when it is full (the loop has
    /// not woken yet) the write fails, and the pipe is readable all the same, so the result is
    /// not checked.
    package static func signalWakeup(_ writeEnd: Int32) {
        _ = try? withUnsafeBytes(of: UInt8(1)) { (byte) throws(Errno) in try System.write(writeEnd, byte) }
    }

    /// Reads the wake-up pipe empty. The corresponding C function is `read`.
    package static func drainWakeup(_ readEnd: Int32) {
        var bytes = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        let size = MemoryLayout.size(ofValue: bytes)
        while (try? withUnsafeMutableBytes(of: &bytes) { (buffer) throws(Errno) in try System.read(readEnd, into: buffer) }) == size {}
    }

    /// `/dev/null`, held open as the spare descriptor the loop frees when `accept` finds none
    /// (see `DescriptorShortage`); -1 when none is free. The corresponding C function is `open`.
    package static func openSpareDescriptor() -> Int32 {
        (try? System.open("/dev/null", O_RDONLY | O_CLOEXEC)) ?? -1
    }

    /// Milliseconds on a clock that never jumps (CLOCK_MONOTONIC), for deadlines.
    package static func monotonicMillis() -> Int64 { Int64(System.monotonicNanos() / 1_000_000) }

    /// Resolves a host for a TCP socket, passive (to listen on) or not (to connect to), in the
    /// order the system prefers. Returns the `gai_strerror` text on failure. The corresponding C
    /// function is `getaddrinfo`.
    package static func resolve(host: String, port: Int, passive: Bool = true) -> Result<[SocketAddress], ResolveFailure> {
        var hints = addrinfo()
        hints.ai_flags = (passive ? AI_PASSIVE : 0) | AI_NUMERICSERV
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0 else { return .failure(ResolveFailure(message: String(cString: gai_strerror(rc)))) }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var node = list
        while let info = node?.pointee {
            if let source = info.ai_addr, Int(info.ai_addrlen) <= MemoryLayout<sockaddr_storage>.size {
                var address = SocketAddress()
                address.length = info.ai_addrlen
                withUnsafeMutableBytes(of: &address.storage) {
                    $0.copyMemory(from: UnsafeRawBufferPointer(start: source, count: Int(info.ai_addrlen)))
                }
                addresses.append(address)
            }
            node = info.ai_next
        }
        return .success(addresses)
    }

    package struct ResolveFailure: Error { package var message: String }
}

/// The text before the first NUL of a C buffer.
private func cText(_ chars: [CChar]) -> String {
    String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

extension SocketAddress {
    /// An IPv4 or IPv6 address as its family's C struct.
    private enum InternetAddress {
        case v4(sockaddr_in)
        case v6(sockaddr_in6)
    }

    /// The address read as its family's struct; nil for other families.
    private var internetAddress: InternetAddress? {
        var storage = self.storage
        return withUnsafePointer(to: &storage) { pointer in
            switch family {
            case AF_INET: .v4(pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee })
            case AF_INET6: .v6(pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee })
            default: nil
            }
        }
    }

    /// "127.0.0.1:9464" or "[::1]:9464", for logs and error messages.
    package var description: String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch internetAddress {
        case .v4(var sin):
            inet_ntop(AF_INET, &sin.sin_addr, &text, socklen_t(text.count))
            return "\(cText(text)):\(UInt16(bigEndian: sin.sin_port))"
        case .v6(var sin6):
            inet_ntop(AF_INET6, &sin6.sin6_addr, &text, socklen_t(text.count))
            return "[\(cText(text))]:\(UInt16(bigEndian: sin6.sin6_port))"
        case nil:
            return "(address family \(family))"
        }
    }

    /// The port in host byte order, 0 for families without one.
    package var port: Int {
        switch internetAddress {
        case .v4(let sin): Int(UInt16(bigEndian: sin.sin_port))
        case .v6(let sin6): Int(UInt16(bigEndian: sin6.sin6_port))
        case nil: 0
        }
    }

    /// What tells one client's host from another's, as far as an address can: an IPv4 address
    /// whole (an IPv4-mapped IPv6 one too), an IPv6 address's /64 (one site's network, which
    /// its owner can fill with addresses at will), nothing for other families.
    package var hostKey: [UInt8] {
        switch internetAddress {
        case .v4(let sin):
            return withUnsafeBytes(of: sin.sin_addr) { Array($0) }
        case .v6(let sin6):
            let b = withUnsafeBytes(of: sin6.sin6_addr) { Array($0) }
            let mapped = b[0..<10].allSatisfy { $0 == 0 } && b[10] == 0xFF && b[11] == 0xFF
            return mapped ? Array(b[12...]) : Array(b[..<8]) + [6]
        case nil:
            return []
        }
    }

    /// True for 127.0.0.0/8, ::1 and IPv4-mapped 127.x: the addresses only this host can reach.
    package var isLoopback: Bool {
        switch internetAddress {
        case .v4(let sin):
            return UInt32(bigEndian: sin.sin_addr.s_addr) >> 24 == 127
        case .v6(let sin6):
            let b = withUnsafeBytes(of: sin6.sin6_addr) { Array($0) }
            let loopback6 = b[0..<15].allSatisfy { $0 == 0 } && b[15] == 1
            let mapped127 = b[0..<10].allSatisfy { $0 == 0 } && b[10] == 0xFF && b[11] == 0xFF && b[12] == 127
            return loopback6 || mapped127
        case nil:
            return false
        }
    }
}
