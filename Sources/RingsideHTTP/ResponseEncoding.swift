import RingsideHTTPClient
/// What the response tells the client about the connection afterwards.
enum ConnectionDisposition {
    /// HTTP/1.1 default: stays open, no header needed.
    case keepAlive
    /// HTTP/1.0 client that asked for keep-alive: must be told `Connection: keep-alive`.
    case keepAliveAnnounced
    /// The server closes after this response: `Connection: close`.
    case close
}

/// The wire bytes of a response: status line, headers and blank line, then the body's parts (none
/// for `headOnly`). They stay apart so a large body is sent from where it is, never copied.
///
/// `Content-Length` is always the body's length, also for `HEAD`, so a `HEAD` tells the client
/// what a `GET` would send; a body written as it is sent (`stream`) goes in chunks instead
/// (`Transfer-Encoding: chunked`: its parts, then `chunkedEnd`, see `chunkHead`), or to an
/// HTTP/1.0 client as it is, ended by the connection's close.
func encodeResponse(
    _ response: HTTPResponse, headOnly: Bool,
    disposition: ConnectionDisposition
) -> (head: [UInt8], body: [[UInt8]]) {
    var head = "HTTP/1.1 \(response.status) \(reasonPhrase(response.status))\r\n"
    head += "Content-Type: \(headerSafe(response.contentType))\r\n"
    switch response.stream?.chunked {
    case nil: head += "Content-Length: \(response.bodyCount)\r\n"
    case true?: head += "Transfer-Encoding: chunked\r\n"
    case false?: break  // ended by the connection's close (see `startResponse`)
    }
    for header in response.headers where !isFramingHeader(header.name) {
        head += "\(headerSafe(header.name)): \(headerSafe(header.value))\r\n"
    }
    switch disposition {
    case .keepAlive: break
    case .keepAliveAnnounced: head += "Connection: keep-alive\r\n"
    case .close: head += "Connection: close\r\n"
    }
    head += "\r\n"
    let parts = headOnly ? [] : response.bodyParts.filter { !$0.isEmpty }
    // Parts before a stream in chunks are chunks too; the stream's chunks follow as it writes them.
    return (Array(head.utf8), response.stream?.chunked != true ? parts : parts.flatMap { [chunkHead($0.count), $0, chunkTail] })
}

/// What comes before a chunk of `count` bytes (its length in hex), and after each: a CRLF.
func chunkHead(_ count: Int) -> [UInt8] { Array((String(count, radix: 16) + "\r\n").utf8) }
let chunkTail: [UInt8] = [13, 10]
/// The last chunk, and the end of a chunked body (no trailers).
let chunkedEnd: [UInt8] = Array("0\r\n\r\n".utf8)

/// A small response in one piece, for the one-shot sends of refusals.
func encodedBytes(_ response: HTTPResponse) -> [UInt8] {
    let (head, body) = encodeResponse(response, headOnly: false, disposition: .close)
    return head + body.joined()
}

/// The response the server itself sends for a request it refuses. `405` and `501` carry `Allow`
/// as RFC 9110 requires, so a client learns what it may send instead.
func refusalResponse(status: Int, message: String) -> HTTPResponse {
    var headers: [HTTPHeader] = []
    if status == 405 || status == 501 { headers.append(HTTPHeader("Allow", "GET, HEAD")) }
    return HTTPResponse(status: status, text: "\(status) \(reasonPhrase(status)): \(message)\n", headers: headers)
}

/// Headers the server sets itself; a handler's copy would contradict the framing.
private func isFramingHeader(_ name: String) -> Bool {
    ["Content-Length", "Content-Type", "Connection", "Transfer-Encoding"].contains {
        asciiCaseInsensitiveEqual($0, name)
    }
}

/// CR and LF would end the header line early and let data inject headers; they become spaces.
private func headerSafe(_ text: String) -> String {
    guard text.utf8.contains(where: { $0 == 13 || $0 == 10 }) else { return text }
    return String(decoding: text.utf8.map { $0 == 13 || $0 == 10 ? 32 : $0 }, as: UTF8.self)
}
