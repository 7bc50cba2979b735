import RingsideCommandLine
import RingsideHTTP
import RingsideHTTPClient

/// How the OTLP/HTTP exporter pushes (`--otlp-*` flags, else OpenTelemetry's `OTEL_*`
/// environment variables; see `OTLPFlags` and docs/otlp.md).
package struct OTLPOptions: Sendable, Equatable {
    /// The receiver's URL: `/v1/metrics` added when the one given has no path.
    package var endpoint: HTTPURL
    /// How often a snapshot is exported.
    package var intervalNanos: UInt64
    /// How long one attempt may take, from connecting to reading the answer.
    package var timeoutNanos: UInt64
    /// Headers sent with every export (an API key, a tenant).
    package var headers: [HTTPHeader]
    /// Resource attributes the user gave (`--otlp-resource-attribute`, `OTEL_RESOURCE_ATTRIBUTES`,
    /// `OTEL_SERVICE_NAME`), in order, each key once: on every resource, over the collector's own.
    package var resourceAttributes: [OTLPAttribute] = []
    /// Whether counters' and histograms' points are totals or the change since the last export taken.
    package var temporality = OTLPTemporality.cumulative
    /// For an `https://` endpoint: the CA file that checks the receiver (nil: the system's CAs),
    /// and the client certificate and key (mTLS).
    package var caFile: OTLPFile?
    package var certFile: OTLPFile?
    package var keyFile: OTLPFile?

    /// The TLS files, as the client's context takes them.
    var tlsFiles: TLSClientContext.Files {
        TLSClientContext.Files(
            caFile: caFile.map { ($0.source, $0.path) }, certFile: certFile.map { ($0.source, $0.path) },
            keyFile: keyFile.map { ($0.source, $0.path) })
    }

    package static let defaultIntervalNanos: UInt64 = 10_000_000_000
    package static let defaultTimeoutNanos: UInt64 = 10_000_000_000

    package init(
        endpoint: HTTPURL, intervalNanos: UInt64 = defaultIntervalNanos, timeoutNanos: UInt64 = defaultTimeoutNanos,
        headers: [HTTPHeader] = []
    ) {
        self.endpoint = endpoint
        self.intervalNanos = intervalNanos
        self.timeoutNanos = timeoutNanos
        self.headers = headers
    }

    /// The path OTLP/HTTP receivers take metrics on.
    package static let metricsPath = "/v1/metrics"

    /// `--otlp-endpoint`'s URL, with `/v1/metrics` when it has no path (as OpenTelemetry's SDKs
    /// read `OTEL_EXPORTER_OTLP_ENDPOINT`); a URL with a path is taken as it is.
    static func endpoint(parsing text: String, from source: String = "--otlp-endpoint") throws(UsageError) -> HTTPURL {
        var url: HTTPURL
        do { url = try HTTPURL(parsing: text, allowingHTTPS: true) } catch { throw UsageError("\(source) \(error)") }
        if url.path.isEmpty || url.path == "/" { url.path = metricsPath }
        return url
    }

    /// Headers the exporter writes itself.
    static let ownHeaders: Set<String> = ["content-type", "content-encoding", "user-agent"]

    /// `--otlp-header K=V`: the name before the first `=`, the value after it.
    static func header(parsing text: String) throws(UsageError) -> HTTPHeader {
        guard let equals = text.firstIndex(of: "=") else {
            throw UsageError("--otlp-header: expected NAME=VALUE, and what was given has no =")
        }
        return try header(String(text[..<equals]), String(text[text.index(after: equals)...]), from: "--otlp-header")
    }

    /// A header `source` gives, checked.
    static func header(_ name: String, _ value: String, from source: String) throws(UsageError) -> HTTPHeader {
        if let problem = HTTPClientRequest.validate(header: name, value: value) { throw UsageError("\(source) \(name): \(problem)") }
        guard !ownHeaders.contains(name.lowercased()) else { throw UsageError("\(source) \(name): the exporter writes it itself") }
        return HTTPHeader(name, value)
    }
}

/// A file of the TLS settings, and the flag or variable that named it (what its errors say).
package struct OTLPFile: Sendable, Equatable {
    package var path: String
    package var source: String
}

/// A resource attribute of the user's: a string value under a key.
package struct OTLPAttribute: Sendable, Equatable {
    package var key: String
    package var value: String

    package init(_ key: String, _ value: String) {
        self.key = key
        self.value = value
    }
}

/// OTLP's aggregation temporality for counters and histograms (gauges have none).
package enum OTLPTemporality: String, Sendable, Equatable, CaseIterable {
    /// Totals since the series began (the default).
    case cumulative
    /// The change since the last export the receiver took.
    case delta
}
