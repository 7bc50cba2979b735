/// Cumulative counts kept without the zeros before the first bucket that counts a value, nor the
/// repeats of the total after the last bucket that adds one: a series' values fall in a few of its
/// classic buckets (one, for a series that saw one value), and every histogram series keeps its
/// buckets' counts once scraped. Read as the whole counts, without making them.
package struct CompactCumulativeCounts: RandomAccessCollection, Sendable, Equatable {
    /// How many counts there are, and how many 0s come first.
    private let length: UInt32, leadingZeros: UInt32
    /// From the first count that is not 0 to the first that equals the last; empty when all are 0.
    private let kept: [UInt64]

    package init(_ counts: [UInt64]) {
        let first = counts.firstIndex { $0 != 0 } ?? counts.count
        var end = counts.count
        if let total = counts.last { while end - 1 > first && counts[end - 2] == total { end -= 1 } }
        (length, leadingZeros, kept) = (UInt32(counts.count), UInt32(first), Array(counts[first..<end]))
    }

    package var startIndex: Int { 0 }
    package var endIndex: Int { Int(length) }

    /// The count at `position`: 0 before the kept ones, the last kept (the total) after them.
    package subscript(position: Int) -> UInt64 {
        let offset = position - Int(leadingZeros)
        guard offset >= 0 else { return 0 }
        return offset < kept.count ? kept[offset] : kept.last ?? 0
    }
}
