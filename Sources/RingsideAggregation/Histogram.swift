/// A log-linear histogram of `UInt64` values (0 ... `UInt64.max`) that reports every value within
/// 1/1024 (0.098%) of what was recorded, so latency quantiles keep three significant digits.
///
/// Bucket layout, HdrHistogram's with 1024 sub-buckets and unit resolution: values below 1024 get
/// one bucket each (exact); above that, octave `k` (values in `[2^(k+9), 2^(k+10))`, `k` = 1 ... 54)
/// is cut into 512 linear buckets of width `2^k`. A bucket's lowest value is therefore at least 512
/// widths, and reporting its midpoint errs by at most half a width: `|reported - v| <= v / 1024`.
/// (HdrHistogram keeps 2048 sub-buckets and reports a bucket edge; the midpoint gives the same
/// bound with half the buckets.) Bucket index = `octave << 9 + value >> octave`, with
/// `octave = 54 - leadingZeroBitCount(value | 1023)`: one `lzcnt`, one shift, one add.
///
/// Memory, allocated lazily (see `Histogram+Storage.swift`): an empty histogram holds no heap
/// memory, nor does one whose values all fell in one bucket (it is kept inline); one with `b`
/// non-empty buckets, `2 <= b <= 256`, holds a sorted list of 8 B per bucket
/// (at most 2 KiB); past that, a page table of 448 `UInt16` (896 B) plus 512 B per touched page
/// of 64 counts: about 50 KiB for a lognormal latency distribution spreading over 8 octaves, at
/// most about 230 KiB with every bucket used. ``reset()`` keeps the capacity, so a reused window slice
/// does not allocate again.
///
/// Counts saturate at `UInt64.max` instead of trapping. `sum` is exact: it is kept as a 128-bit
/// integer, which saturates at `UInt128.max` (weighted counts, up to 2^32 calls a record, can take
/// it there; it never wraps, so a `_sum` never goes back). ``isSaturated`` says whether either did.
///
/// A value type: safe to send across threads, not to mutate from two at once.
package struct Histogram: Sendable {
    // MARK: - Layout

    /// log2 of the number of linear buckets per octave above the exact range.
    @usableFromInline static let octaveBucketsMagnitude = 9
    /// Values below this get a bucket each and are reported exactly.
    package static let exactValueLimit: UInt64 = 1024
    /// The largest relative error of any reported value: half a bucket over 512 bucket widths.
    package static let maxRelativeError = 1.0 / 1024.0
    /// Buckets needed to cover the whole `UInt64` range: the exact range and 54 octaves of 512.
    static let bucketCount = 56 << 9
    /// log2 of the counts per page: a page is 64 counts (512 B).
    @usableFromInline static let pageMagnitude = 6
    @usableFromInline static let pageSize = 1 << pageMagnitude
    static let pageCount = bucketCount >> pageMagnitude

    // MARK: - Storage

    /// Empty while sparse; once paged, 0 for a page never touched, else `n` for the counts at
    /// `slots[(n-1)*64 ..< n*64]`.
    @usableFromInline var pageTable: [UInt16] = []
    /// While sparse, `bucket << 48 | count` per non-empty bucket, in bucket order; once paged, the
    /// touched pages' counts in the order they were first touched.
    @usableFromInline var slots: [UInt64] = []
    /// While sparse and `slots` has no storage: the one non-empty bucket, as a `slots` entry (0:
    /// none). A series whose values all fell in one bucket (one value, or a constant: many of a
    /// quiet series' slices and all-time histograms) keeps no heap block for it; small blocks kept
    /// per series, allocated among busy series' window slices, kept the freed pages around them.
    var soleEntry: UInt64 = 0
    /// The number of recorded values (saturating at `UInt64.max`).
    @usableFromInline package internal(set) var count: UInt64 = 0
    /// The exact sum of recorded values as a 128-bit integer `(high << 64) + low`.
    @usableFromInline var sumLow: UInt64 = 0
    @usableFromInline var sumHigh: UInt64 = 0
    @usableFromInline var minValue: UInt64 = .max
    @usableFromInline var maxValue: UInt64 = 0

    /// Makes an empty histogram, without allocating.
    package init() {}

    // MARK: - Bucket math

    /// The octave of `value`: 0 for the exact range, else the log2 of its bucket width.
    @inlinable @inline(__always)
    static func octave(of value: UInt64) -> Int {
        54 &- (value | 1023).leadingZeroBitCount
    }

    /// The bucket index of `value`, in `0 ..< bucketCount`, in increasing value order.
    @inlinable @inline(__always)
    static func bucketIndex(of value: UInt64) -> Int {
        let octave = octave(of: value)
        // value >> octave is in 512 ..< 1024 above the exact range, so indexes follow on.
        return (octave &<< octaveBucketsMagnitude) &+ Int(truncatingIfNeeded: value &>> UInt64(octave))
    }

    /// The lowest value counted in bucket `index`.
    static func lowerBound(ofBucket index: Int) -> UInt64 {
        let octave = Swift.max((index >> octaveBucketsMagnitude) - 1, 0)
        return UInt64(index - (octave << octaveBucketsMagnitude)) << UInt64(octave)
    }

    /// The width of bucket `index` (1 in the exact range).
    static func width(ofBucket index: Int) -> UInt64 {
        1 << UInt64(Swift.max((index >> octaveBucketsMagnitude) - 1, 0))
    }

    /// The lowest value that lands in the same bucket as `value`.
    package static func lowestEquivalentValue(_ value: UInt64) -> UInt64 {
        let octave = UInt64(octave(of: value))
        return (value >> octave) << octave
    }

    /// The highest value that lands in the same bucket as `value` (never overflows).
    package static func highestEquivalentValue(_ value: UInt64) -> UInt64 {
        lowestEquivalentValue(value) + ((1 << UInt64(octave(of: value))) - 1)
    }

    /// The value reported for everything in `value`'s bucket: its midpoint, within
    /// ``maxRelativeError`` of every value in the bucket.
    package static func representativeValue(_ value: UInt64) -> UInt64 {
        lowestEquivalentValue(value) + ((1 << UInt64(octave(of: value))) >> 1)
    }

    // MARK: - Recording

    /// Adds `count` occurrences of `value` in O(1) with no allocation once the value's page exists.
    /// Inlinable, as the windows that call it are: the drain records every value through it.
    @inlinable
    package mutating func record(_ value: UInt64, count n: UInt64 = 1) {
        guard n != 0 else { return }
        let index = Self.bucketIndex(of: value)
        let page = index &>> Self.pageMagnitude
        if page < pageTable.count, case let number = Int(pageTable[page]), number != 0 {
            let slot = ((number &- 1) &<< Self.pageMagnitude) | (index & (Self.pageSize - 1))
            let (bucket, overflow) = slots[slot].addingReportingOverflow(n)
            slots[slot] = overflow ? .max : bucket
        } else {
            addOutsidePages(n, toBucket: index)
        }
        let (total, totalOverflow) = count.addingReportingOverflow(n)
        count = totalOverflow ? .max : total
        let product = value.multipliedFullWidth(by: n)
        addToSum(high: product.high, low: product.low)
        if value < minValue { minValue = value }
        if value > maxValue { maxValue = value }
    }

    /// Adds `count` occurrences of `value` to its bucket, the count, the minimum and the maximum,
    /// but not to the sum: calls whose values were summed elsewhere (gathered calls, SAMPLING in
    /// ringside.h), placed at a value one of them had. ``addSum(_:raisingMaxTo:)`` adds their sum.
    package mutating func place(_ value: UInt64, count n: UInt64) {
        guard n != 0 else { return }
        let (sumLow, sumHigh) = (self.sumLow, self.sumHigh)
        record(value, count: n)
        (self.sumLow, self.sumHigh) = (sumLow, sumHigh)
    }

    /// Adds `sum` to the sum and raises the maximum to `max`: the exact figures of calls placed
    /// with ``place(_:count:)``, now or later (a merge keeps them while no count goes with them).
    package mutating func addSum(_ sum: UInt64, raisingMaxTo max: UInt64) {
        addToSum(high: 0, low: sum)
        if max > maxValue { maxValue = max }
    }

    /// Lowers the minimum to `min`: a ``SignedHistogram``'s negative side, whose smallest magnitude
    /// is the largest value, takes gathered calls' maximum so.
    mutating func lowerMin(to min: UInt64) {
        if min < minValue { minValue = min }
    }

    /// Adds `(high << 64) + low` to the sum, saturating at `UInt128.max`: a sum that reached its
    /// ceiling stays there rather than wrapping.
    @inlinable @inline(__always)
    mutating func addToSum(high: UInt64, low: UInt64) {
        let (newLow, carry) = sumLow.addingReportingOverflow(low)
        let (partialHigh, overflowHigh) = sumHigh.addingReportingOverflow(high)
        let (newHigh, overflowCarry) = partialHigh.addingReportingOverflow(carry ? 1 : 0)
        if overflowHigh || overflowCarry {
            (sumLow, sumHigh) = (.max, .max)
        } else {
            (sumLow, sumHigh) = (newLow, newHigh)
        }
    }

    // MARK: - Combining

    /// Adds everything recorded in `other`, as if its values had been recorded here.
    package mutating func merge(_ other: Histogram) {
        // A histogram may hold a sum and a largest value before the counts they go with arrive
        // (gathered calls: ``addSum(_:raisingMaxTo:)``): those are merged too.
        guard other.count != 0 || other.sumLow != 0 || other.sumHigh != 0 || other.maxValue != 0 else { return }
        if other.count != 0 { mergeCounts(other) }
        let (total, totalOverflow) = count.addingReportingOverflow(other.count)
        count = totalOverflow ? .max : total
        addToSum(high: other.sumHigh, low: other.sumLow)
        minValue = Swift.min(minValue, other.minValue)
        maxValue = Swift.max(maxValue, other.maxValue)
    }

    /// Adds `other`'s bucket counts (not its count, sum or extremes).
    private mutating func mergeCounts(_ other: Histogram) {
        if other.isSparse {
            if other.soleEntry != 0 {
                addCount(other.soleEntry & Self.sparseCountMask, toBucket: Int(other.soleEntry >> Self.sparseIndexShift))
            }
            for entry in other.slots {
                addCount(entry & Self.sparseCountMask, toBucket: Int(entry >> Self.sparseIndexShift))
            }
        } else if takesSparse(other) {
            // A paged head of few buckets folded into a window's slice: the slice stays a list.
            other.forEachCount { index, count in addCount(count, toBucket: index) }
        } else {
            // A sparse one (a window's snapshot starts empty) takes room for `other`'s pages at once.
            if isSparse { convertToPages(reservingPages: other.slots.count >> Self.pageMagnitude) }
            for page in 0..<other.pageTable.count where other.pageTable[page] != 0 {
                let source = (Int(other.pageTable[page]) - 1) << Self.pageMagnitude
                addPage(of: other, at: source, to: slotIndex(ofPagedBucket: page << Self.pageMagnitude))
            }
        }
    }

    /// Empties the histogram but keeps its allocated capacity (and paged layout, if it had one),
    /// so refilling it does not allocate.
    package mutating func reset() {
        if !pageTable.isEmpty {
            for page in pageTable.indices { pageTable[page] = 0 }
        }
        slots.removeAll(keepingCapacity: true)
        soleEntry = 0
        count = 0
        sumLow = 0
        sumHigh = 0
        minValue = .max
        maxValue = 0
    }

    // MARK: - Statistics

    /// Whether nothing has been recorded.
    package var isEmpty: Bool { count == 0 }

    /// The smallest recorded value, exactly; 0 when empty.
    package var min: UInt64 { count == 0 ? 0 : minValue }

    /// The largest recorded value, exactly; 0 when empty.
    package var max: UInt64 { maxValue }

    /// The sum of recorded values, rounded to the nearest `Double` from an exact 128-bit total.
    package var sum: Double {
        Double(sumHigh) * 18_446_744_073_709_551_616.0 + Double(sumLow)
    }

    /// The exact sum of recorded values, all 128 bits of it.
    package var exactSum: UInt128 { UInt128(sumHigh) << 64 | UInt128(sumLow) }

    /// Whether the count or the sum reached its ceiling (`UInt64.max`, `UInt128.max`), where it
    /// stays: what is recorded since is in the buckets (each saturating too) but not in the figure.
    package var isSaturated: Bool { count == .max || (sumLow == .max && sumHigh == .max) }

    /// The exact sum of recorded values, or `UInt64.max` if it does not fit in 64 bits.
    package var saturatingSum: UInt64 { sumHigh == 0 ? sumLow : .max }

    /// The arithmetic mean of recorded values; 0 when empty.
    package var mean: Double { count == 0 ? 0 : sum / Double(count) }

    /// Heap bytes held by this histogram's counts (capacity, including space kept by ``reset()``).
    package var allocatedBytes: Int {
        pageTable.capacity * MemoryLayout<UInt16>.stride + slots.capacity * MemoryLayout<UInt64>.stride
    }

    /// Bytes of counts in use (sparse entries, or the page table and the touched pages), whatever
    /// the arrays' capacity: what the storage scheme itself takes, free of the allocator's rounding.
    package var storedBytes: Int {
        pageTable.count * MemoryLayout<UInt16>.stride + slots.count * MemoryLayout<UInt64>.stride
            + (soleEntry == 0 ? 0 : MemoryLayout<UInt64>.stride)
    }
}

extension Histogram: Equatable {
    /// Two histograms are equal when they hold the same counts and statistics, however their
    /// counts happen to be stored.
    package static func == (lhs: Histogram, rhs: Histogram) -> Bool {
        lhs.count == rhs.count && lhs.sumLow == rhs.sumLow && lhs.sumHigh == rhs.sumHigh
            && lhs.minValue == rhs.minValue && lhs.maxValue == rhs.maxValue && lhs.buckets == rhs.buckets
    }
}
