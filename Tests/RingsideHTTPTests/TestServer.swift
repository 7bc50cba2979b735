import Dispatch
import Glibc
import RingsideHTTP
import RingsideTestSupport
import RingsideHTTPClient

/// Larger than any socket buffer pair, so sending it blocks on a client that does not read.
let bigBody = [UInt8](repeating: UInt8(ascii: "a"), count: 16 << 20)

/// The collector's routes in miniature, plus `/echo` to show what the handler received.
let testRoutes: @Sendable (HTTPRequest) -> HTTPResponse = { request in
    switch request.path {
    case "/": HTTPResponse(text: "ringside\n")
    case "/metrics": HTTPResponse(contentType: "text/plain; version=0.0.4; charset=utf-8", text: "ringside_up 1\n")
    case "/latest": HTTPResponse(contentType: "application/json", text: "{\"bots\":[]}")
    case "/health": HTTPResponse(text: "ok\n")
    case "/big": HTTPResponse(body: bigBody)
    case "/echo":
        HTTPResponse(
            text: "\(request.method) \(request.path) \(request.query ?? "-")",
            headers: [HTTPHeader("Cache-Control", "no-store")])
    default: HTTPResponse.notFound(request)
    }
}

/// The cheap routes of `testRoutes`, for a server's `quick`: `/health` and 404s; nil for the rest.
let testQuick: @Sendable (HTTPRequest) -> HTTPResponse? = { request in
    switch request.path {
    case "/health": HTTPResponse(text: "ok\n")
    case "/", "/metrics", "/latest", "/big", "/echo", "/slow": nil
    default: HTTPResponse.notFound(request)
    }
}

/// Runs `body` against a started server on an ephemeral loopback port, and stops the server
/// afterwards whether `body` passes, fails or throws. Without `quick`, every request goes to the
/// render worker.
func withServer<T>(
    limits: HTTPServerLimits = HTTPServerLimits(),
    quick: (@Sendable (HTTPRequest) -> HTTPResponse?)? = nil,
    handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse = testRoutes,
    _ body: (HTTPServer) throws -> T
) throws -> T {
    let server = try HTTPServer(listen: "127.0.0.1:0", limits: limits, quick: quick ?? { _ in nil }, handler: handler)
    defer { server.stop() }
    try server.start()
    return try body(server)
}

/// A costly route that holds the render worker: `/slow` says it has begun (`entered`), then waits
/// for `release` before answering "slow". Everything else is `testRoutes`.
final class SlowRoute: Sendable {
    let entered = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)

    var handler: @Sendable (HTTPRequest) -> HTTPResponse {
        { [self] request in
            guard request.path == "/slow" else { return testRoutes(request) }
            entered.signal()
            release.wait()
            return HTTPResponse(text: "slow\n")
        }
    }

    /// Whether the worker began `/slow` within 5 seconds.
    func began() -> Bool { entered.wait(timeout: .now() + 5) == .success }
}
