import Glibc
import RingsideHTTP
import RingsideTestSupport

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
    case "/echo": HTTPResponse(text: "\(request.method) \(request.path) \(request.query ?? "-")",
                               headers: [HTTPHeader("Cache-Control", "no-store")])
    default: HTTPResponse.notFound(request)
    }
}

/// Runs `body` against a started server on an ephemeral loopback port, and stops the server
/// afterwards whether `body` passes, fails or throws.
func withServer<T>(limits: HTTPServerLimits = HTTPServerLimits(),
                   _ body: (HTTPServer) throws -> T) throws -> T {
    let server = try HTTPServer(listen: "127.0.0.1:0", limits: limits, handler: testRoutes)
    defer { server.stop() }
    try server.start()
    return try body(server)
}
