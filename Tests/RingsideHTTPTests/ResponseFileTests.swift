import Foundation
import Glibc
@testable import RingsideHTTP
import RingsideTestSupport
import Testing

/// Responses sent from a file (`ResponseFile`): whole, over plain HTTP (sendfile) and TLS (a
/// record at a time), to slow readers too; a file cut short closes its connection only.
@Suite("Files are sent from the file, not copied into memory")
struct ResponseFileTests {
    /// A file of `bytes` pseudo-random bytes in `directory`; its path and contents.
    func makeFile(_ directory: TemporaryDirectory, bytes: Int) throws -> (path: String, contents: Data) {
        var generator = SystemRandomNumberGenerator()
        var contents = Data(count: bytes)
        contents.withUnsafeMutableBytes { buffer in
            for index in stride(from: 0, to: bytes, by: 8) {
                let word = generator.next() as UInt64
                withUnsafeBytes(of: word) { buffer[index..<min(bytes, index + 8)].copyBytes(from: $0.prefix(bytes - index)) }
            }
        }
        let path = directory.path + "/download.bin"
        try contents.write(to: URL(fileURLWithPath: path))
        return (path, contents)
    }

    /// Routes: `/file` serves `path` from the file; `/short` announces 1 MiB more than it holds;
    /// the rest are `testRoutes`.
    func fileRoutes(_ path: String) -> @Sendable (HTTPRequest) -> HTTPResponse {
        { request in
            guard request.path == "/file" || request.path == "/short" else { return testRoutes(request) }
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            var info = stat()
            guard fd >= 0, fstat(fd, &info) == 0 else { return HTTPResponse(status: 500, text: "open: errno \(errno)\n") }
            let extra = request.path == "/short" ? 1 << 20 : 0
            guard let file = ResponseFile(descriptor: fd, length: Int(info.st_size) + extra) else {
                close(fd)
                return HTTPResponse(status: 503, text: "busy\n")
            }
            return HTTPResponse(contentType: "application/octet-stream", file: file)
        }
    }

    @Test("a 6 MiB file reaches curl whole over plain HTTP and over TLS; HEAD says its length and sends none of it")
    func wholeOverPlainAndTLS() throws {
        guard let curlPath = try requiredSystemTool("curl"), let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let (path, contents) = try makeFile(fixtures.directory, bytes: 6 << 20 | 12345)
        let output = fixtures.path("got.bin")
        try withServer(handler: fileRoutes(path)) { server in
            let plain = try curl(curlPath, "http://127.0.0.1:\(server.boundPort)/file", ["-o", output])
            #expect(plain.status == 200)
            #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == contents)
            let client = try RawClient(port: server.boundPort)
            try client.send("HEAD /file HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try client.readResponse(toHEAD: true)
            #expect(head.status == 200 && head.header("Content-Length") == String(contents.count))
            try client.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            let next = try client.readResponse()
            #expect(next.status == 200 && next.text == "ok\n", "the next response follows at once: no body was sent")
        }
        let config = try fixtures.write("web.yml", "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
        let server = try HTTPServer(listen: "127.0.0.1:0", security: try WebSecurity(path: config), handler: fileRoutes(path))
        defer { server.stop() }
        try server.start()
        try? FileManager.default.removeItem(atPath: output)
        let overTLS = try curl(
            curlPath, "https://127.0.0.1:\(server.boundPort)/file", ["--cacert", fixtures.path("ca.crt"), "-o", output])
        #expect(overTLS.status == 200, "\(overTLS.errors)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == contents)
    }

    @Test("a reader with a 16 KiB window that pauses first gets the file whole; a file shorter than announced closes that connection only")
    func slowReaderAndShortFile() throws {
        let directory = try TemporaryDirectory("ringside-file")
        defer { directory.remove() }
        let (path, contents) = try makeFile(directory, bytes: 3 << 20)
        try withServer(handler: fileRoutes(path)) { server in
            let slow = try RawClient(port: server.boundPort, timeoutSeconds: 10, receiveBuffer: 16 * 1024)
            try slow.send("GET /file HTTP/1.1\r\nHost: x\r\n\r\n")
            usleep(200_000)  // the server meets a full socket and waits for it
            let response = try slow.readResponse()
            #expect(response.status == 200 && Data(response.body) == contents)

            let short = try RawClient(port: server.boundPort, timeoutSeconds: 10)
            try short.send("GET /short HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(short.readStatus() == 200)
            let received = short.readUntilServerCloses()
            #expect(received != nil && received! < contents.count + (1 << 20), "closed before the length announced: \(received ?? -1)")
            #expect(try httpGetWithHeaders(port: server.boundPort, path: "/file").body.count == contents.count, "others are served")
        }
    }

    @Test("at most ResponseFile.maxOpen (16) files are open for responses; a file's slot is free again once its response is gone")
    func boundedFiles() throws {
        let directory = try TemporaryDirectory("ringside-file")
        defer { directory.remove() }
        let (path, _) = try makeFile(directory, bytes: 16)
        var held: [ResponseFile] = []
        var refused = false
        for _ in 0..<ResponseFile.maxOpen + 1 {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard let file = ResponseFile(descriptor: fd, length: 16) else {
                close(fd)
                refused = true
                break
            }
            held.append(file)
        }
        #expect(refused && held.count <= ResponseFile.maxOpen)
        held.removeAll()
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        let again = ResponseFile(descriptor: fd, length: 16)
        #expect(again != nil)
        if again == nil { close(fd) }
    }
}
