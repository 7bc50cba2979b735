import RingsideSystem
import Foundation
import Glibc
@testable import RingsideHTTP
import RingsideTestSupport
import Synchronization
import Testing

/// The server with a web configuration, over real loopback sockets, with curl as the client:
/// each test makes its own certificates (openssl), hashes (htpasswd) and server.
@Suite("HTTPServer with a web configuration: TLS, basic auth, reloads")
struct TLSServerTests {
    /// Runs `body` with a started server configured by the web configuration file `config`
    /// (written in the fixtures' directory), its open paths `/health` and `/-/healthy`.
    func withSecureServer<T>(
        _ fixtures: TLSFixtures, config: String, limits: HTTPServerLimits = HTTPServerLimits(), log: @escaping HTTPServerLog = { _, _ in },
        _ body: (HTTPServer, WebSecurity) throws -> T
    ) throws -> T {
        let path = try fixtures.write("web.yml", config)
        let security = try WebSecurity(path: path, openPaths: ["/health", "/-/healthy"])
        let server = try HTTPServer(listen: "127.0.0.1:0", limits: limits, log: log, security: security, handler: testRoutes)
        defer { server.stop() }
        try server.start()
        return try body(server, security)
    }

    @Test("a password verified once is remembered: 20 scrapes cost one bcrypt; each wrong password costs one and gets 401")
    func verifiedPasswordsAreRemembered() throws {
        guard let curlPath = try requiredSystemTool("curl"), let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let config = "basic_auth_users:\n  prometheus: \(try fixtures.bcrypt("scrape-me", cost: 6))\n"
        try withSecureServer(fixtures, config: config) { server, security in
            let url = "http://127.0.0.1:\(server.boundPort)/metrics"
            for _ in 0..<20 {
                #expect(try curl(curlPath, url, ["-u", "prometheus:scrape-me"]).status == 200)
            }
            #expect(security.counters.passwordChecks == 1)
            for attempt in ["prometheus:scrape-mE", "nobody:scrape-me", "prometheus:"] {
                let refused = try curl(curlPath, url, ["-u", attempt])
                #expect(refused.status == 401 && refused.headers.contains("WWW-Authenticate: Basic"), "\(attempt)")
            }
            let missing = try curl(curlPath, url)
            #expect(missing.status == 401)
            let counters = security.counters
            #expect(counters.passwordChecks == 4 && counters.authWrong == 3 && counters.authMissing == 1)
            // The open paths need none; a verified password still works after the refusals.
            #expect(try curl(curlPath, "http://127.0.0.1:\(server.boundPort)/health").status == 200)
            #expect(try curl(curlPath, url, ["-u", "prometheus:scrape-me"]).status == 200)
            #expect(security.counters.passwordChecks == 4)
        }
    }

    @Test("a client that opens a connection and sends nothing is closed at the head timeout and counted; others are served meanwhile")
    func silentHandshakeTimesOut() throws {
        guard let curlPath = try requiredSystemTool("curl"), let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        var limits = HTTPServerLimits()
        limits.headTimeout = .milliseconds(500)
        let config = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        try withSecureServer(fixtures, config: config, limits: limits) { server, security in
            let silent = try RawClient(port: server.boundPort, timeoutSeconds: 10)
            let served = try curl(curlPath, "https://127.0.0.1:\(server.boundPort)/health", ["--cacert", fixtures.path("ca.crt")])
            #expect(served.status == 200 && served.body == "ok\n")
            // The server closes it: the read sees the end of the stream, with nothing sent.
            #expect(silent.readUntilServerCloses() == 0)
            #expect(eventually(seconds: 10) { security.counters.tlsHandshakeFailures == 1 })
        }
    }

    @Test("plain HTTP to the TLS port gets a plain 400 that says to use https, and is counted as a failed handshake")
    func plainHTTPToTLSPort() throws {
        guard let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let config = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        try withSecureServer(fixtures, config: config) { server, security in
            let client = try RawClient(port: server.boundPort)
            try client.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 400 && response.text.contains("use https://"))
            #expect(response.header("Connection") == "close")
            #expect(security.counters.tlsHandshakeFailures == 1)
        }
    }

    @Test("a changed file is served from the next request: a new user gets in, headers appear; a broken one keeps the old, logged once")
    func reloadsAndKeepsTheRunningConfigOnError() throws {
        guard let curlPath = try requiredSystemTool("curl"), let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let lines = CapturedLines()
        let first = "basic_auth_users:\n  alice: \(try fixtures.bcrypt("a-pass", cost: 5))\n"
        try withSecureServer(fixtures, config: first, log: lines.log) { server, security in
            let url = "http://127.0.0.1:\(server.boundPort)/metrics"
            #expect(try curl(curlPath, url, ["-u", "bob:b-pass"]).status == 401)
            let second =
                first + "  bob: \(try fixtures.bcrypt("b-pass", cost: 5))\nhttp_server_config:\n  headers:\n    X-Frame-Options: deny\n"
            try fixtures.write("web.yml", second)
            let reloaded = eventually(seconds: 10) { (try? curl(curlPath, url, ["-u", "bob:b-pass"]))?.status == 200 }
            #expect(reloaded)
            #expect(try curl(curlPath, url, ["-u", "bob:b-pass"]).headers.contains("X-Frame-Options: deny"))
            #expect(security.counters.reloads == 1)

            try fixtures.write("web.yml", second + "  bogus: 1\n")
            // The file is looked at when a request comes (once a second at most).
            let refused = eventually(seconds: 10) {
                _ = try? curl(curlPath, url, ["-u", "bob:b-pass"])
                return security.counters.reloadFailures == 1
            }
            #expect(refused)
            #expect(!security.counters.lastReloadSucceeded)
            // Still the second version: bob gets in, the header stays.
            let kept = try curl(curlPath, url, ["-u", "bob:b-pass"])
            #expect(kept.status == 200 && kept.headers.contains("X-Frame-Options: deny"))
            let refusals = lines.all.filter { $0.contains("keeping the running configuration") }
            #expect(refusals.count == 1 && refusals[0].contains("line 7: unknown key \"bogus\" in http_server_config"), "\(lines.all)")
            // Asked again and again, the unchanged broken file is not read again nor logged again.
            for _ in 0..<3 { _ = try curl(curlPath, url, ["-u", "bob:b-pass"]) }
            #expect(security.counters.reloadFailures == 1)
        }
    }
}

/// Log lines the server wrote, for the test to read.
final class CapturedLines: Sendable {
    private let lines = Locked<[String]>([])
    var log: HTTPServerLog { { [self] message, _ in lines.withLock { $0.append(message) } } }
    var all: [String] { lines.withLock { $0 } }
}
