#if canImport(Glibc)
import Glibc
#endif

/// The socket calls: the HTTP server's and client's (RingsideHTTP's `Syscall` says what each
/// outcome means to its callers) and the benchmark's socket pair.
extension System {
    /// A new socket (`SOCK_NONBLOCK | SOCK_CLOEXEC` may be or'd into `type`).
    /// The corresponding C function is `socket`.
    package static func socket(_ family: Int32, _ type: Int32, _ protocol: Int32 = 0) throws(Errno) -> Int32 {
        try checked(Glibc.socket(family, type, `protocol`))
    }

    /// Two connected sockets. The corresponding C function is `socketpair`.
    package static func socketpair(_ family: Int32, _ type: Int32, _ protocol: Int32 = 0) throws(Errno) -> [Int32] {
        var ends: [Int32] = [-1, -1]
        _ = try checked(Glibc.socketpair(family, type, `protocol`, &ends))
        return ends
    }

    /// Sets an integer option. The corresponding C function is `setsockopt`.
    package static func setsockopt(_ fd: Int32, _ level: Int32, _ option: Int32, _ value: Int32) throws(Errno) {
        var value = value
        _ = try checked(Glibc.setsockopt(fd, level, option, &value, socklen_t(MemoryLayout<Int32>.size)))
    }

    /// The corresponding C function is `bind`.
    package static func bind(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) throws(Errno) {
        _ = try checked(Glibc.bind(fd, address, length))
    }

    /// The corresponding C function is `listen`.
    package static func listen(_ fd: Int32, backlog: Int32) throws(Errno) {
        _ = try checked(Glibc.listen(fd, backlog))
    }

    /// Writes the address the socket is bound to into `address`, its size into `length` (which
    /// says the room there on the way in). The corresponding C function is `getsockname`.
    package static func getsockname(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>, _ length: inout socklen_t) throws(Errno) {
        _ = try checked(Glibc.getsockname(fd, address, &length))
    }

    /// Starts connecting to `address`: on a non-blocking socket, `EINPROGRESS` says the connection
    /// goes on, and `poll` says when it is done (`SO_ERROR` says how). Not made again after EINTR:
    /// the connection goes on then too. The corresponding C function is `connect`.
    package static func connect(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) throws(Errno) {
        _ = try checked(Glibc.connect(fd, address, length))
    }

    /// An integer option's value. The corresponding C function is `getsockopt`.
    package static func getsockopt(_ fd: Int32, _ level: Int32, _ option: Int32) throws(Errno) -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = try checked(Glibc.getsockopt(fd, level, option, &value, &length))
        return value
    }

    /// Takes one pending connection; its descriptor. The corresponding C function is `accept`.
    package static func accept(_ fd: Int32) throws(Errno) -> Int32 {
        try retryingInterrupted { Glibc.accept(fd, nil, nil) }
    }

    /// Reads what has come into `buffer`; 0 when the peer has closed its end.
    /// The corresponding C function is `recv`.
    package static func recv(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, flags: Int32) throws(Errno) -> Int {
        try retryingInterrupted { Glibc.recv(fd, buffer.baseAddress, buffer.count, flags) }
    }

    /// Sends what the socket takes of `bytes`. The corresponding C function is `send`.
    package static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, flags: Int32) throws(Errno) -> Int {
        try retryingInterrupted { Glibc.send(fd, bytes.baseAddress, bytes.count, flags) }
    }

    /// The corresponding C function is `shutdown`.
    package static func shutdown(_ fd: Int32, _ how: Int32) throws(Errno) {
        _ = try checked(Glibc.shutdown(fd, how))
    }
}

extension System {
    /// Writes the address of the socket's peer into `address`, its size into `length` (which
    /// says the room there on the way in). The corresponding C function is `getpeername`.
    package static func getpeername(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>, _ length: inout socklen_t) throws(Errno) {
        _ = try checked(Glibc.getpeername(fd, address, &length))
    }

    /// Sends at most `count` bytes of the file open at `file`, from `offset` (moved past what was
    /// sent), to the socket `fd`, without copying them through this process: the bytes sent, 0 at
    /// the file's end. The corresponding C function is `sendfile`.
    package static func sendfile(_ fd: Int32, from file: Int32, offset: inout Int, count: Int) throws(Errno) -> Int {
        var position = off_t(offset)
        let sent = try retryingInterrupted { Glibc.sendfile(fd, file, &position, count) }
        offset = Int(position)
        return sent
    }
}
