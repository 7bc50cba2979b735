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
        try Self.checkReadable(settings.certFile, key: "cert_file")
        try Self.checkReadable(settings.keyFile, key: "key_file")
        guard SSL_CTX_use_certificate_chain_file(context, settings.certFile) == 1 else {
            throw failure("cert_file \(settings.certFile): not a PEM certificate")
        }
        let mismatch = "key_file \(settings.keyFile) is not the key of cert_file \(settings.certFile)"
        guard SSL_CTX_use_PrivateKey_file(context, settings.keyFile, SSL_FILETYPE_PEM) == 1 else {
            let (text, reason) = OpenSSL.takeErrors()
            throw WebConfigError(
                reason: reason == X509_R_KEY_VALUES_MISMATCH ? mismatch : "key_file \(settings.keyFile): not a PEM private key: \(text)")
        }
        guard SSL_CTX_check_private_key(context) == 1 else { throw failure(mismatch) }
        try configureClientCertificates(settings)
    }

    /// What `client_auth_type` asks of clients, as Go's `tls.ClientAuthType` means it.
    private func configureClientCertificates(_ settings: WebConfig.TLSSettings) throws(WebConfigError) {
        if let file = settings.clientCAFile {
            try Self.checkReadable(file, key: "client_ca_file")
            guard SSL_CTX_load_verify_locations(context, file, nil) == 1 else {
                throw WebConfigError(reason: "client_ca_file \(file): no PEM certificate in it: \(OpenSSL.takeErrors().text)")
            }
            // The CAs' names, sent to clients so they pick a certificate one of them signed.
            if let names = SSL_load_client_CA_file(file) { SSL_CTX_set_client_CA_list(context, names) }
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

    /// Opens `path` to read, so a missing or unreadable file is named with the system's reason.
    private static func checkReadable(_ path: String, key: String) throws(WebConfigError) {
        do {
            let fd = try System.open(path, O_RDONLY | O_CLOEXEC)
            System.close(fd)
        } catch {
            throw WebConfigError(reason: "\(key) \(path): \(error)")
        }
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
    private let ssl: OpaquePointer
    /// What the last call is waiting for: `POLLIN` or `POLLOUT` (nil when it did not wait).
    private(set) var waitingFor: Int16?
    /// The length of a write that must be made again as it was (OpenSSL requires the same length).
    private var pendingWrite: Int?
    /// The most plaintext one write takes: one TLS record's.
    private static let recordBytes = 16 * 1024

    fileprivate init(_ ssl: OpaquePointer) { self.ssl = ssl }

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
    private func waits(_ code: Int32) -> Bool {
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
            _ = OpenSSL.takeErrors()
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
