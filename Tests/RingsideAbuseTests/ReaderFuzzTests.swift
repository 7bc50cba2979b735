import Foundation
import RingsideTestSupport
import Testing

@Suite("Damaged bot files: every reader reads them or refuses them by name, never crashes, hangs or over-allocates")
struct ReaderFuzzTests {
    /// Runs the fuzzer process (`Tests/ringside-abuse-fuzzer`): thousands of targeted and random
    /// mutations of valid version-2 bot files (several lanes, cells, a registry), each fed to the
    /// inspector, the consumer, a collector pass with both exporters, and (every `dumpEvery`th) the
    /// real ringside-dump. A crash or a hang kills only the fuzzer, which names the case first.
    /// The cases that once hit a library bug (listed in the fuzzer's `knownIssue`, now fixed) are
    /// included, and also run on their own by `onceKnownIssues` below.
    @Test("a fixed seed's mutations: read correctly or refused with the ring and the problem named")
    func mutations() throws {
        let count = longTests ? 100_000 : 5_000
        let dumpEvery = longTests ? 200 : 100
        try withRingDirectory { directory in
            let run = try runProcess(
                "ringside-abuse-fuzzer",
                [
                    "--dir", directory.path, "--seed", "20261121", "--count", "\(count)", "--dump-every", "\(dumpEvery)",
                    "--case-seconds", "10", "--known-issues", "include",
                ], timeoutSeconds: longTests ? 3_600 : 600)
            let crash = run.errorLines.first { $0.contains(" in case: ") }
            #expect(crash == nil, "the fuzzer died: \(crash ?? "")")
            #expect(run.status == 0, "violations:\n\(run.errorLines.prefix(30).joined(separator: "\n"))")
            let summary = try run.json()
            print("reader fuzz: \(run.output.trimmingCharacters(in: .whitespacesAndNewlines))")
            let targeted = try #require(summary["targeted"] as? Int)
            #expect(summary["cases"] as? Int == max(count, targeted))
            #expect(count > targeted, "random cases follow the \(targeted) targeted ones")
            #expect(summary["violations"] as? Int == 0)
            // Both outcomes happen, with each kind of refusal (the catalogue reaches every check).
            #expect((summary["readable"] as? Int ?? 0) > count / 5)
            let refused = summary["refused"] as? [String: Int] ?? [:]
            for kind in [
                "corrupt: bad magic", "corrupt: unsupported format version", "corrupt: bad layout",
                "corrupt: truncated", "corrupt: cursors out of range", "corrupt: metric count",
                "corrupt: registry entry", "not ready",
            ] {
                #expect((refused[kind] ?? 0) > 0, "no case was refused as \(kind)")
            }
            #expect((summary["lanes_refused"] as? Int ?? 0) > 0, "no case was refused for lanes_allocated past max_lanes")
            // Files of several lanes were read (the bases have up to three, a case appends a fourth).
            #expect((summary["most_lanes_read"] as? Int ?? 0) >= 3)
            #expect((summary["multi_lane_readable"] as? Int ?? 0) > count / 10)
            #expect((summary["records_rejected"] as? Int ?? 0) > 0, "no damaged record reached the collector")
            #expect((summary["dump_runs"] as? Int ?? 0) >= count / dumpEvery)
            // No allocation sized by the file: the files are at most 64 records a lane and 16 metrics,
            // and the largest request stays small (a size taken from a damaged field would be huge).
            let largest = try #require(summary["largest_allocation"] as? Int)
            #expect(largest < 1 << 20, "largest single allocation \(largest) bytes")
        }
    }

    /// Lanes whose cursors are each in range but whose sums wrap past 2^64 (say lane 1 at read =
    /// write = 2^64 - 1 beside lane 0 at read 0, write 5). `RingStatus.backlog` once subtracted
    /// the wrapped sums and trapped: the inspector, the consumer, the collector and ringside-dump
    /// died of SIGILL on such a file. Kept as a regression test.
    @Test("lanes whose cursor sums wrap past 2^64 are read, not crashed on (RingStatus.backlog)")
    func onceKnownIssues() throws {
        try withRingDirectory { directory in
            let run = try runProcess(
                "ringside-abuse-fuzzer",
                [
                    "--dir", directory.path, "--seed", "20261121", "--dump-every", "0", "--case-seconds", "10", "--known-issues", "only",
                ], timeoutSeconds: 300)
            let crash = run.errorLines.first { $0.contains(" in case: ") }
            #expect(crash == nil, "the fuzzer died: \(crash ?? "")")
            #expect(run.status == 0, "\(run.errorLines.prefix(10).joined(separator: "\n"))")
        }
    }
}
