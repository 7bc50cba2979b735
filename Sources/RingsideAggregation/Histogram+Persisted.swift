/// A histogram as it is kept between two runs of the collector (its all-time histograms, so that
/// a `_count` or `_sum` never goes back across a restart): every non-empty bucket and the exact
/// figures. Codable, for the collector's state file.
package struct PersistedHistogram: Codable, Sendable, Equatable {
    /// `[bucket index, count]` per non-empty bucket, in bucket order.
    package var buckets: [[UInt64]]
    package var count: UInt64
    package var sumLow: UInt64
    package var sumHigh: UInt64
    package var min: UInt64
    package var max: UInt64
}

extension Histogram {
    /// This histogram as kept between runs.
    package var persisted: PersistedHistogram {
        var buckets: [[UInt64]] = []
        forEachCount { index, count in buckets.append([UInt64(index), count]) }
        return PersistedHistogram(buckets: buckets, count: count, sumLow: sumLow, sumHigh: sumHigh, min: minValue, max: maxValue)
    }

    /// The histogram kept as `persisted`; nil when it does not hold together (a bucket out of
    /// range, counts that do not add up to its count, a minimum above its maximum): a state file
    /// is read, not trusted.
    package init?(_ persisted: PersistedHistogram) {
        self.init()
        var total: UInt64 = 0
        var previous = -1
        for bucket in persisted.buckets {
            guard bucket.count == 2, bucket[0] < UInt64(Self.bucketCount), Int(bucket[0]) > previous, bucket[1] > 0 else { return nil }
            previous = Int(bucket[0])
            let (sum, overflow) = total.addingReportingOverflow(bucket[1])
            guard !overflow else { return nil }
            total = sum
            addCount(bucket[1], toBucket: previous)
        }
        guard total == persisted.count, total == 0 || persisted.min <= persisted.max else { return nil }
        count = total
        sumLow = persisted.sumLow
        sumHigh = persisted.sumHigh
        minValue = total == 0 ? .max : persisted.min
        maxValue = total == 0 ? 0 : persisted.max
    }
}
