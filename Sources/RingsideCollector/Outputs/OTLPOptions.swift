import RingsideCommandLine
import RingsideHTTP
import RingsideHTTPClient

/// How the OTLP/HTTP exporter pushes (`--otlp-endpoint`, `--otlp-interval`, `--otlp-header`,
/// `--otlp-timeout`; see docs/otlp.md).
package struct OTLPOptions: Sendable, Equatable {
    /// The receiver's URL: `/v1/metrics` added when the one given has no path.
    package var endpoint: HTTPURL
    /// How often a snapshot is exported.
    package var intervalNanos: UInt64
    /// How long one attempt may take, from connecting to reading the answer.
    package var timeoutNanos: UInt64
    /// Headers sent with every export (an API key, a tenant).
    package var headers: [HTTPHeader]

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
    static func endpoint(parsing text: String) throws(UsageError) -> HTTPURL {
        var url: HTTPURL
        do { url = try HTTPURL(parsing: text) } catch { throw UsageError("--otlp-endpoint \(error)") }
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
        let name = String(text[..<equals]), value = String(text[text.index(after: equals)...])
        if let problem = HTTPClientRequest.validate(header: name, value: value) { throw UsageError("--otlp-header \(name): \(problem)") }
        guard !ownHeaders.contains(name.lowercased()) else { throw UsageError("--otlp-header \(name): the exporter writes it itself") }
        return HTTPHeader(name, value)
    }
}
