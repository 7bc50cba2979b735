/// TLS for `HTTPClient`'s `https://` URLs, given by a caller that links a TLS library (the
/// collector's OTLP exporter: RingsideHTTP's `TLSClientContext`, over the system's OpenSSL), so
/// that this module stays free of one (the operator's tools link it).
package protocol HTTPClientTLS: Sendable {
    /// A TLS session over the connected non-blocking socket `fd`, its handshake yet to run, that
    /// checks the server's certificate names `host` (a name or an IP address).
    func session(fd: Int32, host: String) throws(HTTPClientError) -> any HTTPClientTLSSession
}

/// One connection's TLS: the handshake, then reads and writes that say what they wait for.
package protocol HTTPClientTLSSession: AnyObject {
    /// What the last call waits for: `POLLIN` or `POLLOUT`; nil when it did not wait.
    var waitingFor: Int16? { get }
    /// Runs the handshake as far as the socket allows: true once done, false while it waits.
    /// - Throws: `HTTPClientError.tls`, with the reason (the certificate's check, first).
    func handshake() throws(HTTPClientError) -> Bool
    /// Reads decrypted bytes.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> IOResult
    /// Writes the first bytes of `bytes`; one that waited is made again with the same bytes.
    func write(_ bytes: UnsafeRawBufferPointer) -> IOResult
    /// Why the last read or write that failed failed in TLS (an alert from the server); nil when
    /// it failed in the socket.
    var failure: String? { get }
}
