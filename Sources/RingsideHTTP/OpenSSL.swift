// Every call RingsideHTTP makes into the system's OpenSSL (libssl-dev): the TLS context a web
// configuration's certificate, key and client CA make, one connection's TLS stream over a
// non-blocking socket, and SHA-256, random bytes and a constant-time comparison for the password
// cache. Everyone else sees `TLSContext`, `TLSStream`, `IOResult` and plain arrays.

import COpenSSL
import Glibc
import RingsideSystem
import RingsideHTTPClient

/// OpenSSL's helpers that are not TLS.
enum OpenSSL {
    /// SHA-256 of the parts, one after the other (EVP). The corresponding C function is `EVP_Digest`.
    static func sha256(_ parts: [[UInt8]]) -> [UInt8] {
        let joined = Array(parts.joined())
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = joined.withUnsafeBytes { EVP_Digest($0.baseAddress, $0.count, &digest, &length, EVP_sha256(), nil) }
        precondition(ok == 1 && length == 32, "EVP_Digest(SHA-256) failed")  // only with no memory left
        return Array(digest.prefix(32))
    }

    /// `count` bytes from OpenSSL's generator (seeded by the kernel's). The corresponding C
    /// function is `RAND_bytes`.
    static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = RAND_bytes(&bytes, Int32(count))
        precondition(ok == 1, "RAND_bytes failed: the system's random generator is unavailable")
        return bytes
    }

    /// Whether `a` and `b` are equal, in a time that depends on their length only.
    /// The corresponding C function is `CRYPTO_memcmp`.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { x in b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 } }
    }

    /// The thread's queued errors as one line (`"reason (library)"`, joined with "; "), and the
    /// first one's reason code; the queue is left empty. The corresponding C function is `ERR_get_error`.
    static func takeErrors() -> (text: String, reason: Int32) {
        var texts: [String] = []
        var first: Int32 = 0
        while case let code = ERR_get_error(), code != 0 {
            if first == 0 { first = rs_err_reason(code) }
            let reason = ERR_reason_error_string(code).map { String(cString: $0) } ?? "error \(rs_err_reason(code))"
            texts.append(reason)
        }
        return (texts.isEmpty ? "unknown error" : texts.joined(separator: "; "), first)
    }
}

/// A server's TLS settings with its certificate and key loaded: an `SSL_CTX`. Made once per
/// version of the web configuration and its files; each connection's `TLSStream` keeps the
/// context it began with, so a connection open across a reload finishes as it began.
///
/// Unchecked `Sendable`: once made it is only read (`SSL_new`), which OpenSSL allows from any thread.
final class TLSContext: @unchecked Sendable {
    private let context: OpaquePointer

    /// Loads the certificate chain, the key and the client CA of `settings`, and applies its versions, suites and curves.
    ///
    /// - Throws: `WebConfigError` naming the file or setting and OpenSSL's reason.
    init(_ settings: WebConfig.TLSSettings) throws(WebConfigError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw WebConfigError(reason: "cannot make a TLS context: \(OpenSSL.takeErrors().text)")
        }
        self.context = context
        try configure(settings)
    }

    deinit { SSL_CTX_free(context) }

    private func configure(_ settings: WebConfig.TLSSettings) throws(WebConfigError) {
        func failure(_ what: String) -> WebConfigError { WebConfigError(reason: "\(what): \(OpenSSL.takeErrors().text)") }
        _ = rs_ssl_ctx_set_nonblocking_modes(context)
        rs_ssl_ctx_set_server_options(context, settings.preferServerCipherSuites ? 1 : 0)
        _ = rs_ssl_ctx_disable_session_cache(context)
        guard rs_ssl_ctx_set_protocol_versions(context, Int32(settings.minVersion.rawValue), Int32(settings.maxVersion.rawValue)) == 1
        else { throw failure("min_version, max_version") }
        if !settings.cipherSuites.isEmpty {
            guard SSL_CTX_set_cipher_list(context, settings.cipherSuites.joined(separator: ":")) == 1 else {
                throw failure("cipher_suites: OpenSSL offers none of them")
            }
        }
        if !settings.curves.isEmpty {
            guard rs_ssl_ctx_set_groups(context, settings.curves.joined(separator: ":")) == 1 else { throw failure("curve_preferences") }
        }
        // Read here, checked as trusted and non-blocking, and handed over in memory: OpenSSL's
        // own file functions would fopen a FIFO and wait on it.
        let certificate = try Self.read(settings.certFile, key: "cert_file")
        var key = try Self.read(settings.keyFile, key: "key_file")
        defer { key.withUnsafeMutableBytes { $0.initializeMemory(as: UInt8.self, repeating: 0) } }  // no key left in freed memory
        if let refusal = Self.useCertificateChain(context, certificate, name: "cert_file \(settings.certFile)") {
            throw WebConfigError(reason: refusal)
        }
        let names = (key: "key_file \(settings.keyFile)", certificate: "cert_file \(settings.certFile)")
        if let refusal = Self.usePrivateKey(context, key, keyName: names.key, certificateName: names.certificate) {
            throw WebConfigError(reason: refusal)
        }
        try configureClientCertificates(settings)
    }

    /// What `client_auth_type` asks of clients, as Go's `tls.ClientAuthType` means it.
    private func configureClientCertificates(_ settings: WebConfig.TLSSettings) throws(WebConfigError) {
        if let file = settings.clientCAFile {
            try trustClientCAs(try Self.read(file, key: "client_ca_file"), path: file)
        } else if settings.clientAuth == .verifyIfGiven || settings.clientAuth == .requireAndVerify {
            // Go checks against the system's CAs when no client CA is given.
            _ = SSL_CTX_set_default_verify_paths(context)
        }
        let accept: @convention(c) (Int32, OpaquePointer?) -> Int32 = { _, _ in 1 }  // any certificate, unchecked
        switch settings.clientAuth {
        case .none: SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        case .request: SSL_CTX_set_verify(context, SSL_VERIFY_PEER, accept)
        case .requireAny: SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, accept)
        case .verifyIfGiven: SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        case .requireAndVerify: SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
        }
    }

    /// The most a certificate, key or CA file may hold: a CA bundle of every public CA is some 220 KB.
    static let maxFileBytes = 4 << 20

    /// The bytes of a file the configuration names, checked as `TrustedFile` checks it.
    private static func read(_ path: String, key: String) throws(WebConfigError) -> [UInt8] {
        do { return try TrustedFile.read(path, maxBytes: maxFileBytes) } catch {
            throw WebConfigError(reason: "\(key) \(path): \(error.reason)")
        }
    }

    /// A certificate, then the chain after it, from PEM bytes, as
    /// `SSL_CTX_use_certificate_chain_file` reads a file; the refusal, beginning with `name` (the
    /// setting and its file), or nil. The corresponding C functions are `PEM_read_bio_X509_AUX`,
    /// `SSL_CTX_use_certificate` and `SSL_CTX_add0_chain_cert`.
    static func useCertificateChain(_ context: OpaquePointer, _ bytes: [UInt8], name: String) -> String? {
        withPEM(bytes) { bio -> String? in
            guard let leaf = rs_pem_read_certificate(bio, 1) else { return failure("\(name): not a PEM certificate") }
            defer { X509_free(leaf) }  // the context keeps a reference of its own
            guard SSL_CTX_use_certificate(context, leaf) == 1 else { return failure("\(name): not a usable certificate") }
            while let next = rs_pem_read_certificate(bio, 0) {
                guard rs_ssl_ctx_add0_chain_cert(context, next) == 1 else {
                    X509_free(next)
                    return failure("\(name): a certificate of its chain is not usable")
                }
            }
            return endedCleanly() ? nil : failure("\(name): a certificate of its chain is not PEM")
        }
    }

    /// The private key, from PEM bytes, checked against the certificate; the refusal naming
    /// `keyName` (and `certificateName`), or nil. The corresponding C functions are
    /// `PEM_read_bio_PrivateKey` (with no passphrase: an encrypted key is refused, never asked
    /// for) and `SSL_CTX_use_PrivateKey`.
    static func usePrivateKey(_ context: OpaquePointer, _ bytes: [UInt8], keyName: String, certificateName: String) -> String? {
        let mismatch = "\(keyName) is not the key of \(certificateName)"
        return withPEM(bytes) { bio -> String? in
            guard let key = rs_pem_read_private_key(bio) else {
                return failure("\(keyName): not a PEM private key (or an encrypted one)")
            }
            defer { EVP_PKEY_free(key) }  // the context keeps a reference of its own
            guard SSL_CTX_use_PrivateKey(context, key) == 1 else {
                let (text, reason) = OpenSSL.takeErrors()
                return reason == X509_R_KEY_VALUES_MISMATCH ? mismatch : "\(keyName): not a usable private key: \(text)"
            }
            return SSL_CTX_check_private_key(context) == 1 ? nil : failure(mismatch)
        }
    }

    /// Trusts the CA certificates in PEM bytes for client certificates, and sends their names to
    /// clients so they pick a certificate one of them signed. The corresponding C functions are
    /// `X509_STORE_add_cert` and `SSL_CTX_add_client_CA`.
    private func trustClientCAs(_ bytes: [UInt8], path: String) throws(WebConfigError) {
        let store = SSL_CTX_get_cert_store(context)
        let refusal = Self.withPEM(bytes) { bio -> String? in
            var count = 0
            while let certificate = rs_pem_read_certificate(bio, 1) {
                defer { X509_free(certificate) }  // the store and the list keep what they need
                guard X509_STORE_add_cert(store, certificate) == 1, SSL_CTX_add_client_CA(context, certificate) == 1 else {
                    return Self.failure("client_ca_file \(path): a certificate in it cannot be trusted")
                }
                count += 1
            }
            guard count > 0 else { return Self.failure("client_ca_file \(path): no PEM certificate in it") }
            return Self.endedCleanly() ? nil : Self.failure("client_ca_file \(path): a certificate in it is not PEM")
        }
        if let refusal { throw WebConfigError(reason: refusal) }
    }

    /// `what`, then OpenSSL's reasons (the queue is emptied).
    static func failure(_ what: String) -> String { "\(what): \(OpenSSL.takeErrors().text)" }

    /// `body` with a read-only memory BIO over `bytes`. The corresponding C functions are
    /// `BIO_new_mem_buf` and `BIO_free`.
    static func withPEM(_ bytes: [UInt8], _ body: (OpaquePointer) -> String?) -> String? {
        ERR_clear_error()
        return bytes.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return "no memory for a BIO" }
            defer { BIO_free(bio) }
            return body(bio)
        }
    }

    /// Whether the reads stopped at the end of the bytes (OpenSSL's "no start line", taken off
    /// the queue), not at a broken block.
    static func endedCleanly() -> Bool {
        let last = ERR_peek_last_error()
        guard last == 0 || rs_err_is_pem_end(last) != 0 else { return false }
        ERR_clear_error()
        return true
    }

    /// A TLS stream for the accepted socket `fd`, its handshake yet to run; nil when OpenSSL has no
    /// memory for one. The corresponding C functions are `SSL_new` and `SSL_set_fd`.
    func stream(fd: Int32) -> TLSStream? {
        ERR_clear_error()
        guard let ssl = SSL_new(context) else { return nil }
        guard SSL_set_fd(ssl, fd) == 1 else {
            SSL_free(ssl)
            return nil
        }
        return TLSStream(ssl)
    }
}

/// One connection's TLS over its non-blocking socket: the handshake, then reads and writes that
/// say what they wait for instead of blocking.
///
/// OpenSSL reads and writes the socket itself (`write`, which would raise SIGPIPE on a peer that
/// hung up: the server's loop thread blocks SIGPIPE). Owned by the server thread.
final class TLSStream {
    let ssl: OpaquePointer
    /// What the last call is waiting for: `POLLIN` or `POLLOUT` (nil when it did not wait).
    private(set) var waitingFor: Int16?
    /// The length of a write that must be made again as it was (OpenSSL requires the same length).
    private var pendingWrite: Int?
    /// OpenSSL's reasons for the last read or write that failed in TLS (an alert from the peer).
    private(set) var lastError: String?
    /// The most plaintext one write takes: one TLS record's.
    private static let recordBytes = 16 * 1024

    init(_ ssl: OpaquePointer) { self.ssl = ssl }

    deinit { SSL_free(ssl) }

    enum Handshake {
        case done
        /// Waiting for the socket (`waitingFor` says which way).
        case inProgress
        /// Failed: why, and whether the client spoke plain HTTP (it may be answered in plain HTTP).
        case failed(reason: String, plainHTTP: Bool)
    }

    /// Runs the handshake as far as the socket allows. The corresponding C function is `SSL_accept`.
    func handshake() -> Handshake {
        ERR_clear_error()
        waitingFor = nil
        let result = SSL_accept(ssl)
        if result == 1 { return .done }
        let code = SSL_get_error(ssl, result)
        if waits(code) { return .inProgress }
        switch code {
        case SSL_ERROR_ZERO_RETURN:
            return .failed(reason: "the client closed TLS during the handshake", plainHTTP: false)
        case SSL_ERROR_SYSCALL:
            let error = errno
            _ = OpenSSL.takeErrors()
            return .failed(
                reason: error == 0 ? "the client closed the connection during the handshake" : "\(Errno(rawValue: error))",
                plainHTTP: false)
        default:
            let (text, reason) = OpenSSL.takeErrors()
            if reason == SSL_R_HTTP_REQUEST || reason == SSL_R_HTTPS_PROXY_REQUEST {
                return .failed(reason: "the client spoke plain HTTP to the TLS port", plainHTTP: true)
            }
            let verified = SSL_get_verify_result(ssl)
            if verified != X509_V_OK, let message = X509_verify_cert_error_string(Int(verified)) {
                return .failed(reason: "client certificate refused: \(String(cString: message))", plainHTTP: false)
            }
            return .failed(reason: text, plainHTTP: false)
        }
    }

    /// Whether OpenSSL holds decrypted bytes not read yet (the socket will not say so).
    /// The corresponding C function is `SSL_pending`.
    var hasBufferedInput: Bool { SSL_pending(ssl) > 0 }

    /// Reads what one record holds, at most `buffer.count` bytes. The corresponding C function is `SSL_read_ex`.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        ERR_clear_error()
        waitingFor = nil
        var count = 0
        if SSL_read_ex(ssl, buffer.baseAddress, buffer.count, &count) == 1 { return .bytes(count) }
        return failure(SSL_get_error(ssl, 0))
    }

    /// Writes the first record's worth of `bytes`; a write that waited is made again with the
    /// length it had, whatever `bytes` holds past it. The corresponding C function is `SSL_write_ex`.
    func write(_ bytes: UnsafeRawBufferPointer) -> IOResult {
        ERR_clear_error()
        waitingFor = nil
        let length = pendingWrite ?? min(bytes.count, Self.recordBytes)
        guard length <= bytes.count else { return .failed(Errno(rawValue: EINVAL)) }  // the caller changed its output: a bug
        var written = 0
        if SSL_write_ex(ssl, bytes.baseAddress, length, &written) == 1 {
            pendingWrite = nil
            return .bytes(written)
        }
        let result = failure(SSL_get_error(ssl, 0))
        if result == .wouldBlock { pendingWrite = length }
        return result
    }

    /// Whether a call that returned `code` waits for the socket (`SSL_ERROR_WANT_READ` or
    /// `SSL_ERROR_WANT_WRITE`); if so, `waitingFor` says which way.
    func waits(_ code: Int32) -> Bool {
        switch code {
        case SSL_ERROR_WANT_READ: waitingFor = Int16(POLLIN)
        case SSL_ERROR_WANT_WRITE: waitingFor = Int16(POLLOUT)
        default: return false
        }
        return true
    }

    private func failure(_ code: Int32) -> IOResult {
        if waits(code) { return .wouldBlock }
        switch code {
        case SSL_ERROR_ZERO_RETURN:
            return .endOfStream
        case SSL_ERROR_SYSCALL:
            let error = errno
            _ = OpenSSL.takeErrors()
            return error == 0 ? .endOfStream : .failed(Errno(rawValue: error))
        default:
            lastError = OpenSSL.takeErrors().text
            return .failed(Errno(rawValue: EPROTO))
        }
    }

    /// Sends TLS's close_notify if the socket takes it at once; best effort, before the socket
    /// closes. The corresponding C function is `SSL_shutdown`.
    func shutdown() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }
}
