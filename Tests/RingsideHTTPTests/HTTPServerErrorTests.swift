import RingsideHTTP
import RingsideTestSupport
import Testing

/// Listen strings and bind failures: the errors an operator sees at startup.
@Suite("HTTPServerError")
struct HTTPServerErrorTests {
    private func error(listen: String) -> HTTPServerError? {
        do {
            let server = try HTTPServer(listen: listen, handler: testRoutes)
            server.stop()
            return nil
        } catch {
            return error
        }
    }

    @Test(
        "Malformed listen strings name the problem",
        arguments: [
            ("foo", "expected HOST:PORT"),
            ("127.0.0.1:99999", "port must be a number from 0 to 65535"),
            ("127.0.0.1:", "port must be a number"),
            ("127.0.0.1:+1", "port must be a number"),
            (":9464", "missing host"),
            ("::1:9464", "put an IPv6 address in brackets"),
            ("[::1:9464", "missing ]"),
            ("[::1]9464", "expected HOST:PORT"),
        ])
    func invalidAddress(listen: String, fragment: String) {
        guard case .invalidAddress(let echoed, _)? = error(listen: listen) else {
            Issue.record("expected invalidAddress for \(listen)")
            return
        }
        #expect(echoed == listen)
        #expect(error(listen: listen)!.description.hasPrefix("listen \"\(listen)\": "))
        #expect(error(listen: listen)!.description.contains(fragment))
    }

    @Test("A taken port is reported as address in use, with strerror and errno")
    func addressInUse() throws {
        let first = try HTTPServer(listen: "127.0.0.1:0", handler: testRoutes)
        defer { first.stop() }
        let listen = "127.0.0.1:\(first.boundPort)"
        let failure = error(listen: listen)
        #expect(failure == .addressInUse(listen: listen, errno: 98))
        #expect(
            failure?.description
                == "listen \(listen): the port is taken by another process (stop it or pick another port): Address already in use (errno: 98)"
        )
    }

    @Test("An address no interface has is reported as not available")
    func addressNotAvailable() {
        // 192.0.2.0/24 is TEST-NET-1, reserved for documentation: never a local address.
        guard case .addressNotAvailable(let listen, _)? = error(listen: "192.0.2.1:0") else {
            Issue.record("expected addressNotAvailable")
            return
        }
        #expect(listen == "192.0.2.1:0")
    }

    @Test("Loopback binds say so and report the port the kernel chose", arguments: ["127.0.0.1:0", "localhost:0", "127.1.2.3:0"])
    func loopback(listen: String) throws {
        let server = try HTTPServer(listen: listen, handler: testRoutes)
        defer { server.stop() }
        #expect(server.isLoopback)
        #expect(server.boundPort > 0)
        #expect(server.boundAddress.hasSuffix(":\(server.boundPort)"))
    }

    @Test("IPv6 loopback binds in brackets, where the host has IPv6")
    func ipv6Loopback() throws {
        do {
            let server = try HTTPServer(listen: "[::1]:0", handler: testRoutes)
            defer { server.stop() }
            #expect(server.isLoopback)
            #expect(server.boundAddress == "[::1]:\(server.boundPort)")
        } catch .addressNotAvailable {
            // IPv6 disabled in this container: nothing to check.
        }
    }

    @Test("The wildcard address is not loopback, so the caller can warn")
    func wildcardIsNotLoopback() throws {
        let server = try HTTPServer(listen: "0.0.0.0:0", handler: testRoutes)
        defer { server.stop() }
        #expect(!server.isLoopback)
    }
}
