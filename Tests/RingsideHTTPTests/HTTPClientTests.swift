@testable import RingsideHTTP
import Testing
@testable import RingsideHTTPClient

/// The client's URLs and how it reads responses, byte by byte as a slow peer sends them (the
/// exchange over real sockets: `HTTPClientHostilePeerTests`, and the OTLP exporter's tests,
/// tools/python/tests/test_otlp.py).
@Suite("HTTPClient")
struct HTTPClientTests {
    @Test(
        "http:// URLs give host, port and path; the path is empty when there is none",
        arguments: [
            ("http://127.0.0.1:4318", "127.0.0.1", 4318, "", "127.0.0.1:4318"),
            ("http://collector/v1/metrics", "collector", 80, "/v1/metrics", "collector"),
            ("HTTP://[::1]:4318/otlp/v1/metrics?tenant=7", "::1", 4318, "/otlp/v1/metrics?tenant=7", "[::1]:4318"),
            ("http://example.com?x=1", "example.com", 80, "/?x=1", "example.com"),
            ("http://h:80/", "h", 80, "/", "h"),
        ])
    func urls(text: String, host: String, port: Int, path: String, authority: String) throws {
        let url = try HTTPURL(parsing: text)
        #expect(url.host == host && url.port == port && url.path == path && url.authority == authority)
    }

    @Test(
        "a URL that cannot be sent to says why",
        arguments: [
            ("https://collector:4318", "https is not supported"),
            ("ftp://x", "the scheme must be http"),
            ("collector:4318", "expected http://HOST[:PORT][/PATH]"),
            ("http://:4318", "missing host"),
            ("http://h:0", "the port must be a number from 1 to 65535"),
            ("http://h:70000/", "the port must be a number"),
            ("http://::1:4318", "put an IPv6 address in brackets"),
            ("http://user:secret@h/", "user names and passwords are not taken"),
            ("http://h/a b", "spaces, control characters"),
            ("http://h/#top", "a fragment"),
        ])
    func badURLs(text: String, reason: String) {
        #expect {
            try HTTPURL(parsing: text)
        } throws: { error in
            "\(error)".contains(reason)
        }
    }

    @Test("a request's head has the path, Host, the caller's headers, Content-Length and Connection: close")
    func requestHead() throws {
        let request = HTTPClientRequest(
            method: "POST", url: try HTTPURL(parsing: "http://[::1]:4318"), headers: [HTTPHeader("X-Key", "a=b")], body: [1, 2, 3])
        #expect(
            String(decoding: request.head(), as: UTF8.self)
                == "POST / HTTP/1.1\r\nHost: [::1]:4318\r\nX-Key: a=b\r\nContent-Length: 3\r\nConnection: close\r\n\r\n")
        #expect(HTTPClientRequest.validate(header: "Authorization", value: "Bearer x y") == nil)
        #expect(HTTPClientRequest.validate(header: "X Key", value: "v")?.contains("not a header name") == true)
        #expect(HTTPClientRequest.validate(header: "content-length", value: "1")?.contains("written by the client") == true)
        #expect(HTTPClientRequest.validate(header: "X-Key", value: "a\r\nHost: evil")?.contains("control character") == true)
    }

    /// `text`'s response, fed one byte at a time; then the end of the connection if it is not complete.
    private func parse(_ text: String, maxBodyBytes: Int = 1 << 10) throws(HTTPClientError) -> HTTPClientResponse {
        var parser = HTTPResponseParser(maxBodyBytes: maxBodyBytes)
        for byte in Array(text.utf8) {
            if let response = try parser.take([byte][...]) { return response }
        }
        return try parser.finish()
    }

    @Test("bodies framed by Content-Length, chunked (extensions, trailers), or the connection's end")
    func framing() throws {
        let sized = try parse("HTTP/1.1 503 Service Unavailable\r\nRetry-After:  7 \r\nContent-Length: 5\r\n\r\nbusy!tail")
        #expect(sized.status == 503 && sized.reason == "Service Unavailable" && sized.header("retry-after") == "7")
        #expect(sized.body == Array("busy!".utf8))
        let chunked = try parse(
            "HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n4;x=1\r\nbad \r\nB\r\nname\nsecond\r\n0\r\nX-Trailer: 1\r\n\r\nnext"
        )
        #expect(chunked.body == Array("bad name\nsecond".utf8) && chunked.firstLineOfBody == "bad name")
        let untilClose = try parse("HTTP/1.0 200 OK\r\n\r\nall of it")
        #expect(untilClose.body == Array("all of it".utf8))
        let interim = try parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n")
        #expect(interim.status == 204 && interim.body.isEmpty)
        let kept = try parse("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", maxBodyBytes: 4)
        #expect(kept.body == Array("0123".utf8))
    }

    @Test(
        "what is not an HTTP/1.x response, or ends early, is an error saying where",
        arguments: [
            ("SSH-2.0-OpenSSH_9.2\r\n", "it begins \"SSH-2\""),
            ("HTTP/1.1 2000 OK\r\n\r\n", "the status line"),
            ("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "the header line"),
            ("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length -1"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "the chunk size"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "does not end in chunked"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "closed within the response's body"),
            ("HTTP/1.1 200 OK\r\nContent-", "closed within the response's head"),
            ("", "closed before any response"),
        ])
    func malformed(text: String, reason: String) {
        #expect {
            try parse(text)
        } throws: { error in
            "\(error)".contains(reason)
        }
    }

    /// `text`'s response, fed in pieces of `piece` bytes (the last may be shorter).
    private func parse(_ text: String, pieces piece: Int) throws(HTTPClientError) -> HTTPClientResponse? {
        var parser = HTTPResponseParser(maxBodyBytes: 1 << 10)
        let bytes = Array(text.utf8)
        for start in stride(from: 0, to: bytes.count, by: piece) {
            if let response = try parser.take(bytes[start..<min(start + piece, bytes.count)]) { return response }
        }
        return nil
    }

    private static let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    private static let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"

    @Test("ten interim responses (100, 103) are skipped; an eleventh is past the bound, and says so")
    func interimResponses() throws {
        let ten = String(repeating: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", count: 5)
        let response = try parse(ten + Self.ok)
        #expect(response.status == 200 && response.body == Array("ok".utf8) && response.headers.count == 1)
        #expect(throws: HTTPClientError.limitExceeded("more than 10 interim (1xx) responses")) {
            try parse(ten + "HTTP/1.1 100 Continue\r\n\r\n" + Self.ok)
        }
    }

    @Test("trailers are read and dropped, and count with the heads: 64 KiB in all")
    func trailers() throws {
        let trailer = "X-Trailer: " + String(repeating: "t", count: 1_000) + "\r\n"
        let taken = try parse(Self.chunked + "2\r\nok\r\n0\r\n" + String(repeating: trailer, count: 20) + "\r\n")
        #expect(taken.body == Array("ok".utf8) && taken.header("X-Trailer") == nil)
        // 40 KiB of headers and 30 KiB of trailers: each under the bound, together past it.
        let header = "X-Header: " + String(repeating: "h", count: 1_000) + "\r\n"
        let bigHead = "HTTP/1.1 200 OK\r\n" + String(repeating: header, count: 40) + "Transfer-Encoding: chunked\r\n\r\n"
        #expect(throws: HTTPClientError.limitExceeded("more than 64 KiB of heads, chunk lines and trailers (at a trailer)")) {
            try parse(bigHead + "2\r\nok\r\n0\r\n" + String(repeating: trailer, count: 30) + "\r\n")
        }
    }

    @Test(
        "an endless head, header, chunk extension, chunk framing or trailer section meets the 64 KiB bound, whole or a byte at a time",
        arguments: [
            ("HTTP/1.1 200 OK\r\n", "X-Header: another\r\n", "a header line"),
            ("HTTP/1.1 200 OK\r\nX-Huge: ", "h", "a header line"),
            ("HTTP/1.1 200 ", "reason ", "a status line"),
            ("HTTP/1.1 100 Continue\r\n", "X-Interim: more\r\n", "a header line"),
            (chunked + "1;", "extension=x;", "a chunk's size"),
            // Chunks of a byte, each with 120 bytes of extension: 519 of them reach the bound, within maxBodyBytes.
            (chunked, "1;" + String(repeating: "e", count: 120) + "\r\nx\r\n", "a chunk's size"),
            (chunked + "0\r\n", "X-Trailer: more\r\n", "a trailer"),
        ])
    func endlessHeads(head: String, repeated: String, at: String) {
        let text = head + String(repeating: repeated, count: 2 * HTTPResponseParser.maxHeadBytes / repeated.utf8.count)
        let bound = HTTPClientError.limitExceeded("more than 64 KiB of heads, chunk lines and trailers (at \(at))")
        #expect(throws: bound) { try parse(text, pieces: 16 << 10) }
        #expect(throws: bound) { try parse(text) }
    }

    @Test("Transfer-Encoding frames the body when Content-Length is there too; Content-Length values that differ are refused")
    func conflictingFraming() throws {
        let both = try parse("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
        #expect(both.body == Array("ok".utf8))
        let same = try parse("HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok")
        #expect(same.body == Array("ok".utf8))
        #expect {
            try parse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 20\r\n\r\nok")
        } throws: { error in
            "\(error)".contains("Content-Length values differ (2, 20)")
        }
    }

    @Test("bare LF line ends are read; a folded header line continues the header above it")
    func lenientLines() throws {
        let response = try parse("HTTP/1.1 200 OK\nX-Folded: a\r\n \t b\nContent-Length: 2\n\nok")
        #expect(response.header("X-Folded") == "a b" && response.body == Array("ok".utf8))
    }

    @Test(
        "an interim response then the connection's end, a 101 never asked for, a space before a colon: each an error saying which",
        arguments: [
            ("HTTP/1.1 100 Continue\r\n\r\n", "closed after 1 interim (1xx) response, before the final one"),
            ("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\n", "after 2 interim (1xx) responses"),
            ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", "101 Switching Protocols, though no upgrade was asked for"),
            ("HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok", "the header line \"Content-Length : 2\""),
            (" X: folded first\r\n", "it begins \" X: f"),
        ])
    func oddities(text: String, reason: String) {
        #expect {
            try parse(text)
        } throws: { error in
            "\(error)".contains(reason)
        }
    }
}
