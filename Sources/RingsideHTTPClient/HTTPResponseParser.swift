/// Reads one HTTP/1.x response from the bytes of a connection, as they come: the status line and
/// headers, interim 1xx responses skipped, then the body, framed by `Transfer-Encoding: chunked`,
/// `Content-Length`, or the end of the connection (RFC 9112 §6.3); none after 204 and 304. At most
/// `maxBodyBytes` of the body are kept: the response is complete once they are, and the rest is
/// never read (the client closes the connection).
///
/// Whatever the peer sends costs a bounded amount of work:
/// - everything that is not the body's data (every head, interim ones included, each chunk's size
///   line and extensions, the trailers) counts towards `maxHeadBytes`, in all;
/// - at most `maxInterimResponses` interim responses;
/// - each byte is looked at a bounded number of times, however the bytes are split (a peer
///   sending one byte at a time costs O(n) in all, not O(n²)).
///
/// A response past a bound is an `HTTPClientError.limitExceeded` naming it. Lines may end in CRLF
/// or a bare LF (RFC 9112 §2.2); a folded header line (obs-fold) continues the header above it.
/// With both `Transfer-Encoding` and `Content-Length`, the transfer coding frames the body (RFC
/// 9112 §6.3): the connection is never used again, so nothing can be smuggled after it. Trailers
/// are read and dropped.
package struct HTTPResponseParser {
    let maxBodyBytes: Int
    static let maxHeadBytes = 64 << 10
    static let maxInterimResponses = 10

    private enum Stage {
        /// The next line is a head's status line.
        case statusLine
        /// Header lines, up to an empty one.
        case headers
        case body(Framing)

        var isStatusLine: Bool {
            if case .statusLine = self { return true }
            return false
        }
    }

    private enum Framing {
        case none
        case length(remaining: Int)
        case chunked(ChunkState)
        case untilClose
    }

    private enum ChunkState {
        /// The next line is a chunk's size (and extensions).
        case size
        /// This many bytes of the chunk's data are still due, then its line end.
        case data(remaining: Int)
        case dataEnd
        /// After the last chunk: trailer lines, up to an empty one.
        case trailers
    }

    /// Bytes received; those before `position` are parsed. `searched`: where the search for the
    /// next line's end goes on from (every byte before it, from `position`, holds none).
    private var buffer: [UInt8] = []
    private var position = 0
    private var searched = 0
    /// Bytes of heads, chunk lines and trailers taken so far, and the interim responses among them.
    private var headBytes = 0
    private var interimResponses = 0
    private var stage = Stage.statusLine
    private var status = 0
    private var reason = ""
    private var headers: [HTTPHeader] = []
    private var body: [UInt8] = []

    package init(maxBodyBytes: Int) {
        self.maxBodyBytes = maxBodyBytes
    }

    /// Takes the next bytes received; the response once it is complete.
    package mutating func take(_ bytes: ArraySlice<UInt8>) throws(HTTPClientError) -> HTTPClientResponse? {
        if position > 0 {  // once a call, so what is kept moves at most once for what came in
            buffer.removeFirst(position)
            searched -= position
            position = 0
        }
        buffer.append(contentsOf: bytes)
        while true {
            switch stage {
            case .statusLine, .headers:
                guard try parseHeadLine() else { return nil }
            case .body(let framing):
                guard try parseBody(framing) else { return nil }
                return response
            }
        }
    }

    /// The connection ended: the response, when its body runs to the end of the connection.
    package mutating func finish() throws(HTTPClientError) -> HTTPClientResponse {
        switch stage {
        case .statusLine where position == buffer.count:
            throw .closedEarly(
                interimResponses == 0
                    ? "before any response"
                    : "after \(interimResponses) interim (1xx) response\(interimResponses == 1 ? "" : "s"), before the final one")
        case .statusLine, .headers: throw .closedEarly("within the response's head")
        case .body(.untilClose): return response
        case .body: throw .closedEarly("within the response's body")
        }
    }

    private var response: HTTPClientResponse {
        HTTPClientResponse(status: status, reason: reason, headers: headers, body: body)
    }

    // MARK: - Lines

    /// The next line (its CR LF or LF taken off), counted in `headBytes`; nil until a whole one is there.
    private mutating func takeLine(_ what: String) throws(HTTPClientError) -> String? {
        guard let end = buffer[max(position, searched)...].firstIndex(of: 0x0A) else {
            searched = buffer.count
            if headBytes + (buffer.count - position) > Self.maxHeadBytes { throw headTooLarge(what) }
            return nil
        }
        headBytes += end + 1 - position
        guard headBytes <= Self.maxHeadBytes else { throw headTooLarge(what) }
        let line = buffer[position..<(end > position && buffer[end - 1] == 0x0D ? end - 1 : end)]
        position = end + 1
        searched = position
        return String(decoding: line, as: UTF8.self)
    }

    private func headTooLarge(_ what: String) -> HTTPClientError {
        .limitExceeded("more than \(Self.maxHeadBytes >> 10) KiB of heads, chunk lines and trailers (at \(what))")
    }

    // MARK: - The head

    /// Parses the next line of a head; false when more bytes are needed.
    private mutating func parseHeadLine() throws(HTTPClientError) -> Bool {
        if case .statusLine = stage, buffer.count - position >= 5, !buffer[position...].starts(with: "HTTP/".utf8) {
            throw .malformedResponse("it begins \"\(printable(buffer[position...].prefix(20)))\"")
        }
        guard let line = try takeLine(stage.isStatusLine ? "a status line" : "a header line") else { return false }
        if stage.isStatusLine {
            try parseStatusLine(line)
            headers = []
            stage = .headers
        } else if line.isEmpty {
            try endHead()
        } else if line.first == " " || line.first == "\t" {
            // obs-fold (RFC 9112 §5.2): the header above goes on, the fold read as a space.
            guard let last = headers.indices.last else { throw .malformedResponse("a folded line before any header") }
            headers[last].value = "\(headers[last].value) \(line.trimmingSpaces)".trimmingSpaces
        } else {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex,
                !line[..<colon].contains(where: { $0 == " " || $0 == "\t" })
            else { throw .malformedResponse("the header line \"\(printable(line.utf8.prefix(80)))\"") }
            headers.append(HTTPHeader(String(line[..<colon]), line[line.index(after: colon)...].trimmingSpaces))
        }
        return true
    }

    private mutating func parseStatusLine(_ line: String) throws(HTTPClientError) {
        let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].count == 3, let code = Int(parts[1]), (100...599).contains(code)
        else { throw .malformedResponse("the status line \"\(printable(line.utf8.prefix(80)))\"") }
        // The client never asks to switch protocols: what would follow is not HTTP.
        guard code != 101 else { throw .malformedResponse("101 Switching Protocols, though no upgrade was asked for") }
        status = code
        reason = parts.count > 2 ? String(parts[2]) : ""
    }

    /// A head is complete: skips an interim one, or decides how the final one's body is framed.
    private mutating func endHead() throws(HTTPClientError) {
        if status < 200 {  // 100 Continue, 103 Early Hints: the final response follows
            interimResponses += 1
            guard interimResponses <= Self.maxInterimResponses else {
                throw .limitExceeded("more than \(Self.maxInterimResponses) interim (1xx) responses")
            }
            stage = .statusLine
            return
        }
        let codings = headers.filter { $0.name.lowercased() == "transfer-encoding" }.map(\.value)
        let lengths = headers.filter { $0.name.lowercased() == "content-length" }.flatMap { $0.value.split(separator: ",") }
            .map(\.trimmingSpaces)
        if status == 204 || status == 304 {
            stage = .body(.none)
        } else if !codings.isEmpty {
            let coding = codings.joined(separator: ", ")
            guard coding.lowercased().split(separator: ",").last?.trimmingSpaces == "chunked" else {
                throw .malformedResponse("Transfer-Encoding \(printable(coding.utf8.prefix(40))) does not end in chunked")
            }
            stage = .body(.chunked(.size))
        } else if let length = lengths.first {
            guard !length.isEmpty, length.count <= 18, length.allSatisfy({ $0.isASCII && $0.isNumber }), let count = Int(length) else {
                throw .malformedResponse("Content-Length \(printable(length.utf8.prefix(40)))")
            }
            guard lengths.allSatisfy({ $0 == length }) else {
                throw .malformedResponse("Content-Length values differ (\(printable(lengths.joined(separator: ", ").utf8.prefix(60))))")
            }
            stage = .body(.length(remaining: count))
        } else {
            stage = .body(.untilClose)
        }
    }

    // MARK: - The body

    /// Parses what the buffer holds of the body; true once it is complete (or `maxBodyBytes` kept).
    private mutating func parseBody(_ start: Framing) throws(HTTPClientError) -> Bool {
        var framing = start
        defer { stage = .body(framing) }
        while true {
            guard body.count < maxBodyBytes else { return true }
            let available = buffer.count - position
            switch framing {
            case .none:
                return true
            case .untilClose:
                keep(available)
                return body.count >= maxBodyBytes
            case .length(let remaining):
                let taken = min(remaining, available)
                keep(taken)
                framing = .length(remaining: remaining - taken)
                return remaining == taken
            case .chunked(.size):
                guard let line = try takeLine("a chunk's size") else { return false }
                let digits = line.prefix { $0 != ";" }.trimmingSpaces
                guard !digits.isEmpty, digits.count <= 15, let size = Int(digits, radix: 16) else {
                    throw .malformedResponse("the chunk size \"\(printable(line.utf8.prefix(40)))\"")
                }
                framing = .chunked(size == 0 ? .trailers : .data(remaining: size))
            case .chunked(.data(let remaining)):
                let taken = min(remaining, available)
                guard taken > 0 else { return false }
                keep(taken)
                framing = .chunked(remaining == taken ? .dataEnd : .data(remaining: remaining - taken))
            case .chunked(.dataEnd):
                guard let line = try takeLine("a chunk's end") else { return false }
                guard line.isEmpty else { throw .malformedResponse("a chunk's data runs past its size") }
                framing = .chunked(.size)
            case .chunked(.trailers):
                guard let line = try takeLine("a trailer") else { return false }
                if line.isEmpty {
                    framing = .none
                    return true
                }
            }
        }
    }

    /// Moves `count` bytes of the buffer to the body, keeping at most `maxBodyBytes` in all.
    private mutating func keep(_ count: Int) {
        body += buffer[position..<(position + min(count, maxBodyBytes - body.count))]
        position += count
        searched = max(searched, position)
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
