import Foundation
import Ringside
@testable import RingsideCollector
import RingsideSnapshot
import RingsideTestSupport
import Testing

@Suite("the series caps count every bot's series at each ask, however many bots a pass adopts")
struct SeriesUsageTallyTests {
    /// The tracker sums what the bots hold once a pass and counts each bot again after it asks
    /// (`SeriesUsageTally`): a bot adopted after others in the same pass must see what they
    /// admitted, and one in a later pass what every earlier one holds.
    @Test("--max-series holds exactly with 61 bots adopted in a pass, and for a bot that comes later")
    func capHoldsAcrossManyBots() throws {
        try withRingDirectory { directory in
            var options = CollectorOptions(directory: directory)
            options.maxSeries = 100
            let collector = try Collector(options: options, log: CapturedLog().log)
            // 60 bots of 3 series in a child (a process holds at most 64 bots, and tests beside
            // this one hold some in this process), and one here, all adopted in one pass (up to
            // 64 a pass).
            let many = try ChildProcess(
                testProducer: "scale-series", ring: "tally", in: directory, ["--series", "180", "--metrics", "3", "--first", "0"])
            defer { many.kill() }
            try #require(many.readLine()?.hasPrefix("ready ") == true, "\(many.waitForExit().standardError)")
            let early = try Bot.attach("tally-early", directory: directory.path, options: .init(laneCapacity: 1024))
            for metric in 0..<3 { try early.histogram("latency", labels: ["n": "\(metric)"]).record(UInt64(metric + 1)) }
            var snapshot = pass(collector)
            #expect(snapshot.rings.count == 61)
            #expect(snapshot.series.count == 100 && snapshot.collector.snapshotBuild.series == 100)
            #expect(snapshot.rings.reduce(0) { $0 + $1.seriesRefused } == 83, "every series past the cap refused, none twice")
            // A bot adopted in a later pass, and a new metric of a bot already in: both refused.
            let late = try Bot.attach("tally-late", directory: directory.path, options: .init(laneCapacity: 1024))
            try late.histogram("latency").record(1)
            try early.histogram("latency", labels: ["n": "new"]).record(1)
            snapshot = pass(collector)
            snapshot = pass(collector)
            #expect(snapshot.series.count == 100 && snapshot.collector.snapshotBuild.series == 100)
            #expect(snapshot.ring("tally-late")?.seriesRefused == 1)
            #expect(snapshot.rings.reduce(0) { $0 + $1.seriesRefused } == 85)
            withExtendedLifetime(early) {}
            withExtendedLifetime(late) {}
        }
    }
}
