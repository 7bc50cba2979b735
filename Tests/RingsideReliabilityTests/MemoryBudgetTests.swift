import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RingsideTestSupport
import Testing

extension ReliabilityTests {
    /// The collector's memory is bounded in bytes, not only in series: 100,000 series of 200-byte
    /// labels took it from 958 MB to 3.8-3.95 GB after scrapes of a 1.44 GB page.
    @Suite("the memory budget for series")
    struct MemoryBudgetTests {
        private func metric(_ body: String, _ name: String) -> Double? {
            body.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
        }

        /// Every page in every variant a client may ask for, twice: the peak of the collector's
        /// own memory (not the rings it maps) stays within the budget and what the process
        /// needs with no series at all.
        @Test("100,000 series of 200-byte labels: refused past the budget, and the pages stay within it")
        func wideLabels() throws {
            let budget = 128 << 20
            try withRingDirectory { directory in
                let (collector, port) = try startCollector([
                    "--dir", directory.path, "--history", "0",
                    "--max-series-bytes", "128M",
                ])
                defer { collector.kill() }
                #expect(try eventually { try httpGet(port: port, path: "/-/ready").status == 200 })
                _ = try httpGet(port: port, path: "/metrics")  // the empty page: what serving costs with no series
                let baseline = try #require(statusKiB(of: collector.pid, "RssAnon"))
                let producer = try ChildProcess(
                    testProducer: "wide-series", ring: "wide", in: directory,
                    ["--rings", "25", "--metrics", "4000", "--label-bytes", "200"])
                defer {
                    producer.send(SIGKILL)
                    producer.waitForExit()
                }
                let ready = producer.readLine()
                try #require(ready?.hasPrefix("ready") == true, "\(ready ?? "no line"): \(producer.waitForExit().standardError)")

                // Every one of the 100,000 is either a series or counted as refused.
                let page = eventually(seconds: 60) { () -> String? in
                    guard let body = try? httpGet(port: port, path: "/metrics", timeoutSeconds: 30).body else { return nil }
                    let refused = body.split(separator: "\n").filter { $0.hasPrefix("ringside_ring_series_refused{") }
                        .compactMap { Double($0.split(separator: " ").last ?? "") }.reduce(0, +)
                    return (metric(body, "ringside_collector_series") ?? 0) + refused == 100_000 ? body : nil
                }
                let body = try #require(page, "the collector did not account for the 100,000 series")
                let series = try #require(metric(body, "ringside_collector_series"))
                #expect(series > 500 && series < 20_000, "\(series) series kept within 128 MiB")
                #expect(metric(body, "ringside_collector_series_bytes_limit") == Double(budget))

                let variants: [(path: String, headers: String)] = [
                    ("/metrics", "Accept-Encoding: gzip\r\n"),
                    ("/metrics", ""),
                    ("/metrics", "Accept: application/openmetrics-text;version=1.0.0\r\nAccept-Encoding: gzip\r\n"),
                    ("/metrics", "Accept: application/openmetrics-text;version=1.0.0\r\n"),
                    ("/latest", "Accept-Encoding: gzip\r\n"),
                    ("/latest", ""),
                ]
                var largest = 0
                for _ in 0..<2 {
                    for variant in variants {
                        let client = try RawClient(port: port, timeoutSeconds: 60)
                        try client.send("GET \(variant.path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(variant.headers)Connection: close\r\n\r\n")
                        let response = try client.readResponse()
                        #expect(response.status == 200, "\(variant)")
                        largest = max(largest, response.body.count)
                    }
                }
                // The high-water mark of the whole resident set, less what is not the collector's own
                // memory: the rings it maps (shared memory) and its executable's pages.
                let peak =
                    try #require(statusKiB(of: collector.pid, "VmHWM")) - (statusKiB(of: collector.pid, "RssShmem") ?? 0)
                    - (statusKiB(of: collector.pid, "RssFile") ?? 0)
                let charged =
                    metric(
                        try httpGet(port: port, path: "/metrics", timeoutSeconds: 30).body,
                        "ringside_collector_series_bytes") ?? -1
                print(
                    "memory budget 128 MiB: \(Int(series)) series of 100,000 kept, charged \(Int(charged) >> 20) MiB; "
                        + "largest page \(largest >> 20) MiB; peak memory \(peak >> 10) MiB over \(baseline >> 10) MiB with no series")
                #expect(peak <= baseline + budget >> 10, "peak \(peak >> 10) MiB, baseline \(baseline >> 10) MiB")
                collector.send(SIGTERM)
                #expect(collector.waitForExit().standardError.contains("(--max-series-bytes) is reached"), "the log says which cap")
            }
        }
    }
}
