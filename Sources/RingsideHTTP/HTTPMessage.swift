import RingsideHTTPClient

/// A request the server accepted: a `GET` or `HEAD` (or a `POST` to one of `postPaths`) with a well-formed head and no body.
///
/// The handler sees `HEAD` requests too, so it can skip work; it should answer them exactly as
/// it answers `GET`, and the server drops the body.
package struct HTTPRequest: Sendable, Equatable {
    /// `GET` or `HEAD`, or `POST` to one of `HTTPServerLimits.postPaths`: the server answers every other method itself.
    package var method: String
    /// The request target as sent, e.g. `/metrics?name=x`, for logs.
    package var target: String
    /// The target without its query string: what to route on. Not percent-decoded.
    package var path: String
    /// What followed the first `?`, without it; `nil` when there was no `?`.
    package var query: String?
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    package var minorVersion: Int
    package var headers: [HTTPHeader]

    package init(method: String, target: String, path: String, query: String?, minorVersion: Int, headers: [HTTPHeader]) {
        self.method = method
        self.target = target
        self.path = path
        self.query = query
        self.minorVersion = minorVersion
        self.headers = headers
    }

    /// The first header with this name, compared without regard to ASCII case as HTTP requires.
    package func header(_ name: String) -> String? {
        headers.first { asciiCaseInsensitiveEqual($0.name, name) }?.value
    }
}

/// What the handler answers. The server adds `Content-Length` and `Connection` itself.
package struct HTTPResponse: Sendable, Equatable {
    package var status: Int
    package var contentType: String
    /// The body in parts, sent one after the other from where each lies: a page kept in
    /// pieces (the collector's /metrics) is never joined into a copy to be sent.
    package var bodyParts: [[UInt8]]
    /// A file sent after `bodyParts`, from the file (see `ResponseFile`); nil for none.
    package var file: ResponseFile?
    /// A body written as it is sent (see `ResponseStream`), after `bodyParts`; nil for none.
    package var stream: ResponseStream?
    /// Extra headers, e.g. `Cache-Control`. `Content-Length`, `Content-Type` and `Connection`
    /// here are ignored (the server owns framing), and CR or LF in a value becomes a space so a
    /// value built from data can never split the response.
    package var headers: [HTTPHeader]

    package init(
        status: Int = 200, contentType: String = "text/plain; charset=utf-8", body: [UInt8],
        headers: [HTTPHeader] = []
    ) {
        self.init(status: status, contentType: contentType, bodyParts: [body], headers: headers)
    }

    package init(
        status: Int = 200, contentType: String = "text/plain; charset=utf-8", bodyParts: [[UInt8]],
        headers: [HTTPHeader] = []
    ) {
        self.status = status
        self.contentType = contentType
        self.bodyParts = bodyParts
        self.headers = headers
    }

    /// A response whose body is `file`, sent from the file.
    package init(status: Int = 200, contentType: String, file: ResponseFile, headers: [HTTPHeader] = []) {
        self.init(status: status, contentType: contentType, bodyParts: [], headers: headers)
        self.file = file
    }

    package init(
        status: Int = 200, contentType: String = "text/plain; charset=utf-8", text: String,
        headers: [HTTPHeader] = []
    ) {
        self.init(status: status, contentType: contentType, body: Array(text.utf8), headers: headers)
    }

    /// A response whose body is written as it is sent (see `ResponseStream`).
    package init(status: Int = 200, contentType: String, stream: ResponseStream, headers: [HTTPHeader] = []) {
        self.init(status: status, contentType: contentType, bodyParts: [], headers: headers)
        self.stream = stream
    }

    /// The body in one piece (joined when it is in parts), `file` and `stream` aside.
    package var body: [UInt8] {
        get { bodyParts.count == 1 ? bodyParts[0] : Array(bodyParts.joined()) }
        set { bodyParts = [newValue] }
    }

    /// The body's length in bytes, the file's included (a stream's is not known before it is sent).
    package var bodyCount: Int { bodyParts.reduce(0) { $0 + $1.count } + (file?.length ?? 0) }

    /// Equal when they would put the same bytes on the wire, however the body is split (a file
    /// or a stream is equal to itself only).
    package static func == (lhs: HTTPResponse, rhs: HTTPResponse) -> Bool {
        lhs.status == rhs.status && lhs.contentType == rhs.contentType && lhs.headers == rhs.headers
            && lhs.bodyCount == rhs.bodyCount && lhs.bodyParts.joined().elementsEqual(rhs.bodyParts.joined()) && lhs.file === rhs.file
            && lhs.stream === rhs.stream
    }

    /// A plain-text 404 naming the path, for routes the handler does not serve.
    package static func notFound(_ request: HTTPRequest) -> HTTPResponse {
        HTTPResponse(status: 404, text: "not found: \(request.path)\n")
    }
}

/// The standard reason phrase, or a generic one by class so any status code can be sent.
func reasonPhrase(_ status: Int) -> String {
    switch status {
    case 200: "OK"
    case 202: "Accepted"
    case 204: "No Content"
    case 301: "Moved Permanently"
    case 302: "Found"
    case 304: "Not Modified"
    case 400: "Bad Request"
    case 401: "Unauthorized"
    case 403: "Forbidden"
    case 404: "Not Found"
    case 405: "Method Not Allowed"
    case 408: "Request Timeout"
    case 413: "Content Too Large"
    case 429: "Too Many Requests"
    case 431: "Request Header Fields Too Large"
    case 500: "Internal Server Error"
    case 501: "Not Implemented"
    case 503: "Service Unavailable"
    case 505: "HTTP Version Not Supported"
    case 100..<200: "Informational"
    case 200..<300: "Success"
    case 300..<400: "Redirection"
    case 400..<500: "Client Error"
    default: "Server Error"
    }
}
