import Glibc
import RingsideSystem
import RingsideHTTPClient

/// Why an `HTTPServer` could not be created or started.
///
/// Each case names one cause and its `description` says what to do about it, e.g.
/// `listen 127.0.0.1:9464: the port is taken by another process (stop it or pick another port):
/// Address already in use (errno: 98)`. Nothing a client sends produces this error: bad requests
/// are answered with 4xx responses on their own connection.
package enum HTTPServerError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The listen string is not `HOST:PORT`; `reason` says which part is wrong.
    case invalidAddress(listen: String, reason: String)
    /// The host part did not resolve; `reason` is the resolver's message.
    case cannotResolve(listen: String, reason: String)
    /// Another socket is listening on that port (`EADDRINUSE`).
    case addressInUse(listen: String, errno: Int32)
    /// Binding a port below 1024 without privilege (`EACCES`).
    case permissionDenied(listen: String, errno: Int32)
    /// The host is not an address of any interface on this machine (`EADDRNOTAVAIL`).
    case addressNotAvailable(listen: String, errno: Int32)
    /// Another call failed: `socket`, `setsockopt`, `listen`, `pipe`, `fcntl` or `pthread_create`.
    case systemCall(String, listen: String, errno: Int32)

    package var description: String {
        switch self {
        case let .invalidAddress(listen, reason):
            return "listen \"\(listen)\": \(reason)"
        case let .cannotResolve(listen, reason):
            return "listen \(listen): cannot resolve the host: \(reason)"
        case let .addressInUse(listen, code):
            return "listen \(listen): the port is taken by another process (stop it or pick another port): \(Errno(rawValue: code))"
        case let .permissionDenied(listen, code):
            return "listen \(listen): ports below 1024 need root or CAP_NET_BIND_SERVICE; use a higher port: \(Errno(rawValue: code))"
        case let .addressNotAvailable(listen, code):
            return "listen \(listen): no interface on this host has that address: \(Errno(rawValue: code))"
        case let .systemCall(call, listen, code):
            return "listen \(listen): \(call) failed: \(Errno(rawValue: code))"
        }
    }

    /// Maps a failed bind or setup call to the case a person can act on.
    static func from(_ error: SyscallError, listen: String) -> HTTPServerError {
        let code = error.errno.rawValue
        guard error.call == "bind" else { return .systemCall(error.call, listen: listen, errno: code) }
        switch error.errno {
        case .addressInUse: return .addressInUse(listen: listen, errno: code)
        case .permissionDenied, .notPermitted: return .permissionDenied(listen: listen, errno: code)
        case .addressNotAvailable: return .addressNotAvailable(listen: listen, errno: code)
        default: return .systemCall("bind", listen: listen, errno: code)
        }
    }
}
