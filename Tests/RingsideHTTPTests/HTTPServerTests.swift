import Glibc
import RingsideHTTP
import RingsideTestSupport
import Testing

/// End-to-end behaviour over real loopback sockets. Each test runs its own server on an
/// ephemeral port, so the tests run in parallel with each other and with other suites.
@Suite("HTTPServer")
struct HTTPServerTests {
    static let routes: [(path: String, contentType: String, body: String)] = [
        ("/", "text/plain; charset=utf-8", "ringside\n"),
        ("/metrics", "text/plain; version=0.0.4; charset=utf-8", "ringside_up 1\n"),
        ("/latest", "application/json", "{\"bots\":[]}"),
        ("/health", "text/plain; charset=utf-8", "ok\n"),
    ]

    @Test("GET serves each route with its content type and length", arguments: routes)
    func getRoutes(route: (path: String, contentType: String, body: String)) throws {
        try withServer { server in
            let client = try RawClient(port: server.boundPort)
            try client.send("GET \(route.path) HTTP/1.1\r\nHost: localhost\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.header("Content-Type") == route.contentType)
            #expect(response.header("Content-Length") == String(route.body.utf8.count))
            #expect(response.text == route.body)
            #expect(response.header("Connection") == nil)
        }
    }

    @Test("An unknown path gets the handler's 404")
    func unknownPath() throws {
        try withServer { server in
            let client = try RawClient(port: server.boundPort)
            try client.send("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 404)
            #expect(response.text == "not found: /nope\n")
        }
    }

    @Test("The handler routes on the path and still sees the query string and extra headers go out")
    func queryStringIsSeparated() throws {
        try withServer { server in
            let client = try RawClient(port: server.boundPort)
            try client.send("GET /echo?bot=a&x=1 HTTP/1.1\r\nHost: x\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.text == "GET /echo bot=a&x=1")
            #expect(response.header("Cache-Control") == "no-store")
        }
    }

    @Test("Keep-alive serves two requests on one connection")
    func keepAlive() throws {
        try withServer { server in
            let client = try RawClient(port: server.boundPort)
            for path in ["/health", "/metrics"] {
                try client.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try client.readResponse().status == 200)
            }
        }
    }

    @Test("Pipelined requests are answered in order")
    func pipelined() throws {
        try withServer { server in
            let client = try RawClient(port: server.boundPort)
            try client.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /latest HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().text == "ok\n")
            #expect(try client.readResponse().text == "{\"bots\":[]}")
        }
    }

    @Test("HEAD has GET's headers and no body")
    func headHasNoBody() throws {
        try withServer { server in
            let client = try RawClient(port: server.boundPort)
            try client.send("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try client.readResponse(toHEAD: true)
            #expect(head.status == 200)
            #expect(head.header("Content-Length") == "14")
            // If a body had been sent, it would be read here as the next response's status line.
            try client.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().text == "ok\n")
        }
    }

    @Test("A body in parts goes out as one, in order, its length their sum; HEAD gets that length and no body")
    func bodyInParts() throws {
        // Larger than one turn's write slice, empty, and small: each part sent from where it lies.
        let large = [UInt8]((0..<300_000).map { UInt8(ascii: "a") + UInt8($0 % 26) })
        let parts: [[UInt8]] = [Array("head-".utf8), [], large, Array("-tail\n".utf8)]
        try withServer(handler: { _ in HTTPResponse(bodyParts: parts) }) { server in
            let client = try RawClient(port: server.boundPort)
            try client.send("GET /parts HTTP/1.1\r\nHost: x\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.header("Content-Length") == String(parts.joined().count))
            #expect(response.body == Array(parts.joined()))
            try client.send("HEAD /parts HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse(toHEAD: true).header("Content-Length") == String(parts.joined().count))
        }
        #expect(HTTPResponse(bodyParts: parts) == HTTPResponse(body: Array(parts.joined())), "equal when the same bytes go out")
    }

    @Test("Connection: close is honored")
    func connectionClose() throws {
        try withServer { server in
            let client = try RawClient(port: server.boundPort)
            try client.send("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.header("Connection") == "close")
            #expect(client.isClosedByServer())
        }
    }

    @Test("HTTP/1.0 closes by default and stays open when it asks for keep-alive")
    func http10() throws {
        try withServer { server in
            let plain = try RawClient(port: server.boundPort)
            try plain.send("GET /health HTTP/1.0\r\n\r\n")
            #expect(try plain.readResponse().header("Connection") == "close")
            #expect(plain.isClosedByServer())

            let keeping = try RawClient(port: server.boundPort)
            try keeping.send("GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            #expect(try keeping.readResponse().header("Connection") == "keep-alive")
            try keeping.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            #expect(try keeping.readResponse().text == "ringside\n")
        }
    }

    @Test(
        "A malformed request line gets 400 and a close",
        arguments: [
            "GET /\r\n\r\n",
            "GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET / HTTP/1.1 extra\r\nHost: x\r\n\r\n",
            "GET / FTP/1.0\r\n\r\n",
            "GET metrics HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET / HTTP/1.1\nHost: x\n\n",
            "GET / HTTP/1.1\r\nBad Header: x\r\n\r\n",
            "GET / HTTP/1.1\r\n\r\n",
        ])
    func malformed(request: String) throws {
        try withServer { server in
            let client = try RawClient(port: server.boundPort)
            try client.send(request)
            let response = try client.readResponse()
            #expect(response.status == 400)
            #expect(response.header("Connection") == "close")
            #expect(client.isClosedByServer())
        }
    }

    @Test("Binary garbage gets 400 and a close without waiting for the timeout")
    func binaryGarbage() throws {
        try withServer { server in
            let client = try RawClient(port: server.boundPort)
            try client.send([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03, 0xFF, 0x00])
            #expect(try client.readResponse().status == 400)
            #expect(client.isClosedByServer())
        }
    }

    @Test("A head over 8 KiB gets 431 and a close")
    func hugeHeader() throws {
        try withServer { server in
            let client = try RawClient(port: server.boundPort)
            let big = String(repeating: "a", count: 10_000)
            try client.send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: \(big)\r\n\r\n")
            #expect(try client.readResponse().status == 431)
            #expect(client.isClosedByServer())
        }
    }

    @Test(
        "Unknown and unsupported methods get 501 or 405 with Allow",
        arguments: [
            ("BREW", 501), ("POST", 405), ("DELETE", 405),
        ])
    func methods(method: String, status: Int) throws {
        try withServer { server in
            let client = try RawClient(port: server.boundPort)
            try client.send("\(method) / HTTP/1.1\r\nHost: x\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == status)
            #expect(response.header("Allow") == "GET, HEAD")
            #expect(client.isClosedByServer())
        }
    }

    @Test(
        "Request bodies are refused with 413",
        arguments: [
            "Content-Length: 5\r\n\r\nhello", "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        ])
    func bodiesRefused(framing: String) throws {
        try withServer { server in
            let client = try RawClient(port: server.boundPort)
            try client.send("GET / HTTP/1.1\r\nHost: x\r\n" + framing)
            #expect(try client.readResponse().status == 413)
            #expect(client.isClosedByServer())
        }
    }

    @Test("A client sending one byte at a time does not delay another client")
    func slowClientDoesNotStallOthers() throws {
        try withServer { server in
            let slow = try RawClient(port: server.boundPort)
            let fast = try RawClient(port: server.boundPort)
            let request = Array("GET /health HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            for byte in request {
                try slow.send([byte])
                let started = monotonicSeconds()
                try fast.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try fast.readResponse().status == 200)
                #expect(monotonicSeconds() - started < 2)
                usleep(10_000)
            }
            #expect(try slow.readResponse().text == "ok\n")
        }
    }

    @Test("A 16 MiB body arrives whole after its head, and the connection then answers the next request")
    func largeBodyWhole() throws {
        try withServer { server in
            let client = try RawClient(port: server.boundPort, timeoutSeconds: 10)
            try client.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            let big = try client.readResponse()
            #expect(big.status == 200 && big.header("Content-Length") == String(bigBody.count))
            #expect(big.body == bigBody)
            try client.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().status == 200)
        }
    }

    @Test("A client that does not read a large response delays no one and is dropped after the write timeout")
    func stalledReader() throws {
        var limits = HTTPServerLimits()
        limits.writeTimeout = .milliseconds(300)
        try withServer(limits: limits) { server in
            let stalled = try RawClient(port: server.boundPort, receiveBuffer: 4096)
            try stalled.send("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            usleep(50_000)  // the server fills both socket buffers and waits for POLLOUT
            let other = try RawClient(port: server.boundPort)
            let started = monotonicSeconds()
            try other.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try other.readResponse().status == 200)
            #expect(monotonicSeconds() - started < 2)
            usleep(400_000)  // past the write timeout
            let received = stalled.readUntilServerCloses()
            #expect(received != nil, "the server should have closed the stalled connection")
            #expect((received ?? .max) < bigBody.count)
        }
    }

    @Test("200 idle connections do not block a new request")
    func manyIdleConnections() throws {
        try withServer { server in
            var idle: [RawClient] = []
            for i in 0..<200 {
                let client = try RawClient(port: server.boundPort)
                if i.isMultiple(of: 2) { try client.send("GET /met") }  // half send a partial head
                idle.append(client)
            }
            let started = monotonicSeconds()
            let client = try RawClient(port: server.boundPort)
            try client.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().status == 200)
            #expect(monotonicSeconds() - started < 2)
            withExtendedLifetime(idle) {}
        }
    }

    @Test("At the limit a newcomer takes the slot of the connection idle longest; only when all are mid-request is it refused with 503")
    func connectionLimit() throws {
        var limits = HTTPServerLimits()
        limits.maxConnections = 3
        try withServer(limits: limits) { server in
            var open: [RawClient] = []
            for _ in 0..<3 {
                let client = try RawClient(port: server.boundPort)
                try client.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try client.readResponse().status == 200)  // now surely accepted, and idle
                open.append(client)
            }
            let newcomer = try RawClient(port: server.boundPort)
            try newcomer.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try newcomer.readResponse().status == 200)
            #expect(open[0].isClosedByServer(), "the connection idle longest gave up its slot")
            try open[2].send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try open[2].readResponse().status == 200)

            // Every slot mid-request (a head begun): nothing to evict, so the next one is refused.
            var busy: [RawClient] = []
            for client in [open[1], open[2], newcomer] {
                try client.send("GET /health HTTP/1.1\r\nHo")
                busy.append(client)
            }
            usleep(50_000)  // the server reads the partial heads
            let extra = try RawClient(port: server.boundPort)
            #expect(try extra.readResponse().status == 503)
            #expect(extra.isClosedByServer())
            withExtendedLifetime(busy) {}
        }
    }

    @Test("Under a request budget every client is still answered, each in turn, and a stop ends a wait for the next window")
    func requestBudget() throws {
        var limits = HTTPServerLimits()
        limits.maxRequestsPerSecond = 100  // 10 a tenth of a second
        try withServer(limits: limits) { server in
            let clients = try (0..<4).map { _ in try RawClient(port: server.boundPort) }
            for round in 0..<8 {
                for client in clients { try client.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n") }
                for (number, client) in clients.enumerated() {
                    #expect(try client.readResponse().status == 200, "round \(round), client \(number)")
                }
            }
        }
    }

    @Test("2,000 idle connections held past the 1,024 bound cannot lock out a scraper")
    func idleFloodCannotLockOut() throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        guard limit.rlim_cur >= 2_600 || limit.rlim_max >= 2_600 else {
            Issue.record("this process may open \(limit.rlim_max) files; the test needs 2,600")
            return
        }
        if limit.rlim_cur < 2_600 {
            limit.rlim_cur = min(limit.rlim_max, 4_096)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        try withServer { server in
            var idle: [RawClient] = []
            for _ in 0..<2_000 { idle.append(try RawClient(port: server.boundPort)) }
            usleep(100_000)  // accepted (and the oldest evicted) by now
            for attempt in 0..<3 {
                // Locked out is no answer at all; a slow answer (the server works through the
                // 2,000 first, on a loaded machine) is not.
                let scraper = try RawClient(port: server.boundPort, timeoutSeconds: 30)
                try scraper.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                let response = try scraper.readResponse()
                #expect(response.status == 200, "scrape \(attempt): \(response.status)")
                #expect(response.text == "ringside_up 1\n")
            }
            // The oldest gave up their slots (checked on a few: an open one takes the 3 s socket timeout to tell).
            #expect(idle.prefix(10).allSatisfy { $0.isClosedByServer() }, "the oldest idle connections were evicted")
            withExtendedLifetime(idle) {}
        }
    }

    // MARK: - Quick routes and the render worker

    @Test(
        "While the worker is held by a costly request, quick routes are answered on other connections; the costly response then comes first on its connection, before the request pipelined behind it"
    )
    func quickRoutesAnswerWhileWorkerIsHeld() throws {
        let slow = SlowRoute()
        try withServer(quick: testQuick, handler: slow.handler) { server in
            defer { slow.release.signal() }  // never leave the worker held, or stop() would wait for it
            let held = try RawClient(port: server.boundPort)
            // A costly request, and a quick one pipelined behind it on the same connection.
            try held.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            try #require(slow.began(), "the worker began /slow")

            // The worker is blocked: the loop still answers quick routes, each on a new connection.
            for path in ["/health", "/nope", "/health"] {
                let other = try RawClient(port: server.boundPort)
                try other.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try other.readResponse().status == (path == "/health" ? 200 : 404))
            }
            // A costly request on another connection waits its turn behind /slow.
            let queued = try RawClient(port: server.boundPort)
            try queued.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")

            slow.release.signal()
            #expect(try held.readResponse().text == "slow\n", "the costly response first")
            #expect(try held.readResponse().text == "ok\n", "then the request pipelined behind it")
            #expect(try queued.readResponse().text == "ringside_up 1\n")
            // The connection goes on as usual.
            try held.send("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try held.readResponse(toHEAD: true).header("Content-Length") == "14")
        }
    }

    @Test("Past the worker's queue bound a costly request gets 503 with Retry-After at once, on a connection that stays open")
    func workerQueueBound() throws {
        var limits = HTTPServerLimits()
        limits.maxQueuedRequests = 2
        let slow = SlowRoute()
        try withServer(limits: limits, quick: testQuick, handler: slow.handler) { server in
            defer { slow.release.signal() }
            let held = try RawClient(port: server.boundPort)
            try held.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            try #require(slow.began())
            let second = try RawClient(port: server.boundPort)
            try second.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            // A barrier: the loop reads every readable connection before it polls again, so once a
            // quick answer sent after the second request arrives, that request is at the worker.
            let barrier = try RawClient(port: server.boundPort)
            try barrier.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try barrier.readResponse().status == 200)

            let third = try RawClient(port: server.boundPort)
            try third.send("GET /latest HTTP/1.1\r\nHost: x\r\n\r\n")
            let busy = try third.readResponse()
            #expect(busy.status == 503)
            #expect(busy.header("Retry-After") == "1")
            #expect(busy.header("Connection") == nil, "kept open, for the retry")

            slow.release.signal()
            #expect(try held.readResponse().text == "slow\n")
            #expect(try second.readResponse().text == "ringside_up 1\n")
            try third.send("GET /latest HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try third.readResponse().text == "{\"bots\":[]}", "the retry is served")
        }
    }

    @Test("A client that leaves while its request is at the worker costs nothing: its answer is dropped and the next are served")
    func clientLeavesWhileRendering() throws {
        let slow = SlowRoute()
        try withServer(quick: testQuick, handler: slow.handler) { server in
            defer { slow.release.signal() }
            do {
                let leaving = try RawClient(port: server.boundPort)
                try leaving.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
                try #require(slow.began())
            }  // closed here
            slow.release.signal()
            for _ in 0..<3 {
                let next = try RawClient(port: server.boundPort)
                try next.send("GET /latest HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try next.readResponse().status == 200)
            }
        }
    }

    @Test("A head not completed within the timeout gets 408 and a close; an idle one is closed")
    func headTimeout() throws {
        var limits = HTTPServerLimits()
        limits.headTimeout = .milliseconds(200)
        try withServer(limits: limits) { server in
            let partial = try RawClient(port: server.boundPort)
            let idle = try RawClient(port: server.boundPort)
            try partial.send("GET /health HTTP/1.1\r\nHo")
            #expect(try partial.readResponse().status == 408)
            #expect(partial.isClosedByServer())
            #expect(idle.isClosedByServer())
        }
    }

    @Test("stop() returns promptly, closes open connections and the port")
    func stopClosesEverything() throws {
        let server = try HTTPServer(listen: "127.0.0.1:0", handler: testRoutes)
        defer { server.stop() }
        try server.start()
        let client = try RawClient(port: server.boundPort)
        try client.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().status == 200)

        let started = monotonicSeconds()
        server.stop()
        #expect(monotonicSeconds() - started < 1)
        #expect(client.isClosedByServer())
        #expect(throws: TestSupportError.self) { try RawClient(port: server.boundPort) }
        server.stop()  // idempotent
    }

    @Test("A server that was never started can be stopped")
    func stopWithoutStart() throws {
        let server = try HTTPServer(listen: "127.0.0.1:0", handler: testRoutes)
        server.stop()
        #expect(throws: TestSupportError.self) { try RawClient(port: server.boundPort) }
    }
}
