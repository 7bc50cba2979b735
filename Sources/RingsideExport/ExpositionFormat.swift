/// The formats /metrics serves, and which one a scraper's `Accept` header asks for.
package enum ExpositionFormat: Sendable, Hashable, CaseIterable {
    /// Prometheus text 0.0.4: the default.
    case text
    /// OpenMetrics text 1.0.0: `# EOF`, `# UNIT`, counter families named without `_total`.
    case openMetrics
    /// Delimited `io.prometheus.client.MetricFamily` messages: the only format that carries
    /// native histograms to Prometheus 2.x.
    case protobuf

    package var contentType: String {
        switch self {
        case .text: return "text/plain; version=0.0.4; charset=utf-8"
        case .openMetrics: return "application/openmetrics-text; version=1.0.0; charset=utf-8"
        case .protobuf: return "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
        }
    }

    /// The format `accept` prefers most among those served (by `q`, then by order), else text.
    /// Protobuf only as delimited MetricFamily messages; OpenMetrics only as version 1.0.0 (or
    /// unversioned).
    package static func negotiate(accept: String?) -> ExpositionFormat {
        guard let accept else { return .text }
        var best: (format: ExpositionFormat, q: Double)?
        for range in accept.split(separator: ",") {
            let parts = range.split(separator: ";").map { $0.trimmingWhitespace.lowercased() }
            guard let type = parts.first else { continue }
            var parameters: [String: String] = [:]
            for parameter in parts.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map(String.init)
                if pair.count == 2 { parameters[pair[0]] = pair[1].trimmingCharacters(of: "\"") }
            }
            let q = parameters["q"].flatMap(Double.init) ?? 1
            let format: ExpositionFormat?
            switch type {
            case "application/vnd.google.protobuf":
                format =
                    parameters["proto"] == "io.prometheus.client.metricfamily" && parameters["encoding"] == "delimited"
                    ? .protobuf : nil
            case "application/openmetrics-text":
                format = parameters["version"].map { $0 == "1.0.0" } ?? true ? .openMetrics : nil
            case "text/plain", "text/*", "*/*":
                format = .text
            default:
                format = nil
            }
            guard let format, q > 0 else { continue }
            if best == nil || q > best!.q { best = (format, q) }
        }
        return best?.format ?? .text
    }
}

/// Whether `acceptEncoding` takes gzip (`gzip` or `*`, with a `q` above 0).
package func acceptsGzip(_ acceptEncoding: String?) -> Bool {
    guard let acceptEncoding else { return false }
    return acceptEncoding.split(separator: ",").contains { coding in
        let parts = coding.split(separator: ";").map { $0.trimmingWhitespace.lowercased() }
        guard let name = parts.first, name == "gzip" || name == "x-gzip" || name == "*" else { return false }
        let q = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
        return q > 0
    }
}

private extension Substring {
    var trimmingWhitespace: String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}

private extension String {
    func trimmingCharacters(of character: Character) -> String {
        String(drop(while: { $0 == character }).reversed().drop(while: { $0 == character }).reversed())
    }
}
