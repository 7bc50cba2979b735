import Foundation
import RingsideAggregation
import RingsideExport
import RingsideTestSupport
import Testing

@Suite("native histograms from Ringside's log-linear buckets")
struct NativeHistogramTests {
    /// The native bucket of one value, through a histogram holding only it.
    func index(of value: UInt64, schema: Int) -> Int32? {
        var histogram = Histogram()
        histogram.record(value)
        return NativeBuckets(histogram, schema: schema, baseUnitsPerValue: 1).buckets.first?.index
    }

    @Test("bucket i holds (base^(i-1), base^i]: powers of two close their bucket, for positive and negative schemas")
    func indexes() {
        // schema 0: base 2.
        #expect(index(of: 1, schema: 0) == 0)
        #expect(index(of: 2, schema: 0) == 1)
        #expect(index(of: 3, schema: 0) == 2)
        #expect(index(of: 4, schema: 0) == 2)
        #expect(index(of: 5, schema: 0) == 3)
        // schema -1: base 4, so (1, 4] is bucket 1 and (4, 16] bucket 2.
        #expect(index(of: 2, schema: -1) == 1)
        #expect(index(of: 4, schema: -1) == 1)
        #expect(index(of: 5, schema: -1) == 2)
        #expect(index(of: 16, schema: -1) == 2)
        // schema 3: 8 buckets an octave.
        #expect(index(of: 1, schema: 3) == 0)
        #expect(index(of: 2, schema: 3) == 8)
        #expect(index(of: 1000, schema: 3) == Int32((log2(1000.0) * 8).rounded(.up)))
        // Below one base unit: negative indexes (1 ns in seconds).
        var histogram = Histogram()
        histogram.record(1)
        #expect(NativeBuckets(histogram, schema: 0, baseUnitsPerValue: 1e-9).buckets.first?.index == -29)
    }

    @Test("zeros go to the zero bucket; spans and deltas describe the buckets run by run")
    func spansAndDeltas() {
        var histogram = Histogram()
        for _ in 0..<3 { histogram.record(0) }
        for value: UInt64 in [1, 2, 2, 8, 8, 8] { histogram.record(value) }  // schema 0: buckets 0, 1, 1, 3, 3, 3
        let native = NativeBuckets(histogram, schema: 0, baseUnitsPerValue: 1)
        #expect(native.zeroCount == 3)
        #expect(native.buckets.map(\.index) == [0, 1, 3])
        #expect(native.buckets.map(\.count) == [1, 2, 3])
        #expect(native.spans.map(\.offset) == [0, 1])
        #expect(native.spans.map(\.length) == [2, 1])
        #expect(native.deltas == [1, 1, 1])
    }

    @Test("the quantiles of a lognormal latency fall in the native bucket chosen for them, give or take 0.1 %, at every schema")
    func quantilesLandInTheirBucket() {
        var random = SplitMix64(seed: 42)
        var histogram = Histogram()
        var values: [UInt64] = []
        for _ in 0..<200_000 {
            let u = Double.random(in: Double.ulpOfOne..<1, using: &random)
            let v = Double.random(in: 0..<1, using: &random)
            let normal = (-2 * log(u)).squareRoot() * cos(2 * Double.pi * v)
            let value = UInt64(exp(log(40_000) + 0.6 * normal))  // ns: a 40 us median
            values.append(value)
            histogram.record(value)
        }
        values.sort()
        for schema in [-2, 0, 3, 5, 8] {
            let native = NativeBuckets(histogram, schema: schema, baseUnitsPerValue: 1e-9)
            #expect(native.buckets.reduce(0) { $0 + $1.count } + native.zeroCount == UInt64(values.count))
            let base = pow(2, pow(2, -Double(schema)))
            for quantile in [0.5, 0.9, 0.99, 0.999] {
                let rank = UInt64((quantile * Double(values.count)).rounded(.up))
                var seen: UInt64 = native.zeroCount
                let bucket = native.buckets.first { bucket in
                    seen += bucket.count
                    return seen >= rank
                }!
                let upper = pow(base, Double(bucket.index)), lower = upper / base
                let exact = Double(values[Int(rank) - 1]) * 1e-9
                #expect(
                    exact >= lower * (1 - 1.0 / 1024) && exact <= upper * (1 + 1.0 / 1024),
                    "schema \(schema) p\(quantile): \(exact) s outside bucket (\(lower), \(upper)]")
            }
        }
    }
}
