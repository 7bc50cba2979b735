import Foundation
@testable import RingsideHTTP
import RingsideTestSupport
import Testing
@testable import RingsideHTTPClient

@Suite("YAMLSubset: the web configuration's YAML, and what it refuses with the line")
struct YAMLSubsetTests {
    @Test("block mappings, lists in both styles, quoted and plain scalars, comments and --- read as written")
    func readsTheSubset() throws {
        let text = """
            --- # a document marker and a comment
            tls_server_config:
              cert_file: "server.crt"   # a quoted value
              key_file: 'it''s.key'
              cipher_suites:
                - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
                - "TLS_AES_128_GCM_SHA256"
              curve_preferences: [X25519, "CurveP256",]
            basic_auth_users:
              alice: $2y$10$abc#not-a-comment
              "bob smith": "x\\ty\\u00e9"
            http_server_config:
              headers: {X-Frame-Options: deny, X-Content-Type-Options: nosniff}
            empty:
            list_at_key_indent:
            - a
            - key: value
              other: 2
            """
        let value = try YAMLSubset.parse(text)
        guard case .mapping(let top, line: 2) = value else {
            Issue.record("not a mapping: \(value)")
            return
        }
        #expect(top.map(\.key) == ["tls_server_config", "basic_auth_users", "http_server_config", "empty", "list_at_key_indent"])
        guard case .mapping(let tls, _) = top[0].value else {
            Issue.record("tls")
            return
        }
        #expect(tls[0].value == .scalar("server.crt", quoted: true, line: 3))
        #expect(tls[1].value == .scalar("it's.key", quoted: true, line: 4))
        #expect(
            tls[2].value
                == .sequence(
                    [
                        .scalar("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", quoted: false, line: 6),
                        .scalar("TLS_AES_128_GCM_SHA256", quoted: true, line: 7),
                    ], line: 6))
        #expect(
            tls[3].value == .sequence([.scalar("X25519", quoted: false, line: 8), .scalar("CurveP256", quoted: true, line: 8)], line: 8))
        guard case .mapping(let users, _) = top[1].value else {
            Issue.record("users")
            return
        }
        #expect(users[0].value == .scalar("$2y$10$abc#not-a-comment", quoted: false, line: 10))
        #expect(users[1].key == "bob smith" && users[1].value == .scalar("x\ty\u{e9}", quoted: true, line: 11))
        guard case .mapping(let http, _) = top[2].value, case .mapping(let headers, _) = http[0].value else {
            Issue.record("http")
            return
        }
        #expect(headers.map(\.key) == ["X-Frame-Options", "X-Content-Type-Options"])
        #expect(top[3].value == .null(line: 14))
        guard case .sequence(let items, _) = top[4].value, items.count == 2, case .mapping(let item, line: 17) = items[1] else {
            Issue.record("list: \(top[4].value)")
            return
        }
        #expect(item.map(\.key) == ["key", "other"] && item[1].value == .scalar("2", quoted: false, line: 18))
    }

    @Test("an empty document, or only comments, is null")
    func emptyDocument() throws {
        #expect(try YAMLSubset.parse("") == .null(line: 1))
        #expect(try YAMLSubset.parse("# nothing\n\n---\n") == .null(line: 1))
    }

    static let refused: [(text: String, line: Int, reason: String)] = [
        ("a: 1\n\tb: 2\n", 2, "tab"),
        ("a: 1\na: 2\n", 2, "given twice"),
        ("a: |\n  text\n", 1, "block scalars"),
        ("a: >\n  text\n", 1, "block scalars"),
        ("a: &x 1\n", 1, "anchors"),
        ("a: *x\n", 1, "aliases"),
        ("a: !!str 1\n", 1, "tags"),
        ("a: 1\n---\nb: 2\n", 2, "second document"),
        ("a: \"open\n", 1, "closing"),
        ("a: [1, 2\n", 1, "close on the same line"),
        ("a: [1, [2]]\n", 1, "nested"),
        ("a: b: c\n", 1, "quote it"),
        ("a:\n  b: 1\n    c: 2\n", 3, "indentation"),
        ("a:\n  - 1\n  b: 2\n", 3, "indentation"),
        ("a: 1\n  b: 2\n", 2, "indentation"),
        ("a: \"\\q\"\n", 1, "unknown escape"),
        ("a:\n  b: 1\n c: 2\n", 3, "indentation"),
        ("just text\n  more text\n", 2, "several lines"),
        ("%YAML 1.2\n---\na: 1\n", 1, "directives"),
    ]

    @Test("what is outside the subset is refused with its line and a reason", arguments: refused)
    func refusesWithLine(_ sample: (text: String, line: Int, reason: String)) {
        #expect {
            _ = try YAMLSubset.parse(sample.text)
        } throws: { error in
            guard let error = error as? YAMLError else { return false }
            return error.line == sample.line && error.reason.contains(sample.reason)
        }
    }
}

@Suite("WebConfig: exporter-toolkit's web configuration, checked as the toolkit checks it")
struct WebConfigTests {
    static let hash = "$2y$10$zvWwBPyUnYGVygRW3yflSO6oEQBKWMvEkQncMQqg5pJ1RS9FVkYfy"

    @Test("every key of the format is read, relative files are the file's directory's, defaults are the toolkit's")
    func readsEveryKey() throws {
        let text = """
            tls_server_config:
              cert_file: server.crt
              key_file: /etc/keys/server.key
              client_auth_type: RequireAndVerifyClientCert
              client_ca_file: ca/clients.pem
              min_version: TLS13
              max_version: TLS13
              cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_AES_128_GCM_SHA256]
              curve_preferences: [X25519, CurveP384]
              prefer_server_cipher_suites: false
            http_server_config:
              http2: false
              headers:
                X-Frame-Options: sameorigin
                Strict-Transport-Security: max-age=31536000
                X-XSS-Protection: ""
            basic_auth_users:
              prometheus: \(Self.hash)
            """
        let config = try WebConfig.parse(text, directory: "/etc/ringside")
        let tls = try #require(config.tls)
        #expect(tls.certFile == "/etc/ringside/server.crt" && tls.keyFile == "/etc/keys/server.key")
        #expect(tls.clientCAFile == "/etc/ringside/ca/clients.pem" && tls.clientAuth == .requireAndVerify)
        #expect(tls.minVersion == .tls13 && tls.maxVersion == .tls13)
        #expect(tls.cipherSuites == ["ECDHE-ECDSA-AES256-GCM-SHA384"])  // TLS 1.3's are always on, as in Go
        #expect(tls.curves == ["X25519", "P-384"] && !tls.preferServerCipherSuites)
        #expect(
            config.headers == [HTTPHeader("X-Frame-Options", "sameorigin"), HTTPHeader("Strict-Transport-Security", "max-age=31536000")])
        #expect(!config.http2)
        #expect(config.users.map(\.name) == ["prometheus"] && config.users.map(\.hash) == [Self.hash])
        #expect(config.referencedFiles == ["/etc/ringside/server.crt", "/etc/keys/server.key", "/etc/ringside/ca/clients.pem"])

        let plain = try WebConfig.parse("basic_auth_users:\n  a: \(Self.hash)\n", directory: "/x")
        #expect(plain.tls == nil && plain.users.count == 1)
        let defaults = try WebConfig.parse("tls_server_config:\n  cert_file: c\n  key_file: k\n", directory: "/x")
        #expect(
            defaults.tls?.minVersion == .tls12 && defaults.tls?.maxVersion == .tls13
                && defaults.tls?.clientAuth == WebConfig.ClientAuth.none)
        #expect(defaults.tls?.preferServerCipherSuites == true)
    }

    static let refused: [(text: String, line: Int?, reason: String)] = [
        ("tls_config:\n  cert_file: a\n", 1, "unknown key \"tls_config\""),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  cert_fle: c\n", 4, "unknown key \"cert_fle\" in tls_server_config"),
        ("tls_server_config:\n  cert_file: a\n", 1, "needs key_file"),
        ("tls_server_config:\n  key_file: a\n", 1, "needs cert_file"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Always\n", 4, "is not one of"),
        (
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n", 1,
            "client_ca_file is set but client_auth_type is NoClientCert"
        ),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS11\n", 4, "TLS 1.2 and 1.3 only"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  max_version: TLS12\n", 5, "above max_version"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [RC4]\n", 4, "unknown cipher suite"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  curve_preferences:\n    - P-256\n", 5, "unknown curve"),
        ("tls_server_config:\n  cert_file: a\n  key_file: b\n  prefer_server_cipher_suites: maybe\n", 4, "true or false"),
        ("tls_server_config:\n  cert: PEM\n", 2, "not supported"),
        ("tls_server_config:\n  client_allowed_sans: [a]\n", 2, "not supported"),
        ("rate_limit:\n  burst: 1\n", 1, "not supported"),
        ("basic_auth_users:\n  alice: secret\n", 2, "not a bcrypt hash"),
        ("basic_auth_users:\n  alice: $2y$03$zvWwBPyUnYGVygRW3yflSO6oEQBKWMvEkQncMQqg5pJ1RS9FVkYfy\n", 2, "not a bcrypt hash"),
        ("basic_auth_users:\n  - alice\n", 2, "must be a mapping"),
        ("http_server_config:\n  headers:\n    Server: ringside\n", 3, "can not be configured"),
        ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", 3, "expected deny or sameorigin"),
        ("http_server_config:\n  http2: yes please\n", 2, "true or false"),
        ("http_server_config:\n  headers:\n    X-XSS-Protection: \"1\\r\\nSet-Cookie: x\"\n", 3, "control character"),
        ("tls_server_config: [a]\n", 1, "must be a mapping"),
    ]

    @Test("a file the toolkit would refuse is refused with the line to blame and why", arguments: refused)
    func refusesWithLine(_ sample: (text: String, line: Int?, reason: String)) {
        #expect {
            _ = try WebConfig.parse(sample.text, directory: "/x")
        } throws: { error in
            guard let error = error as? WebConfigError else { return false }
            return error.line == sample.line && error.reason.contains(sample.reason)
        }
    }

    @Test("bcrypt through libxcrypt verifies htpasswd's $2y$ hashes, and $2b$ and $2a$ forms of them; a wrong password does not")
    func bcryptVerifies() throws {
        guard let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let hash = try fixtures.bcrypt("correct horse", cost: 6)
        #expect(Bcrypt.isHash(hash) && Bcrypt.cost(of: hash) == 6)
        for prefix in ["$2y$", "$2b$", "$2a$"] {
            let variant = prefix + hash.dropFirst(4)
            #expect(Bcrypt.verify(password: Array("correct horse".utf8), hash: variant), "\(variant)")
            #expect(!Bcrypt.verify(password: Array("correct horsE".utf8), hash: variant))
            #expect(!Bcrypt.verify(password: Array("correct horse\0x".utf8), hash: variant))
        }
        let setting = try #require(Bcrypt.randomSetting(cost: 6))
        #expect(setting.hasPrefix("$2b$06$") && !Bcrypt.verify(password: Array("correct horse".utf8), hash: setting))
    }

    @Test("Basic credentials: base64 of user:password, the scheme in any case; anything else is no credentials")
    func basicCredentials() {
        let alice = BasicCredentials(header: "Basic YWxpY2U6c2VjcmV0")
        #expect(alice?.user == Array("alice".utf8) && alice?.password == Array("secret".utf8))
        #expect(BasicCredentials(header: "basic YTpiOmM=")?.password == Array("b:c".utf8))  // the first colon splits
        #expect(BasicCredentials(header: "BASIC Ong=")?.user == [])
        for bad in ["Bearer YWxpY2U6c2VjcmV0", "Basic", "Basic YWxpY2U", "Basic YWxp*2U6", "Basic YWxpY2U6c2VjcmV0=", "Basic =YWx"] {
            #expect(BasicCredentials(header: bad) == nil, "\(bad)")
        }
    }

    /// Files the collector accepts: each loaded by `WebSecurity.check` (the collector's own check,
    /// certificate and key loaded), then given to `promtool check web-config` of Prometheus 2.42.
    @Test("promtool check web-config accepts every file the collector accepts, and refuses those both refuse")
    func promtoolAgrees() throws {
        guard let promtool = try requiredSystemTool("promtool"), let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        let hash = try fixtures.bcrypt("secret", cost: 5)
        let tls = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        let accepted = [
            "",
            "basic_auth_users:\n  prometheus: \(hash)\n  'grafana': \"\(hash)\"\n",
            tls,
            tls + "basic_auth_users:\n  prometheus: \(hash)\n",
            tls + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
            tls + "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n",
            tls + "  client_auth_type: RequireAnyClientCert\n",
            tls + "  client_auth_type: RequestClientCert\n",
            tls + "  min_version: TLS13\n  max_version: TLS13\n",
            tls + "  cipher_suites:\n    - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n    - TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256\n"
                + "  prefer_server_cipher_suites: false\n  curve_preferences: [X25519, CurveP256]\n",
            tls + "http_server_config:\n  http2: false\n  headers:\n    X-Content-Type-Options: nosniff\n    X-Frame-Options: deny\n",
        ]
        for (index, text) in accepted.enumerated() {
            let path = try fixtures.write("accepted-\(index).yml", text)
            #expect(throws: Never.self, "\(text)") { try WebSecurity.check(path: path) }
            let result = try runProcess(promtool, ["check", "web-config", path], mergingErrors: true)
            #expect(
                result.status == 0 && result.output.contains("SUCCESS"),
                "promtool refused what the collector accepts:\n\(text)\n\(result.output)")
        }
        let refused = [
            "tls_server_config:\n  cert_file: server.crt\n  key_file: client.key\n",  // not the certificate's key
            "tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n",
            "tls_server_config:\n  cert_file: server.crt\n",
            tls + "  client_auth_type: Sometimes\n",
            tls + "  client_ca_file: ca.crt\n",
            tls + "  unknown: 1\n",
            "basic_auth_users:\n  prometheus: plaintext\n",
            "http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
        ]
        for (index, text) in refused.enumerated() {
            let path = try fixtures.write("refused-\(index).yml", text)
            #expect(throws: WebConfigError.self, "\(text)") { try WebSecurity.check(path: path) }
            let result = try runProcess(promtool, ["check", "web-config", path], mergingErrors: true)
            #expect(result.status != 0, "promtool accepted what the collector refuses:\n\(text)\n\(result.output)")
        }
    }

    @Test("a certificate that does not load is named with OpenSSL's reason")
    func certificateErrorsNameTheFile() throws {
        guard let fixtures = try TLSFixtures.make() else { return }
        defer { fixtures.remove() }
        try fixtures.write("garbage.crt", "not a certificate\n")
        let cases: [(String, String)] = [
            ("cert_file: garbage.crt\n  key_file: server.key", "cert_file \(fixtures.path("garbage.crt")): not a PEM certificate"),
            ("cert_file: server.crt\n  key_file: client.key", "is not the key of cert_file"),
            ("cert_file: nowhere.crt\n  key_file: server.key", "cert_file \(fixtures.path("nowhere.crt")): No such file or directory"),
        ]
        for (lines, reason) in cases {
            let path = try fixtures.write("bad.yml", "tls_server_config:\n  \(lines)\n")
            #expect {
                try WebSecurity.check(path: path)
            } throws: { error in
                "\(error)".contains(reason)
            }
        }
    }
}
