import RingsideHTTPClient
/// Exporter-toolkit's web configuration file (`--web-config-file`, also spelled
/// `--web.config.file`), checked: TLS, basic-auth users with bcrypt hashes, extra headers.
///
/// The keys are those of exporter-toolkit 0.8 and 0.9, which Prometheus 2.42 (its
/// `promtool check web-config`) reads, with the same meanings and defaults; a file this type
/// accepts, promtool accepts. A key it does not know is refused with its line, as the toolkit's
/// strict YAML decoding refuses it. Where this server is stricter, it says why: TLS 1.0 and 1.1
/// are refused, and so are keys of later toolkits (inline `cert`, `key`, `client_ca`,
/// `client_allowed_sans`, `rate_limit`), which promtool 2.42 would refuse.
package struct WebConfig: Equatable, Sendable {
    /// `tls_server_config`; nil when it sets nothing (plain HTTP).
    package var tls: TLSSettings?
    /// `basic_auth_users`: user name to bcrypt hash, in the file's order. Empty: no password asked.
    package var users: [(name: String, hash: String)] = []
    /// `http_server_config.headers`, added to every response.
    package var headers: [HTTPHeader] = []
    /// `http_server_config.http2`: read and checked, without effect (this server speaks HTTP/1.1 only).
    package var http2 = true

    package struct TLSSettings: Equatable, Sendable {
        /// Absolute paths (relative ones in the file are taken from the file's directory, as the toolkit does).
        package var certFile: String
        package var keyFile: String
        package var clientCAFile: String?
        package var clientAuth: ClientAuth = .none
        package var minVersion: TLSVersion = .tls12
        package var maxVersion: TLSVersion = .tls13
        /// OpenSSL's names of the TLS 1.2 suites asked for (empty: OpenSSL's defaults).
        package var cipherSuites: [String] = []
        /// OpenSSL's names of the groups asked for, in order (empty: OpenSSL's defaults).
        package var curves: [String] = []
        package var preferServerCipherSuites = true
    }

    /// `client_auth_type`, as Go's `tls.ClientAuthType` means each.
    package enum ClientAuth: String, CaseIterable, Sendable {
        /// `NoClientCert`: no certificate asked for.
        case none = "NoClientCert"
        /// `RequestClientCert`: asked for, neither required nor checked.
        case request = "RequestClientCert"
        /// `RequireAnyClientCert`: required, not checked against a CA.
        case requireAny = "RequireAnyClientCert"
        /// `VerifyClientCertIfGiven`: checked against the client CA when one is sent.
        case verifyIfGiven = "VerifyClientCertIfGiven"
        /// `RequireAndVerifyClientCert`: required and checked: the one setting that authenticates clients.
        case requireAndVerify = "RequireAndVerifyClientCert"
    }

    package enum TLSVersion: Int, Comparable, Sendable {
        case tls12 = 0x0303
        case tls13 = 0x0304

        package static func < (a: TLSVersion, b: TLSVersion) -> Bool { a.rawValue < b.rawValue }
    }

    package static func == (a: WebConfig, b: WebConfig) -> Bool {
        a.tls == b.tls && a.headers == b.headers && a.http2 == b.http2
            && a.users.map(\.name) == b.users.map(\.name) && a.users.map(\.hash) == b.users.map(\.hash)
    }

    /// The files the configuration names (certificate, key, client CA), to watch for changes.
    package var referencedFiles: [String] {
        guard let tls else { return [] }
        return [tls.certFile, tls.keyFile] + (tls.clientCAFile.map { [$0] } ?? [])
    }

    /// Reads a web configuration's text. Relative file names are resolved against `directory`
    /// (the file's own). Checks the form only: that the certificate and key load is `TLSContext`'s.
    ///
    /// - Throws: `WebConfigError` with the line and the reason.
    package static func parse(_ text: String, directory: String) throws(WebConfigError) -> WebConfig {
        let document: YAMLValue
        do { document = try YAMLSubset.parse(text) } catch { throw WebConfigError(line: error.line, reason: error.reason) }
        var config = WebConfig()
        for entry in try mappingEntries(document, name: "the web configuration") {
            switch entry.key {
            case "tls_server_config":
                config.tls = try tlsSettings(entry, directory: directory)
            case "http_server_config":
                for field in try mappingEntries(entry.value, name: entry.key) {
                    switch field.key {
                    case "http2": config.http2 = try boolean(field)
                    case "headers": config.headers = try headers(field)
                    default: throw unknownKey(field, in: entry.key, known: ["http2", "headers"])
                    }
                }
            case "basic_auth_users":
                for user in try mappingEntries(entry.value, name: entry.key) {
                    let hash = try string(user, what: "the bcrypt hash of user \"\(user.key)\"")
                    guard Bcrypt.isHash(hash) else {
                        throw WebConfigError(
                            line: user.line,
                            reason: "the password of user \"\(user.key)\" is not a bcrypt hash ($2a$, $2b$ or $2y$, cost 04 to 31, "
                                + "60 characters); make one with: htpasswd -nBC 10 \"\" | tr -d ':\\n'")
                    }
                    config.users.append((user.key, hash))
                }
            case "rate_limit":
                throw WebConfigError(
                    line: entry.line, reason: "rate_limit (exporter-toolkit 0.12) is not supported (nor by Prometheus 2.42's promtool)")
            default:
                throw unknownKey(entry, in: nil, known: ["tls_server_config", "http_server_config", "basic_auth_users"])
            }
        }
        return config
    }

    /// `tls_server_config`, read key by key and then checked whole; nil when it sets none of the
    /// keys that turn TLS on.
    private static func tlsSettings(_ entry: YAMLEntry, directory: String) throws(WebConfigError) -> TLSSettings? {
        var fields = TLSFields()
        for field in try mappingEntries(entry.value, name: entry.key) {
            switch field.key {
            case "cert_file": fields.certFile = try filePath(field, directory: directory)
            case "key_file": fields.keyFile = try filePath(field, directory: directory)
            case "client_ca_file": fields.clientCAFile = try filePath(field, directory: directory)
            case "client_auth_type": fields.clientAuth = (try clientAuth(field), field.line)
            case "min_version":
                fields.settings.minVersion = try tlsVersion(field)
                fields.versionLine.min = field.line
            case "max_version":
                fields.settings.maxVersion = try tlsVersion(field)
                fields.versionLine.max = field.line
            case "cipher_suites": fields.settings.cipherSuites += try openSSLCipherSuites(field)
            case "curve_preferences": fields.settings.curves += try openSSLGroups(field)
            case "prefer_server_cipher_suites": fields.settings.preferServerCipherSuites = try boolean(field)
            case "cert", "key", "client_ca", "client_allowed_sans":
                throw WebConfigError(
                    line: field.line,
                    reason: "\(field.key) (a key of later exporter-toolkits) is not supported, nor by Prometheus 2.42's promtool"
                        + (field.key == "client_allowed_sans" ? "" : "; write the PEM to a file and name it with \(field.key)_file"))
            default:
                throw unknownKey(
                    field, in: entry.key,
                    known: [
                        "cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version",
                        "cipher_suites", "curve_preferences", "prefer_server_cipher_suites",
                    ])
            }
        }
        return try fields.checked(line: entry.line)
    }

    /// What `tls_server_config` set, as its keys are read: the files and the client auth type stay
    /// nil until named (TLS is on only when one of them is), the rest goes to `settings` at once;
    /// each with the line an error points at.
    private struct TLSFields {
        var certFile: String?, keyFile: String?, clientCAFile: String?
        var clientAuth: (ClientAuth, line: Int)?
        var versionLine: (min: Int?, max: Int?)
        var settings = TLSSettings(certFile: "", keyFile: "")

        /// The settings, checked whole once every key is read (`line`: `tls_server_config`'s): the
        /// versions in order; then, as the toolkit, TLS is on when a file or the client auth type
        /// is set, and needs both the certificate and the key; a client CA needs a client auth
        /// type that asks for certificates. Nil when TLS is off.
        func checked(line: Int) throws(WebConfigError) -> TLSSettings? {
            if settings.minVersion > settings.maxVersion {
                throw WebConfigError(line: versionLine.max ?? versionLine.min ?? line, reason: "min_version is above max_version")
            }
            guard certFile != nil || keyFile != nil || clientAuth != nil || clientCAFile != nil else { return nil }
            guard let certFile else { throw WebConfigError(line: line, reason: "tls_server_config needs cert_file") }
            guard let keyFile else { throw WebConfigError(line: line, reason: "tls_server_config needs key_file") }
            var tls = settings
            tls.certFile = certFile
            tls.keyFile = keyFile
            tls.clientCAFile = clientCAFile
            tls.clientAuth = clientAuth?.0 ?? .none
            if clientCAFile != nil && tls.clientAuth == .none {
                throw WebConfigError(
                    line: clientAuth?.line ?? line,
                    reason: "client_ca_file is set but client_auth_type is NoClientCert: set client_auth_type: RequireAndVerifyClientCert "
                        + "to check client certificates against it")
            }
            return tls
        }
    }

    /// A file's name, a relative one taken from `directory` (the configuration's own) as the
    /// toolkit does; nil when empty.
    private static func filePath(_ field: YAMLEntry, directory: String) throws(WebConfigError) -> String? {
        let text = try string(field, what: field.key)
        guard !text.isEmpty else { return nil }  // empty is unset, as in Go
        return text.hasPrefix("/") ? text : (directory.hasSuffix("/") ? directory : directory + "/") + text
    }

    /// `client_auth_type`'s value, with the toolkit's old name and empty (the default) taken.
    private static func clientAuth(_ field: YAMLEntry) throws(WebConfigError) -> ClientAuth {
        let text = try string(field, what: field.key)
        // RequireClientCert is the toolkit's old name of RequireAnyClientCert; empty is the default.
        let value = text.isEmpty ? "NoClientCert" : text == "RequireClientCert" ? "RequireAnyClientCert" : text
        guard let auth = ClientAuth(rawValue: value) else {
            throw WebConfigError(
                line: field.line,
                reason: "client_auth_type \"\(text)\" is not one of " + ClientAuth.allCases.map(\.rawValue).joined(separator: ", "))
        }
        return auth
    }

    /// `cipher_suites`' Go names as OpenSSL's, in order; TLS 1.3's (no OpenSSL name: accepted,
    /// without effect, as in Go) are left out.
    private static func openSSLCipherSuites(_ field: YAMLEntry) throws(WebConfigError) -> [String] {
        try openSSLNames(field, in: cipherSuites) {
            "unknown cipher suite \"\($0)\"; use Go's names, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 (docs/operations.md lists them)"
        }
    }

    /// `curve_preferences`' Go names as OpenSSL's groups, in order.
    private static func openSSLGroups(_ field: YAMLEntry) throws(WebConfigError) -> [String] {
        try openSSLNames(field, in: curves) { "unknown curve \"\($0)\"; use one of " + curves.keys.sorted().joined(separator: ", ") }
    }

    /// A list of Go's names read as OpenSSL's from `table`, in order, those with an empty name left
    /// out; an unknown one is refused at its line, saying `unknown(name)`.
    private static func openSSLNames(
        _ field: YAMLEntry, in table: [String: String], unknown: (String) -> String
    ) throws(WebConfigError) -> [String] {
        var names: [String] = []
        for (name, line) in try strings(field) {
            guard let openSSLName = table[name] else { throw WebConfigError(line: line, reason: unknown(name)) }
            if !openSSLName.isEmpty { names.append(openSSLName) }
        }
        return names
    }

    private static func tlsVersion(_ field: YAMLEntry) throws(WebConfigError) -> TLSVersion {
        switch try string(field, what: field.key) {
        case "TLS12": return .tls12
        case "TLS13": return .tls13
        case "TLS10", "TLS11":
            throw WebConfigError(line: field.line, reason: "\(field.key): this server speaks TLS 1.2 and 1.3 only (TLS12, TLS13)")
        case let other:
            throw WebConfigError(line: field.line, reason: "\(field.key) \"\(other)\" is not a TLS version (TLS12, TLS13)")
        }
    }

    /// The headers exporter-toolkit lets a file set, and the values allowed where it limits them.
    private static let allowedHeaders: [(name: String, values: [String])] = [
        ("Strict-Transport-Security", []), ("X-Content-Type-Options", ["nosniff"]),
        ("X-Frame-Options", ["deny", "sameorigin"]), ("X-XSS-Protection", []), ("Content-Security-Policy", []),
    ]

    private static func headers(_ field: YAMLEntry) throws(WebConfigError) -> [HTTPHeader] {
        var headers: [HTTPHeader] = []
        for header in try mappingEntries(field.value, name: field.key) {
            guard let allowed = allowedHeaders.first(where: { $0.name == header.key }) else {
                throw WebConfigError(
                    line: header.line,
                    reason: "HTTP header \"\(header.key)\" can not be configured (only "
                        + allowedHeaders.map(\.name).joined(separator: ", ")
                        + ")")
            }
            let value = try string(header, what: header.key)
            guard allowed.values.isEmpty || allowed.values.contains(value) else {
                throw WebConfigError(
                    line: header.line, reason: "\(header.key) \"\(value)\": expected " + allowed.values.joined(separator: " or "))
            }
            // CR, LF and NUL would split the response; a YAML escape could put them here.
            guard !value.utf8.contains(where: { $0 < 0x20 && $0 != 0x09 }) else {
                throw WebConfigError(line: header.line, reason: "\(header.key): a control character in the value")
            }
            if !value.isEmpty { headers.append(HTTPHeader(header.key, value)) }  // empty: unset, as the toolkit
        }
        return headers
    }

    // MARK: - Types of values

    private static func mappingEntries(_ value: YAMLValue, name: String) throws(WebConfigError) -> [YAMLEntry] {
        switch value {
        case .mapping(let entries, _): return entries
        case .null: return []
        default: throw WebConfigError(line: value.line, reason: "\(name) must be a mapping of KEY: VALUE lines")
        }
    }

    private static func string(_ field: YAMLEntry, what: String) throws(WebConfigError) -> String {
        switch field.value {
        case .scalar(let text, _, _): return text
        case .null: return ""
        default: throw WebConfigError(line: field.line, reason: "\(what) must be one value, not a list or a mapping")
        }
    }

    private static func strings(_ field: YAMLEntry) throws(WebConfigError) -> [(String, Int)] {
        switch field.value {
        case .sequence(let items, _):
            var result: [(String, Int)] = []
            for item in items {
                guard case .scalar(let text, _, let line) = item else {
                    throw WebConfigError(line: item.line, reason: "\(field.key) must be a list of names")
                }
                result.append((text, line))
            }
            return result
        case .null: return []
        default: throw WebConfigError(line: field.line, reason: "\(field.key) must be a list (- NAME lines, or [NAME, NAME])")
        }
    }

    private static func boolean(_ field: YAMLEntry) throws(WebConfigError) -> Bool {
        if case .scalar(let text, false, _) = field.value {
            switch text {
            case "true", "True", "TRUE": return true
            case "false", "False", "FALSE": return false
            default: break
            }
        }
        throw WebConfigError(line: field.line, reason: "\(field.key) must be true or false")
    }

    private static func unknownKey(_ entry: YAMLEntry, in section: String?, known: [String]) -> WebConfigError {
        WebConfigError(
            line: entry.line,
            reason: "unknown key \"\(entry.key)\"" + (section.map { " in \($0)" } ?? "") + " (known: " + known.joined(separator: ", ") + ")"
        )
    }

    /// Go's names of the cipher suites `crypto/tls` offers, as exporter-toolkit takes them, and
    /// OpenSSL's names of the same. TLS 1.3's are accepted and have no effect, as in Go (TLS 1.3
    /// always offers its three).
    static let cipherSuites: [String: String] = [
        "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
        "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
        "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
        "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
        "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
        "TLS_AES_128_GCM_SHA256": "",
        "TLS_AES_256_GCM_SHA384": "",
        "TLS_CHACHA20_POLY1305_SHA256": "",
    ]

    /// Go's names of the curves exporter-toolkit takes, and OpenSSL's names of the same groups.
    static let curves: [String: String] = ["CurveP256": "P-256", "CurveP384": "P-384", "CurveP521": "P-521", "X25519": "X25519"]
}

/// Why a web configuration file was refused: its line when one is to blame, and the reason.
package struct WebConfigError: Error, Equatable, Sendable, CustomStringConvertible {
    package var line: Int?
    package var reason: String

    package init(line: Int? = nil, reason: String) {
        self.line = line
        self.reason = reason
    }

    package var description: String { (line.map { "line \($0): " } ?? "") + reason }
}
