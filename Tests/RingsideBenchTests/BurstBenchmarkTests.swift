import Foundation
@testable import RingsideBench
import RingsideJSON
import Testing

@Suite("ringside-bench burst")
struct BurstBenchmarkTests {
    @Test("a sampled burst counts every call by its weights, a dropping one does not; the report gives counts and errors per row")
    func sampledAndDropped() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let directory = try scratch.subdirectory("burst")
        let sampled = try BurstBenchmark.burst(.rising, seed: 3, sampleAbovePercent: 50, directory: directory)
        let dropped = try BurstBenchmark.burst(.rising, seed: 3, sampleAbovePercent: 100, directory: directory)
        #expect(sampled.count == sampled.calls && sampled.records < Int(sampled.calls) / 4, "\(sampled)")
        #expect(sampled.errors.allSatisfy { abs($0) < 0.01 }, "\(sampled.errors)")
        #expect(dropped.count == UInt64(dropped.records) && dropped.count < dropped.calls / 5, "\(dropped)")
        #expect(dropped.errors[0] < -0.1, "what a full lane keeps leans to the burst's start: \(dropped.errors)")

        let report = BurstReport(
            machine: ReportTests.machine, method: "m",
            rows: [
                .init(name: "burst.sampled", sampleAbovePercent: 50, seeds: [sampled]),
                .init(name: "burst.dropped", sampleAbovePercent: 100, seeds: [dropped]),
            ])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(report.json.text.utf8)) as? [String: Any])
        let results = try #require(object["results"] as? [[String: Any]])
        #expect(results.map { $0["name"] as? String } == ["burst.sampled", "burst.dropped"])
        #expect(results[0]["exact_counts"] as? Int == 1 && results[0]["count_percent"] as? Int == 100)
        #expect(results[1]["exact_counts"] as? Int == 0 && (results[1]["p50_error_max_percent"] as? Double ?? 0) > 10)
        #expect(report.table.contains("1 of 1") && report.table.contains("0 of 1"))
    }
}
