import RingsideCommandLine
import RingsideHTTP
import RingsideHTTPClient

/// OpenTelemetry's `OTEL_*` environment variables, as its specification defines them (the OTLP
/// exporter's configuration and the SDK's), for what the `--otlp-*` flags leave out. A variable
/// set to the empty string is unset, as the specification says; for each setting, the
/// `OTEL_EXPORTER_OTLP_METRICS_*` variable wins over `OTEL_EXPORTER_OTLP_*`. A value that does not
/// read is a usage error naming the variable (the collector does not start), as a bad flag is.
///
/// - `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`: the URL as it is; `OTEL_EXPORTER_OTLP_ENDPOINT`: a
///   base URL, `/v1/metrics` appended to its path. Either turns the push on, unless
///   `OTEL_SDK_DISABLED` is `true` or `OTEL_METRICS_EXPORTER` names no `otlp` (`none`).
/// - `OTEL_EXPORTER_OTLP_[METRICS_]PROTOCOL`: `http/protobuf`, the only one spoken (checked
///   when the endpoint is the environment's).
/// - `OTEL_EXPORTER_OTLP_[METRICS_]HEADERS`, `OTEL_RESOURCE_ATTRIBUTES`: `key=value` pairs
///   separated by commas, blanks around each trimmed, the values percent-decoded (W3C Baggage's
///   form); `OTEL_SERVICE_NAME` sets `service.name` over the latter's.
/// - `OTEL_EXPORTER_OTLP_[METRICS_]TIMEOUT` and `OTEL_METRIC_EXPORT_INTERVAL`: milliseconds.
/// - `OTEL_EXPORTER_OTLP_[METRICS_]CERTIFICATE`, `..._CLIENT_CERTIFICATE`, `..._CLIENT_KEY`: files.
/// - `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`: `cumulative`, `delta` or `lowmemory`
///   (any case; `lowmemory` is delta for counters and histograms, which Ringside's are).
struct OTLPEnvironment {
    let variables: [String: String]

    init(_ variables: [String: String]) { self.variables = variables }

    /// The most a list variable may hold.
    static let maxListBytes = 64 << 10

    /// A variable's value; nil when unset or empty.
    func value(_ name: String) -> String? {
        guard let value = variables[name], !value.isEmpty else { return nil }
        return value
    }

    /// The metrics variable of `setting`, else the general one: its name and value.
    func exporterValue(_ setting: String) -> (name: String, value: String)? {
        for name in ["OTEL_EXPORTER_OTLP_METRICS_\(setting)", "OTEL_EXPORTER_OTLP_\(setting)"] {
            if let value = value(name) { return (name, value) }
        }
        return nil
    }

    func endpoint() throws(UsageError) -> HTTPURL? {
        if value("OTEL_SDK_DISABLED")?.lowercased() == "true" { return nil }
        if let exporters = value("OTEL_METRICS_EXPORTER"),
            !exporters.split(separator: ",").contains(where: { $0.trimmingBlanks.lowercased() == "otlp" })
        {
            return nil
        }
        var url: HTTPURL
        if let text = value("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") {
            url = try parse(text, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
            if url.path.isEmpty { url.path = "/" }
        } else if let text = value("OTEL_EXPORTER_OTLP_ENDPOINT") {
            url = try parse(text, "OTEL_EXPORTER_OTLP_ENDPOINT")
            guard !url.path.contains("?") else {
                throw UsageError("OTEL_EXPORTER_OTLP_ENDPOINT \(text): a base URL has no query (/v1/metrics is appended to its path)")
            }
            url.path = String(url.path.reversed().drop { $0 == "/" }.reversed()) + OTLPOptions.metricsPath
        } else {
            return nil
        }
        if let (name, text) = exporterValue("PROTOCOL"), text != "http/protobuf" {
            throw UsageError("\(name) \(text): the collector speaks http/protobuf only (OTLP over HTTP, protobuf)")
        }
        return url
    }

    private func parse(_ text: String, _ name: String) throws(UsageError) -> HTTPURL {
        do { return try HTTPURL(parsing: text, allowingHTTPS: true) } catch { throw UsageError("\(name) \(error)") }
    }

    func timeoutNanos() throws(UsageError) -> UInt64? {
        guard let (name, text) = exporterValue("TIMEOUT") else { return nil }
        return try Self.millis(text, name, 100...300_000, "100 to 300000 (100ms to 5m)")
    }

    func intervalNanos() throws(UsageError) -> UInt64? {
        guard let text = value("OTEL_METRIC_EXPORT_INTERVAL") else { return nil }
        return try Self.millis(text, "OTEL_METRIC_EXPORT_INTERVAL", 100...3_600_000, "100 to 3600000 (100ms to 1h)")
    }

    private static func millis(_ text: String, _ name: String, _ range: ClosedRange<UInt64>, _ bounds: String) throws(UsageError) -> UInt64
    {
        guard text.count <= 10, text.allSatisfy({ $0.isASCII && $0.isNumber }), let millis = UInt64(text), range.contains(millis) else {
            throw UsageError("\(name) \(text): expected a number of milliseconds from \(bounds)")
        }
        return millis * 1_000_000
    }

    func headers() throws(UsageError) -> [HTTPHeader] {
        guard let (name, text) = exporterValue("HEADERS") else { return [] }
        var headers: [HTTPHeader] = []
        for (key, value) in try Self.pairs(text, name, showValues: false) {
            headers.append(try OTLPOptions.header(key, value, from: name))
        }
        return headers
    }

    func resourceAttributes() throws(UsageError) -> [OTLPAttribute] {
        var attributes: [OTLPAttribute] = []
        if let text = value("OTEL_RESOURCE_ATTRIBUTES") {
            for (key, value) in try Self.pairs(text, "OTEL_RESOURCE_ATTRIBUTES", showValues: true) {
                attributes.removeAll { $0.key == key }
                attributes.append(OTLPAttribute(key, value))
            }
        }
        if let name = value("OTEL_SERVICE_NAME") {
            attributes.removeAll { $0.key == "service.name" }
            attributes.append(OTLPAttribute("service.name", name))
        }
        return attributes
    }

    func temporality() throws(UsageError) -> OTLPTemporality? {
        let name = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
        guard let text = value(name) else { return nil }
        switch text.lowercased() {
        case "cumulative": return .cumulative
        case "delta", "lowmemory": return .delta
        default: throw UsageError("\(name) \(text): use cumulative, delta or lowmemory")
        }
    }

    func file(_ setting: String) -> OTLPFile? { exporterValue(setting).map { OTLPFile(path: $0.value, source: $0.name) } }

    /// `key=value` pairs separated by commas (W3C Baggage's list, which OpenTelemetry's variables
    /// take): blanks around keys and values trimmed, empty members skipped, values percent-decoded
    /// to UTF-8. A header's value may be a key: the error shows it only when `showValues`.
    static func pairs(_ text: String, _ name: String, showValues: Bool) throws(UsageError) -> [(String, String)] {
        guard text.utf8.count <= maxListBytes else { throw UsageError("\(name): longer than \(maxListBytes) bytes") }
        var pairs: [(String, String)] = []
        for (index, member) in text.split(separator: ",", omittingEmptySubsequences: false).enumerated() {
            let trimmed = member.trimmingBlanks
            if trimmed.isEmpty { continue }
            let which = "\(name): member \(index + 1)"
            guard let equals = trimmed.firstIndex(of: "=") else {
                let shown = showValues && trimmed.count <= 80 && trimmed.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
                throw UsageError("\(which)\(shown ? " (\(trimmed))" : ""): expected KEY=VALUE (pairs separated by commas)")
            }
            let key = trimmed[..<equals].trimmingBlanks
            guard !key.isEmpty, key.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw UsageError("\(which): the key is empty or has blanks, control characters or non-ASCII")
            }
            guard let value = percentDecoded(trimmed[trimmed.index(after: equals)...].trimmingBlanks) else {
                throw UsageError("\(which) (\(key)): the value is not percent-encoded UTF-8 (a % not followed by two hex digits?)")
            }
            pairs.append((String(key), value))
        }
        return pairs
    }

    /// `text` with each `%XX` made the byte it names; nil when a `%` is not followed by two hex
    /// digits, or the bytes are not UTF-8.
    static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case 0x30...0x39: digit - 0x30
        case 0x41...0x46: digit - 0x41 + 10
        case 0x61...0x66: digit - 0x61 + 10
        default: nil
        }
    }
}

extension Substring {
    /// Without the spaces and tabs at either end.
    fileprivate var trimmingBlanks: Substring {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !blank($0) }), let last = lastIndex(where: { !blank($0) }) else { return "" }
        return self[first...last]
    }
}
