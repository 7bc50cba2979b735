import RingsideCommandLine
import RingsideHTTP
import RingsideHTTPClient

/// The `--otlp-*` flags as the command line (and configuration file) gives them, kept until the
/// end (`--otlp-endpoint` may come after the others), then merged with OpenTelemetry's `OTEL_*`
/// environment variables (`OTLPEnvironment`): a flag, or a configuration file's key, wins over
/// the variable that says the same.
struct OTLPFlags {
    var endpoint: HTTPURL?
    var intervalNanos: UInt64?
    var timeoutNanos: UInt64?
    var headers: [HTTPHeader] = []
    var resourceAttributes: [OTLPAttribute] = []
    var temporality: OTLPTemporality?
    var caFile: String?
    var certFile: String?
    var keyFile: String?
    /// The last flag given that needs an endpoint.
    var needingEndpoint: String?

    /// The exporter's options (a reload applies them: the pusher is made again).
    static var options: [CollectorOption] {
        [
            .init(
                ["--otlp-endpoint"], .value("URL"),
                help: [
                    "push every series to an OTLP/HTTP receiver (protobuf, gzipped; http://",
                    "or https://); /v1/metrics is added to a URL without a path. Else",
                    "OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT, and the other OTEL_* variables",
                    "under the flags below: the flags win (docs/otlp.md)",
                ]
            ) { reading, value throws(UsageError) in reading.otlp.endpoint = try OTLPOptions.endpoint(parsing: value.text) },
            needingEndpoint(["--otlp-interval"], .value("DUR"), help: ["how often (default 10s; 100ms to 1h)"]) {
                otlp, value throws(UsageError) in
                otlp.intervalNanos = try duration(value, 100 * ms...hour)
            },
            needingEndpoint(
                ["--otlp-header"], .value("K=V"), help: ["a header sent with every export, e.g. an API key (repeatable)"]
            ) { otlp, value throws(UsageError) in otlp.headers.append(try OTLPOptions.header(parsing: value.text)) },
            needingEndpoint(
                ["--otlp-timeout"], .value("DUR"),
                help: ["how long one export may take, connecting to reading the answer", "(default 10s; 100ms to 5m)"]
            ) { otlp, value throws(UsageError) in otlp.timeoutNanos = try duration(value, 100 * ms...5 * minute) },
            needingEndpoint(
                ["--otlp-resource-attribute"], .value("K=V"),
                help: [
                    "a resource attribute on every export (repeatable; service.name",
                    "replaces the bot's name, which stays in ringside.bot)",
                ]
            ) { otlp, value throws(UsageError) in otlp.set(&otlp.resourceAttributes, try attribute(value)) },
            needingEndpoint(
                ["--otlp-temporality"], .value("cumulative|delta"),
                help: ["counters and histograms as totals (default) or as the change since", "the last export the receiver took"]
            ) { otlp, value throws(UsageError) in
                guard let chosen = OTLPTemporality(rawValue: value.text) else {
                    throw UsageError("\(value.flag) \(value.text): use cumulative or delta")
                }
                otlp.temporality = chosen
            },
            needingEndpoint(
                ["--otlp-ca-file"], .value("FILE"),
                help: ["the CA certificates (PEM) that check an https receiver (default:", "the system's)"]
            ) { otlp, value throws(UsageError) in otlp.caFile = try value.file() },
            needingEndpoint(
                ["--otlp-cert-file"], .value("FILE"),
                help: ["a client certificate and its key (PEM), for a receiver that asks", "for one (mTLS)"],
                head: "--otlp-cert-file FILE, --otlp-key-file FILE"
            ) { otlp, value throws(UsageError) in otlp.certFile = try value.file() },
            needingEndpoint(["--otlp-key-file"], .value("FILE"), help: []) { otlp, value throws(UsageError) in
                otlp.keyFile = try value.file()
            },
        ]
    }

    /// An option that needs `--otlp-endpoint` (given, or the environment's): the last one given is
    /// named when neither is.
    private static func needingEndpoint(
        _ names: [String], _ takes: CollectorOption.Takes, help: [String], head: String? = nil,
        read: @escaping (inout OTLPFlags, OptionValue) throws(UsageError) -> Void
    ) -> CollectorOption {
        CollectorOption(names, takes, help: help, head: head) { reading, value throws(UsageError) in
            try read(&reading.otlp, value)
            reading.otlp.needingEndpoint = value.flag
        }
    }

    private static func duration(_ value: OptionValue, _ range: ClosedRange<UInt64>) throws(UsageError) -> UInt64 {
        try value.duration(range) {
            "\(value.flag) \($0): must be from \(formatDuration(range.lowerBound)) to \(formatDuration(range.upperBound))"
        }
    }

    /// `--otlp-resource-attribute`'s `KEY=VALUE`.
    private static func attribute(_ value: OptionValue) throws(UsageError) -> OTLPAttribute {
        let text = value.text
        guard let equals = text.firstIndex(of: "="), equals != text.startIndex,
            text[..<equals].utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { throw UsageError("\(value.flag) \(text): expected KEY=VALUE, the key ASCII without blanks") }
        return OTLPAttribute(String(text[..<equals]), String(text[text.index(after: equals)...]))
    }

    /// Sets `attribute`, replacing the one of its key.
    func set(_ attributes: inout [OTLPAttribute], _ attribute: OTLPAttribute) {
        if let at = attributes.firstIndex(where: { $0.key == attribute.key }) {
            attributes[at] = attribute
        } else {
            attributes.append(attribute)
        }
    }

    /// The exporter's options: the flags', and for what they leave out, the environment's; nil
    /// when neither names an endpoint.
    /// - Throws: a flag given without an endpoint; a variable's bad value, naming it.
    func options(environment: [String: String]) throws(UsageError) -> OTLPOptions? {
        let env = OTLPEnvironment(environment)
        guard let url = try given(endpoint, else: env.endpoint) else {
            if let needingEndpoint { throw UsageError("\(needingEndpoint) needs --otlp-endpoint URL") }
            return nil
        }
        var options = OTLPOptions(
            endpoint: url, intervalNanos: try given(intervalNanos, else: env.intervalNanos) ?? OTLPOptions.defaultIntervalNanos,
            timeoutNanos: try given(timeoutNanos, else: env.timeoutNanos) ?? OTLPOptions.defaultTimeoutNanos)
        let named = Set(headers.map { $0.name.lowercased() })
        options.headers = try env.headers().filter { !named.contains($0.name.lowercased()) } + headers
        var attributes = try env.resourceAttributes()
        for attribute in resourceAttributes { set(&attributes, attribute) }
        options.resourceAttributes = attributes
        options.temporality = try given(temporality, else: env.temporality) ?? .cumulative
        options.caFile = caFile.map { OTLPFile(path: $0, source: "--otlp-ca-file") } ?? env.file("CERTIFICATE")
        options.certFile = certFile.map { OTLPFile(path: $0, source: "--otlp-cert-file") } ?? env.file("CLIENT_CERTIFICATE")
        options.keyFile = keyFile.map { OTLPFile(path: $0, source: "--otlp-key-file") } ?? env.file("CLIENT_KEY")
        try check(options)
        if !options.endpoint.secure {
            // The environment's files are for an https endpoint (`check` refused the flags').
            (options.caFile, options.certFile, options.keyFile) = (nil, nil, nil)
        } else {
            // Read and loaded here, so a bad file is a usage error naming it; the exporter loads them again to push.
            do { _ = try TLSClientContext(options.tlsFiles) } catch { throw UsageError(error.reason) }
        }
        return options
    }

    /// The flag's value when given, else the environment's.
    private func given<T>(_ value: T?, else variable: () throws(UsageError) -> T?) throws(UsageError) -> T? {
        if let value { return value }
        return try variable()
    }

    /// The TLS files make sense together and with https only.
    private func check(_ options: OTLPOptions) throws(UsageError) {
        if let one = options.certFile ?? options.keyFile, (options.certFile == nil) != (options.keyFile == nil) {
            throw UsageError(
                "\(one.source) \(one.path): a client certificate and its key are given together (--otlp-cert-file, --otlp-key-file)")
        }
        if !options.endpoint.secure, let file = options.caFile ?? options.certFile ?? options.keyFile, file.source.hasPrefix("--") {
            throw UsageError("\(file.source) needs an https:// endpoint (\(options.endpoint) is plain http)")
        }
    }
}

// Nanoseconds, for the options' bounds.
private let ms: UInt64 = 1_000_000
private let second: UInt64 = 1_000_000_000
private let minute: UInt64 = 60 * second
private let hour: UInt64 = 60 * minute
