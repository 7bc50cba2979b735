/// Reads one HTTP/1.x response from the bytes of a connection, as they come: the status line and
/// headers (at most 64 KiB), interim 1xx responses skipped, then the body, framed by
/// `Transfer-Encoding: chunked`, `Content-Length`, or the end of the connection (RFC 9112 §6.3);
/// none after 204 and 304. At most `maxBodyBytes` of the body are kept: the response is complete
/// once they are, and the rest is never read (the client closes the connection).
struct HTTPResponseParser {
    let maxBodyBytes: Int
    static let maxHeadBytes = 64 << 10

    private enum Framing {
        case none
        case length(remaining: Int)
        case chunked(ChunkState)
        case untilClose
    }

    private enum ChunkState {
        /// The next line is a chunk's size (and extensions).
        case size
        /// This many bytes of the chunk's data are still due, then its CRLF.
        case data(remaining: Int)
        case dataEnd
        /// After the last chunk: trailer lines, up to an empty one.
        case trailers
    }

    /// Bytes received and not yet parsed, and how many of them were searched for a head's end
    /// (so a peer sending a byte at a time costs O(n) in all, not O(n²)).
    private var buffer: [UInt8] = []
    private var searched = 0
    private var status = 0
    private var reason = ""
    private var headers: [HTTPHeader] = []
    private var framing: Framing?
    private var body: [UInt8] = []

    init(maxBodyBytes: Int) {
        self.maxBodyBytes = maxBodyBytes
    }

    /// Takes the next bytes received; the response once it is complete.
    mutating func take(_ bytes: ArraySlice<UInt8>) throws(HTTPClientError) -> HTTPClientResponse? {
        buffer.append(contentsOf: bytes)
        while framing == nil {
            guard try parseHead() else { return nil }
        }
        return try parseBody() ? response : nil
    }

    /// The connection ended: the response, when its body runs to the end of the connection.
    mutating func finish() throws(HTTPClientError) -> HTTPClientResponse {
        switch framing {
        case nil: throw .closedEarly(buffer.isEmpty ? "before any response" : "within the response's head")
        case .untilClose: return response
        default: throw .closedEarly("within the response's body")
        }
    }

    private var response: HTTPClientResponse {
        HTTPClientResponse(status: status, reason: reason, headers: headers, body: body)
    }

    // MARK: - The head

    /// Parses a head if the buffer holds one; false when more bytes are needed.
    private mutating func parseHead() throws(HTTPClientError) -> Bool {
        guard let end = find([0x0D, 0x0A, 0x0D, 0x0A], from: max(0, searched - 3)) else {
            searched = buffer.count
            if buffer.count > Self.maxHeadBytes { throw .malformedResponse("a head of more than 64 KiB") }
            if buffer.count >= 5, !buffer.starts(with: Array("HTTP/".utf8)) {
                throw .malformedResponse("it begins \"\(printable(buffer.prefix(20)))\"")
            }
            return false
        }
        let lines = buffer[..<end].split(separator: 0x0A, omittingEmptySubsequences: false).map { line in
            String(decoding: line.last == 0x0D ? line.dropLast() : line, as: UTF8.self)
        }
        buffer.removeFirst(end + 4)
        searched = 0
        let statusLine = lines[0].split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), statusLine[1].count == 3,
            let code = Int(statusLine[1]), (100...599).contains(code)
        else { throw .malformedResponse("the status line \"\(printable(lines[0].utf8.prefix(80)))\"") }
        var parsed: [HTTPHeader] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                throw .malformedResponse("the header line \"\(printable(line.utf8.prefix(80)))\"")
            }
            let value = line[line.index(after: colon)...].trimmingSpaces
            parsed.append(HTTPHeader(String(line[..<colon]), value))
        }
        // An interim response (100 Continue, 103 Early Hints): the final one follows.
        if code < 200 { return true }
        status = code
        reason = statusLine.count > 2 ? String(statusLine[2]) : ""
        headers = parsed
        let response = HTTPClientResponse(status: code, reason: reason, headers: parsed, body: [])
        if code == 204 || code == 304 {
            framing = Framing.none
        } else if let coding = response.header("Transfer-Encoding") {
            guard coding.lowercased().split(separator: ",").last?.trimmingSpaces == "chunked" else {
                throw .malformedResponse("Transfer-Encoding \(coding) does not end in chunked")
            }
            framing = .chunked(.size)
        } else if let length = response.header("Content-Length") {
            guard !length.isEmpty, length.count <= 18, length.allSatisfy({ $0.isASCII && $0.isNumber }), let count = Int(length) else {
                throw .malformedResponse("Content-Length \(printable(length.utf8.prefix(40)))")
            }
            framing = .length(remaining: count)
        } else {
            framing = .untilClose
        }
        return true
    }

    // MARK: - The body

    /// Parses what the buffer holds of the body; true once it is complete (or `maxBodyBytes` kept).
    private mutating func parseBody() throws(HTTPClientError) -> Bool {
        while true {
            guard body.count < maxBodyBytes else { return true }
            switch framing {
            case nil, .none?:
                return true
            case .untilClose?:
                keep(buffer.count)
                return body.count >= maxBodyBytes
            case .length(let remaining)?:
                let taken = min(remaining, buffer.count)
                keep(taken)
                framing = .length(remaining: remaining - taken)
                return remaining == taken
            case .chunked(let state)?:
                switch state {
                case .size:
                    guard let line = try takeLine() else { return false }
                    let digits = line.prefix { $0 != ";" }.trimmingSpaces
                    guard !digits.isEmpty, digits.count <= 15, let size = Int(digits, radix: 16) else {
                        throw .malformedResponse("the chunk size \"\(printable(line.utf8.prefix(40)))\"")
                    }
                    framing = .chunked(size == 0 ? .trailers : .data(remaining: size))
                case .data(let remaining):
                    let taken = min(remaining, buffer.count)
                    guard taken > 0 else { return false }
                    keep(taken)
                    framing = .chunked(remaining == taken ? .dataEnd : .data(remaining: remaining - taken))
                case .dataEnd:
                    guard let line = try takeLine() else { return false }
                    guard line.isEmpty else { throw .malformedResponse("a chunk's data runs past its size") }
                    framing = .chunked(.size)
                case .trailers:
                    guard let line = try takeLine() else { return false }
                    if line.isEmpty { return true }
                }
            }
        }
    }

    /// Moves `count` bytes of the buffer to the body, keeping at most `maxBodyBytes` in all.
    private mutating func keep(_ count: Int) {
        body += buffer.prefix(min(count, maxBodyBytes - body.count))
        buffer.removeFirst(count)
    }

    /// The next CRLF-ended line, taken from the buffer; nil until one is there.
    private mutating func takeLine() throws(HTTPClientError) -> String? {
        guard let end = find([0x0D, 0x0A]) else {
            if buffer.count > Self.maxHeadBytes { throw .malformedResponse("a chunk's line of more than 64 KiB") }
            return nil
        }
        defer { buffer.removeFirst(end + 2) }
        return String(decoding: buffer[..<end], as: UTF8.self)
    }

    private func find(_ pattern: [UInt8], from start: Int = 0) -> Int? {
        guard buffer.count - start >= pattern.count else { return nil }
        return (start...(buffer.count - pattern.count)).first { buffer[$0..<($0 + pattern.count)].elementsEqual(pattern) }
    }
}

/// Bytes as text for an error message: printable ASCII kept, anything else as `.`.
private func printable<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
    String(decoding: bytes.map { $0 >= 0x20 && $0 < 0x7F ? $0 : 0x2E }, as: UTF8.self)
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs.
    fileprivate var trimmingSpaces: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
