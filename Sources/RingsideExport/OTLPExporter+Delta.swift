import RingsideAggregation
import RingsideSnapshot

/// What a delta export subtracts (`--otlp-temporality delta`): each counter's and histogram's
/// totals as of the last export the receiver took, and that export's time, which starts the next
/// export's points.
package struct OTLPBaseline: Sendable {
    package var timeNanos: UInt64
    package var series: [UInt64: Totals]

    /// A series' totals: a counter's sums, a histogram's count, sum and buckets.
    package struct Totals: Sendable {
        var count: UInt64
        var sum: Double
        var exactSum: UInt128
        var buckets: ExponentialBuckets?
    }

    /// No export taken yet: each point is its series' whole total, from the series' start.
    package static let none = OTLPBaseline(timeNanos: 0, series: [:])

    package init(timeNanos: UInt64, series: [UInt64: Totals]) {
        self.timeNanos = timeNanos
        self.series = series
    }

    /// The totals of `snapshot`'s counters and histograms, as an export at `timeNanos` sends them.
    package init(_ snapshot: Snapshot, scale: Int, timeNanos: UInt64) {
        self.timeNanos = timeNanos
        series = [:]
        for one in snapshot.series where one.metric.kind != .gauge {
            let histogram = one.metric.kind == .histogram
            series[one.id] = Totals(
                count: one.cumulativeCount, sum: one.cumulativeSum, exactSum: histogram ? 0 : one.cumulativeExactSum,
                buckets: histogram ? ExportBuckets.exponential(of: one, scale: scale) : nil)
        }
    }

    /// `series`' totals here, unless they are more than its totals now (a series that began
    /// again): then nil, and the point is the whole total from the series' start.
    func totals(of series: SeriesSnapshot, buckets: ExponentialBuckets?) -> Totals? {
        guard let kept = self.series[series.id] else { return nil }
        guard kept.count <= series.cumulativeCount, kept.exactSum <= series.cumulativeExactSum || series.metric.kind == .histogram
        else { return nil }
        if let before = kept.buckets {
            guard let now = buckets, before.zeroCount <= now.zeroCount, Self.subtract(before, from: now) != nil else { return nil }
        }
        return kept
    }

    /// `now`'s buckets less `before`'s, bucket by bucket (zero, positive and negative); nil when
    /// one of `before`'s is more than `now`'s.
    static func subtract(_ before: ExponentialBuckets, from now: ExponentialBuckets) -> ExponentialBuckets? {
        var result = now
        result.zeroCount = now.zeroCount &- before.zeroCount
        guard let positive = subtract((before.offset, before.counts), from: (now.offset, now.counts)),
            let negative = subtract((before.negativeOffset, before.negativeCounts), from: (now.negativeOffset, now.negativeCounts))
        else { return nil }
        result.counts = positive
        result.negativeCounts = negative
        return result
    }

    private static func subtract(_ before: (Int32, [UInt64]), from now: (Int32, [UInt64])) -> [UInt64]? {
        var counts = now.1
        for (position, count) in before.1.enumerated() where count != 0 {
            let at = Int(before.0) + position - Int(now.0)
            guard at >= 0, at < counts.count, counts[at] >= count else { return nil }
            counts[at] -= count
        }
        return counts
    }
}
