import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RingsideTestSupport
import Testing

/// A file of the kit's, in `tools/` or `Tests/fixtures/`.
func kitFile(_ relativePath: String) -> String { packageRoot + "/" + relativePath }

/// The Prometheus configuration the kit's tests run: a scrape and a rule evaluation every second,
/// Ringside's rules, and job `ringside` scraping each target (`host:port`) with its labels.
func kitPrometheusConfig(_ targets: [(address: String, labels: [String: String])]) -> String {
    var lines = [
        "global:", "  scrape_interval: 1s", "  evaluation_interval: 1s",
        "rule_files:", "  - \(kitFile("tools/prometheus/ringside-rules.yml"))",
        "scrape_configs:", "  - job_name: ringside", "    static_configs:",
    ]
    for target in targets {
        lines.append("      - targets: [\"\(target.address)\"]")
        if !target.labels.isEmpty {
            lines.append(
                "        labels: {" + target.labels.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
                    + "}")
        }
    }
    return lines.joined(separator: "\n") + "\n"
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
    for pattern in [
        #""(?:[^"\\]|\\.)*""#, #"\{[^}]*\}"#, #"\[[^\]]*\]"#,
        #"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"#,
    ] {
        text = text.replacingOccurrences(of: pattern, with: " ", options: .regularExpression)
    }
    let keywords: Set<String> = [
        "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
        "unless", "offset", "atan2", "inf", "nan", "Inf", "NaN",
    ]
    var names: Set<String> = []
    let identifier = try! NSRegularExpression(pattern: #"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?"#)
    for match in identifier.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
        guard match.range(at: 2).location == NSNotFound else { continue }  // a function call
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

/// The PromQL expressions in a rules file: `expr:` on one line, or a block scalar (`expr: >-`) on those after.
func ruleExpressions(inRulesFile text: String) -> [String] {
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    var expressions: [String] = []
    for (number, line) in lines.enumerated() {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasPrefix("expr:") else { continue }
        let value = String(trimmed.dropFirst(5)).trimmingCharacters(in: .whitespaces)
        guard [">-", ">", "|", "|-"].contains(value) else {
            expressions.append(value)
            continue
        }
        // A block scalar: the lines indented deeper than `expr:`, joined.
        let indent = line.prefix { $0 == " " }.count
        let block = lines[(number + 1)...].prefix { $0.prefix { $0 == " " }.count > indent && !$0.allSatisfy { $0 == " " } }
        expressions.append(block.map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " "))
    }
    return expressions
}

/// A file of the kit's as shipped, with each of `replacements` made: a test runs the shipped
/// configuration with its own addresses. Each original must occur exactly once, so that a change
/// to the file fails the test instead of leaving it to test something else.
func shippedFile(_ relativePath: String, replacing replacements: [(original: String, replacement: String)]) throws -> String {
    var text = try String(contentsOfFile: kitFile(relativePath), encoding: .utf8)
    for (original, replacement) in replacements {
        let count = text.components(separatedBy: original).count - 1
        guard count == 1 else { throw TestSupportError("\(relativePath) holds \(count) copies of \(original.debugDescription), not 1") }
        text = text.replacingOccurrences(of: original, with: replacement)
    }
    return text
}

/// A server of the kit's peers (Prometheus, Alertmanager) of the test's own: loopback, in a
/// temporary directory of its own, killed and the directory removed by `stop()`.
final class KitPeer {
    let port: Int
    private let process: ChildProcess
    private let directory: TemporaryDirectory

    /// Makes the directory (`ringside-NAME`), then starts the server as `startReadyPeer` does,
    /// `start` launching it in the directory's path for the port. The directory is removed when
    /// the server does not start.
    init(_ name: String, start: (_ directory: String, _ port: Int) throws -> ChildProcess) throws {
        let directory = try TemporaryDirectory("ringside-" + name)
        do {
            (port, process) = try startReadyPeer(name) { port in try start(directory.path, port) }
        } catch {
            directory.remove()
            throw error
        }
        self.directory = directory
    }

    /// Kills the server and removes its directory.
    func stop() {
        process.kill()
        directory.remove()
    }
}

/// Starts a server of the kit's peers (Prometheus, Alertmanager) on a free loopback port:
/// `start` launches it for the port, then its `/-/ready` must answer 200 within 20 s. A port taken
/// meanwhile ("address already in use" in its log) is retried on another, three tries at most.
func startReadyPeer(_ name: String, _ start: (_ port: Int) throws -> ChildProcess) throws -> (port: Int, process: ChildProcess) {
    var attempt = 0
    while true {
        attempt += 1
        let port = try freeLoopbackPort()
        let process = try start(port)
        let ready = eventually(seconds: 20) { (try? httpGet(port: port, path: "/-/ready", timeoutSeconds: 2))?.status == 200 }
        if ready { return (port, process) }
        process.kill()
        let log = process.waitForExit().standardError
        if attempt < 3 && log.contains("address already in use") { continue }
        throw TestSupportError("\(name) did not become ready on port \(port): \(log.suffix(2000))")
    }
}
