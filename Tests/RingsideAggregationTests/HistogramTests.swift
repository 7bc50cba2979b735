import Testing
@testable import RingsideAggregation

@Suite("Histogram")
struct HistogramTests {
    static let quantiles = [0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1]

    static let specialValues: [UInt64] = {
        var values: [UInt64] = [0, 1, 2, 3, 1000, 1023, 1024, 1025, 2047, 2048, 2049, 1_000_000, .max, .max - 1]
        for bit in 0..<64 {
            let power = UInt64(1) << UInt64(bit)
            values += [power, power - 1, power + 1]
        }
        return values
    }()

    @Test("values below 1024 are kept exactly")
    func valuesBelowExactLimitAreExact() {
        var histogram = Histogram()
        for value in 0..<Histogram.exactValueLimit {
            #expect(Histogram.lowestEquivalentValue(value) == value)
            #expect(Histogram.highestEquivalentValue(value) == value)
            #expect(Histogram.representativeValue(value) == value)
            histogram.record(value)
        }
        for rank in 1...1024 {
            #expect(histogram.value(atQuantile: Double(rank) / 1024) == UInt64(rank - 1))
        }
    }

    @Test(
        "every value's bucket holds it and its reported value is within 1/1024 of it",
        arguments: [1, 2, 3, 4])
    func representativeIsWithinErrorBound(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let values = Self.specialValues + (0..<50_000).map { _ in random.anyMagnitude() }
        for value in values {
            let lowest = Histogram.lowestEquivalentValue(value)
            let highest = Histogram.highestEquivalentValue(value)
            #expect(lowest <= value && value <= highest)
            // A bucket is at most 1/512 of its lowest value wide: the midpoint is within 1/1024.
            #expect(highest - lowest <= Swift.max(lowest / 512, 1) - 1)
            #expect(isWithinErrorBound(Histogram.representativeValue(value), of: value))
            #expect(Histogram.bucketIndex(of: lowest) == Histogram.bucketIndex(of: highest))
            #expect(Histogram.lowerBound(ofBucket: Histogram.bucketIndex(of: value)) == lowest)
        }
    }

    @Test("bucket indexes increase with value and cover every bucket exactly once")
    func bucketIndexesAreContiguous() {
        var index = 0
        var value: UInt64 = 0
        while true {
            #expect(Histogram.bucketIndex(of: value) == index)
            let highest = Histogram.highestEquivalentValue(value)
            if highest == .max { break }
            value = highest + 1
            index += 1
        }
        #expect(index == Histogram.bucketCount - 1)
    }

    @Test(
        "quantiles of seeded data are within 0.1% of the exact quantiles from sorting",
        arguments: [
            (seed: 7, mu: 10.0, sigma: 2.0), (seed: 8, mu: 14.0, sigma: 0.5),
            (seed: 9, mu: 5.0, sigma: 3.0), (seed: 10, mu: 30.0, sigma: 6.0),
        ])
    func quantilesMatchSortedData(seed: UInt64, mu: Double, sigma: Double) {
        var random = SeededRandom(seed: seed)
        var histogram = Histogram()
        var values: [UInt64] = []
        for _ in 0..<100_000 {
            let value = random.lognormal(mu: mu, sigma: sigma)
            values.append(value)
            histogram.record(value)
        }
        values.sort()
        for q in Self.quantiles {
            let exact = exactQuantile(values, q)
            let reported = histogram.value(atQuantile: q)
            #expect(isWithinErrorBound(reported, of: exact), "q=\(q): \(reported) vs exact \(exact)")
            #expect(Double(reported > exact ? reported - exact : exact - reported) <= 0.001 * Double(exact))
        }
        #expect(
            histogram.values(atQuantiles: Self.quantiles.reversed()) == Self.quantiles.reversed().map { histogram.value(atQuantile: $0) })
    }

    @Test("quantiles over every magnitude are within 0.1% and never outside min ... max")
    func quantilesStayWithinMinAndMax() {
        var random = SeededRandom(seed: 11)
        for size in [1, 2, 3, 5, 17, 1000] {
            var histogram = Histogram()
            var values = (0..<size).map { _ in random.anyMagnitude() }
            values.forEach { histogram.record($0) }
            values.sort()
            for rank in 0...100 {
                let q = Double(rank) / 100
                let reported = histogram.value(atQuantile: q)
                #expect(values.first! <= reported && reported <= values.last!)
                #expect(isWithinErrorBound(reported, of: exactQuantile(values, q)))
            }
        }
        // Two values in one wide bucket: the midpoint would be outside both, so it is clamped.
        var narrow = Histogram()
        narrow.record(1 << 40)
        narrow.record((1 << 40) + 1)
        #expect(narrow.value(atQuantile: 0.5) == 1 << 40)
        #expect(narrow.value(atQuantile: 1) == (1 << 40) + 1)
    }

    @Test("count, min, max, sum and mean are exact")
    func statisticsAreExact() {
        var random = SeededRandom(seed: 12)
        var histogram = Histogram()
        var sum: UInt64 = 0
        var count: UInt64 = 0
        var low = UInt64.max
        var high: UInt64 = 0
        for _ in 0..<10_000 {
            let value = random.lognormal(mu: 12, sigma: 2)
            let times = UInt64.random(in: 1...3, using: &random)
            histogram.record(value, count: times)
            sum += value * times
            count += times
            low = Swift.min(low, value)
            high = Swift.max(high, value)
        }
        #expect(histogram.count == count)
        #expect(histogram.min == low)
        #expect(histogram.max == high)
        #expect(histogram.saturatingSum == sum)
        #expect(histogram.sum == Double(sum))
        #expect(histogram.mean == Double(sum) / Double(count))
    }

    @Test("0, 1, powers of two and UInt64.max record and report correctly")
    func extremeValuesRecordAndReport() {
        var all = Histogram()
        for value in Self.specialValues {
            var single = Histogram()
            single.record(value)
            #expect(single.count == 1 && single.min == value && single.max == value)
            #expect(single.saturatingSum == value && single.sum == Double(value))
            for q in Self.quantiles { #expect(single.value(atQuantile: q) == value) }
            // Quantiles of one value are it without a scan; the scan of its bucket gives the same.
            var thrice = single
            thrice.record(value, count: 2)
            let ranks = Self.quantiles.map(thrice.rank(ofQuantile:))
            #expect(thrice.values(atQuantiles: Self.quantiles) == thrice.values(atRanks: ranks))
            #expect(thrice.values(atQuantiles: Self.quantiles).allSatisfy { $0 == value })
            #expect(
                single.buckets == [
                    HistogramBucket(
                        lowerBound: Histogram.lowestEquivalentValue(value),
                        upperBound: Histogram.highestEquivalentValue(value), count: 1)
                ])
            all.record(value)
        }
        let sorted = Self.specialValues.sorted()
        #expect(all.min == 0 && all.max == .max)
        #expect(all.count == UInt64(sorted.count))
        for rank in 1...sorted.count {
            let q = Double(rank) / Double(sorted.count)
            #expect(isWithinErrorBound(all.value(atQuantile: q), of: sorted[rank - 1]))
        }
    }

    @Test("a sum beyond UInt64 is exact in 128 bits and saturates in saturatingSum")
    func largeSumsDoNotOverflow() {
        var histogram = Histogram()
        histogram.record(.max, count: 4)
        histogram.record(1 << 63)
        #expect(histogram.saturatingSum == .max)
        #expect(histogram.sum == 4 * 18_446_744_073_709_551_615.0 + 9_223_372_036_854_775_808.0)
        #expect(histogram.count == 5)
    }

    @Test("counts saturate instead of trapping")
    func countsSaturate() {
        var histogram = Histogram()
        histogram.record(5, count: .max)
        histogram.record(5, count: .max)
        #expect(histogram.count == .max)
        #expect(histogram.buckets.first?.count == .max)
        var merged = histogram
        merged.merge(histogram)
        #expect(merged.count == .max && merged.buckets.first?.count == .max)
    }

    @Test("recording a zero count changes nothing")
    func zeroCountIsIgnored() {
        var histogram = Histogram()
        histogram.record(42, count: 0)
        #expect(histogram == Histogram())
        #expect(histogram.isEmpty && histogram.min == 0 && histogram.max == 0)
        #expect(histogram.value(atQuantile: 0.5) == 0)
        #expect(histogram.allocatedBytes == 0)
    }

    @Test("merge(a, b) equals recording everything into one histogram", arguments: [13, 14, 15])
    func mergeEqualsRecordingIntoOne(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var a = Histogram()
        var b = Histogram()
        var both = Histogram()
        for index in 0..<20_000 {
            let value = index % 3 == 0 ? random.anyMagnitude() : random.lognormal(mu: 11, sigma: 1.5)
            if index % 2 == 0 { a.record(value) } else { b.record(value, count: 2) }
            both.record(value, count: index % 2 == 0 ? 1 : 2)
        }
        var merged = a
        merged.merge(b)
        #expect(merged == both)
        var reversed = b
        reversed.merge(a)
        #expect(reversed == both)
        var fromEmpty = Histogram()
        fromEmpty.merge(both)
        fromEmpty.merge(Histogram())
        #expect(fromEmpty == both)
        #expect(merged != a)
    }

    @Test("reset empties the histogram and keeps its capacity for reuse")
    func resetKeepsCapacity() {
        var random = SeededRandom(seed: 16)
        var histogram = Histogram()
        let values = (0..<5_000).map { _ in random.lognormal(mu: 12, sigma: 1) }
        values.forEach { histogram.record($0) }
        let bytes = histogram.allocatedBytes
        histogram.reset()
        #expect(histogram == Histogram())
        #expect(histogram.allocatedBytes == bytes)
        values.forEach { histogram.record($0) }
        #expect(histogram.allocatedBytes == bytes)
    }

    @Test("memory grows with the buckets used, not the value range")
    func memoryIsLazy() {
        var histogram = Histogram()
        #expect(histogram.allocatedBytes == 0)
        histogram.record(UInt64.max)
        histogram.record(0)
        #expect(histogram.isSparse)
        // What the histogram stores, not the arrays' capacity, which depends on the allocator's state.
        #expect(histogram.storedBytes == 2 * 8)  // two 8 B entries
        var scattered = Histogram()
        for bit in 0..<64 { scattered.record(1 << UInt64(bit), count: 3) }
        #expect(scattered.isSparse && scattered.storedBytes == 64 * 8)
        var full = Histogram()
        var value: UInt64 = 0
        while true {
            full.record(value)
            let next = Histogram.highestEquivalentValue(value)
            if next == .max { break }
            value = next + 1
        }
        #expect(!full.isSparse)
        #expect(full.count == UInt64(Histogram.bucketCount))
        #expect(full.storedBytes == Histogram.pageCount * 2 + Histogram.bucketCount * 8)  // the page table and every page
    }

    @Test("a histogram of one bucket holds it inline, no heap block; a second bucket, a merge or pages take it on")
    func oneBucketIsInline() {
        var one = Histogram()
        for _ in 0..<3 { one.record(1_500_000) }
        #expect(one.allocatedBytes == 0 && one.storedBytes == 8 && one.isSparse)
        #expect(one.buckets.map(\.count) == [3] && one.value(atQuantile: 0.5) == 1_500_000)
        var two = one
        two.record(7)
        #expect(two.allocatedBytes > 0 && two.buckets.map(\.count) == [1, 3] && two.count == 4)
        var merged = Histogram()
        merged.record(7)
        merged.merge(one)  // the inline bucket, into an inline one of another bucket
        #expect(merged == two)
        var paged = Histogram()
        paged.convertToPages()
        paged.merge(one)
        #expect(paged == one && !paged.isSparse)
        var converted = one
        converted.convertToPages()
        #expect(converted == one && !converted.isSparse)
        var big = one
        big.record(1_500_000, count: 1 << 48)  // the inline count would pass 48 bits: paged
        #expect(!big.isSparse && big.count == 3 + 1 << 48 && big.buckets.map(\.count) == [3 + 1 << 48])
        // A reset slice keeps its list's storage, and takes its next bucket there.
        two.reset()
        two.record(9)
        #expect(two.allocatedBytes > 0 && two.buckets.map(\.count) == [1])
        #expect(Histogram(one.persisted) == one)
    }

    @Test("sparse and paged histograms of the same values are equal and merge either way")
    func sparseAndPagedAgree() {
        var random = SeededRandom(seed: 25)
        let values = (0..<200).map { _ in random.anyMagnitude() }
        var sparse = Histogram()
        values.forEach { sparse.record($0) }
        var paged = Histogram()
        paged.convertToPages()
        values.forEach { paged.record($0) }
        #expect(sparse.isSparse && !paged.isSparse)
        #expect(sparse == paged)
        #expect(sparse.buckets == paged.buckets)
        var doubled = Histogram()
        values.forEach { doubled.record($0, count: 2) }
        var sparseTwice = sparse
        sparseTwice.merge(paged)
        var pagedTwice = paged
        pagedTwice.merge(sparse)
        #expect(sparseTwice == doubled && pagedTwice == doubled)
        var big = Histogram()
        big.record(7, count: 1 << 50)  // too large a count for a sparse entry
        #expect(!big.isSparse && big.count == 1 << 50)
    }

    @Test(
        "quantiles read a page at a time are those of a walk over every bucket, with counts saturated",
        arguments: [(seed: 26, saturated: false), (seed: 27, saturated: false), (seed: 28, saturated: true)])
    func quantilesByPageMatchEveryBucket(seed: UInt64, saturated: Bool) {
        var random = SeededRandom(seed: seed)
        var histogram = Histogram()
        for _ in 0..<20_000 { histogram.record(random.lognormal(mu: 9, sigma: 1.5)) }
        if saturated {
            // Two huge counts in one page (2^63 each): the page's total does not fit in 64 bits.
            histogram.record(3_000, count: 1 << 63)
            histogram.record(3_001, count: 1 << 63)
        }
        #expect(!histogram.isSparse)
        let quantiles = (0...1000).map { Double($0) / 1000 }
        // The definition: the first bucket whose running count (saturating) reaches the rank.
        let buckets = histogram.buckets
        let expected = quantiles.map { q -> UInt64 in
            let rank = histogram.rank(ofQuantile: q)
            var seen: UInt64 = 0
            for bucket in buckets {
                seen = seen.addingReportingOverflow(bucket.count).overflow ? .max : seen + bucket.count
                if rank <= seen { return histogram.reportedValue(ofRank: rank, in: bucket) }
            }
            return histogram.max
        }
        let reported = histogram.values(atQuantiles: quantiles)
        let wrong = quantiles.indices.filter { reported[$0] != expected[$0] }.map { (quantiles[$0], reported[$0], expected[$0]) }
        #expect(wrong.isEmpty, "(q, reported, expected): \(wrong.prefix(5))")
        #expect(histogram.values(atQuantiles: quantiles.reversed()) == expected.reversed())
    }

    @Test("a paged histogram whose buckets fit merges into a sparse one as a list; one that does not, as pages")
    func pagedMergesIntoSparseAsAListWhenItFits() {
        var few = Histogram()
        few.convertToPages()
        var expected = Histogram()
        for index in 0..<600 {  // 64 exact buckets
            few.record(UInt64(500 + index % 64))
            expected.record(UInt64(500 + index % 64))
        }
        var sparse = Histogram()
        for value: UInt64 in [5, 510, 1 << 40] {
            sparse.record(value)
            expected.record(value)
        }
        var merged = sparse
        merged.merge(few)
        #expect(merged.isSparse && merged.buckets.count == 66 && merged.count == 603)
        #expect(merged == expected)
        var many = Histogram()
        many.convertToPages()
        for index in 0..<600 { many.record(UInt64(1_000 + index)) }  // 600 buckets
        var paged = sparse
        paged.merge(many)
        #expect(!paged.isSparse && paged.count == 603)
        var heavy = Histogram()
        heavy.convertToPages()
        heavy.record(1_000, count: 5_000)  // one bucket, but more values than a list keeps
        var pagedByCount = sparse
        pagedByCount.merge(heavy)
        #expect(!pagedByCount.isSparse && pagedByCount.count == 5_003)
    }

    @Test("buckets come in increasing order and their counts add up to count")
    func bucketsAreOrderedAndComplete() {
        var random = SeededRandom(seed: 17)
        var histogram = Histogram()
        for _ in 0..<10_000 { histogram.record(random.anyMagnitude()) }
        let buckets = histogram.buckets
        #expect(buckets.reduce(0) { $0 + $1.count } == histogram.count)
        for (previous, next) in zip(buckets, buckets.dropFirst()) {
            #expect(previous.upperBound < next.lowerBound)
        }
        for bucket in buckets {
            #expect(Histogram.lowestEquivalentValue(bucket.upperBound) == bucket.lowerBound)
            #expect(Histogram.highestEquivalentValue(bucket.lowerBound) == bucket.upperBound)
        }
    }

    @Test(
        "cumulative counts at export bounds never under-count and over-count only within one bucket",
        arguments: [18, 19])
    func cumulativeCountsBracketExactCounts(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var histogram = Histogram()
        var values: [UInt64] = []
        for _ in 0..<20_000 {
            let value = random.lognormal(mu: 9, sigma: 2.5)
            values.append(value)
            histogram.record(value)
        }
        values.sort()
        let exactCount = { (bound: UInt64) in UInt64(values.prefix { $0 <= bound }.count) }
        var bounds = (0..<200).map { _ in random.lognormal(mu: 9, sigma: 3) }
        bounds += [0, 1, 100, 1000, 1023, 5000, 10_000, 250_000, 1_000_000, .max]
        bounds.sort()
        let counts = histogram.cumulativeCounts(atUpperBounds: bounds)
        for (bound, count) in zip(bounds, counts) {
            #expect(exactCount(bound) <= count)
            #expect(count <= exactCount(Histogram.highestEquivalentValue(bound)))
            if bound < Histogram.exactValueLimit || bound >= values.last! || bound < values.first! {
                #expect(count == exactCount(bound))
            }
            if bound == Histogram.highestEquivalentValue(bound) {
                #expect(count == exactCount(bound))
            }
        }
        #expect(zip(counts, counts.dropFirst()).allSatisfy { $0 <= $1 })
        #expect(counts.last == histogram.count)
    }

    @Test("a value equal to an export bound is counted under it")
    func valueAtBoundIsCounted() {
        var histogram = Histogram()
        for value: UInt64 in [999, 1_000_000, 1_000_001, 5_000_000, 123_456_789] {
            histogram.record(value)
        }
        let counts = histogram.cumulativeCounts(atUpperBounds: [998, 999, 1_000_000, 5_000_000, 123_456_788, 123_456_789])
        #expect(counts[0] == 0 && counts[1] == 1 && counts[5] == 5)
        #expect(counts[2] >= 2 && counts[3] >= 4)
        #expect(Histogram().cumulativeCounts(atUpperBounds: [1, 2]) == [0, 0])
    }

    @Test("the count and the 128-bit sum saturate at their ceilings under weighted records, merges and added sums: never lower, flagged")
    func countAndSumSaturate() {
        let value = UInt64.max, weight = UInt64(UInt32.max)
        var histogram = Histogram()
        var counts: [UInt64] = [], sums: [UInt128] = []
        // Each record adds 2^32 - 1 calls of 2^64 - 1 (about 2^96 to the sum): 2^32 + 1 of them
        // would pass 2^128. Merging doubles what is held, so 40 rounds pass both ceilings.
        histogram.record(value, count: weight)
        for _ in 0..<40 {
            let copy = histogram
            histogram.merge(copy)
            histogram.record(value, count: weight)
            histogram.addSum(value, raisingMaxTo: value)
            counts.append(histogram.count)
            sums.append(histogram.exactSum)
        }
        #expect(zip(counts, counts.dropFirst()).allSatisfy { $0 <= $1 }, "the count never goes back")
        #expect(zip(sums, sums.dropFirst()).allSatisfy { $0 <= $1 }, "the sum never goes back")
        #expect(histogram.count == .max && histogram.exactSum == .max && histogram.isSaturated)
        #expect(histogram.sum == Double(UInt128.max))
        #expect(!Histogram().isSaturated)
        var below = Histogram()
        below.record(value, count: .max - 1)
        #expect(!below.isSaturated && below.exactSum == UInt128(value) * UInt128(UInt64.max - 1))
    }
}
