/// An `http://` URL (or `https://`, where the caller has TLS), parsed: host, port and path (with
/// its query), as `HTTPClient` sends to it.
///
/// Accepted: `http://HOST[:PORT][/PATH[?QUERY]]`, the host a name, an IPv4 address or an IPv6
/// one in brackets; the port 80 when not given (443 for `https`). Refused, each with the reason:
/// other schemes (`https` too, unless the caller allows it: the client needs an `HTTPClientTLS`
/// for it), user names and passwords (give a header), fragments, and spaces or control characters.
package struct HTTPURL: Equatable, Sendable, CustomStringConvertible {
    /// Whether the URL is `https://`: the connection speaks TLS.
    package var secure = false
    /// The host as the resolver takes it (an IPv6 address without its brackets).
    package var host: String
    package var port: Int
    /// The path and query as written after the authority; empty when the URL has none.
    package var path: String

    package init(parsing text: String, allowingHTTPS: Bool = false) throws(HTTPURLError) {
        func invalid(_ reason: String) -> HTTPURLError { HTTPURLError(url: text, reason: reason) }
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else {
            throw invalid("expected http://HOST[:PORT][/PATH]")
        }
        let scheme = text[..<colon].lowercased()
        secure = scheme == "https"
        guard scheme == "http" || (secure && allowingHTTPS) else {
            if secure { throw invalid("https is not supported here: use http://") }
            throw invalid(allowingHTTPS ? "the scheme must be http or https" : "the scheme must be http")
        }
        let rest = text[colon...].dropFirst(3)
        guard rest.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw invalid("spaces, control characters and non-ASCII are not allowed")
        }
        guard !rest.contains("#") else { throw invalid("a fragment (#...) is not sent to a server; leave it out") }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.contains("@") else { throw invalid("user names and passwords are not taken in the URL; send a header") }
        var hostPart = authority
        var portPart: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw invalid("missing ] after an IPv6 address") }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("expected :PORT after the IPv6 address") }
                portPart = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
            if hostPart.contains(":") { throw invalid("put an IPv6 address in brackets, e.g. http://[::1]:4318") }
        }
        guard !hostPart.isEmpty else { throw invalid("missing host") }
        var port = secure ? 443 : 80
        if let portPart {
            guard !portPart.isEmpty, portPart.count <= 5, portPart.allSatisfy({ $0.isASCII && $0.isNumber }),
                let number = Int(portPart), (1...65535).contains(number)
            else { throw invalid("the port must be a number from 1 to 65535") }
            port = number
        }
        host = String(hostPart)
        self.port = port
        let tail = rest[authorityEnd...]
        path = tail.hasPrefix("?") ? "/" + tail : String(tail)
    }

    /// `HOST:PORT` as the `Host` header writes it (`[::1]:4318` for IPv6; no port when it is the
    /// scheme's, 80 or 443).
    package var authority: String {
        let shown = host.contains(":") ? "[\(host)]" : host
        return port == (secure ? 443 : 80) ? shown : "\(shown):\(port)"
    }

    package var description: String { "\(secure ? "https" : "http")://\(authority)\(path)" }
}

/// Why a URL was refused: the URL and the part that is wrong.
package struct HTTPURLError: Error, Equatable, Sendable, CustomStringConvertible {
    package var url: String
    package var reason: String

    package var description: String { "\(url): \(reason)" }
}
