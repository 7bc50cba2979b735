import RingsideSnapshot
import Testing

@Suite("CompactCumulativeCounts: a series' classic buckets kept without their leading zeros and repeated total")
struct CompactCumulativeCountsTests {
    @Test(
        "every shape reads as the counts it was given",
        arguments: [
            [], [0], [5], [0, 0, 0], [0, 0, 1, 1, 1], [1, 1, 1], [0, 1, 2, 2, 5, 5], [0, 3, 3, 3, 4], [2, 2, 2, 7],
            [0, 0, 7], [UInt64.max, UInt64.max],
        ] as [[UInt64]])
    func roundTrip(counts: [UInt64]) {
        #expect(Array(CompactCumulativeCounts(counts)) == counts)
        #expect(CompactCumulativeCounts(counts).count == counts.count && CompactCumulativeCounts(counts).last == counts.last)
    }

    @Test("random cumulative counts of 1 to 80 buckets read as themselves")
    func randomCounts() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            var total: UInt64 = 0
            let counts = (0..<Int.random(in: 1...80, using: &generator)).map { _ in
                if Int.random(in: 0..<4, using: &generator) == 0 { total += UInt64.random(in: 1...1_000, using: &generator) }
                return total
            }
            #expect(Array(CompactCumulativeCounts(counts)) == counts, "\(counts)")
        }
    }
}
