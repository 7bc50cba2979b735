import CRingside
import Foundation
import Ringside
import RingsideSystem

/// `start.*`: a lane that starts writing after an idle spell, sampling off (a full lane drops),
/// 20,000 records a second into 1,024 slots (51 ms of room), beside a collector at its defaults:
/// what each start drops, with the doorbell and with the poll, the two bots' starts in turn.
extension WakeBenchmark {
    static let startRate = 20_000
    static let startCapacity = 1_024
    /// The idle spell before each start: longer than the poll, and than the second the drain keeps
    /// a lane's fill rate (`DrainTiming.fillRateHoldNanos`: it wakes at that pace meanwhile), plus
    /// up to a poll at random (the start's phase against the poll uniform); how long each start writes.
    static let idleSpellNanos: UInt64 = 1_500_000_000
    static let writingNanos: UInt64 = 250_000_000

    static func startsMethod(_ settings: BenchSettings) -> String {
        "start.*: a bot of one \(startCapacity)-slot lane, sampling off, \(starts(settings)) starts each, the two rows' in "
            + "turn: an idle spell of \(idleSpellNanos / 1_000_000) ms and 0 to 100 at random (longer than the poll, and than the second the drain keeps a lane's fill rate), then \(startRate / 1_000) records every ms (paced as "
            + "ringside-test-producer blast is: a ms's records at once, then a sleep until the next are due) for "
            + "\(writingNanos / 1_000_000) ms; dropped = the lane's drops in a start. "
    }

    static func startRows(
        _ settings: BenchSettings, directory: String, scratch: ScratchDirectory
    ) throws(BenchError) -> [WakeReport.StartRow] {
        let collector = try startDaemon(settings, directory: directory, scratch: scratch)
        defer { ScaleBenchmark.stop(collector.process, in: scratch) }
        let bots = try attachPair(
            ["start-bell", "start-poll"], directory: directory, options: .init(laneCapacity: startCapacity, sampleAbovePercent: 100))
        for (bot, histogram) in bots {
            histogram.record(1)
            try collector.waitForCount(ring: bot.name, atLeast: 1)
        }
        var rows = [WakeReport.StartRow(name: "start.doorbell"), WakeReport.StartRow(name: "start.poll")]
        var random = SystemRandomNumberGenerator()
        for _ in 0..<starts(settings) {
            for index in bots.indices {
                System.nanosleep(idleSpellNanos + UInt64.random(in: 0..<100_000_000, using: &random))
                rows[index].starts.append(writeOneStart(bots[index].histogram, lane: bots[index].bot.currentThreadLane))
            }
        }
        return rows
    }

    /// One start: `startRate` a second for `writingNanos`, a ms's records at a time.
    static func writeOneStart(_ histogram: Bot.Histogram, lane: Bot.Lane) -> WakeReport.Start {
        let droppedBefore = lane.recordsDropped
        let batch = UInt64(startRate / 1_000)
        let start = rs_clock_precise_ns()
        var written: UInt64 = 0
        while rs_clock_precise_ns() &- start < writingNanos {
            for _ in 0..<batch { histogram.record(written &+ 1) }
            written &+= batch
            let due = start &+ written * 1_000_000 / batch
            let now = rs_clock_precise_ns()
            if due > now { System.nanosleep(due - now) }
        }
        return WakeReport.Start(records: written, dropped: lane.recordsDropped &- droppedBefore)
    }
}
