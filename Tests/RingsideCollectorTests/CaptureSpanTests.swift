import Foundation
import Ringside
import RingsideTestSupport
import Testing

extension CaptureProcessTests {
    /// A capture is taken once its seconds after have been drained: the recorder must still hold
    /// its seconds before then (it held 2 s less than asked for, `--capture-after` and a grace).
    @Test("a capture holds its --recorder-seconds before the trigger as well as its --capture-after after it")
    func holdsTheWholeSpan() throws {
        try withCapturingCollector(["--recorder-seconds", "2", "--capture-after", "1s", "--capture-min-interval", "1h"]) {
            _, port, directory, captures in
            // 50,000 records a second (the recorder's chunks of 4,096 span 82 ms), each a counter
            // sample of the trace at its time.
            let producer = try ChildProcess(testProducer: "blast", ring: "steady", in: directory, ["--seconds", "30", "--rate", "50000"])
            defer { producer.kill() }
            #expect(producer.readLine()?.hasPrefix("attached ") == true)
            // Records of --recorder-seconds before asking.
            let recorded = try eventually(seconds: 30) { () -> Bool in
                let held = (try jsonObject(httpGet(port: port, path: "/latest").body)["collector"] as? [String: Any])?["recorder"]
                return ((held as? [String: Any])?["seconds_held"] as? Double ?? 0) >= 1.9
            }
            try #require(recorded, "the recorder did not hold 2 s of the producer's records")
            let accepted = try CaptureProbe.post(port: port, path: "/api/capture?bot=steady")
            try #require(accepted.status == 202, "\(accepted.status) \(accepted.text)")
            let capture = try #require(try CaptureProbe.finished(port: port, trigger: "request"), "no capture was written")
            let files = try #require(capture["files"] as? [String])
            let name = try #require(files.first { $0.hasSuffix(".trace.json") })
            let trace = try jsonObject(String(contentsOfFile: captures + "/" + name, encoding: .utf8))
            let events = try #require(trace["traceEvents"] as? [[String: Any]])
            let times = events.filter { $0["ph"] as? String == "C" && ($0["name"] as? String)?.hasPrefix("blast") == true }
                .compactMap { $0["ts"] as? Double }
            let first = try #require(times.min()), last = try #require(times.max())
            // 2 s before and 1 s after, to within the drain's timing.
            #expect(last - first >= 2_700_000 && last - first <= 3_300_000, "the capture spans \((last - first) / 1e6) s of 3 s")
        }
    }
}
