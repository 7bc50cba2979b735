@testable import RingsideCollector
import RingsideCommandLine
import RingsideHTTPClient
import Testing

/// OpenTelemetry's `OTEL_*` variables, read where no `--otlp-*` flag says (docs/otlp.md).
@Suite("OTLP: the OTEL_* environment variables")
struct OTLPEnvironmentTests {
    func options(_ arguments: [String], _ environment: [String: String]) throws -> OTLPOptions? {
        guard case let .run(options) = try CollectorOptions.invocation(arguments, environment: environment) else { return nil }
        return options.otlp
    }

    func options(_ environment: [String: String]) throws -> OTLPOptions? { try options([], environment) }

    @Test("the endpoint: a base URL gets /v1/metrics after its path, the metrics one is used as it is, the flag wins")
    func endpoint() throws {
        #expect(try options([:]) == nil)
        let base = try #require(try options(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318"]))
        #expect(base.endpoint.description == "http://otel:4318/v1/metrics")
        let prefixed = try #require(try options(["OTEL_EXPORTER_OTLP_ENDPOINT": "https://gw.example/otlp/"]))
        #expect(prefixed.endpoint.description == "https://gw.example/otlp/v1/metrics" && prefixed.endpoint.port == 443)
        let metrics = try #require(
            try options(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://b:2/in"]))
        #expect(metrics.endpoint.description == "http://b:2/in")
        let flag = try #require(try options(["--otlp-endpoint", "http://c:3"], ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1"]))
        #expect(flag.endpoint.description == "http://c:3/v1/metrics")
        // Empty is unset; an SDK switched off, or another exporter named, turns nothing on.
        #expect(try options(["OTEL_EXPORTER_OTLP_ENDPOINT": ""]) == nil)
        #expect(try options(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_SDK_DISABLED": "true"]) == nil)
        #expect(try options(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_METRICS_EXPORTER": "none"]) == nil)
        #expect(try options(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_METRICS_EXPORTER": "console, otlp"]) != nil)
    }

    @Test("headers and resource attributes: comma-separated, trimmed, percent-decoded; the flags win per key")
    func lists() throws {
        let environment = [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_EXPORTER_OTLP_HEADERS": " X-Tenant = desk%207 ,,Authorization=Bearer%20k ",
            "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-list,team=fx,note=%E2%82%AC%2C%3D", "OTEL_SERVICE_NAME": "desk",
        ]
        let plain = try #require(try options(environment))
        #expect(plain.headers == [HTTPHeader("X-Tenant", "desk 7"), HTTPHeader("Authorization", "Bearer k")])
        #expect(
            plain.resourceAttributes == [OTLPAttribute("team", "fx"), OTLPAttribute("note", "€,="), OTLPAttribute("service.name", "desk")])
        let flagged = try #require(
            try options(["--otlp-header", "authorization=Bearer f", "--otlp-resource-attribute", "team=rates"], environment))
        #expect(flagged.headers == [HTTPHeader("X-Tenant", "desk 7"), HTTPHeader("authorization", "Bearer f")])
        #expect(flagged.resourceAttributes.first { $0.key == "team" }?.value == "rates")
        let metricsHeaders = try #require(try options(environment.merging(["OTEL_EXPORTER_OTLP_METRICS_HEADERS": "K=v"]) { $1 }))
        #expect(metricsHeaders.headers == [HTTPHeader("K", "v")])
    }

    @Test("timeout and interval in milliseconds, temporality (lowmemory is delta), flags first")
    func numbers() throws {
        let environment = [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_METRIC_EXPORT_INTERVAL": "1000",
            "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "LowMemory",
        ]
        let read = try #require(try options(environment))
        #expect(read.timeoutNanos == 2_500_000_000 && read.intervalNanos == 1_000_000_000 && read.temporality == .delta)
        let flagged = try #require(try options(["--otlp-timeout", "1s", "--otlp-temporality", "cumulative"], environment))
        #expect(flagged.timeoutNanos == 1_000_000_000 && flagged.temporality == .cumulative)
    }

    @Test(
        "a bad value is one line naming the variable, with no header's value",
        arguments: [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "otel:4318", "OTEL_EXPORTER_OTLP_ENDPOINT otel:4318: expected http://"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:1/p?k=v", "a base URL has no query"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s", "OTEL_EXPORTER_OTLP_TIMEOUT 10s: expected a number of milliseconds from 100"),
            ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "0", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT 0: expected"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "99999999999", "OTEL_METRIC_EXPORT_INTERVAL 99999999999: expected"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "Authorization", "OTEL_EXPORTER_OTLP_HEADERS: member 1: expected KEY=VALUE"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "a=1,Host=x", "OTEL_EXPORTER_OTLP_HEADERS Host: Host is written by the client itself"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "X-Key=%zz", "member 1 (X-Key): the value is not percent-encoded UTF-8"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "X-Key=%0A", "OTEL_EXPORTER_OTLP_HEADERS X-Key: the value has a control character"),
            ("OTEL_RESOURCE_ATTRIBUTES", "a b=c", "OTEL_RESOURCE_ATTRIBUTES: member 1: the key is empty or has blanks"),
            ("OTEL_RESOURCE_ATTRIBUTES", "k=%FF", "OTEL_RESOURCE_ATTRIBUTES: member 1 (k): the value is not percent-encoded UTF-8"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL grpc: the collector speaks http/protobuf only"),
            ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "often", "use cumulative, delta or lowmemory"),
        ])
    func bad(variable: String, value: String, message: String) {
        var environment = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1"]
        environment[variable] = value
        #expect {
            try options(environment)
        } throws: { error in
            let text = "\(error)"
            return text.contains(message) && !text.contains("\n") && !text.contains("%0A")
        }
    }

    @Test("a header list past 64 KiB is refused, and so is a CA file that is not a trusted regular file")
    func bounds() {
        #expect(throws: UsageError.self) {
            try options([
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_EXPORTER_OTLP_HEADERS": String(repeating: "k=v,", count: 20_000),
            ])
        }
        #expect {
            try options(["OTEL_EXPORTER_OTLP_ENDPOINT": "https://a:1", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/dev/null"])
        } throws: { "\($0)".contains("OTEL_EXPORTER_OTLP_CERTIFICATE /dev/null: ") }
        // Plain http: the environment's certificate is for an https endpoint; it is left unread.
        #expect((try? options(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/dev/null"])) != nil)
    }
}
