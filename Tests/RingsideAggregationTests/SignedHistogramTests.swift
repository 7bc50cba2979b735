import Foundation
import Testing
@testable import RingsideAggregation

/// Issue 41: signed values (slippage, PnL), kept as two histograms mirrored about zero. Every
/// figure is checked against the exact one computed from the values themselves.
@Suite("SignedHistogram: values on both sides of zero")
struct SignedHistogramTests {
    static let quantiles = [0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1]

    /// The nearest-rank quantile of sorted signed values.
    static func exactQuantile(_ sorted: [Int64], _ q: Double) -> Int64 {
        let rank = Int((q * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    /// Within the histogram's error of the exact value's magnitude, on its side of zero.
    static func isClose(_ reported: Int64, to exact: Int64) -> Bool {
        guard (reported < 0) == (exact < 0) else { return false }
        return isWithinErrorBound(reported.magnitude, of: exact.magnitude)
    }

    /// A mixture like slippage in hundredths of a basis point: most fills near the quote on
    /// either side, a tail of bad ones (positive) and a thinner tail of good ones (negative).
    static func slippage(_ count: Int, seed: UInt64) -> [Int64] {
        var random = SeededRandom(seed: seed)
        return (0..<count).map { _ in
            let pick = Double.random(in: 0..<1, using: &random)
            if pick < 0.05 { return 0 }
            let magnitude = Int64(random.lognormal(mu: pick < 0.5 ? 5 : 6, sigma: pick < 0.9 ? 0.8 : 2))
            return pick < 0.55 ? -magnitude : magnitude
        }
    }

    @Test("a mixture across zero: count, exact sum, min and max, and every quantile within 1/1024 of the exact one")
    func mixtureAcrossZero() {
        for seed in UInt64(1)...5 {
            let values = Self.slippage(100_000, seed: seed)
            var histogram = SignedHistogram()
            for value in values { histogram.record(value) }
            let sorted = values.sorted()
            #expect(histogram.count == UInt64(values.count))
            #expect(histogram.exactSum == values.reduce(Int128(0)) { $0 + Int128($1) })
            #expect(histogram.min == sorted.first && histogram.max == sorted.last)
            let reported = histogram.values(atQuantiles: Self.quantiles)
            for (q, value) in zip(Self.quantiles, reported) {
                let exact = Self.exactQuantile(sorted, q)
                #expect(Self.isClose(value, to: exact), "seed \(seed) q \(q): \(value) for \(exact)")
                #expect(value >= histogram.min && value <= histogram.max)
            }
        }
    }

    @Test("only negative values, only non-negative ones, zeros, and the ends of Int64")
    func oneSidedAndEnds() {
        var negatives = SignedHistogram()
        for value in Int64(1)...2000 { negatives.record(-value) }
        #expect(negatives.min == -2000 && negatives.max == -1 && negatives.exactSum == -2_001_000)
        #expect(negatives.values(atQuantiles: [0, 0.5, 1]) == [-2000, -1001, -1], "the 1,000th smallest of -2000 ... -1")

        var positives = SignedHistogram()
        var plain = Histogram()
        for value in UInt64(0)...2000 {
            positives.record(Int64(value))
            plain.record(value)
        }
        #expect(positives.values(atQuantiles: Self.quantiles) == plain.values(atQuantiles: Self.quantiles).map { Int64($0) })
        #expect(positives.min == 0 && positives.max == 2000)

        for value: Int64 in [-1_234_567, -1, 1, 98_765, .min, .max] {
            var same = SignedHistogram()
            same.record(value, count: 3)
            #expect(same.values(atQuantiles: [0, 0.5, 0.99, 1]) == [value, value, value, value], "\(value) three times")
        }

        var zeros = SignedHistogram()
        zeros.record(0, count: 3)
        #expect(zeros.values(atQuantiles: [0, 0.5, 1]) == [0, 0, 0] && zeros.min == 0 && zeros.max == 0 && zeros.sum == 0)

        var ends = SignedHistogram()
        ends.record(.min)
        ends.record(.max)
        ends.record(-1)
        #expect(ends.min == .min && ends.max == .max)
        #expect(ends.exactSum == Int128(Int64.min) + Int128(Int64.max) - 1)
        #expect(ends.values(atQuantiles: [0, 0.5, 1]) == [.min, -1, .max])

        // Counts past 2^53, where a Double rounds up past the count: ranks stay within it.
        var huge = SignedHistogram()
        huge.record(-5, count: .max - 10)
        huge.record(7, count: 10)
        #expect(huge.count == .max && huge.values(atQuantiles: [0, 0.5, 1]) == [-5, -5, 7])

        let empty = SignedHistogram()
        #expect(empty.isEmpty && empty.min == 0 && empty.max == 0 && empty.values(atQuantiles: [0.5]) == [0])
    }

    @Test("cumulative counts at signed bounds match the values: exact where the bounds are")
    func cumulativeCounts() {
        let values = Self.slippage(20_000, seed: 7).map { max(min($0, 1000), -1000) }  // within the exact range
        var histogram = SignedHistogram()
        for value in values { histogram.record(value) }
        let bounds: [Int64] = [-1001, -1000, -500, -37, -1, 0, 1, 36, 500, 999, 1000]
        let counts = histogram.cumulativeCounts(atUpperBounds: bounds)
        for (bound, count) in zip(bounds, counts) {
            #expect(count == UInt64(values.filter { $0 <= bound }.count), "le \(bound)")
        }
        #expect(counts == counts.sorted(), "non-decreasing")
    }

    @Test("merging, the difference of two readings, and the persisted form keep every figure")
    func mergeDifferencePersisted() throws {
        let values = Self.slippage(30_000, seed: 11)
        var whole = SignedHistogram(), first = SignedHistogram(), second = SignedHistogram()
        for (index, value) in values.enumerated() {
            whole.record(value)
            if index < 10_000 { first.record(value) } else { second.record(value) }
        }
        var merged = first
        merged.merge(second)
        #expect(merged == whole)

        let difference = whole.subtracting(first)
        #expect(difference.count == second.count && difference.exactSum == second.exactSum)
        #expect(difference.values(atQuantiles: [0.01, 0.5, 0.99]) == second.values(atQuantiles: [0.01, 0.5, 0.99]))

        let data = try JSONEncoder().encode(whole.persisted)
        let read = try #require(SignedHistogram(try JSONDecoder().decode(PersistedSignedHistogram.self, from: data)))
        #expect(read == whole)
        var bad = whole.persisted
        bad.negative.min = 0
        #expect(SignedHistogram(bad) == nil, "a negative side holding a magnitude of 0 is refused")
    }

    @Test("kept in sliding windows like any slice: a value leaves the window, never the all-time figures")
    func inWindows() {
        var windows = SlidingWindows<SignedHistogram>(layout: WindowLayout(windowNanos: [1_000_000_000]))
        windows.update(atNanos: 1_000_000_000) { $0.record(-250) }
        windows.update(atNanos: 1_100_000_000) { $0.record(40) }
        var recent = SignedHistogram()
        windows.merge(window: 0, nowNanos: 1_200_000_000, into: &recent)
        #expect(recent.count == 2 && recent.min == -250 && recent.max == 40)
        var later = SignedHistogram()
        windows.merge(window: 0, nowNanos: 3_000_000_000, into: &later)
        #expect(later.isEmpty)
        #expect(windows.allTime.min == -250 && windows.allTime.exactSum == -210)
    }
}

@Suite("WindowedSignedHistogram: a signed series in windows, with gathered calls")
struct WindowedSignedHistogramTests {
    @Test(
        "records and gathered calls on both sides of zero: windows and all time keep the exact count, sum and maximum (gather cells keep no minimum)"
    )
    func gatheredAcrossZero() {
        var series = WindowedSignedHistogram(layout: WindowLayout(windowNanos: [1_000_000_000]))
        series.record(-40, atNanos: 1_000_000_000)
        series.record(15, atNanos: 1_000_000_000)
        // Three gathered calls, -5, -90 and 30, placed at the latest (30), their sum and largest apart.
        series.place(30, count: 3, atNanos: 1_100_000_000)
        series.addSum(-65, raisingMaxTo: 30, atNanos: 1_100_000_000)
        let window = series.snapshot(window: 0, nowNanos: 1_200_000_000)
        #expect(window.count == 5 && window.exactSum == -90 && window.max == 30 && window.min == -40)
        #expect(series.cumulative == window)

        // All negative, gathered: the largest (-3) is the smallest magnitude.
        var negative = WindowedSignedHistogram(layout: WindowLayout(windowNanos: [1_000_000_000]))
        negative.place(-20, count: 2, atNanos: 5)
        negative.addSum(-23, raisingMaxTo: -3, atNanos: 5)
        let all = negative.cumulative
        #expect(all.count == 2 && all.exactSum == -23 && all.max == -3 && all.min == -20)
        #expect(series.allocatedBytes > 0)
    }
}
