import CRingside
import Ringside
@testable import RingsideCollector
import RingsideTestSupport
import Testing

/// The drain's schedule (`DrainScheduler`): a ring's file touched (inotify: a lane added by
/// fallocate) is drained whole at the visit that event brings, new lanes included. Before, that
/// visit drained nothing (its new lanes were looked for after its drain), and the pass after
/// drained them; a pass cut short by its time budget left the other touched rings' first visit to
/// the next, which drained nothing either and let a snapshot begin without their records.
@Suite("The drain's schedule: a ring whose file grew a lane is drained at the visit its event brings")
struct DrainSchedulerTests {
    @Test(
        "a bot's first records, in a lane its thread added after the bot was taken up, are drained by the pass that sees the lane's event")
    func laneAddedDrainedAtOnce() throws {
        try withRingDirectory { directory in
            let bots = try ["a", "b"].map { try Bot.attach("lane-\($0)", directory: directory.path, options: .init(laneCapacity: 1024)) }
            // Registered, never recorded: no lane of the bots' is claimed yet.
            let fills = try bots.map { try $0.histogram("fill") }
            var options = CollectorOptions()
            options.directory = directory
            let collector = try Collector(options: options, log: CapturedLog().log)
            var now = rs_clock_precise_ns()
            // Taken up, and settled: no longer new (a new ring's lanes are looked for every pass).
            for pass in 0..<3 {
                if pass > 0 { now += 2_000_000_000 }
                collector.runPass(nowNanos: now)
            }
            try #require(collector.snapshot.rings.filter { $0.bot.hasPrefix("lane-") }.count == 2)
            for (number, fill) in fills.enumerated() { for value in 1...3 { fill.record(UInt64(number * 10 + value)) } }
            // Within the second: neither the check of every file's lane count nor the rings' liveness is due.
            now += 100_000_000
            // The pass that sees the files' events drains the new lanes of each ring it visits (at
            // least the first: a pass its time budget cuts short leaves the other to the next,
            // which drains it whole). Before, those visits drained nothing.
            let first = collector.runPass(nowNanos: now)
            let second = collector.runPass(nowNanos: now + 1_000)
            #expect(first >= 3, "the first visit the event brings drains the ring's new lane")
            #expect(first + second == 6, "the visits the events bring drain every new lane")
            collector.runPass(nowNanos: now + 1_000_000, forcePublish: true)
            for (number, bot) in bots.enumerated() {
                #expect(collector.snapshot.series("fill", ring: bot.name)?.cumulativeExactSum == UInt128(number * 30 + 6))
            }
        }
    }
}
