import RingsideAggregation
import Synchronization

/// A series' all-time histogram (a `Histogram`, or a `SignedHistogram`) and its classic buckets, which the first page that needs them
/// computes and every later page reuses: the collector hands the same one to each snapshot until
/// the series records again, so 10,000 quiet series are not re-bucketed at every scrape.
package final class AllTimeHistogram<Values: Sendable>: Sendable {
    package let histogram: Values
    private let classic = Mutex<[UInt64]?>(nil)

    init(_ histogram: Values) {
        self.histogram = histogram
    }

    /// The classic buckets' counts: `compute`'s the first time, the same ever after (the exporter
    /// owns the bounds; a series' unit, and so its bounds, never change).
    package func classicCounts(_ compute: (Values) -> [UInt64]) -> [UInt64] {
        classic.withLock { counts in
            if let counts { return counts }
            let computed = compute(histogram)
            counts = computed
            return computed
        }
    }
}
