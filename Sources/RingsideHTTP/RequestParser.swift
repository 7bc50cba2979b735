import RingsideHTTPClient
/// What the parser made of the bytes received so far on one connection.
package enum ParseOutcome: Equatable {
    /// The head is not complete yet, and nothing so far is wrong.
    case needMore
    /// A complete, acceptable request; `keepAlive` says whether the connection may serve another.
    case request(HTTPRequest, keepAlive: Bool)
    /// Refuse with this status and close: after a bad head we cannot trust where the next
    /// request would start.
    case refuse(status: Int, message: String)
}

/// Incremental, strict parser for HTTP/1.x request heads (RFC 9112), one connection's worth.
///
/// Bytes go in with `append`; `next()` returns one request at a time, so pipelined requests come
/// out in order. It rejects as soon as the bytes cannot become a valid head (a control byte, a
/// non-ASCII request line, a bare LF), so binary garbage such as a TLS handshake is refused on the
/// first read instead of after the timeout. Only the bytes not yet looked at are scanned, so a
/// client sending one byte at a time costs O(n) in total, not O(n²).
package struct RequestParser {
    /// The most bytes a head (request line, headers and the blank line) may take; beyond it, 431.
    let maxHeadBytes: Int
    /// More headers than this is refused with 431 even within `maxHeadBytes`.
    static let maxHeaderCount = 100

    private(set) var buffer: [UInt8] = []
    /// Bytes of `buffer` already checked; the scan resumes here.
    private var scanned = 0
    /// Whether the request line's LF has been seen (non-ASCII is allowed in header values only).
    private var requestLineComplete = false
    /// RFC 9112 §2.2: a server SHOULD ignore at least one empty line before a request. One.
    private var skippedEmptyLine = false

    /// Paths that also take `POST` without a body (`HTTPServerLimits.postPaths`).
    let postPaths: Set<String>

    package init(maxHeadBytes: Int, postPaths: Set<String> = []) {
        self.maxHeadBytes = maxHeadBytes
        self.postPaths = postPaths
    }

    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
    }

    package mutating func next() -> ParseOutcome {
        if scanned == 0 && !skippedEmptyLine && buffer.first == cr {
            guard buffer.count >= 2 else { return .needMore }
            if buffer[1] == lf {
                buffer.removeFirst(2)
                skippedEmptyLine = true
            }
        }
        var i = scanned
        while i < buffer.count {
            let byte = buffer[i]
            if byte == lf {
                guard i > 0, buffer[i - 1] == cr else { return refuse(400, "bare LF; lines must end with CRLF") }
                if requestLineComplete && buffer[i - 2] == lf {
                    return completeHead(length: i + 1)
                }
                requestLineComplete = true
            } else {
                if i > 0 && buffer[i - 1] == cr { return refuse(400, "CR not followed by LF") }
                if (byte < 0x20 && byte != tab && byte != cr) || byte == 0x7F {
                    return refuse(400, "control byte \(byte) in request head; is this HTTP?")
                }
                if !requestLineComplete && byte >= 0x80 { return refuse(400, "non-ASCII byte in request line") }
                if i == 0 && !isTokenByte(byte) { return refuse(400, "request does not start with a method") }
            }
            i += 1
            if i >= maxHeadBytes { return refuse(431, "request head exceeds \(maxHeadBytes) bytes") }
        }
        scanned = i
        return .needMore
    }

    private mutating func completeHead(length: Int) -> ParseOutcome {
        let head = buffer[..<length]
        let outcome = parseHead(head, postPaths: postPaths)
        buffer.removeFirst(length)
        scanned = 0
        requestLineComplete = false
        skippedEmptyLine = false
        return outcome
    }

    private func refuse(_ status: Int, _ message: String) -> ParseOutcome {
        .refuse(status: status, message: message)
    }
}

private let cr: UInt8 = 13
private let lf: UInt8 = 10
private let tab: UInt8 = 9
private let space: UInt8 = 32

/// RFC 9110 `tchar`: the bytes allowed in methods and header names.
func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
        return true
    default:
        return "!#$%&'*+-.^_`|~".utf8.contains(byte)
    }
}

/// Methods we know and refuse with 405 (the resource exists but takes only GET and HEAD);
/// any other token gets 501.
private let knownMethods: Set<String> = ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"]

/// Parses a complete head whose bytes the scan already vetted: CRLF line ends, no control bytes,
/// an ASCII request line. Checks syntax first (400), then the method (405/501), then framing.
func parseHead(_ head: ArraySlice<UInt8>, postPaths: Set<String> = []) -> ParseOutcome {
    var lines = splitLines(head)
    let requestLine = lines.removeFirst()
    let parts = requestLine.split(separator: space, omittingEmptySubsequences: false)
    guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty }) else {
        return .refuse(status: 400, message: "request line must be METHOD SP TARGET SP HTTP/1.x")
    }
    guard parts[0].allSatisfy(isTokenByte) else { return .refuse(status: 400, message: "invalid method") }
    let method = String(decoding: parts[0], as: UTF8.self)
    let target = String(decoding: parts[1], as: UTF8.self)
    let version = String(decoding: parts[2], as: UTF8.self)

    let minorVersion: Int
    switch version {
    case "HTTP/1.1": minorVersion = 1
    case "HTTP/1.0": minorVersion = 0
    default:
        let u = Array(version.utf8)
        let shaped =
            u.count == 8 && version.hasPrefix("HTTP/") && u[5] >= 0x30 && u[5] <= 0x39
            && u[6] == UInt8(ascii: ".") && u[7] >= 0x30 && u[7] <= 0x39
        return shaped
            ? .refuse(status: 505, message: "only HTTP/1.0 and HTTP/1.1 are supported")
            : .refuse(status: 400, message: "request line must end with HTTP/1.0 or HTTP/1.1")
    }
    guard let (path, query) = splitTarget(target) else {
        return .refuse(status: 400, message: "request target must start with /")
    }

    var headers: [HTTPHeader] = []
    for line in lines where !line.isEmpty {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
            line[..<colon].allSatisfy(isTokenByte)
        else { return .refuse(status: 400, message: "header lines must be name: value") }
        let value = line[(colon + 1)...].drop { $0 == space || $0 == tab }
        let trimmed = value.reversed().drop { $0 == space || $0 == tab }.reversed()
        headers.append(HTTPHeader(String(decoding: line[..<colon], as: UTF8.self), String(decoding: trimmed, as: UTF8.self)))
    }
    if headers.count > RequestParser.maxHeaderCount {
        return .refuse(status: 431, message: "more than \(RequestParser.maxHeaderCount) headers")
    }
    let request = HTTPRequest(
        method: method, target: target, path: path, query: query,
        minorVersion: minorVersion, headers: headers)
    return checkSemantics(request, postPaths: postPaths)
}

/// The rules that need the whole head: Host, method, bodies, and the connection's fate.
private func checkSemantics(_ request: HTTPRequest, postPaths: Set<String>) -> ParseOutcome {
    func values(_ name: String) -> [String] {
        request.headers.filter { asciiCaseInsensitiveEqual($0.name, name) }.map(\.value)
    }
    let hosts = values("Host").count
    if (request.minorVersion == 1 && hosts != 1) || hosts > 1 {
        return .refuse(status: 400, message: "HTTP/1.1 requests need exactly one Host header")
    }
    let isAction = request.method == "POST" && postPaths.contains(request.path)
    if request.method != "GET" && request.method != "HEAD" && !isAction {
        let status = knownMethods.contains(request.method) ? 405 : 501
        return .refuse(status: status, message: "method \(request.method) not supported; use GET or HEAD")
    }
    let transferEncodings = values("Transfer-Encoding")
    let contentLengths = values("Content-Length")
    if !transferEncodings.isEmpty && !contentLengths.isEmpty {
        return .refuse(status: 400, message: "both Transfer-Encoding and Content-Length")
    }
    if !transferEncodings.isEmpty { return .refuse(status: 413, message: "request bodies are not accepted") }
    for length in contentLengths {
        guard !length.isEmpty, length.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return .refuse(status: 400, message: "invalid Content-Length")
        }
        if length.utf8.contains(where: { $0 != UInt8(ascii: "0") }) {
            return .refuse(status: 413, message: "request bodies are not accepted")
        }
    }
    let tokens = values("Connection").flatMap { $0.split(separator: ",") }
        .map { $0.trimmingASCIIBlanks() }
    let close = tokens.contains { asciiCaseInsensitiveEqual($0, "close") }
    let keepAlive = tokens.contains { asciiCaseInsensitiveEqual($0, "keep-alive") }
    return .request(request, keepAlive: !close && (request.minorVersion == 1 || keepAlive))
}

/// Lines of a head that ends in CRLF CRLF, without their CRLFs; the last is the empty line.
private func splitLines(_ head: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
    var lines: [ArraySlice<UInt8>] = []
    var start = head.startIndex
    var i = head.startIndex
    while i < head.endIndex {
        if head[i] == lf {
            lines.append(head[start..<(i - 1)])
            start = i + 1
        }
        i += 1
    }
    return lines
}

/// Path and query of an origin-form (`/p?q`), absolute-form (`http://h/p?q`) or `*` target.
private func splitTarget(_ target: String) -> (String, String?)? {
    var rest = Substring(target)
    let lower = target.lowercased()
    if lower.hasPrefix("http://") || lower.hasPrefix("https://") {
        rest = rest[rest.index(rest.firstIndex(of: ":")!, offsetBy: 3)...]
        rest = rest.firstIndex { $0 == "/" || $0 == "?" }.map { rest[$0...] } ?? ""
        if !rest.hasPrefix("/") { rest = Substring("/" + rest) }
    } else if target == "*" {
        return ("*", nil)
    } else if !target.hasPrefix("/") {
        return nil
    }
    guard let mark = rest.firstIndex(of: "?") else { return (String(rest), nil) }
    return (String(rest[..<mark]), String(rest[rest.index(after: mark)...]))
}

extension Substring {
    fileprivate func trimmingASCIIBlanks() -> String {
        String(self.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
