import CRingside
import Foundation
import Ringside
import RingsideSystem

/// `idle.*`: a collector at its defaults with 2,000 attached bots that write nothing (a histogram
/// and a lane each), its threads' CPU over the measured seconds; first with every bot ringing (127
/// watched by the doorbells, the rest polled), then with none ringing (all polled).
extension WakeBenchmark {
    static let idleBots = 2_000
    /// After the last bot is shown: new bots are looked at more often for a second, and the
    /// first snapshots and sampler rounds take in every ring.
    static let idleSettleNanos: UInt64 = 5_000_000_000

    static func idleMethod(_ settings: BenchSettings) -> String {
        "idle.2000bots.*: \(idleBots) bots attached by one thread of this process (a histogram and a lane each, "
            + "nothing written), then \(idleSettleNanos / 1_000_000_000) s after /latest shows every ring, the collector's "
            + "threads' CPU (/proc/PID/task/TID/schedstat) over \(Int(idleSeconds(settings))) s, as % of one core, by thread "
            + "(ringside-collec: the daemon's loop, which feeds the history; ringside-sample: the thread sampler; "
            + "ringside-drain, ringside-bell: the doorbells' waiter, ringside-find: discovery, ringside-http*, "
            + "ringside-render); .doorbell with every bot ringing, .poll after each stored 0 in rings_doorbell. "
    }

    static func idleRow(
        _ settings: BenchSettings, directory: String, scratch: ScratchDirectory
    ) throws(BenchError) -> [WakeReport.IdleRow] {
        let collector = try startDaemon(settings, directory: directory, scratch: scratch)
        defer { ScaleBenchmark.stop(collector.process, in: scratch) }
        // A process holds at most 64 bots: 40 processes of 50.
        var holders: [IdleBots] = []
        defer { for holder in holders { holder.stop() } }
        for first in stride(from: 0, to: idleBots, by: IdleBots.perProcess) {
            holders.append(try IdleBots(directory: directory, first: first))
        }
        let deadline = rs_clock_precise_ns() + 120_000_000_000
        while ((try collector.latest())["rings"] as? [Any])?.count ?? 0 < idleBots {
            guard rs_clock_precise_ns() < deadline else { throw BenchError("the collector did not show \(idleBots) rings within 120 s") }
            System.nanosleep(500_000_000)
        }
        System.nanosleep(idleSettleNanos)
        let ringing = measureIdle(collector, name: "idle.2000bots.doorbell", seconds: idleSeconds(settings))
        for holder in holders { try holder.ask("no-ring") }
        System.nanosleep(2_000_000_000)
        let polled = measureIdle(collector, name: "idle.2000bots.poll", seconds: idleSeconds(settings))
        return [ringing, polled]
    }

    /// The collector's threads' CPU over `seconds`, by thread name.
    static func measureIdle(_ collector: WakeCollector, name: String, seconds: Double) -> WakeReport.IdleRow {
        let before = collector.threadCPU()
        let wallBefore = rs_clock_precise_ns()
        System.nanosleep(UInt64(seconds * 1e9))
        let after = collector.threadCPU()
        let wall = Double(rs_clock_precise_ns() &- wallBefore)
        let earlier = Dictionary(before.map { ($0.tid, $0.nanos) }, uniquingKeysWith: max)
        var byName: [String: UInt64] = [:]
        for thread in after {
            // A thread that began meanwhile counts from 0.
            byName[thread.name, default: 0] += thread.nanos &- min(thread.nanos, earlier[thread.tid] ?? 0)
        }
        let threads = byName.map { (name: $0.key, percent: Double($0.value) / wall * 100) }.sorted { $0.percent > $1.percent }
        return WakeReport.IdleRow(name: name, bots: idleBots, seconds: wall / 1e9, threads: threads)
    }
}

/// A process of its own that attaches `perProcess` bots (`idle-FIRST` on), each with one histogram
/// and a lane, writes nothing, and on request (`no-ring`) stores 0 in their `rings_doorbell`: the
/// benchmark runs itself with a hidden flag (see `runIfAsked`). It ends when its stdin closes.
package final class IdleBots {
    static let flag = "--idle-bots"
    static let perProcess = 50
    private let process = Process()
    private let requests: FileHandle
    private let answers: FileHandle
    private let what: String

    init(directory: String, first: Int) throws(BenchError) {
        what = "the holder of idle bots \(first) to \(first + Self.perProcess - 1) in \(directory)"
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.arguments = [Self.flag, directory, String(first)]
        do {
            process.executableURL = URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            try process.run()
        } catch { throw BenchError("starting \(what): \(error)") }
        requests = input.fileHandleForWriting
        answers = output.fileHandleForReading
        try expectDone()
    }

    /// Sends `request` and waits for its `done`.
    func ask(_ request: String) throws(BenchError) {
        do { try requests.write(contentsOf: Data((request + "\n").utf8)) } catch { throw BenchError("\(what): \(error)") }
        try expectDone()
    }

    func stop() {
        try? requests.close()
        process.waitUntilExit()
    }

    private func expectDone() throws(BenchError) {
        // The child's answers are one short line each, written whole.
        let line = String(decoding: answers.availableData, as: UTF8.self)
        guard line == "done\n" else {
            stop()
            throw BenchError("\(what): \(line.isEmpty ? "exited" : line)")
        }
    }

    /// Runs the holder and exits when `arguments` (without the program name) are the hidden flag's.
    package static func runIfAsked(_ arguments: [String]) {
        guard arguments.first == flag else { return }
        guard arguments.count == 3, let first = Int(arguments[2]) else {
            FileHandle.standardError.write(Data("ringside-bench \(flag): expected DIRECTORY FIRST\n".utf8))
            exit(2)
        }
        func say(_ line: String) { try? System.writeAll(STDOUT_FILENO, line + "\n") }
        var bots: [Bot] = []
        do {
            for index in first..<(first + perProcess) {
                let bot = try Bot.attach("idle-\(index)", directory: arguments[1], options: .init(laneCapacity: 1_024))
                _ = try bot.histogram(WakeBenchmark.metric)
                _ = try bot.claimCurrentThreadLane()
                bots.append(bot)
            }
        } catch {
            say("error: \(error)")
            exit(1)
        }
        say("done")
        while let request = readLine() {
            if request == "no-ring" { for bot in bots { bot.sayDoesNotRing() } }
            say("done")
        }
        bots.removeAll()
        exit(0)
    }
}
