import Ringside
import RingsideAggregation

/// A histogram in OpenTelemetry's exponential form (OTLP's `ExponentialHistogramDataPoint`): at
/// scale `s`, with `base = 2^(2^-s)`, positive bucket `i` holds the values in `(base^i, base^(i+1)]`,
/// and a zero bucket holds those at or below `zeroThreshold`.
///
/// It is made from the native buckets of the same schema (`NativeBuckets`), whose bucket `j` holds
/// `(base^(j-1), base^j]`: the very same ranges, each numbered one less. So the mapping from
/// Ringside's buckets is the native one (each placed whole by its midpoint, at most 0.1 % off the
/// values it holds), and a collector's OTLP and Prometheus native histograms of one schema have
/// the same buckets with the same counts.
public struct ExponentialBuckets: Equatable, Sendable {
    public var scale: Int
    public var zeroThreshold: Double
    public var zeroCount: UInt64
    /// The index of `counts[0]`'s bucket.
    public var offset: Int32
    /// The counts of consecutive buckets from `offset`, those between non-empty ones at 0; empty
    /// when every value is in the zero bucket (or there is none).
    public var counts: [UInt64]

    /// `native`'s buckets, numbered as OTLP numbers them.
    public init(_ native: NativeBuckets) {
        scale = native.schema
        zeroThreshold = native.zeroThreshold
        zeroCount = native.zeroCount
        guard let first = native.buckets.first, let last = native.buckets.last else {
            offset = 0
            counts = []
            return
        }
        // Native bucket j is OTLP bucket j - 1: (base^(j-1), base^j] both.
        offset = first.index - 1
        var dense = [UInt64](repeating: 0, count: Int(last.index - first.index) + 1)
        for bucket in native.buckets { dense[Int(bucket.index - first.index)] = bucket.count }
        counts = dense
    }
}

extension ExportBuckets {
    /// `histogram` (of values in `unit`) in OTLP's exponential buckets of `scale` (-4 to 8), in base units.
    package static func exponential(_ histogram: Histogram, unit: MetricUnit, scale: Int) -> ExponentialBuckets {
        ExponentialBuckets(native(histogram, unit: unit, schema: scale))
    }
}
