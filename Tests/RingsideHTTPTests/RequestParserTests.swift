@testable import RingsideHTTP
import Testing
@testable import RingsideHTTPClient

/// The parser on its own: exact outcomes for exact bytes, with no sockets in the way.
@Suite("RequestParser")
struct RequestParserTests {
    private func parse(_ text: String, maxHeadBytes: Int = 8192) -> ParseOutcome {
        var parser = RequestParser(maxHeadBytes: maxHeadBytes)
        Array(text.utf8).withUnsafeBytes { parser.append($0) }
        return parser.next()
    }

    private func status(_ outcome: ParseOutcome) -> Int? {
        if case .refuse(let status, _) = outcome { return status }
        return nil
    }

    @Test("A complete GET yields method, path, query, version and trimmed headers")
    func parsesRequest() {
        let outcome = parse("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept:  text/plain \t\r\n\r\n")
        let expected = HTTPRequest(
            method: "GET", target: "/metrics?x=1", path: "/metrics", query: "x=1", minorVersion: 1,
            headers: [HTTPHeader("Host", "a"), HTTPHeader("Accept", "text/plain")])
        #expect(outcome == .request(expected, keepAlive: true))
    }

    @Test("Header lookup ignores ASCII case")
    func headerLookup() {
        guard case .request(let request, _) = parse("GET / HTTP/1.1\r\nhOsT: a\r\nX-Thing: 1\r\n\r\n") else {
            Issue.record("not parsed")
            return
        }
        #expect(request.header("host") == "a")
        #expect(request.header("x-thing") == "1")
        #expect(request.header("missing") == nil)
    }

    @Test("Feeding one byte at a time gives the same request as feeding it whole")
    func incremental() {
        let text = "GET /latest HTTP/1.1\r\nHost: a\r\n\r\n"
        var parser = RequestParser(maxHeadBytes: 8192)
        var outcomes: [ParseOutcome] = []
        for byte in text.utf8 {
            [byte].withUnsafeBytes { parser.append($0) }
            outcomes.append(parser.next())
        }
        #expect(outcomes.dropLast().allSatisfy { $0 == .needMore })
        #expect(outcomes.last == parse(text))
    }

    @Test("Pipelined requests come out one at a time, in order")
    func pipelined() {
        var parser = RequestParser(maxHeadBytes: 8192)
        Array("GET /a HTTP/1.1\r\nHost: x\r\n\r\nHEAD /b HTTP/1.1\r\nHost: x\r\n\r\nGET /c".utf8).withUnsafeBytes { parser.append($0) }
        guard case .request(let first, _) = parser.next(), case .request(let second, _) = parser.next() else {
            Issue.record("expected two requests")
            return
        }
        #expect(first.path == "/a")
        #expect(second.method == "HEAD" && second.path == "/b")
        #expect(parser.next() == .needMore)
    }

    @Test(
        "Keep-alive follows the version and the Connection header",
        arguments: [
            ("HTTP/1.1", "", true), ("HTTP/1.1", "Connection: close\r\n", false),
            ("HTTP/1.1", "Connection: foo, Close\r\n", false), ("HTTP/1.0", "", false),
            ("HTTP/1.0", "Connection: Keep-Alive\r\n", true),
        ])
    func keepAlive(version: String, header: String, expected: Bool) {
        guard case .request(_, let keepAlive) = parse("GET / \(version)\r\nHost: a\r\n\(header)\r\n") else {
            Issue.record("not parsed")
            return
        }
        #expect(keepAlive == expected)
    }

    @Test(
        "Refusals carry the status that names the problem",
        arguments: [
            ("GET /\r\n\r\n", 400),  // two parts
            ("GET / HTTP/1.1\r\nHost: a\r\n Folded: x\r\n\r\n", 400),  // obs-fold
            ("GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400),  // space before colon
            ("GET / HTTP/1.1\r\nHost: a\rX\r\n\r\n", 400),  // CR without LF
            ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),  // two Hosts
            ("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
            ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\n", 413),
            ("PUT / HTTP/1.1\r\nHost: a\r\n\r\n", 405),
            ("get / HTTP/1.1\r\nHost: a\r\n\r\n", 501),  // methods are case-sensitive
            ("GET /\u{E9} HTTP/1.1\r\n", 400),  // non-ASCII target, refused early
            ("\u{0}\u{1}\u{2}", 400),  // refused before any line ends
        ])
    func refusals(text: String, expected: Int) {
        #expect(status(parse(text)) == expected)
    }

    @Test("Content-Length: 0 is accepted, since it is no body")
    func zeroContentLength() {
        #expect(status(parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 00\r\n\r\n")) == nil)
    }

    @Test("A head one byte over the bound gets 431; exactly at the bound it parses")
    func headBound() {
        let head = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
        let bound = head.utf8.count
        #expect(status(parse(head, maxHeadBytes: bound)) == nil)
        #expect(status(parse(head, maxHeadBytes: bound - 1)) == 431)
        #expect(status(parse("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 100), maxHeadBytes: 64)) == 431)
    }

    @Test("More than 100 headers gets 431")
    func headerCount() {
        let headers = (0...100).map { "X-\($0): 1\r\n" }.joined()
        #expect(status(parse("GET / HTTP/1.1\r\nHost: a\r\n\(headers)\r\n")) == 431)
    }

    @Test("One leading empty line is ignored, as RFC 9112 suggests")
    func leadingEmptyLine() {
        #expect(status(parse("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")) == nil)
        #expect(status(parse("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")) == 400)
    }

    @Test(
        "Absolute-form and asterisk targets are understood",
        arguments: [
            ("http://example.com/metrics?a=b", "/metrics", "a=b"), ("HTTP://h:1", "/", nil), ("https://h?q", "/", "q"),
        ])
    func targets(target: String, path: String, query: String?) {
        guard case .request(let request, _) = parse("GET \(target) HTTP/1.1\r\nHost: h\r\n\r\n") else {
            Issue.record("not parsed")
            return
        }
        #expect(request.path == path)
        #expect(request.query == query)
        #expect(request.target == target)
    }

    @Test("Response headers from data cannot split the response")
    func responseHeaderInjection() {
        let response = HTTPResponse(text: "x", headers: [HTTPHeader("X-Bot", "a\r\nSet-Cookie: y"), HTTPHeader("Content-Length", "99")])
        let (head, body) = encodeResponse(response, headOnly: false, disposition: .keepAlive)
        #expect(
            String(decoding: head + body.joined(), as: UTF8.self)
                == "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 1\r\nX-Bot: a  Set-Cookie: y\r\n\r\nx")
        #expect(encodeResponse(response, headOnly: true, disposition: .keepAlive).body.isEmpty)
    }

    @Test("Random bytes in random chunks never crash the parser or yield a field with CR or LF")
    func fuzz() {
        var random = XorShift(seed: 0x5EED)
        let alphabet = Array("GET HEAD /metrics?q HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n:".utf8)
        for _ in 0..<3000 {
            var parser = RequestParser(maxHeadBytes: 256)
            var bytes: [UInt8] = (0..<random.next(below: 400)).map { _ in
                random.next(below: 8) == 0
                    ? UInt8(truncatingIfNeeded: random.next(below: 256)) : alphabet[random.next(below: alphabet.count)]
            }
            var outcome = ParseOutcome.needMore
            while !bytes.isEmpty {
                let chunk = bytes.prefix(1 + random.next(below: 64))
                bytes.removeFirst(chunk.count)
                Array(chunk).withUnsafeBytes { parser.append($0) }
                outcome = parser.next()
                while case .request(let request, _) = outcome {
                    let fields = [request.method, request.target] + request.headers.flatMap { [$0.name, $0.value] }
                    #expect(!fields.contains { $0.utf8.contains(13) || $0.utf8.contains(10) })
                    outcome = parser.next()
                }
                if case .refuse = outcome { break }
                #expect(parser.buffer.count < 256 + 64)
            }
        }
    }
}

/// A seeded generator, so a fuzz failure reproduces.
private struct XorShift {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next(below bound: Int) -> Int {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return Int(state % UInt64(bound))
    }
}
