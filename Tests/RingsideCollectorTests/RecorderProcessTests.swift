import RingsideSystem
import Foundation
import Ringside
import RingsideTestSupport
import Synchronization
import Testing

@Suite("The flight recorder in ringside-collector as a process, under load")
struct RecorderProcessTests {
    /// The collector's `recorder` figures and records drained, from /latest.
    private static func figures(port: Int) throws -> (recorder: [String: Any], drained: Int)? {
        let collector = try jsonObject(httpGet(port: port, path: "/latest").body)["collector"] as? [String: Any]
        guard let recorder = collector?["recorder"] as? [String: Any], let drained = collector?["records_drained"] as? Int else {
            return nil
        }
        return (recorder, drained)
    }

    @Test("two producers blasting at full speed: the recorder's bytes never pass its budget, and what it let go of is counted exactly")
    func budgetHeldUnderLoad() throws {
        try withRingDirectory { directory in
            let budget = 1 << 20
            let (collector, port) = try startCollector([
                "--dir", directory.path, "--poll", "5ms", "--recorder-seconds", "10m", "--recorder-max-bytes", "1M",
            ])
            defer { collector.kill() }
            let producers = try ["blast-a", "blast-b"].map { ring in
                try ChildProcess(testProducer: "blast", ring: ring, in: directory, ["--seconds", "3", "--capacity", "65536"])
            }
            for producer in producers { #expect(producer.readLine()?.hasPrefix("attached ") == true) }
            // While they blast, every look at the figures (on a thread of its own) finds the budget held.
            let looks = Locked((count: 0, peak: 0, over: [Int]()))
            let stop = Atomic<Bool>(false)
            let watcher = Thread {
                while !stop.load(ordering: .acquiring) {
                    if let bytes = (try? Self.figures(port: port))?.recorder["bytes"] as? Int {
                        looks.withLock { looks in
                            looks.count += 1
                            looks.peak = max(looks.peak, bytes)
                            if bytes > budget { looks.over.append(bytes) }
                        }
                    }
                    usleep(10_000)
                }
            }
            watcher.start()
            let outputs = producers.map { $0.readLine() ?? "" }
            stop.store(true, ordering: .releasing)
            let written = try outputs.map { line in
                // "attempts A written W dropped D faults F late L"
                let fields = line.split(separator: " ")
                return try #require(fields.firstIndex(of: "written").flatMap { Int(fields[$0 + 1]) }, "\(line)")
            }
            let total = written.reduce(0, +)
            // Drained to the last record, the recorder holds or counted each one (none is 10 min old).
            let settled = try eventually(seconds: 30) { () -> [String: Any]? in
                guard let (recorder, drained) = try Self.figures(port: port), drained == total else { return nil }
                return recorder
            }
            let recorder = try #require(settled, "the collector drained all \(total) records")
            let held = try #require(recorder["records"] as? Int), evicted = try #require(recorder["evicted_records"] as? Int)
            #expect(held + evicted == total, "held \(held) + evicted \(evicted) != drained \(total)")
            #expect(evicted > 0, "\(total) records of 40 bytes do not fit in 1 MiB")
            #expect(try #require(recorder["bytes"] as? Int) <= budget)
            let seen = looks.withLock { $0 }
            #expect(seen.count > 0 && seen.over.isEmpty, "looks \(seen.count), over the budget: \(seen.over)")
            let metrics = try httpGet(port: port, path: "/metrics").body
            #expect(metrics.contains("ringside_recorder_evicted_records_total \(evicted)"))
            #expect(metrics.contains("ringside_recorder_bytes_limit \(budget)"))
            print(
                "recorder under load: \(total) records in 3 s (\(total / 3) a second), peak \(seen.peak) bytes of \(budget), \(seen.count) looks"
            )
        }
    }
}
