import Testing

@testable import RingsideCollector

@Suite("The publisher's pace: a tenth of the drain thread, each snapshot published before the last is a second old")
struct PublishPaceTests {
    static let millisecond: UInt64 = 1_000_000

    /// The spacing after a snapshot begun at 10 s and published `wall` later, its slices costing `cost`.
    static func spacing(cost: UInt64, wall: UInt64) -> UInt64 {
        var pace = PublishPace()
        pace.begunNanos = 10_000 * millisecond
        pace.published(nowNanos: pace.begunNanos + wall, costNanos: cost)
        #expect(pace.wallNanos == wall && pace.costNanos == cost)
        return pace.spacingNanos
    }

    @Test("cheap snapshots are spaced ten times their cost; dearer ones so that the next is out before the last is a second old")
    func spacing() {
        let ms = Self.millisecond
        // A tenth of the drain thread: 4 ms of slices, 5 ms begun to published.
        #expect(Self.spacing(cost: 4 * ms, wall: 5 * ms) == 40 * ms)
        #expect(Self.spacing(cost: 50 * ms, wall: 60 * ms) == 500 * ms)
        // A second less the building: 300 ms of slices over 350 ms, begun again 650 ms after the last.
        #expect(Self.spacing(cost: 300 * ms, wall: 350 * ms) == 650 * ms)
        #expect(Self.spacing(cost: 90 * ms, wall: 200 * ms) == 800 * ms)
        // Building takes over half a second: never sooner than its cost.
        #expect(Self.spacing(cost: 600 * ms, wall: 700 * ms) == 600 * ms)
        // Over a second: one after the other.
        #expect(Self.spacing(cost: 1_500 * ms, wall: 1_800 * ms) == 1_500 * ms)
        // A clock that went back (a test stepping time) counts no building.
        var pace = PublishPace()
        pace.begunNanos = 10_000 * ms
        pace.published(nowNanos: 9_000 * ms, costNanos: 200 * ms)
        #expect(pace.wallNanos == 0 && pace.spacingNanos == PublishPace.wantedSpacingNanos)
    }
}
