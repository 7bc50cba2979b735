import Foundation

/// Certificates and password hashes for a test of `--web-config-file`, made by the real tools in a
/// directory of the test's own (removed by `remove()`): the `openssl` CLI makes a CA, a server
/// certificate for 127.0.0.1 it signs and a client certificate it signs, and a second CA unrelated
/// to the first with a client certificate of its own; `htpasswd -B` (apache2-utils) hashes passwords.
///
/// Files: `ca.crt`, `server.crt`/`server.key`, `client.crt`/`client.key`, `other-ca.crt`,
/// `other-client.crt`/`other-client.key`.
package struct TLSFixtures {
    package let directory: TemporaryDirectory
    private let openssl: String
    private let htpasswd: String

    /// Nil, after saying why, when `openssl` or `htpasswd` is missing outside CI; under CI a missing
    /// tool throws (`requiredSystemTool`).
    package static func make() throws -> TLSFixtures? {
        guard let openssl = try requiredSystemTool("openssl"), let htpasswd = try requiredSystemTool("htpasswd") else { return nil }
        return try TLSFixtures(openssl: openssl, htpasswd: htpasswd)
    }

    private init(openssl: String, htpasswd: String) throws {
        self.openssl = openssl
        self.htpasswd = htpasswd
        directory = try TemporaryDirectory("ringside-tls")
        do {
            try makeCA("ca", commonName: "Ringside test CA")
            try makeCertificate("server", signedBy: "ca", commonName: "127.0.0.1", extensions: "subjectAltName=IP:127.0.0.1")
            try makeCertificate("client", signedBy: "ca", commonName: "prometheus", extensions: "extendedKeyUsage=clientAuth")
            try makeCA("other-ca", commonName: "Another CA")
            try makeCertificate("other-client", signedBy: "other-ca", commonName: "intruder", extensions: "extendedKeyUsage=clientAuth")
        } catch {
            directory.remove()
            throw error
        }
    }

    package func remove() { directory.remove() }

    /// The path of a file in the directory.
    package func path(_ name: String) -> String { directory.path + "/" + name }

    /// Writes `text` to the file `name` in the directory; returns its path.
    @discardableResult
    package func write(_ name: String, _ text: String) throws -> String {
        try text.write(toFile: path(name), atomically: true, encoding: .utf8)
        return path(name)
    }

    /// A self-signed CA: `NAME.crt` and `NAME.key` (EC P-256, valid two days).
    package func makeCA(_ name: String, commonName: String) throws {
        try run([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path(name + ".key"),
            "-out", path(name + ".crt"), "-days", "2", "-subj", "/CN=\(commonName)",
        ])
    }

    /// A certificate `NAME.crt` with its key `NAME.key`, signed by the CA `ca`, with `extensions`
    /// (an OpenSSL extension line, e.g. `subjectAltName=IP:127.0.0.1`).
    package func makeCertificate(_ name: String, signedBy ca: String, commonName: String, extensions: String) throws {
        try run([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path(name + ".key"),
            "-out", path(name + ".csr"), "-subj", "/CN=\(commonName)",
        ])
        try write(name + ".ext", extensions + "\n")
        try run([
            "x509", "-req", "-in", path(name + ".csr"), "-CA", path(ca + ".crt"), "-CAkey", path(ca + ".key"),
            "-set_serial", String(UInt32.random(in: 1...UInt32.max)), "-out", path(name + ".crt"), "-days", "2",
            "-extfile", path(name + ".ext"),
        ])
    }

    /// The bcrypt hash of `password` at `cost`, as `htpasswd -nbBC COST "" PASSWORD` writes it (`$2y$...`).
    package func bcrypt(_ password: String, cost: Int = 10) throws -> String {
        let result = try runProcess(htpasswd, ["-nbBC", String(cost), "", password])
        let hash = result.output.trimmingCharacters(in: .whitespacesAndNewlines).trimmingCharacters(in: CharacterSet(charactersIn: ":"))
        guard result.status == 0, hash.hasPrefix("$2") else { throw TestSupportError("htpasswd: \(result.output) \(result.errors)") }
        return hash
    }

    private func run(_ arguments: [String]) throws {
        let result = try runProcess(openssl, arguments, mergingErrors: true)
        guard result.status == 0 else { throw TestSupportError("openssl \(arguments.joined(separator: " ")): \(result.output)") }
    }
}

/// What `curl` made of one request: the status (0 when there was no HTTP answer: a refused
/// handshake), the body, the headers, and curl's own error text.
package struct CurlResult {
    package var status: Int
    package var body: String
    package var headers: String
    package var errors: String
}

/// Runs `curl` against `url` with `options` (e.g. `--cacert`, `-u`, `--cert`); the caller found
/// curl with `requiredSystemTool`.
package func curl(_ curl: String, _ url: String, _ options: [String] = []) throws -> CurlResult {
    let headers = try TemporaryDirectory("ringside-curl")
    defer { headers.remove() }
    let result = try runProcess(
        curl, ["-sS", "--max-time", "10", "-D", headers.path + "/h", "-w", "\n%{http_code}"] + options + [url], timeoutSeconds: 20)
    var lines = result.output.components(separatedBy: "\n")
    let status = Int(lines.removeLast()) ?? 0
    let headerText = (try? String(contentsOfFile: headers.path + "/h", encoding: .utf8)) ?? ""
    return CurlResult(status: status, body: lines.joined(separator: "\n"), headers: headerText, errors: result.errors)
}
