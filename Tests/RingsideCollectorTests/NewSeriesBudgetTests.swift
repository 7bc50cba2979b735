import CRingside
import Foundation
import Ringside
@testable import RingsideCollector
import RingsideExport
import RingsideSnapshot
import RingsideTestSupport
import Testing

@Suite("New series: a snapshot out of time for them leaves the rest to the next, counted")
struct NewSeriesBudgetTests {
    @Test(
        "with no time for new series, each snapshot shows one bot's new series and admits one ring's new metrics, counting the series it leaves; every figure is exact once shown"
    )
    func newSeriesShownInTurn() throws {
        try withRingDirectory { directory in
            let bots = try (0..<3).map { try Bot.attach("burst-\($0)", directory: directory.path, options: .init(laneCapacity: 1024)) }
            for (number, bot) in bots.enumerated() {
                for symbol in 0..<5 {
                    try bot.histogram("fill", labels: ["symbol": "S\(symbol)"]).record(UInt64(number * 100 + symbol + 1))
                }
            }
            var options = CollectorOptions(directory: directory)
            options.newSeriesNanos = 0
            let collector = try Collector(options: options, log: CapturedLog().log)
            var now = rs_clock_precise_ns()
            var shown: [(fills: Int, orders: Int, awaiting: Int, kept: Int)] = []
            func publish() throws {
                now += 2_000_000_000  // every ring's registry and cells due a look
                let generation = collector.snapshot.generation
                for _ in 0..<1_000 where collector.snapshot.generation == generation { collector.runPass(nowNanos: now) }
                let page = collector.snapshot
                let health = try JSONSerialization.jsonObject(
                    with: Data(JSONExporter.health(page, isHealthy: true, lastPassAgeSeconds: 0, snapshotAgeSeconds: 0)))
                let built = page.collector.snapshotBuild
                #expect((health as? [String: Any])?["series"] as? Int == built.series, "/health says the series kept")
                shown.append(
                    (
                        page.series.count { $0.metric.name == "fill" }, page.series.count { $0.metric.name == "orders" },
                        built.seriesAwaitingFigures, built.series - page.series.count
                    ))
            }
            // Admitted as their rings were: their first figures come a bot at a time.
            for _ in 0..<3 { try publish() }
            #expect(shown.map(\.fills) == [5, 10, 15])
            #expect(shown.map(\.awaiting) == [10, 5, 0])
            // The series kept count those awaiting their first figures.
            #expect(shown.map(\.kept) == shown.map(\.awaiting))

            // A counter writes no record: only a look at its bot's registry admits it, a ring at a time.
            for (number, bot) in bots.enumerated() { try bot.counter("orders").increment(by: UInt64(number + 1)) }
            shown = []
            for _ in 0..<3 { try publish() }
            #expect(shown.map(\.orders) == [1, 2, 3])
            #expect(shown.map(\.awaiting) == [0, 0, 0])

            let page = collector.snapshot
            for (number, bot) in bots.enumerated() {
                #expect(page.series("orders", ring: bot.name)?.cumulativeExactSum == UInt128(number + 1))
                for symbol in 0..<5 {
                    let fill = page.series("fill", ring: bot.name, labels: ["symbol": "S\(symbol)"])
                    #expect(fill?.cumulativeCount == 1 && fill?.cumulativeExactSum == UInt128(number * 100 + symbol + 1))
                }
            }
            // A forced snapshot (at stop) shows every series: none is left waiting.
            for bot in bots { try bot.histogram("late").record(7) }
            collector.runPass(nowNanos: now + 1_000_000, forcePublish: true)
            #expect(collector.snapshot.series.count { $0.metric.name == "late" } == 3)
            #expect(collector.snapshot.collector.snapshotBuild.seriesAwaitingFigures == 0)
        }
    }

    @Test(
        "a bot whose only change is new series awaiting their first figures shows what it showed, not made again, while a snapshot has no time for them"
    )
    func awaitingBotShownAsItWas() throws {
        try withRingDirectory { directory in
            let bots = try ["a", "b", "c"].map {
                try Bot.attach("await-\($0)", directory: directory.path, options: .init(laneCapacity: 1024))
            }
            // Series registered and never recorded: their windows stay empty, so they show the same.
            for bot in bots { for n in 0..<2 { _ = try bot.histogram("held", labels: ["n": "\(n)"]) } }
            var options = CollectorOptions(directory: directory)
            options.newSeriesNanos = 0
            let collector = try Collector(options: options, log: CapturedLog().log)
            var now = rs_clock_precise_ns()
            // The next snapshot, time stepped as often as it takes: snapshots are spaced by their
            // pace (`PublishPace`: ten times the last one's build, the drain thread's own time), so
            // on a loaded machine a step of 100 ms may bring none.
            func publish(after step: UInt64) -> Snapshot {
                let generation = collector.snapshot.generation
                for _ in 0..<100 where collector.snapshot.generation == generation {
                    now += step
                    for _ in 0..<1_000 where collector.snapshot.generation == generation { collector.runPass(nowNanos: now) }
                }
                return collector.snapshot
            }
            // Admitted a ring at a time, as their registries are looked at (every 2 s here).
            var page = Snapshot()
            for _ in 0..<10 where page.series.count < 6 || page.collector.snapshotBuild.seriesAwaitingFigures > 0 {
                page = publish(after: 2_000_000_000)
            }
            try #require(page.series.count == 6 && page.collector.snapshotBuild.seriesAwaitingFigures == 0)

            // New series, recorded: admitted as they are drained, their first figures a bot a snapshot.
            for bot in bots { for n in 0..<2 { try bot.histogram("fill", labels: ["n": "\(n)"]).record(UInt64(n + 1)) } }
            let pages = (0..<3).map { _ in publish(after: 100_000_000) }
            #expect(pages.map(\.collector.snapshotBuild.seriesAwaitingFigures) == [4, 2, 0])
            #expect(pages.map { $0.series.count { $0.metric.name == "fill" } } == [2, 4, 6])
            // The second snapshot made b again (its turn) but not c: c's part is the one the first
            // published, the very array, not its series walked again to be left out again.
            func heldPart(of bot: Bot, in page: Snapshot) -> UnsafePointer<SeriesSnapshot>? {
                let position = page.series.indices.first { page.series[$0].ring == bot.name && page.series[$0].metric.name == "held" }
                return position.map { page.series.withSeries(at: $0) { $0 } }
            }
            #expect(heldPart(of: bots[2], in: pages[1]) != nil)
            #expect(heldPart(of: bots[2], in: pages[1]) == heldPart(of: bots[2], in: pages[0]))
            #expect(heldPart(of: bots[1], in: pages[1]) != heldPart(of: bots[1], in: pages[0]))
            for bot in bots {
                for n in 0..<2 {
                    let fill = pages[2].series("fill", ring: bot.name, labels: ["n": "\(n)"])
                    #expect(fill?.cumulativeCount == 1 && fill?.cumulativeExactSum == UInt128(n + 1))
                }
            }
        }
    }
}
