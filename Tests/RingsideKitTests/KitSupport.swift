import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RingsideTestSupport
import Testing

/// The package's root, found from this file's path: the kit's files live in `tools/` and
/// `Tests/fixtures/`.
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

func kitFile(_ relativePath: String) -> String { packageRoot + "/" + relativePath }

/// The Prometheus configuration the kit's tests run: a scrape and a rule evaluation every second,
/// Ringside's rules, and job `ringside` scraping each target (`host:port`) with its labels.
func kitPrometheusConfig(_ targets: [(address: String, labels: [String: String])]) -> String {
    var lines = ["global:", "  scrape_interval: 1s", "  evaluation_interval: 1s",
                 "rule_files:", "  - \(kitFile("tools/prometheus/ringside-rules.yml"))",
                 "scrape_configs:", "  - job_name: ringside", "    static_configs:"]
    for target in targets {
        lines.append("      - targets: [\"\(target.address)\"]")
        if !target.labels.isEmpty {
            lines.append("        labels: {" + target.labels.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}")
        }
    }
    return lines.joined(separator: "\n") + "\n"
}

/// A loopback TCP port free at the time of asking (the kernel's pick for port 0).
func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestSupportError("socket: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else { throw TestSupportError("bind 127.0.0.1:0: \(String(cString: strerror(errno)))") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// A body sent with `Transfer-Encoding: chunked` (Prometheus sends large answers so), joined;
/// any other body as it is. `httpGet` returns the body without its headers, so this looks at
/// its first line: a chunked body starts with the first chunk's size in hex.
func dechunked(_ body: String) -> String {
    var bytes = Array(body.utf8)[...]
    guard let first = bytes.first, first != UInt8(ascii: "{"), first != UInt8(ascii: "[") else { return body }
    var joined: [UInt8] = []
    while let lineEnd = bytes.firstIndex(of: UInt8(ascii: "\r")) {
        guard let size = Int(String(decoding: bytes[bytes.startIndex..<lineEnd], as: UTF8.self)
            .split(separator: ";").first ?? "", radix: 16), size > 0 else { break }
        let start = lineEnd + 2
        guard start + size <= bytes.endIndex else { return body }
        joined += bytes[start..<start + size]
        bytes = bytes[min(start + size + 2, bytes.endIndex)...]
    }
    return String(decoding: joined, as: UTF8.self)
}

/// Parses a JSON object (from a plain or chunked body).
func jsonObject(_ text: String) throws -> [String: Any] {
    guard let object = try JSONSerialization.jsonObject(with: Data(dechunked(text).utf8)) as? [String: Any] else {
        throw TestSupportError("not a JSON object: \(text.prefix(200))")
    }
    return object
}

// MARK: - Metric names in PromQL

/// The metric names a PromQL expression selects: bare names, and `__name__` matchers (returned
/// as regular expressions to match, `=~` ones as written, `=` ones escaped). A small scanner for
/// the kit's own expressions, not a PromQL parser: it drops strings, label matchers, ranges and
/// grouping clauses, then takes every identifier not followed by `(` that is not a keyword.
func selectedMetricNames(in expression: String) -> (names: Set<String>, patterns: [String]) {
    var patterns: [String] = []
    let nameMatcher = try! NSRegularExpression(pattern: #"__name__\s*(=~|=)\s*"((?:[^"\\]|\\.)*)""#)
    let whole = NSRange(expression.startIndex..., in: expression)
    for match in nameMatcher.matches(in: expression, range: whole) {
        let op = String(expression[Range(match.range(at: 1), in: expression)!])
        let value = String(expression[Range(match.range(at: 2), in: expression)!]).replacingOccurrences(of: #"\\"#, with: #"\"#)
        patterns.append(op == "=" ? NSRegularExpression.escapedPattern(for: value) : value)
    }
    var text = expression
    for pattern in [#""(?:[^"\\]|\\.)*""#, #"\{[^}]*\}"#, #"\[[^\]]*\]"#,
                    #"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"#] {
        text = text.replacingOccurrences(of: pattern, with: " ", options: .regularExpression)
    }
    let keywords: Set<String> = ["by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
                                 "unless", "offset", "atan2", "inf", "nan", "Inf", "NaN"]
    var names: Set<String> = []
    let identifier = try! NSRegularExpression(pattern: #"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?"#)
    for match in identifier.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
        guard match.range(at: 2).location == NSNotFound else { continue } // a function call
        let name = String(text[Range(match.range(at: 1), in: text)!])
        if !keywords.contains(name) && !name.allSatisfy({ $0.isNumber || $0 == "e" }) { names.insert(name) }
    }
    return (names, patterns)
}

/// The sample names a Prometheus text page has (`NAME`, `NAME_bucket`, ... as written).
func sampleNames(inMetricsPage page: String) -> Set<String> {
    var names: Set<String> = []
    for line in page.split(separator: "\n") where !line.hasPrefix("#") {
        let name = line.prefix { $0 != "{" && $0 != " " }
        if !name.isEmpty { names.insert(String(name)) }
    }
    return names
}

/// The recording rules' names in a rules file.
func recordingRuleNames(inRulesFile text: String) -> Set<String> {
    var names: Set<String> = []
    for line in text.split(separator: "\n") {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        if trimmed.hasPrefix("- record:") || trimmed.hasPrefix("record:") {
            names.insert(trimmed.components(separatedBy: "record:")[1].trimmingCharacters(in: .whitespaces))
        }
    }
    return names
}

/// The PromQL expressions in a rules file (`expr:` on one line each).
func ruleExpressions(inRulesFile text: String) -> [String] {
    text.split(separator: "\n").compactMap { line in
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        return trimmed.hasPrefix("expr:") ? String(trimmed.dropFirst(5)).trimmingCharacters(in: .whitespaces) : nil
    }
}
