import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

@Suite("ringside-dump postmortem of a killed C bot")
struct PostmortemTests {
    @Test(
        "a SIGKILLed C bot's files (its own and its forked worker's) give back every record: values as slices, exemplars, thread names, counter total, gauge, hlog"
    )
    func killedCBot() throws {
        let build = try TemporaryDirectory("ringside-postmortem-c")
        defer { build.remove() }
        guard let executable = try buildCProducer("c", fixture: "c_postmortem", into: build) else { return }
        try withRingDirectory { directory in
            let threads = 3, count = 300
            let bot = try ChildProcess(executable, [directory.path, "pmbot", "\(threads)", "\(count)", "fork"])
            defer { bot.kill() }
            let childLine = bot.readLine() ?? ""
            let childPID = try #require(childLine.hasPrefix("child pid ") ? Int32(childLine.dropFirst(10)) : nil, "\(childLine)")
            let ready = bot.readLine()
            try #require(ready == "ready", "the C bot did not start: \(ready ?? "") \(bot.waitForExit().standardError)")
            // A live bot is refused: its lanes change while they are read.
            let refused = try runProcess("ringside-dump", ["--dir", directory.path, "postmortem", "pmbot", "--out", build.path])
            #expect(refused.status == 1 && refused.errors.contains("is alive"), "\(refused.output)\(refused.errors)")
            bot.send(SIGKILL)
            #expect(bot.waitForExit().status == SIGKILL)

            let run = try runProcess("ringside-dump", ["--dir", directory.path, "postmortem", "pmbot", "--out", build.path])
            try #require(run.status == 0, "\(run.output)\(run.errors)")
            for t in 0..<threads { #expect(run.output.contains("pm-worker-\(t)"), "\(run.output)") }
            #expect(run.output.contains("counter pm_orders") && run.output.contains("\(threads * count)"), "\(run.output)")
            #expect(run.output.contains("gauge pm_position") && run.output.contains("\(count).25"), "\(run.output)")

            // The JSON trace: a thread per lane named by its thread, a slice per latency record
            // (its duration the value, in ns: 1 us in the trace's microseconds is 1000 ns).
            let trace = try jsonObject(String(contentsOfFile: build.path + "/pmbot-postmortem.trace.json", encoding: .utf8))
            let events = try #require(trace["traceEvents"] as? [[String: Any]])
            // A thread's overlapping slices go on rows of its own, "NAME #2"...: the thread is NAME.
            func thread(_ track: String) -> String { track.components(separatedBy: " #").first ?? track }
            let threadNames = events.filter { $0["ph"] as? String == "M" && $0["name"] as? String == "thread_name" }
                .compactMap { ($0["args"] as? [String: Any])?["name"] as? String }.map(thread)
            // The main thread (its gauge) is named by the kernel: the program's name.
            #expect(Set(threadNames) == Set((0..<threads).map { "pm-worker-\($0)" } + ["c_postmortem"]), "\(threadNames)")
            let slices = events.filter { $0["ph"] as? String == "X" }
            let latencies = slices.filter { $0["name"] as? String == "pm_latency" }
            // Durations in ns, each thread's on its own track: thread t wrote (t+1)*1000 + 1...count.
            var byThread: [String: [Int]] = [:]
            let nameOfLane = Dictionary(
                events.filter { $0["ph"] as? String == "M" && $0["name"] as? String == "thread_name" && $0["pid"] as? Int == Int(bot.pid) }
                    .map {
                        (($0["tid"] as? Int) ?? -1, ($0["args"] as? [String: Any])?["name"] as? String ?? "")
                    }, uniquingKeysWith: { first, _ in first })
            for slice in latencies where slice["pid"] as? Int == Int(bot.pid) {
                let nanos = Int(((slice["dur"] as? Double) ?? -1) * 1000 + 0.5)
                byThread[thread(nameOfLane[(slice["tid"] as? Int) ?? -1] ?? "?"), default: []].append(nanos)
            }
            for t in 0..<threads {
                #expect(byThread["pm-worker-\(t)"]?.sorted() == Array((t + 1) * 1000 + 1...(t + 1) * 1000 + count), "thread \(t)")
            }
            #expect(latencies.count == threads * count + count)
            // The forked child's values, in its worker file: a process of its own.
            let processNames = events.filter { $0["ph"] as? String == "M" && $0["name"] as? String == "process_name" }
                .compactMap { ($0["args"] as? [String: Any])?["name"] as? String }
            #expect(processNames.sorted() == ["bot pmbot (pid \(bot.pid))", "pmbot worker (pid \(childPID))"], "\(processNames)")
            let childValues = latencies.filter { $0["pid"] as? Int == Int(childPID) }.map {
                Int((($0["dur"] as? Double) ?? -1) * 1000 + 0.5)
            }
            #expect(childValues.sorted() == Array(9001...9000 + count))
            // Every tenth value's exemplar names it.
            let exemplars = latencies.compactMap { ($0["args"] as? [String: Any])?["exemplar.order_id"] as? String }
            #expect(exemplars.count == threads * count / 10)
            #expect(Set(exemplars).contains("T0-10") && Set(exemplars).contains("T\(threads - 1)-\(count)"))
            // One 2 ms span per thread, in us: a slice of at least 2,000,000 ns.
            let spans = slices.filter { $0["name"] as? String == "pm_span" }
            #expect(spans.count == threads && spans.allSatisfy { ($0["dur"] as? Double ?? 0) >= 2000 }, "\(spans)")
            let counters = events.filter { $0["ph"] as? String == "C" && $0["pid"] as? Int == Int(bot.pid) }
            let total = counters.first { $0["name"] as? String == "pm_orders" }.flatMap { ($0["args"] as? [String: Any])?["value"] as? Int }
            #expect(total == threads * count)
            let gauge = counters.last { $0["name"] as? String == "pm_position" }.flatMap {
                ($0["args"] as? [String: Any])?["value"] as? Double
            }
            #expect(gauge == Double(count) + 0.25)

            // The interval log: every latency record, in lines of whole seconds.
            let log = try String(contentsOfFile: build.path + "/pmbot-postmortem.hlog", encoding: .utf8)
            let lines = log.split(separator: "\n").filter { $0.hasPrefix("Tag=pmbot.pm_latency@ns,") }
            #expect(!lines.isEmpty, "\(log)")
            #expect(log.contains("Tag=pmbot@\(childPID).pm_latency@ns,"), "the worker's histogram, tagged by its file")
            let pftrace = try Data(contentsOf: URL(fileURLWithPath: build.path + "/pmbot-postmortem.pftrace"))
            #expect(pftrace.count > latencies.count * 8)
        }
    }
}
