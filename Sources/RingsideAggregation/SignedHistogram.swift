/// A histogram of signed values (`Int64`: slippage in hundredths of a basis point, PnL per trade in
/// micro-dollars), made of two ``Histogram``s mirrored about zero: the values `>= 0` (zero exact,
/// in a bucket of its own), and the magnitudes of the values `< 0`. Each side keeps ``Histogram``'s
/// buckets, so every value is reported within 1/1024 of its magnitude on either side of zero.
/// Quantiles, the minimum and the maximum are read across zero; the sum is exact (128 bits).
///
/// An unsigned series never needs one: a ``Histogram`` is this with no negative side.
///
/// A value type: safe to send across threads, not to mutate from two at once.
package struct SignedHistogram: Sendable, Equatable {
    /// The values `>= 0`.
    @usableFromInline package internal(set) var nonNegative = Histogram()
    /// The magnitudes of the values `< 0` (1 ... 2^63).
    @usableFromInline package internal(set) var negative = Histogram()

    /// Makes an empty histogram, without allocating.
    package init() {}

    // MARK: - Recording and combining

    /// Adds `count` occurrences of `value` (inlinable, as `Histogram.record` is).
    @inlinable
    package mutating func record(_ value: Int64, count n: UInt64 = 1) {
        if value >= 0 {
            nonNegative.record(UInt64(value), count: n)
        } else {
            negative.record(value.magnitude, count: n)
        }
    }

    /// Adds `count` gathered calls at `value`, one of theirs, to the buckets, the count and the
    /// extremes but not the sum (see ``Histogram/place(_:count:)``); ``addSum(_:raisingMaxTo:)``
    /// adds their sum.
    package mutating func place(_ value: Int64, count n: UInt64) {
        if value >= 0 {
            nonNegative.place(UInt64(value), count: n)
        } else {
            negative.place(value.magnitude, count: n)
        }
    }

    /// Adds gathered calls' exact sum and raises the maximum to `max` (nil: none to raise it to).
    /// Only the two sides' sums together mean anything (a sum of both signs goes to the side of
    /// its own sign).
    package mutating func addSum(_ sum: Int64, raisingMaxTo max: Int64?) {
        if sum >= 0 {
            nonNegative.addSum(UInt64(sum), raisingMaxTo: 0)
        } else {
            negative.addSum(sum.magnitude, raisingMaxTo: 0)
        }
        guard let max else { return }
        if max >= 0 {
            nonNegative.addSum(0, raisingMaxTo: UInt64(max))
        } else if !hasNonNegative {
            negative.lowerMin(to: max.magnitude)
        }
    }

    /// Whether a value >= 0 was recorded, or a gathered one's maximum says so.
    var hasNonNegative: Bool { !nonNegative.isEmpty || nonNegative.max > 0 }

    /// Adds everything recorded in `other`.
    package mutating func merge(_ other: SignedHistogram) {
        nonNegative.merge(other.nonNegative)
        negative.merge(other.negative)
    }

    /// Empties it, keeping its capacity.
    package mutating func reset() {
        nonNegative.reset()
        negative.reset()
    }

    /// What was recorded since it was `earlier` (see ``Histogram/subtracting(_:)``), side by side.
    package func subtracting(_ earlier: SignedHistogram) -> SignedHistogram {
        var result = SignedHistogram()
        result.nonNegative = nonNegative.subtracting(earlier.nonNegative)
        result.negative = negative.subtracting(earlier.negative)
        return result
    }

    // MARK: - Statistics

    /// How many values were recorded (saturating at `UInt64.max`).
    package var count: UInt64 {
        let (total, overflow) = nonNegative.count.addingReportingOverflow(negative.count)
        return overflow ? .max : total
    }

    /// Whether nothing has been recorded.
    package var isEmpty: Bool { nonNegative.isEmpty && negative.isEmpty }

    /// The smallest recorded value, exactly; 0 when empty.
    package var min: Int64 {
        negative.isEmpty ? Int64(clamping: nonNegative.min) : Self.negated(negative.max)
    }

    /// The largest recorded value, exactly; 0 when empty.
    package var max: Int64 {
        hasNonNegative ? Int64(clamping: nonNegative.max) : (negative.isEmpty ? 0 : Self.negated(negative.min))
    }

    /// The exact sum, or what is left of it once a side's sum reached `Int128.max` (see
    /// ``isSaturated``). Both sides within `0 ... Int128.max`, their difference always fits.
    package var exactSum: Int128 {
        Int128(clamping: nonNegative.exactSum) - Int128(clamping: negative.exactSum)
    }

    /// The sum, rounded to the nearest `Double` from the exact one.
    package var sum: Double { Double(exactSum) }

    /// Whether a count or a sum reached its ceiling, where it stays (see ``Histogram/isSaturated``).
    package var isSaturated: Bool {
        nonNegative.isSaturated || negative.isSaturated || count == .max
            || nonNegative.exactSum > UInt128(Int128.max) || negative.exactSum > UInt128(Int128.max)
    }

    /// The arithmetic mean; 0 when empty.
    package var mean: Double { count == 0 ? 0 : sum / Double(count) }

    /// Heap bytes held by both sides' counts.
    package var allocatedBytes: Int { nonNegative.allocatedBytes + negative.allocatedBytes }

    // MARK: - Quantiles and buckets

    /// The values at quantiles `quantiles` (each 0 ... 1, nearest rank over both sides), in one
    /// pass over each side: within 1/1024 of the true value's magnitude, never outside
    /// `min ... max`, and `min` and `max` exactly at the ends; 0 when empty.
    package func values(atQuantiles quantiles: [Double]) -> [Int64] {
        let total = count
        guard total != 0 else { return [Int64](repeating: 0, count: quantiles.count) }
        // Every value the same: each quantile is it, exactly (as `Histogram`'s).
        if min == max { return [Int64](repeating: max, count: quantiles.count) }
        let negatives = negative.count
        // The r-th smallest value is the (negatives - r + 1)-th largest magnitude when r falls
        // among the negative values, else the (r - negatives)-th of the others.
        var negativeRanks: [(position: Int, rank: UInt64)] = []
        var otherRanks: [(position: Int, rank: UInt64)] = []
        for (position, q) in quantiles.enumerated() {
            let rank = Histogram.nearestRank(ofQuantile: q, count: total)
            if rank <= negatives {
                negativeRanks.append((position, negatives - rank + 1))
            } else {
                otherRanks.append((position, Swift.min(rank - negatives, nonNegative.count)))
            }
        }
        var result = [Int64](repeating: 0, count: quantiles.count)
        for (entry, magnitude) in zip(negativeRanks, negative.values(atRanks: negativeRanks.map(\.rank))) {
            result[entry.position] = Self.negated(magnitude)
        }
        for (entry, value) in zip(otherRanks, nonNegative.values(atRanks: otherRanks.map(\.rank))) {
            result[entry.position] = Int64(clamping: value)
        }
        return result
    }

    /// For each bound `b` of an ascending list, the number of values `<= b` (Prometheus' `le`
    /// buckets), exact within a bucket of either side as ``Histogram/cumulativeCounts(atUpperBounds:)``
    /// says. Non-decreasing.
    package func cumulativeCounts(atUpperBounds bounds: [Int64]) -> [UInt64] {
        precondition(
            zip(bounds, bounds.dropFirst()).allSatisfy { $0 <= $1 },
            "SignedHistogram.cumulativeCounts(atUpperBounds:): the bounds are not in ascending order")
        let negatives = negative.count
        let below = bounds.prefix { $0 < 0 }
        // A value <= b < 0 has a magnitude >= |b|: all the negatives but those of magnitude < |b|.
        let smaller = negative.cumulativeCounts(atUpperBounds: below.reversed().map { $0.magnitude - 1 })
        var result = smaller.reversed().map { negatives >= $0 ? negatives - $0 : 0 }
        let atOrAbove = nonNegative.cumulativeCounts(atUpperBounds: bounds.dropFirst(below.count).map { UInt64($0) })
        result += atOrAbove.map { $0.addingReportingOverflow(negatives).overflow ? .max : $0 + negatives }
        return result
    }

    /// The `Int64` of the negative value of magnitude `magnitude` (1 ... 2^63; larger ones, which
    /// a side never holds, end at `Int64.min`).
    static func negated(_ magnitude: UInt64) -> Int64 {
        magnitude >= UInt64(1) << 63 ? .min : -Int64(magnitude)
    }
}

extension SignedHistogram: WindowedHistogramSlice {
    package mutating func resetHead() {
        nonNegative.resetHead()
        negative.resetHead()
    }
}

/// A ``SignedHistogram`` as it is kept between two runs of the collector: each side as a
/// ``PersistedHistogram``.
package struct PersistedSignedHistogram: Codable, Sendable, Equatable {
    package var nonNegative: PersistedHistogram
    package var negative: PersistedHistogram

    package init(nonNegative: PersistedHistogram, negative: PersistedHistogram) {
        (self.nonNegative, self.negative) = (nonNegative, negative)
    }
}

extension SignedHistogram {
    /// This histogram as kept between runs.
    package var persisted: PersistedSignedHistogram {
        PersistedSignedHistogram(nonNegative: nonNegative.persisted, negative: negative.persisted)
    }

    /// The histogram kept as `persisted`; nil when either side does not hold together, or the
    /// negative side holds a magnitude of 0 or above 2^63 (a state file is read, not trusted).
    package init?(_ persisted: PersistedSignedHistogram) {
        guard let nonNegative = Histogram(persisted.nonNegative), let negative = Histogram(persisted.negative) else { return nil }
        guard negative.isEmpty || (negative.min >= 1 && negative.max <= UInt64(1) << 63) else { return nil }
        self.init()
        (self.nonNegative, self.negative) = (nonNegative, negative)
    }
}
