// The HTTP client's TLS (`HTTPClientTLS`), for the OTLP exporter's `https://` pushes, over the
// same system OpenSSL as the server's (`TLSContext`, `TLSStream`).

import COpenSSL
import Glibc
import RingsideHTTPClient
import RingsideSystem

/// A client's TLS settings loaded: an `SSL_CTX` that checks servers against the system's CAs, or
/// those of a CA file, and may present a client certificate (mTLS). TLS 1.2 at least; every
/// session checks the server's certificate and that it names the host connected to (a name, by
/// SNI and the certificate's DNS names; an IP address, by its IP addresses).
///
/// The files are read as the web configuration's are (`TrustedFile`: a regular file of the
/// collector's user or root that no one else can change), in memory, never by OpenSSL's own
/// file functions (which would open a FIFO and wait on it).
///
/// Unchecked `Sendable`: once made it is only read (`SSL_new`), which OpenSSL allows from any thread.
package final class TLSClientContext: HTTPClientTLS, @unchecked Sendable {
    private let context: OpaquePointer
    /// Whether the context presents a client certificate.
    private let hasClientCertificate: Bool

    /// The files, each with the name its errors give it (a flag or a variable).
    package struct Files: Sendable, Equatable {
        package var caFile: (name: String, path: String)?
        package var certFile: (name: String, path: String)?
        package var keyFile: (name: String, path: String)?

        package init(
            caFile: (name: String, path: String)? = nil, certFile: (name: String, path: String)? = nil,
            keyFile: (name: String, path: String)? = nil
        ) {
            self.caFile = caFile
            self.certFile = certFile
            self.keyFile = keyFile
        }

        package static func == (a: Files, b: Files) -> Bool {
            a.caFile?.path == b.caFile?.path && a.certFile?.path == b.certFile?.path && a.keyFile?.path == b.keyFile?.path
        }
    }

    /// - Throws: `TLSClientError`, naming the file and why it is refused.
    package init(_ files: Files) throws(TLSClientError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            throw TLSClientError(reason: "cannot make a TLS context: \(OpenSSL.takeErrors().text)")
        }
        self.context = context
        hasClientCertificate = files.certFile != nil
        try configure(files)
        if !hasClientCertificate { SSL_CTX_set_client_cert_cb(context, noteCertificateRequest) }
    }

    deinit { SSL_CTX_free(context) }

    private func configure(_ files: Files) throws(TLSClientError) {
        rs_ssl_ctx_set_client_options(context)
        _ = rs_ssl_ctx_set_nonblocking_modes(context)
        guard rs_ssl_ctx_set_protocol_versions(context, TLS1_2_VERSION, TLS1_3_VERSION) == 1 else {
            throw TLSClientError(reason: TLSContext.failure("TLS versions"))
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        if let (name, path) = files.caFile {
            try trust(try Self.read(path, name: name), name: "\(name) \(path)")
        } else if SSL_CTX_set_default_verify_paths(context) != 1 {
            throw TLSClientError(reason: TLSContext.failure("the system's CA certificates"))
        }
        guard let (certName, certPath) = files.certFile, let (keyName, keyPath) = files.keyFile else { return }
        let certificate = try Self.read(certPath, name: certName)
        var key = try Self.read(keyPath, name: keyName)
        defer { key.withUnsafeMutableBytes { $0.initializeMemory(as: UInt8.self, repeating: 0) } }  // no key left in freed memory
        if let refusal = TLSContext.useCertificateChain(context, certificate, name: "\(certName) \(certPath)") {
            throw TLSClientError(reason: refusal)
        }
        if let refusal = TLSContext.usePrivateKey(
            context, key, keyName: "\(keyName) \(keyPath)", certificateName: "\(certName) \(certPath)")
        {
            throw TLSClientError(reason: refusal)
        }
    }

    private static func read(_ path: String, name: String) throws(TLSClientError) -> [UInt8] {
        do { return try TrustedFile.read(path, maxBytes: TLSContext.maxFileBytes) } catch {
            throw TLSClientError(reason: "\(name) \(path): \(error.reason)")
        }
    }

    /// Trusts the CA certificates in PEM bytes (and only them). The corresponding C function is `X509_STORE_add_cert`.
    private func trust(_ bytes: [UInt8], name: String) throws(TLSClientError) {
        let store = SSL_CTX_get_cert_store(context)
        let refusal = TLSContext.withPEM(bytes) { bio -> String? in
            var count = 0
            while let certificate = rs_pem_read_certificate(bio, 1) {
                defer { X509_free(certificate) }  // the store keeps a reference of its own
                guard X509_STORE_add_cert(store, certificate) == 1 else {
                    return TLSContext.failure("\(name): a certificate in it cannot be trusted")
                }
                count += 1
            }
            guard count > 0 else { return TLSContext.failure("\(name): no PEM certificate in it") }
            return TLSContext.endedCleanly() ? nil : TLSContext.failure("\(name): a certificate in it is not PEM")
        }
        if let refusal { throw TLSClientError(reason: refusal) }
    }

    /// A session over `fd` that checks the server's certificate names `host`. The corresponding C
    /// functions are `SSL_new`, `SSL_set_fd`, `SSL_set_tlsext_host_name` (for a name: no SNI for
    /// an address, RFC 6066), `SSL_set1_host` and `X509_VERIFY_PARAM_set1_ip_asc`.
    package func session(fd: Int32, host: String) throws(HTTPClientError) -> any HTTPClientTLSSession {
        ERR_clear_error()
        guard let ssl = SSL_new(context) else { throw .tls("no memory for a TLS session") }
        let stream = TLSStream(ssl)  // frees it
        guard SSL_set_fd(ssl, fd) == 1 else { throw .tls(TLSContext.failure("SSL_set_fd")) }
        if Self.isAddress(host) {
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1 else {
                throw .tls(TLSContext.failure("the address \(host)"))
            }
        } else {
            guard rs_ssl_set_server_name(ssl, host) == 1, SSL_set1_host(ssl, host) == 1 else {
                throw .tls(TLSContext.failure("the name \(host)"))
            }
            SSL_set_hostflags(ssl, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
        }
        let session = TLSClientSession(stream, host: host, hasClientCertificate: hasClientCertificate)
        // For `noteCertificateRequest`: the session outlives its SSL (which it frees).
        SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(session).toOpaque())
        return session
    }

    /// Whether `host` is an IPv4 or IPv6 address (not a name). The corresponding C function is `inet_pton`.
    static func isAddress(_ host: String) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16)
        return inet_pton(AF_INET, host, &buffer) == 1 || inet_pton(AF_INET6, host, &buffer) == 1
    }
}

/// Notes that the server asked for a client certificate, where none is given: the handshake goes
/// on without one (a server may only ask), and if the server then ends the connection, the error
/// says why it likely did. The corresponding C function is `SSL_get_ex_data`.
private func noteCertificateRequest(
    _ ssl: OpaquePointer?, _ certificate: UnsafeMutablePointer<OpaquePointer?>?, _ key: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    if let ssl, let session = SSL_get_ex_data(ssl, 0) {
        Unmanaged<TLSClientSession>.fromOpaque(session).takeUnretainedValue().certificateRequested = true
    }
    return 0  // no certificate
}

/// A TLS client context's files refused: the file (and the flag or variable naming it) and why.
package struct TLSClientError: Error, Equatable, CustomStringConvertible {
    package var reason: String
    package var description: String { reason }
}

/// One connection's client TLS: `TLSStream`'s reads and writes, and the handshake a client makes.
final class TLSClientSession: HTTPClientTLSSession {
    private let stream: TLSStream
    private let host: String
    private let hasClientCertificate: Bool
    /// Set during the handshake when the server asks for a client certificate.
    fileprivate var certificateRequested = false

    init(_ stream: TLSStream, host: String, hasClientCertificate: Bool) {
        self.stream = stream
        self.host = host
        self.hasClientCertificate = hasClientCertificate
    }

    var waitingFor: Int16? { stream.waitingFor }

    /// The corresponding C functions are `SSL_connect` and `SSL_get_verify_result`.
    func handshake() throws(HTTPClientError) -> Bool {
        ERR_clear_error()
        let result = SSL_connect(stream.ssl)
        if result == 1 { return true }
        let code = SSL_get_error(stream.ssl, result)
        if stream.waits(code) { return false }
        let verified = SSL_get_verify_result(stream.ssl)
        if verified != X509_V_OK, let message = X509_verify_cert_error_string(Int(verified)) {
            _ = OpenSSL.takeErrors()
            throw .tls("the certificate of \(host) is refused: \(String(cString: message))")
        }
        switch code {
        case SSL_ERROR_ZERO_RETURN, SSL_ERROR_SYSCALL:
            let error = errno
            _ = OpenSSL.takeErrors()
            throw .tls(
                "the handshake with \(host) failed: "
                    + (error == 0 || code == SSL_ERROR_ZERO_RETURN ? "the server closed the connection" : "\(Errno(rawValue: error))"))
        default:
            throw .tls("the handshake with \(host) failed: \(OpenSSL.takeErrors().text) (does it speak TLS?)")
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> IOResult { stream.read(into: buffer) }
    func write(_ bytes: UnsafeRawBufferPointer) -> IOResult { stream.write(bytes) }

    /// Why the last read or write failed in TLS (an alert: the server refused the client's
    /// certificate, say), or why the server likely ended the connection: it asked for a client
    /// certificate, and none is given.
    var failure: String? {
        let asked = certificateRequested && !hasClientCertificate
        let why = asked ? "the server asked for a client certificate, and none is given (--otlp-cert-file, --otlp-key-file)" : nil
        guard let error = stream.lastError else { return why.map { "\(host): \($0)" } }
        return "\(host): \(error)" + (why.map { "; \($0)" } ?? "")
    }
}
