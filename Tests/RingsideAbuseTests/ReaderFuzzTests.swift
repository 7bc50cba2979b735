import Foundation
import RingsideTestSupport
import Testing

@Suite("Damaged ring files: every reader reads them or refuses them by name, never crashes, hangs or over-allocates")
struct ReaderFuzzTests {
    /// Runs the fuzzer process (`Tests/ringside-abuse-fuzzer`): thousands of targeted and random
    /// mutations of valid rings, each fed to the inspector, the consumer, a collector pass with both
    /// exporters, and (every `dumpEvery`th) the real ringside-dump. A crash or a hang kills only
    /// the fuzzer, which names the case first.
    @Test("a fixed seed's mutations: read correctly or refused with the ring and the problem named")
    func mutations() throws {
        let count = longTests ? 100_000 : 2_500
        let dumpEvery = longTests ? 200 : 100
        try withRingDirectory { directory in
            let run = try runProcess("ringside-abuse-fuzzer", [
                "--dir", directory.path, "--seed", "20261121", "--count", "\(count)", "--dump-every", "\(dumpEvery)",
                "--case-seconds", "10",
            ], timeoutSeconds: longTests ? 3_600 : 300)
            let crash = run.errorLines.first { $0.contains(" in case: ") }
            #expect(crash == nil, "the fuzzer died: \(crash ?? "")")
            #expect(run.status == 0, "violations:\n\(run.errorLines.prefix(30).joined(separator: "\n"))")
            let summary = try #require(
                try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any], "no summary: \(run.output)")
            print("reader fuzz: \(run.output.trimmingCharacters(in: .whitespacesAndNewlines))")
            #expect(summary["cases"] as? Int == count)
            #expect(summary["violations"] as? Int == 0)
            // Both outcomes happen, with each kind of refusal (the catalogue reaches every check).
            #expect((summary["readable"] as? Int ?? 0) > count / 5)
            let refused = summary["refused"] as? [String: Int] ?? [:]
            for kind in ["corrupt: bad magic", "corrupt: unsupported format version", "corrupt: bad layout",
                         "corrupt: truncated", "corrupt: cursors out of range", "corrupt: metric count",
                         "corrupt: registry entry", "not ready"] {
                #expect((refused[kind] ?? 0) > 0, "no case was refused as \(kind)")
            }
            #expect((summary["records_rejected"] as? Int ?? 0) > 0, "no damaged record reached the collector")
            #expect((summary["dump_runs"] as? Int ?? 0) >= count / dumpEvery)
            // No allocation sized by the file: the rings are at most 64 records and 16 metrics, and
            // the largest request stays small (a size taken from a damaged field would be huge).
            let largest = try #require(summary["largest_allocation"] as? Int)
            #expect(largest < 1 << 20, "largest single allocation \(largest) bytes")
        }
    }
}
