/// A parsed `HOST:PORT` listen string, before resolution.
///
/// Accepted forms: `127.0.0.1:9464`, `[::1]:9464`, `localhost:0`, `0.0.0.0:9464`. The host is
/// required: an empty host would mean "every interface", and exposing the collector beyond this
/// machine should be written out (`0.0.0.0` or `[::]`), not implied.
struct ListenAddress: Equatable {
    var host: String
    var port: Int

    /// Parses `text`, or throws `.invalidAddress` with the part that is wrong.
    init(parsing text: String) throws(HTTPServerError) {
        func invalid(_ reason: String) -> HTTPServerError { .invalidAddress(listen: text, reason: reason) }
        let expected = "expected HOST:PORT, e.g. 127.0.0.1:9464 or [::1]:9464"

        let hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw invalid("missing ] after an IPv6 address; \(expected)") }
            hostPart = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw invalid(expected) }
            portPart = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw invalid(expected) }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            if hostPart.contains(":") { throw invalid("put an IPv6 address in brackets, e.g. [::1]:9464") }
        }
        guard !hostPart.isEmpty else {
            throw invalid("missing host; write 127.0.0.1 for this machine only, 0.0.0.0 or [::] for every interface")
        }
        guard !portPart.isEmpty, portPart.count <= 5, portPart.allSatisfy({ $0.isASCII && $0.isNumber }),
            let port = Int(portPart), port <= 65535
        else { throw invalid("port must be a number from 0 to 65535 (0 picks a free one)") }
        host = String(hostPart)
        self.port = port
    }
}

extension HTTPServer {
    /// Checks the form of a listen string (`HOST:PORT`) without resolving or binding it, so that a
    /// command line can refuse a malformed address before anything starts.
    /// - Throws: `HTTPServerError.invalidAddress` naming the part that is wrong.
    package static func validate(listen: String) throws(HTTPServerError) {
        _ = try ListenAddress(parsing: listen)
    }
}
