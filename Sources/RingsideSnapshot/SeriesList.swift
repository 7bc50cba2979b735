/// A snapshot's series, in parts: the publisher appends each bot's series as one part, the
/// very array its bot keeps for the next snapshot, so a bot whose series did not change costs
/// the next snapshot one retain, and freeing a snapshot releases its parts, not each series.
/// (Each series is a box on the heap: in one flat array, a million of them, cold in the cache,
/// were retained into every build and released from every snapshot freed, on the drain thread:
/// the release alone took 0.08 to 0.2 s a publish, measured.)
///
/// Read it as any collection of series, by position from 0; a part is shared until written
/// (copy on write, as an array's elements are).
package struct SeriesList: RandomAccessCollection, MutableCollection, ExpressibleByArrayLiteral, Sendable {
    package typealias Index = Int

    private var parts: [[SeriesSnapshot]] = []
    /// The position of each part's first series, in order; and the part of each position (4
    /// bytes a series, written in order as parts are appended: a page reads a million series by
    /// position, a few times each).
    private var starts: [Int] = []
    private var partOf: [UInt32] = []
    package var startIndex: Int { 0 }
    package var endIndex: Int { partOf.count }

    package init() {}

    package init(_ series: [SeriesSnapshot]) { append(part: series) }

    package init(arrayLiteral series: SeriesSnapshot...) { self.init(series) }

    package subscript(position: Int) -> SeriesSnapshot {
        get {
            let part = part(holding: position)
            return parts[part][position - starts[part]]
        }
        set {
            let part = part(holding: position)
            parts[part][position - starts[part]] = newValue
        }
    }

    /// Appends `series` as one part, shared, not copied.
    package mutating func append(part series: [SeriesSnapshot]) {
        guard !series.isEmpty else { return }
        starts.append(endIndex)
        partOf.append(contentsOf: repeatElement(UInt32(parts.count), count: series.count))
        parts.append(series)
    }

    /// Appends one series, as a part of its own.
    package mutating func append(_ series: SeriesSnapshot) { append(part: [series]) }

    /// Calls `body` with the series at `position` in place: a copy of a series retains its
    /// figures, which a page of a million series' lines would do a million times.
    package func withSeries<Result>(at position: Int, _ body: (UnsafePointer<SeriesSnapshot>) throws -> Result) rethrows -> Result {
        let part = part(holding: position)
        return try parts[part].withUnsafeBufferPointer { try body($0.baseAddress! + (position - starts[part])) }
    }

    /// Calls `body` with each series in place, in order, and its position.
    package func forEachInPlace(_ body: (_ position: Int, _ series: UnsafePointer<SeriesSnapshot>) throws -> Void) rethrows {
        for (part, start) in zip(parts, starts) {
            try part.withUnsafeBufferPointer { series in
                for offset in series.indices { try body(start + offset, series.baseAddress! + offset) }
            }
        }
    }

    private func part(holding position: Int) -> Int { Int(partOf[position]) }

    package func makeIterator() -> Iterator { Iterator(parts: parts.makeIterator()) }

    /// Walks the parts in order, with no lookup for each position.
    package struct Iterator: IteratorProtocol {
        private var parts: IndexingIterator<[[SeriesSnapshot]]>
        private var part: IndexingIterator<[SeriesSnapshot]>?

        fileprivate init(parts: IndexingIterator<[[SeriesSnapshot]]>) { self.parts = parts }

        package mutating func next() -> SeriesSnapshot? {
            while true {
                if let series = part?.next() { return series }
                guard let next = parts.next() else { return nil }
                part = next.makeIterator()
            }
        }
    }
}
