import Foundation
@testable import RingsideExport
import RingsideTestSupport
import Testing

/// OpenMetrics 1.0's rules on values, as prometheus_client's parser enforces them (a page that
/// breaks one is refused whole, every other series with it): counter-like samples (`_total`,
/// `_sum`, `_count`, `_bucket`) are never negative or NaN, a summary's quantiles never negative,
/// and a histogram with a negative bucket has no `_sum` (its sum is no counter), nor then `_count`.
@Suite("OpenMetrics: signed and scaled series keep the format's rules on values")
struct OpenMetricsRulesTests {
    @Test("the pinned snapshot's OpenMetrics page, its signed histogram included, breaks no rule on values")
    func pinnedPageKeepsTheRules() throws {
        let page = String(decoding: PrometheusRenderer().render(pinnedSnapshot(), format: .openMetrics), as: UTF8.self)
        #expect(page.contains("slippage_bps_bucket{ring=\"bot-a\",le=\"-"), "the fixture has a signed histogram")
        #expect(Self.violations(page) == [])
        #expect(page.contains("# TYPE slippage_bps_windowed gauge") && page.contains("# TYPE slippage_bps_windowed_sum gauge"))
        // The text format keeps the signed histogram's sum and count, and its windows' summary:
        // Prometheus reads them, and promtool's lint wants no gauge with a quantile label or a `_sum` name.
        let text = String(decoding: PrometheusRenderer().render(pinnedSnapshot(), format: .text), as: UTF8.self)
        #expect(text.contains("slippage_bps_sum{ring=\"bot-a\"} -") && text.contains("slippage_bps_count{ring=\"bot-a\"} 2000"))
        #expect(text.contains("# TYPE slippage_bps_windowed summary"))
        if let promtool = try requiredSystemTool("promtool") {
            // It parses the page; its lint finds only the fixture's own name `idle_gauge` ("should
            // not include type 'gauge'"), a bot's choice that the collector keeps as it is.
            let check = try runProcess(promtool, ["check", "metrics"], stdin: text, mergingErrors: true)
            let findings = check.output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            #expect(
                findings.allSatisfy { $0.hasPrefix("idle_gauge_") && $0.hasSuffix("should not include type 'gauge'") }, "\(check.output)")
        }
    }

    @Test("the checker finds what the rules forbid (it is not a check that cannot fail)")
    func checkerFindsViolations() {
        let page = """
            # TYPE a histogram
            a_bucket{le="-1"} 1
            a_bucket{le="+Inf"} 2
            a_sum -3
            a_count 2
            # TYPE b summary
            b{quantile="0.5"} -1
            b_sum -1
            b_count 1
            # EOF

            """
        #expect(
            Self.violations(page) == [
                "a_sum -3: negative", "a: _sum beside a negative bucket", "b{quantile=\"0.5\"} -1: a negative quantile",
                "b_sum -1: negative",
            ])
    }

    /// What a page breaks, one line each.
    static func violations(_ page: String) -> [String] {
        var found: [String] = []
        var type: [String: String] = [:]
        var family = ""
        var negativeBucket = false, sum = false
        func closeFamily() {
            if type[family] == "histogram" && negativeBucket && sum { found.append("\(family): _sum beside a negative bucket") }
            negativeBucket = false
            sum = false
        }
        for line in page.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                closeFamily()
                let fields = line.split(separator: " ")
                family = String(fields[2])
                type[family] = String(fields[3])
                continue
            }
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " ") else { continue }
            let sample = line[..<space], value = Double(line[line.index(after: space)...]) ?? .nan
            let name = String(sample.prefix { $0 != "{" })
            let suffix = name.hasPrefix(family) ? String(name.dropFirst(family.count)) : name
            if ["_total", "_sum", "_count", "_bucket"].contains(suffix) {
                if value.isNaN { found.append("\(line): NaN") }
                if value < 0 { found.append("\(line): negative") }
            }
            if suffix == "_bucket", let le = sample.firstRange(of: "le=\"").map({ sample[$0.upperBound...].prefix { $0 != "\"" } }),
                let bound = Double(le), bound < 0
            {
                negativeBucket = true
            }
            if suffix == "_sum" { sum = true }
            if type[family] == "summary" && suffix.isEmpty && value < 0 { found.append("\(line): a negative quantile") }
        }
        closeFamily()
        return found
    }
}
