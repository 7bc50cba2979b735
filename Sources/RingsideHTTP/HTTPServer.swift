import Dispatch
import Glibc
import RingsideSystem
import Synchronization
import RingsideHTTPClient

/// The bounds that keep one client from costing the server more than a slot.
package struct HTTPServerLimits: Sendable, Equatable {
    /// Largest request head (request line, headers, blank line); larger gets 431 and a close.
    package var maxHeadBytes = 8 * 1024
    /// Open connections at most. At the bound, a newcomer takes the slot of the connection idle
    /// longest (one that has sent nothing yet, or is between requests), so idle connections can
    /// never lock a scraper out; only when every connection is busy does it get a 503.
    package var maxConnections = 1024
    /// Added to the server thread's nice value (0 to 19): the collector runs its HTTP thread
    /// below its drain thread, so a flood of scrapes cannot take the CPU the drain needs.
    package var threadNiceIncrement: Int32 = 0
    /// Added to the render worker's nice value (0 to 19), the thread that runs `handler`. Above
    /// `threadNiceIncrement`, the loop (and so the quick routes) preempts a long render.
    package var workerNiceIncrement: Int32 = 0
    /// Requests handed to the render worker and not yet answered (the one it renders included),
    /// at most. Past it, a request `quick` declines gets `503` with `Retry-After: 1` at once, so
    /// the wait for a page stays bounded (this many renders) instead of growing with the clients.
    package var maxQueuedRequests = 64
    /// Requests answered per second at most (nil: no bound). Past it the server stops reading
    /// until the next tenth of a second, so a flood of requests costs a bounded share of a core
    /// and queues instead; connections are served in turn, so every client gets its share.
    package var maxRequestsPerSecond: Int?
    /// Time to receive a complete request head, counted from the accept or the previous
    /// response; it is also the keep-alive idle timeout. Not reset by progress, so a client
    /// sending a byte a second is closed on time.
    package var headTimeout: Duration = .seconds(5)
    /// Time to send one response to a client that reads it slowly.
    package var writeTimeout: Duration = .seconds(10)
    /// Paths that also take `POST` without a body (an action, such as `/-/reload`); every other
    /// method and path is refused as before.
    package var postPaths: Set<String> = []

    package init() {}
}

/// A line for the server's owner to log, and whether it reports a problem (else its end). The
/// server calls it on its own thread, once per change of state (descriptors running out, and
/// available again), never per request.
package typealias HTTPServerLog = @Sendable (_ message: String, _ isProblem: Bool) -> Void

/// A small HTTP/1.1 server for the collector's scrape endpoints, on two dedicated threads.
///
/// It answers `GET` and `HEAD` (and `POST` to `limits.postPaths`) and refuses everything else itself (bodies, other methods,
/// malformed or oversized heads). One OS thread runs a `poll` loop over every connection, not
/// Swift concurrency's cooperative pool, so HTTP clients can never occupy the threads the
/// collector's drain loop needs, and a slow or idle client never delays another.
///
/// Requests are answered in two steps, so a costly one cannot hold up a cheap one:
/// - `quick`, on the loop's thread, sees every request first. It answers what costs next to
///   nothing (health checks, 404s) by returning a response, and declines the rest with nil.
/// - `handler` answers what `quick` declines, on a second thread (the render worker), one
///   request at a time, in the order they came. Meanwhile the loop goes on serving every other
///   connection. A connection whose request is at the worker reads nothing more until its
///   response is sent, so each connection's responses keep the order of its requests, pipelined
///   ones included. At most `limits.maxQueuedRequests` wait; past that, 503 with `Retry-After`.
///
/// Which routes are cheap is the caller's to say: the server only knows that `quick` must return
/// at once.
///
/// With a `WebSecurity` (exporter-toolkit's web configuration file), every connection speaks TLS
/// (OpenSSL, its handshake on the loop, bounded by the head timeout) and every request but those
/// to its open paths needs a basic-auth password; a password not verified before is checked with
/// bcrypt on a third thread, the password worker, and the request answered when it comes back.
///
/// `init` binds and listens (so `boundPort` is known and bind errors surface before anything
/// starts); `start` spawns the threads; `stop` closes everything and joins them. All methods are
/// safe to call from any thread, except `stop()` from inside `quick` or `handler`, which would
/// wait for itself.
package final class HTTPServer: Sendable {
    /// How long `stop` waits for the workers' jobs under way.
    static let workerWaitNanos: UInt64 = 500_000_000

    /// The collector's conventional address: this machine only.
    package static let defaultListen = "127.0.0.1:9464"

    /// The port actually bound: the one asked for, or the kernel's choice for port 0.
    package let boundPort: Int
    /// The bound address as `127.0.0.1:9464` or `[::1]:9464`, for the startup log line.
    package let boundAddress: String
    /// False when other machines can reach the server (e.g. `0.0.0.0`); callers log a warning,
    /// since metrics can reveal what the bots are doing.
    package let isLoopback: Bool
    package let limits: HTTPServerLimits

    private let listenFD: Int32
    private let wakeup: LoopWakeup
    private let quick: @Sendable (HTTPRequest) -> HTTPResponse?
    private let worker: Worker<HTTPRequest, HTTPResponse>
    /// The password worker, with a web configuration (its users may come with a reload).
    private let passwords: Worker<AccessRules.Verification, Bool>?
    /// The web configuration (`--web-config-file`): TLS, users, headers; nil for plain HTTP, open to all.
    package let security: WebSecurity?
    private let log: HTTPServerLog
    private let lifecycle = Locked(Lifecycle.ready)

    private enum Lifecycle {
        case ready
        case running(PartThread)
        case stopped
    }

    /// Binds and listens on `listen` (`HOST:PORT`, e.g. `127.0.0.1:9464`, `[::1]:0`,
    /// `localhost:9464`). Connections queue in the kernel until `start()`.
    ///
    /// - Parameters:
    ///   - listen: where to listen; a host name is resolved and its addresses tried in order.
    ///   - limits: the per-client bounds.
    ///   - log: told when descriptors run out and when they are available again, when the web
    ///     configuration is reloaded or refused, and (at most once a minute) about failed TLS
    ///     handshakes and refused passwords.
    ///   - security: the web configuration to serve by: TLS for every connection, basic auth for
    ///     every request but those to its open paths. Nil: plain HTTP, no password.
    ///   - quick: answers the cheap requests on the loop's thread, or returns nil to hand the
    ///     request to `handler`. It must return at once: every other client waits while it runs.
    ///     The default declines everything.
    ///   - handler: answers each `GET` and `HEAD` that `quick` declines, on the render worker,
    ///     one at a time. It may take long; only requests for the worker wait for it.
    /// - Throws: `HTTPServerError` naming the address and the cause.
    package init(
        listen: String, limits: HTTPServerLimits = HTTPServerLimits(),
        log: @escaping HTTPServerLog = { _, _ in }, security: WebSecurity? = nil,
        quick: @escaping @Sendable (HTTPRequest) -> HTTPResponse? = { _ in nil },
        handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse
    ) throws(HTTPServerError) {
        precondition(
            limits.maxHeadBytes >= 64 && limits.maxConnections >= 1 && limits.maxQueuedRequests >= 1,
            "HTTPServerLimits too small")
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
        let wakeup: LoopWakeup
        do {
            local = try Syscall.localAddress(bound.fd)
            wakeup = try LoopWakeup()
        } catch {
            System.close(bound.fd)
            throw .from(error, listen: listen)
        }
        self.listenFD = bound.fd
        self.wakeup = wakeup
        self.boundPort = local.port
        self.boundAddress = local.description
        self.isLoopback = local.isLoopback
        self.limits = limits
        self.log = log
        self.quick = quick
        self.security = security
        worker = Worker(name: "ringside-answer", work: handler, wakeup: wakeup)
        passwords = security.map { security in
            Worker(name: "ringside-passwd", work: { security.verify($0) }, wakeup: wakeup)
        }
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
            System.close(fd)
            throw error
        }
    }

    deinit { stop() }

    /// Starts the server's two threads, the loop and the render worker. Calling it twice, or
    /// after `stop()`, is a programming error.
    ///
    /// - Throws: `HTTPServerError.systemCall("pthread_create", …)` if a thread cannot start.
    package func start() throws(HTTPServerError) {
        try lifecycle.withLock { (state: inout Lifecycle) throws(HTTPServerError) in
            guard case .ready = state else { preconditionFailure("HTTPServer.start() called twice or after stop()") }
            if case .failure(let error) = worker.start(niceIncrement: limits.workerNiceIncrement) {
                throw .from(error, listen: boundAddress)
            }
            if case .failure(let error) = passwords?.start(niceIncrement: limits.workerNiceIncrement) {
                worker.stop()
                throw .from(error, listen: boundAddress)
            }
            let loop = ServerLoop(
                listenFD: listenFD, wakeup: wakeup, limits: limits, log: log, quick: quick, worker: worker, passwords: passwords,
                security: security)
            let thread = PartThread(name: "ringside-http")
            switch thread.start(niceIncrement: limits.threadNiceIncrement, { loop.run() }) {
            case .success:
                state = .running(thread)
            case .failure(let error):
                worker.stop()
                passwords?.stop()
                throw .from(SyscallError(call: "pthread_create", errno: error), listen: boundAddress)
            }
        }
    }

    /// Closes the listening socket and every connection and waits for the threads to exit: one
    /// wake-up of the loop (well under a millisecond when idle: it never blocks), and the end of
    /// the page the render worker renders and the password the password worker hashes, if any,
    /// for `workerWaitNanos` at most: past it they are left to finish alone and their answers dropped.
    /// So a stop takes about `workerWaitNanos` at the most, whatever a worker is doing. Idempotent;
    /// safe from any thread except `quick` and `handler`.
    package func stop() {
        lifecycle.withLock { state in
            switch state {
            case .stopped:
                return
            case .running(let thread):
                wakeup.requestStop()
                thread.stop()
            case .ready:
                break
            }
            let deadline = System.monotonicNanos() + Self.workerWaitNanos
            worker.stop(deadlineNanos: deadline)
            passwords?.stop(deadlineNanos: deadline)
            System.close(listenFD)
            state = .stopped
        }
    }
}

extension Duration {
    /// Whole milliseconds, rounded up so a positive timeout never becomes 0.
    var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
    }
}
