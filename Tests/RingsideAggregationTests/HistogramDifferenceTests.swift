@testable import RingsideAggregation
import Testing

@Suite("A histogram less an earlier reading of it")
struct HistogramDifferenceTests {
    @Test("the difference holds exactly the records between the readings, sparse or paged")
    func difference() {
        var random = SeededRandom(seed: 15)
        for (before, after) in [(10, 20), (300, 5_000), (6_000, 50), (0, 100), (100, 0)] {
            var all = Histogram()
            var between = Histogram()
            for _ in 0..<before { all.record(random.lognormal(mu: 11, sigma: 1.5)) }
            let earlier = all
            for _ in 0..<after {
                let value = random.lognormal(mu: 11, sigma: 1.5)
                all.record(value)
                between.record(value)
            }
            let difference = all.subtracting(earlier)
            #expect(difference.buckets == between.buckets)
            #expect(difference.count == between.count && difference.exactSum == between.exactSum)
            if between.isEmpty { continue }
            // min and max: exact when the interval set a new extreme, else within a bucket's reported value.
            for (got, exact) in [(difference.min, between.min), (difference.max, between.max)] {
                #expect(Double(got > exact ? got - exact : exact - got) <= Double(exact) * Histogram.maxRelativeError)
            }
            if earlier.isEmpty || between.max > earlier.max { #expect(difference.max == between.max) }
            if earlier.isEmpty || between.min < earlier.min { #expect(difference.min == between.min) }
        }
    }

    @Test("nothing between the readings is an empty histogram")
    func nothing() {
        var all = Histogram()
        for value in [5, 5_000, 5_000_000] as [UInt64] { all.record(value) }
        #expect(all.subtracting(all).isEmpty)
        #expect(all.subtracting(all) == Histogram())
        #expect(all.subtracting(Histogram()) == all)
    }
}
