/// The difference of two readings of one growing histogram: what was recorded between them.
extension Histogram {
    /// What was recorded into this histogram since it was `earlier` (a copy of it taken before),
    /// for per-interval histograms (`--hlog`) made from a series' all-time histogram.
    ///
    /// Counts, `count` and the sum are exact. `min` and `max` are exact when the interval set a new
    /// all-time extreme; otherwise they are the reported value (midpoint) of the lowest or highest
    /// non-empty bucket of the difference, kept within this histogram's `min ... max`: within
    /// ``maxRelativeError``. A bucket count below `earlier`'s (not a later reading) counts as 0.
    package func subtracting(_ earlier: Histogram) -> Histogram {
        guard earlier.count != 0 else { return self }
        var result = Histogram()
        var previous: [(index: Int, count: UInt64)] = []
        previous.reserveCapacity(256)
        earlier.forEachCount { previous.append(($0, $1)) }
        var position = 0
        var lowest = -1, highest = -1
        forEachCount { index, count in
            while position < previous.count, previous[position].index < index { position += 1 }
            var remaining = count
            if position < previous.count, previous[position].index == index {
                remaining = count > previous[position].count ? count - previous[position].count : 0
            }
            guard remaining != 0 else { return }
            result.addCount(remaining, toBucket: index)
            if lowest < 0 { lowest = index }
            highest = index
        }
        guard lowest >= 0 else { return Histogram() }
        result.count = count >= earlier.count ? count - earlier.count : 0
        let (sum, borrow) = exactSum.subtractingReportingOverflow(earlier.exactSum)
        let difference = borrow ? 0 : sum
        result.sumLow = UInt64(truncatingIfNeeded: difference)
        result.sumHigh = UInt64(truncatingIfNeeded: difference >> 64)
        func reported(_ index: Int) -> UInt64 {
            Self.lowerBound(ofBucket: index) + (Self.width(ofBucket: index) >> 1)
        }
        result.minValue = minValue < earlier.minValue ? minValue : Swift.max(reported(lowest), minValue)
        result.maxValue = maxValue > earlier.maxValue ? maxValue : Swift.min(reported(highest), maxValue)
        return result
    }
}
