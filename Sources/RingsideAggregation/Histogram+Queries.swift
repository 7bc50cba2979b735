/// One non-empty bucket of a ``Histogram``: the values from `lowerBound` through `upperBound`
/// (both inclusive) were recorded `count` times.
package struct HistogramBucket: Sendable, Hashable {
    package var lowerBound: UInt64
    package var upperBound: UInt64
    package var count: UInt64
}

extension Histogram {
    /// Calls `body` with each non-empty bucket in increasing value order, for exporters.
    package func forEachBucket(_ body: (HistogramBucket) throws -> Void) rethrows {
        try forEachCount { index, count in
            let lower = Self.lowerBound(ofBucket: index)
            try body(HistogramBucket(lowerBound: lower, upperBound: lower + (Self.width(ofBucket: index) - 1), count: count))
        }
    }

    /// The non-empty buckets in increasing value order.
    package var buckets: [HistogramBucket] {
        var result: [HistogramBucket] = []
        forEachBucket { result.append($0) }
        return result
    }

    /// The value at quantile `q` (0 ... 1, nearest rank: the `ceil(q * count)`-th smallest), within
    /// ``maxRelativeError`` of the true one and never outside `min ... max`; 0 when empty.
    ///
    /// Ranks 1 and `count` report ``min`` and ``max`` exactly. `q` outside 0 ... 1 is clamped;
    /// NaN is a programming error.
    package func value(atQuantile q: Double) -> UInt64 {
        values(atQuantiles: [q])[0]
    }

    /// The values at several quantiles in one pass over the buckets; see ``value(atQuantile:)``.
    ///
    /// Paged counts are summed a page at a time, and a page's buckets looked at only when a rank
    /// falls in it: a window's snapshot asks this of every histogram series it publishes.
    package func values(atQuantiles quantiles: [Double]) -> [UInt64] {
        guard count != 0 else { return [UInt64](repeating: 0, count: quantiles.count) }
        // Every value the same (a window of one value, most often): each quantile is it, exactly.
        if minValue == maxValue { return [UInt64](repeating: maxValue, count: quantiles.count) }
        return values(atRanks: quantiles.map(rank(ofQuantile:)))
    }

    /// The values of 1-based nearest ranks (each in `1 ... count`), in one pass; see
    /// ``value(atQuantile:)``. A ``SignedHistogram`` asks its two sides for ranks of their own.
    func values(atRanks ranks: [UInt64]) -> [UInt64] {
        var result = [UInt64](repeating: 0, count: ranks.count)
        guard count != 0 else { return result }
        // The ranks' positions from the lowest rank up. The collector's quantiles are sorted, so
        // their ranks are: no order is made then (a snapshot asks this of every window it computes).
        let sorted = ranks.indices.dropFirst().allSatisfy { ranks[$0 - 1] <= ranks[$0] }
        let order = sorted ? [] : ranks.indices.sorted { ranks[$0] < ranks[$1] }
        func position(_ next: Int) -> Int { sorted ? next : order[next] }
        var next = 0
        var seen: UInt64 = 0
        func take(_ index: Int, _ count: UInt64) {
            seen = seen.addingReportingOverflow(count).overflow ? .max : seen + count
            guard next < ranks.count, ranks[position(next)] <= seen else { return }
            let lower = Self.lowerBound(ofBucket: index)
            let bucket = HistogramBucket(lowerBound: lower, upperBound: lower + (Self.width(ofBucket: index) - 1), count: count)
            while next < ranks.count, ranks[position(next)] <= seen {
                result[position(next)] = reportedValue(ofRank: ranks[position(next)], in: bucket)
                next += 1
            }
        }
        if isSparse {
            forEachCount(take)
        } else {
            slots.withUnsafeBufferPointer { slots in
                for page in 0..<pageTable.count where pageTable[page] != 0 {
                    guard next < ranks.count else { break }
                    let first = (Int(pageTable[page]) - 1) << Self.pageMagnitude
                    let counts = UnsafeBufferPointer(rebasing: slots[first..<(first + Self.pageSize)])
                    // A page that ends below the next rank changes nothing but `seen`.
                    if let total = Self.total(of: counts), case let (end, overflow) = seen.addingReportingOverflow(total), !overflow,
                        end < ranks[position(next)]
                    {
                        seen = end
                        continue
                    }
                    for offset in counts.indices where counts[offset] != 0 {
                        take(page << Self.pageMagnitude | offset, counts[offset])
                    }
                }
            }
        }
        // Only reachable if bucket counts saturated below the total.
        while next < ranks.count {
            result[position(next)] = max
            next += 1
        }
        return result
    }

    /// The sum of a page's counts; nil if it does not fit in 64 bits.
    static func total(of counts: UnsafeBufferPointer<UInt64>) -> UInt64? {
        var total: UInt64 = 0
        for count in counts {
            let (sum, overflow) = total.addingReportingOverflow(count)
            if overflow { return nil }
            total = sum
        }
        return total
    }

    /// The 1-based nearest rank of quantile `q`, in `1 ... count`.
    func rank(ofQuantile q: Double) -> UInt64 { Self.nearestRank(ofQuantile: q, count: count) }

    /// The 1-based nearest rank of quantile `q` among `count` values, in `1 ... count`: `q`
    /// outside 0 ... 1 is clamped, and a count past 2^53 (where `Double` rounds) never gives a
    /// rank past it. NaN is a programming error.
    static func nearestRank(ofQuantile q: Double, count: UInt64) -> UInt64 {
        precondition(!q.isNaN, "Histogram.value(atQuantile:): the quantile is NaN")
        let rank = (Swift.min(Swift.max(q, 0), 1) * Double(count)).rounded(.up)
        if rank <= 1 { return 1 }
        if rank >= Double(count) { return count }
        return UInt64(rank)
    }

    /// The reported value for the value of `rank` in `bucket`: exact at the ends, else the midpoint.
    func reportedValue(ofRank rank: UInt64, in bucket: HistogramBucket) -> UInt64 {
        if rank == 1 { return min }
        if rank == count { return max }
        let midpoint = bucket.lowerBound + (bucket.upperBound - bucket.lowerBound + 1) / 2
        return Swift.min(Swift.max(midpoint, min), max)
    }

    /// For each bound `b` of an ascending list, the number of values `<= b`, as Prometheus
    /// cumulative (`le`) buckets need.
    ///
    /// A value counts under `b` when its bucket's lowest value is `<= b`, so a value equal to a
    /// bound is always counted. The result is exact when `b < 1024`, `b < min`, `b >= max`, or
    /// `b + 1` starts a bucket; otherwise it may also count values in `b + 1 ... b * (1 + 1/512)`
    /// (the rest of `b`'s bucket). Non-decreasing, and the last entry is ``count`` if the last
    /// bound is at least ``max``.
    package func cumulativeCounts(atUpperBounds bounds: [UInt64]) -> [UInt64] {
        precondition(
            zip(bounds, bounds.dropFirst()).allSatisfy { $0 <= $1 },
            "Histogram.cumulativeCounts(atUpperBounds:): the bounds are not in ascending order")
        var result = [UInt64](repeating: 0, count: bounds.count)
        guard count != 0 else { return result }
        var next = 0
        var seen: UInt64 = 0
        forEachBucket { bucket in
            while next < bounds.count, bounds[next] < bucket.lowerBound {
                result[next] = seen
                next += 1
            }
            seen = seen.addingReportingOverflow(bucket.count).overflow ? .max : seen + bucket.count
        }
        for index in bounds.indices {
            if index >= next { result[index] = seen }
            if bounds[index] < minValue { result[index] = 0 }
            if bounds[index] >= maxValue { result[index] = count }
        }
        return result
    }
}
