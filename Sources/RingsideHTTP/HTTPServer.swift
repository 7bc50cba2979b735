import Glibc
import Synchronization

/// The bounds that keep one client from costing the server more than a slot.
public struct HTTPServerLimits: Sendable, Equatable {
    /// Largest request head (request line, headers, blank line); larger gets 431 and a close.
    public var maxHeadBytes = 8 * 1024
    /// Open connections at most. At the bound, a newcomer takes the slot of the connection idle
    /// longest (one that has sent nothing yet, or is between requests), so idle connections can
    /// never lock a scraper out; only when every connection is busy does it get a 503.
    public var maxConnections = 1024
    /// Added to the server thread's nice value (0 to 19): the collector runs its HTTP thread
    /// below its drain thread, so a flood of scrapes cannot take the CPU the drain needs.
    public var threadNiceIncrement: Int32 = 0
    /// Requests answered per second at most (nil: no bound). Past it the server stops reading
    /// until the next tenth of a second, so a flood of requests costs a bounded share of a core
    /// and queues instead; connections are served in turn, so every client gets its share.
    public var maxRequestsPerSecond: Int?
    /// Time to receive a complete request head, counted from the accept or the previous
    /// response; it is also the keep-alive idle timeout. Not reset by progress, so a client
    /// sending a byte a second is closed on time.
    public var headTimeout: Duration = .seconds(5)
    /// Time to send one response to a client that reads it slowly.
    public var writeTimeout: Duration = .seconds(10)

    public init() {}
}

/// A small HTTP/1.1 server for the collector's scrape endpoints, on one dedicated thread.
///
/// It answers `GET` and `HEAD` through `handler` and refuses everything else itself (bodies,
/// other methods, malformed or oversized heads). It runs one OS thread with a `poll` loop, not
/// Swift concurrency's cooperative pool, so HTTP clients can never occupy the threads the
/// collector's drain loop needs, and a slow or idle client never delays another.
///
/// `init` binds and listens (so `boundPort` is known and bind errors surface before anything
/// starts); `start` spawns the thread; `stop` closes everything and joins it. All methods are
/// safe to call from any thread, except `stop()` from inside `handler`, which would wait for
/// itself.
public final class HTTPServer: Sendable {
    /// The collector's conventional address: this machine only.
    public static let defaultListen = "127.0.0.1:9464"

    /// The port actually bound: the one asked for, or the kernel's choice for port 0.
    public let boundPort: Int
    /// The bound address as `127.0.0.1:9464` or `[::1]:9464`, for the startup log line.
    public let boundAddress: String
    /// False when other machines can reach the server (e.g. `0.0.0.0`); callers log a warning,
    /// since metrics can reveal what the bots are doing.
    public let isLoopback: Bool
    public let limits: HTTPServerLimits

    private let listenFD: Int32
    /// The self-pipe that wakes the loop for `stop()`.
    private let wakeFDs: (read: Int32, write: Int32)
    private let handler: @Sendable (HTTPRequest) -> HTTPResponse
    private let lifecycle = Mutex(Lifecycle.ready)

    private enum Lifecycle {
        case ready
        case running(pthread_t)
        case stopped
    }

    /// Binds and listens on `listen` (`HOST:PORT`, e.g. `127.0.0.1:9464`, `[::1]:0`,
    /// `localhost:9464`). Connections queue in the kernel until `start()`.
    ///
    /// - Parameters:
    ///   - listen: where to listen; a host name is resolved and its addresses tried in order.
    ///   - limits: the per-client bounds.
    ///   - handler: answers each `GET` and `HEAD`, on the server thread. It must return quickly:
    ///     every other client waits while it runs.
    /// - Throws: `HTTPServerError` naming the address and the cause.
    public init(listen: String, limits: HTTPServerLimits = HTTPServerLimits(),
                handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) throws(HTTPServerError) {
        precondition(limits.maxHeadBytes >= 64 && limits.maxConnections >= 1, "HTTPServerLimits too small")
        precondition(limits.headTimeout > .zero && limits.writeTimeout > .zero, "HTTPServerLimits timeouts must be positive")
        let address = try ListenAddress(parsing: listen)
        let candidates: [SocketAddress]
        switch Syscall.resolve(host: address.host, port: address.port) {
        case .success(let list) where !list.isEmpty: candidates = list
        case .success: throw .cannotResolve(listen: listen, reason: "no addresses")
        case .failure(let failure): throw .cannotResolve(listen: listen, reason: failure.message)
        }

        var firstError: HTTPServerError?
        var bound: (fd: Int32, address: SocketAddress)?
        for candidate in candidates {
            do {
                bound = (try Self.openListener(candidate), candidate)
                break
            } catch {
                firstError = firstError ?? .from(error, listen: listen)
            }
        }
        guard let bound else { throw firstError! }

        let local: SocketAddress
        let wakeFDs: (read: Int32, write: Int32)
        do {
            local = try Syscall.localAddress(bound.fd)
            wakeFDs = try Syscall.makeWakeup()
        } catch {
            Syscall.close(bound.fd)
            throw .from(error, listen: listen)
        }
        self.listenFD = bound.fd
        self.wakeFDs = wakeFDs
        self.boundPort = local.port
        self.boundAddress = local.description
        self.isLoopback = local.isLoopback
        self.limits = limits
        self.handler = handler
    }

    /// One listening socket on one address; closed again if any step fails.
    private static func openListener(_ address: SocketAddress) throws(SyscallError) -> Int32 {
        let fd = try Syscall.tcpSocket(family: address.family)
        do {
            try Syscall.setReuseAddress(fd)
            try Syscall.bind(fd, to: address)
            try Syscall.listen(fd, backlog: 1024)
            return fd
        } catch {
            Syscall.close(fd)
            throw error
        }
    }

    deinit { stop() }

    /// Starts the server thread. Calling it twice, or after `stop()`, is a programming error.
    ///
    /// - Throws: `HTTPServerError.systemCall("pthread_create", …)` if the thread cannot start.
    public func start() throws(HTTPServerError) {
        try lifecycle.withLock { (state: inout Lifecycle) throws(HTTPServerError) in
            guard case .ready = state else { preconditionFailure("HTTPServer.start() called twice or after stop()") }
            let loop = ServerLoop(listenFD: listenFD, wakeFD: wakeFDs.read, limits: limits, handler: handler)
            let nice = limits.threadNiceIncrement
            switch Syscall.startThread({
                // On Linux the nice value is a thread's own: PRIO_PROCESS with id 0 sets the calling thread's.
                if nice > 0 { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, nice) }
                loop.run()
            }) {
            case .success(let thread): state = .running(thread)
            case .failure(let error): throw .from(error, listen: boundAddress)
            }
        }
    }

    /// Closes the listening socket and every connection and waits for the server thread to
    /// exit, which takes one wake-up of its loop (well under a millisecond when idle).
    /// Idempotent; safe from any thread except the handler.
    public func stop() {
        lifecycle.withLock { state in
            switch state {
            case .stopped:
                return
            case .running(let thread):
                Syscall.signalWakeup(wakeFDs.write)
                Syscall.join(thread)
            case .ready:
                break
            }
            Syscall.close(listenFD)
            Syscall.close(wakeFDs.read)
            Syscall.close(wakeFDs.write)
            state = .stopped
        }
    }
}
