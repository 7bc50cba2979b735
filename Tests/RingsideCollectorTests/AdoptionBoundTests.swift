import CRingside
import Ringside
@testable import RingsideCollector
import RingsideExport
import RingsideTestSupport
import Testing

@Suite("Rings found at once are adopted over several passes, for a bounded time each")
struct AdoptionBoundTests {
    /// The rings discovery hands over, adopted by passes of a tracker whose passes may spend
    /// `adoptionNanos` adopting; returns how many rings it holds after each pass.
    private func adopted(bots: Int, adoptionNanos: UInt64, passes: Int) throws -> [Int] {
        try withRingDirectory { directory in
            let attached = try (0..<bots).map { try Bot.attach("found-\($0)", directory: directory.path) }
            for bot in attached { try bot.histogram("fill").record(1) }
            var options = CollectorOptions(directory: directory)
            options.adoptionNanos = adoptionNanos
            let log = CapturedLog().log
            let handoff = DiscoveryHandoff(wakeDrain: {}, wakeDiscovery: {})
            let tracker = try RingTracker(
                options: options,
                makeAggregator: { BotAggregator(ring: $0, layout: .standard, quantiles: 1, pageBytes: PrometheusExporter.pageBytes) },
                log: log, ringLog: RingLog(log), wakeup: DrainWakeup(), handoff: handoff, ringLimit: 1_000)
            defer { tracker.closeState() }
            for bot in attached {
                handoff.post(
                    found: [DiscoveryHandoff.FoundRing(consumer: try RingConsumer(bot.name, directory: directory), loggedProblem: nil)])
            }
            var held: [Int] = []
            for _ in 0..<passes {
                _ = tracker.beginPass(nowNanos: rs_clock_precise_ns())
                held.append(tracker.tracked.count)
            }
            return held
        }
    }

    @Test("with no time to adopt, a pass adopts one ring, the next the next; with time, every ring in one pass")
    func adoptionIsBounded() throws {
        #expect(try adopted(bots: 3, adoptionNanos: 0, passes: 4) == [1, 2, 3, 3])
        #expect(try adopted(bots: 3, adoptionNanos: 3_600_000_000_000, passes: 1) == [3])
    }
}
