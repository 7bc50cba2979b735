import Testing

@testable import RingsideAggregation

@Suite("PersistedHistogram: an all-time histogram kept between the collector's runs")
struct PersistedHistogramTests {
    @Test("a histogram comes back whole: buckets, count, exact sum, min and max, sparse or paged")
    func roundTrip() throws {
        for values in [[UInt64](), [7], Array(1...5_000).map { UInt64($0) * 977 }, [0, UInt64.max, UInt64.max]] {
            var histogram = Histogram()
            for value in values { histogram.record(value) }
            let back = try #require(Histogram(histogram.persisted), "\(values.count) values")
            #expect(back == histogram)
            #expect(back.exactSum == histogram.exactSum && back.min == histogram.min && back.max == histogram.max)
            #expect(back.values(atQuantiles: [0.5, 0.99]) == histogram.values(atQuantiles: [0.5, 0.99]))
        }
    }

    @Test("a kept histogram that does not hold together is refused")
    func refusesNonsense() {
        var histogram = Histogram()
        histogram.record(5)
        histogram.record(50_000)
        let good = histogram.persisted
        var outOfRange = good
        outOfRange.buckets[1][0] = UInt64.max
        var unordered = good
        unordered.buckets.reverse()
        var miscounted = good
        miscounted.count += 1
        var emptyBucket = good
        emptyBucket.buckets[0][1] = 0
        var short = good
        short.buckets[0] = [1]
        var inverted = good
        (inverted.min, inverted.max) = (good.max, good.min)
        for bad in [outOfRange, unordered, miscounted, emptyBucket, short, inverted] {
            #expect(Histogram(bad) == nil, "\(bad)")
        }
        #expect(Histogram(good) == histogram)
    }
}
