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
    @Test("--max-series holds exactly with 60 bots adopted in a pass, and for a bot that comes later")
    func capHoldsAcrossManyBots() throws {
        try withRingDirectory { directory in
            var options = CollectorOptions()
            options.directory = directory
            options.maxSeries = 100
            let collector = try Collector(options: options, log: CapturedLog().log)
            var bots: [Bot] = []
            // 60 of them (a process holds at most 64 bots), adopted in one pass (up to 64 a pass).
            for index in 0..<60 {
                let bot = try Bot.attach("tally-\(index)", directory: directory.path, options: .init(laneCapacity: 1024))
                for metric in 0..<3 { try bot.histogram("latency", labels: ["n": "\(metric)"]).record(UInt64(index + 1)) }
                bots.append(bot)
            }
            var snapshot = pass(collector)
            #expect(snapshot.rings.count == 60)
            #expect(snapshot.series.count == 100 && snapshot.collector.series == 100)
            #expect(snapshot.rings.reduce(0) { $0 + $1.seriesRefused } == 80, "every series past the cap refused, none twice")
            // A bot adopted in a later pass, and a new metric of a bot already in: both refused.
            let late = try Bot.attach("tally-late", directory: directory.path, options: .init(laneCapacity: 1024))
            try late.histogram("latency").record(1)
            try bots[0].histogram("latency", labels: ["n": "new"]).record(1)
            snapshot = pass(collector)
            snapshot = pass(collector)
            #expect(snapshot.series.count == 100 && snapshot.collector.series == 100)
            #expect(snapshot.ring("tally-late")?.seriesRefused == 1)
            #expect(snapshot.rings.reduce(0) { $0 + $1.seriesRefused } == 82)
            withExtendedLifetime(bots) {}
            withExtendedLifetime(late) {}
        }
    }
}
