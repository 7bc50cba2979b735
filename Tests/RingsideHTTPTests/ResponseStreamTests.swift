import Foundation
@testable import RingsideHTTP
import RingsideTestSupport
import Synchronization
import Testing

/// Responses written as they are sent (`ResponseStream`): in chunks, a part taken only once the
/// last is sent, whole over plain HTTP and TLS, and at most `ResponseStream.maxOpen` at once.
@Suite("Bodies written as they are sent go in chunks", .serialized)
struct ResponseStreamTests {
    /// Part `n` of the stream: `n` repeated, 1 KiB to 64 KiB long, so each part's place shows.
    static func part(_ number: Int) -> [UInt8] { [UInt8](repeating: UInt8(truncatingIfNeeded: number), count: 1_024 << (number % 7)) }
    static let parts = 40
    static var body: [UInt8] { Array((0..<parts).map(part).joined()) }

    /// `/stream` writes `parts` parts (an empty one between, which sends no chunk); the rest are `testRoutes`.
    static let routes: @Sendable (HTTPRequest) -> HTTPResponse = { request in
        guard request.path == "/stream" else { return testRoutes(request) }
        let next = Atomic<Int>(0)
        guard
            let stream = ResponseStream({
                let number = next.add(1, ordering: .relaxed).oldValue
                guard number < 2 * parts else { return nil }
                return number.isMultiple(of: 2) ? part(number / 2) : []
            })
        else { return HTTPResponse(status: 503, text: "busy\n") }
        return HTTPResponse(contentType: "application/octet-stream", stream: stream)
    }

    @Test(
        "a body of 40 parts reaches curl whole over plain HTTP and TLS; HEAD says chunked and sends none; the next request is answered on the connection"
    )
    func wholeOverPlainAndTLS() throws {
        guard let curlPath = try requiredSystemTool("curl"), let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let output = fixtures.path("got.bin")
        try withServer(handler: Self.routes) { server in
            let plain = try curl(curlPath, "http://127.0.0.1:\(server.boundPort)/stream", ["-o", output])
            #expect(plain.status == 200)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: output))) == Self.body)
            let client = try RawClient(port: server.boundPort)
            try client.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            let got = try client.readResponse()
            #expect(got.status == 200 && got.header("Transfer-Encoding") == "chunked" && got.header("Content-Length") == nil)
            #expect(got.body == Self.body)
            try client.send("HEAD /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try client.readResponse(toHEAD: true)
            #expect(head.status == 200 && head.header("Transfer-Encoding") == "chunked")
            try client.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            let next = try client.readResponse()
            #expect(next.status == 200 && next.text == "ok\n", "the next response follows: the body ended, and HEAD sent none")
        }
        let config = try fixtures.write("web.yml", "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
        let server = try HTTPServer(listen: "127.0.0.1:0", security: try WebSecurity(path: config), handler: Self.routes)
        defer { server.stop() }
        try server.start()
        try? FileManager.default.removeItem(atPath: output)
        let overTLS = try curl(
            curlPath, "https://127.0.0.1:\(server.boundPort)/stream", ["--cacert", fixtures.path("ca.crt"), "-o", output])
        #expect(overTLS.status == 200, "\(overTLS.errors)")
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: output))) == Self.body)
    }

    @Test("a reader with a 16 KiB window that pauses first gets the body whole; a part is written only once the last is sent")
    func slowReader() throws {
        // 200 parts of 64 KiB: more than the socket buffers hold (a few MB at most).
        let written = Atomic<Int>(0), parts = 200
        let handler: @Sendable (HTTPRequest) -> HTTPResponse = { _ in
            let stream = ResponseStream {
                let number = written.add(1, ordering: .relaxed).oldValue
                return number < parts ? [UInt8](repeating: UInt8(truncatingIfNeeded: number), count: 64 << 10) : nil
            }
            return HTTPResponse(contentType: "application/octet-stream", stream: stream!)
        }
        try withServer(handler: handler) { server in
            let slow = try RawClient(port: server.boundPort, timeoutSeconds: 10, receiveBuffer: 16 * 1024)
            try slow.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            usleep(200_000)  // the server meets a full socket and waits for it
            #expect(written.load(ordering: .relaxed) < parts / 2, "parts written ahead of a reader that reads none")
            let got = try slow.readResponse()
            #expect(got.status == 200 && got.body == Array((0..<parts).map { [UInt8](repeating: UInt8($0), count: 64 << 10) }.joined()))
        }
    }

    @Test("to an HTTP/1.0 client the body goes as it is, with no length, and the connection closes after it")
    func http10EndsWithTheConnection() throws {
        let handler: @Sendable (HTTPRequest) -> HTTPResponse = { request in
            let next = Atomic<Int>(0)
            let stream = ResponseStream(minorVersion: request.minorVersion) {
                let number = next.add(1, ordering: .relaxed).oldValue
                return number < Self.parts ? Self.part(number) : nil
            }
            return HTTPResponse(contentType: "application/octet-stream", stream: stream!)
        }
        try withServer(handler: handler) { server in
            for keepAlive in ["", "Connection: keep-alive\r\n"] {
                let client = try RawClient(port: server.boundPort)
                try client.send("GET /stream HTTP/1.0\r\n\(keepAlive)\r\n")
                let got = try client.readResponse()  // no length, not chunked: read to the close
                #expect(got.status == 200 && got.body == Self.body, "\(keepAlive)")
                #expect(got.header("Transfer-Encoding") == nil && got.header("Content-Length") == nil)
                #expect(got.header("Connection") == "close", "asked for keep-alive or not, the close ends the body")
            }
        }
    }

    @Test("at most maxOpen streams at once in the process")
    func openAtMost() {
        var held: [ResponseStream] = []
        // Other tests may hold one meanwhile: the bound is what is checked, not the count reached.
        while held.count <= ResponseStream.maxOpen, let stream = ResponseStream({ nil }) { held.append(stream) }
        #expect(held.count <= ResponseStream.maxOpen, "\(held.count) open at once")
    }
}
