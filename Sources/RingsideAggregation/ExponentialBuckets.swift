/// A histogram in OpenTelemetry's exponential form (OTLP's `ExponentialHistogramDataPoint`): at
/// scale `s`, with `base = 2^(2^-s)`, positive bucket `i` holds the values in `(base^i, base^(i+1)]`,
/// and a zero bucket holds those at or below `zeroThreshold`.
///
/// It is made from the native buckets of the same schema (`NativeBuckets`), whose bucket `j` holds
/// `(base^(j-1), base^j]`: the very same ranges, each numbered one less. So the mapping from
/// Ringside's buckets is the native one (each placed whole by its midpoint, at most 0.1 % off the
/// values it holds), and a collector's OTLP and Prometheus native histograms of one schema have
/// the same buckets with the same counts.
package struct ExponentialBuckets: Equatable, Sendable {
    package var scale: Int
    package var zeroThreshold: Double
    package var zeroCount: UInt64
    /// The index of `counts[0]`'s bucket.
    package var offset: Int32
    /// The counts of consecutive buckets from `offset`, those between non-empty ones at 0; empty
    /// when every value is in the zero bucket (or there is none).
    package var counts: [UInt64]
    /// A signed histogram's values below zero, as `offset` and `counts` by their magnitudes
    /// (bucket `i` holds `[-base^(i+1), -base^i)`); empty for the others.
    package var negativeOffset: Int32
    package var negativeCounts: [UInt64]

    /// `native`'s buckets, numbered as OTLP numbers them.
    package init(_ native: NativeBuckets) {
        scale = native.schema
        zeroThreshold = native.zeroThreshold
        zeroCount = native.zeroCount
        (offset, counts) = Self.dense(native.buckets)
        (negativeOffset, negativeCounts) = Self.dense(native.negativeBuckets)
    }

    /// Native buckets as OTLP's dense run: native bucket j is OTLP bucket j - 1, (base^(j-1), base^j] both.
    private static func dense(_ buckets: [(index: Int32, count: UInt64)]) -> (offset: Int32, counts: [UInt64]) {
        guard let first = buckets.first, let last = buckets.last else { return (0, []) }
        var dense = [UInt64](repeating: 0, count: Int(last.index - first.index) + 1)
        for bucket in buckets { dense[Int(bucket.index - first.index)] = bucket.count }
        return (first.index - 1, dense)
    }
}
