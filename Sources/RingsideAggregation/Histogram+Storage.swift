/// How ``Histogram`` stores its counts: sparse while few buckets are used, paged after.
///
/// Sparse: `slots` is a sorted list of `bucket << 48 | count`, at most 256 entries (2 KiB), so a
/// slice that saw a few hundred scattered values does not pay 512 B per value for a page each; a
/// histogram of one bucket whose list has no storage keeps that entry inline (`soleEntry`), and
/// moves it into the list when a second bucket comes.
/// Paged: `pageTable` maps each 64-bucket page to its counts in `slots`; recording is then a
/// table load and an add. A histogram turns paged when it needs a 257th bucket or a count of
/// 2^48, or once it has 4096 values (a busy series deserves the fast path), and stays paged
/// (its capacity kept) across ``Histogram/reset()``. A window's head, the slice every record goes
/// through, turns paged sooner: when a tick gave it `headPagingValues` (see ``resetHead()``).
extension Histogram {
    static let sparseIndexShift: UInt64 = 48
    static let sparseCountMask: UInt64 = (1 << 48) - 1
    static let sparseCapacity = 256
    static let sparseValueLimit: UInt64 = 4096
    /// Values in one tick that page a window's head for the next (2,048 a second, in 250 ms ticks).
    static let headPagingValues: UInt64 = 512

    /// Empties a window's head for the next tick. One that took `headPagingValues` values in
    /// this one is paged first, so its series' records take the paged path (a table load and an
    /// add) rather than a binary search of the sparse list and an insert: spread over many
    /// series, a busy collector's records leave each head a few thousand values a tick, short of
    /// the 4,096 that page any histogram. The slices it is merged into stay sparse while they fit.
    package mutating func resetHead() {
        if isSparse, count >= Self.headPagingValues { convertToPages() }
        reset()
    }

    /// Whether `other`'s counts (paged) fit this sparse list: `sparseValueLimit` values in all
    /// at most, and `sparseCapacity` buckets (a bucket both hold counted twice: a bound).
    func takesSparse(_ other: Histogram) -> Bool {
        let (total, overflow) = count.addingReportingOverflow(other.count)
        guard isSparse, !overflow, total < Self.sparseValueLimit else { return false }
        var room = Self.sparseCapacity - slots.count - (soleEntry == 0 ? 0 : 1)
        for page in 0..<other.pageTable.count where other.pageTable[page] != 0 {
            let first = (Int(other.pageTable[page]) - 1) << Self.pageMagnitude
            for offset in 0..<Self.pageSize where other.slots[first + offset] != 0 {
                room -= 1
                if room < 0 { return false }
            }
        }
        return true
    }

    /// Whether the counts are still a sorted list rather than pages.
    var isSparse: Bool { pageTable.isEmpty }

    /// The slow part of ``record(_:count:)``: a sparse histogram, or a page not yet allocated.
    @usableFromInline @inline(never)
    mutating func addOutsidePages(_ n: UInt64, toBucket index: Int) {
        addCount(n, toBucket: index)
    }

    /// Adds `n` to bucket `index`'s count, whichever way the counts are stored.
    mutating func addCount(_ n: UInt64, toBucket index: Int) {
        if isSparse {
            if count < Self.sparseValueLimit && addSparse(n, toBucket: index) { return }
            convertToPages()
        }
        let slot = slotIndex(ofPagedBucket: index)
        let (sum, overflow) = slots[slot].addingReportingOverflow(n)
        slots[slot] = overflow ? .max : sum
    }

    /// Adds `n` to bucket `index` in the sorted list; false when the list is full or the count
    /// would not fit in 48 bits, so the caller must page.
    mutating func addSparse(_ n: UInt64, toBucket index: Int) -> Bool {
        let key = UInt64(index) << Self.sparseIndexShift
        if slots.capacity == 0 {
            if soleEntry == 0 || soleEntry & ~Self.sparseCountMask == key {
                let count = (soleEntry & Self.sparseCountMask).addingReportingOverflow(n)
                guard !count.overflow, count.partialValue <= Self.sparseCountMask else { return false }
                soleEntry = key | count.partialValue
                return true
            }
            // A second bucket: the list takes the entry held inline.
            slots = [soleEntry]
            soleEntry = 0
        }
        let position = sparsePosition(of: index)
        if position < slots.count, slots[position] & ~Self.sparseCountMask == key {
            let count = (slots[position] & Self.sparseCountMask).addingReportingOverflow(n)
            guard !count.overflow, count.partialValue <= Self.sparseCountMask else { return false }
            slots[position] = key | count.partialValue
            return true
        }
        guard slots.count < Self.sparseCapacity, n <= Self.sparseCountMask else { return false }
        slots.insert(key | n, at: position)
        return true
    }

    /// The position of the first sparse entry whose bucket is `index` or above.
    func sparsePosition(of index: Int) -> Int {
        let key = UInt64(index) << Self.sparseIndexShift
        var low = 0
        var high = slots.count
        while low < high {
            let middle = (low + high) / 2
            if slots[middle] < key { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Moves the sparse entries into pages, with room for `pages` pages without growing.
    mutating func convertToPages(reservingPages pages: Int = 0) {
        let entries = soleEntry == 0 ? slots : [soleEntry]
        soleEntry = 0
        slots = []
        slots.reserveCapacity(Swift.min(pages, Self.pageCount) << Self.pageMagnitude)
        pageTable = [UInt16](repeating: 0, count: Self.pageCount)
        for entry in entries {
            slots[slotIndex(ofPagedBucket: Int(entry >> Self.sparseIndexShift))] = entry & Self.sparseCountMask
        }
    }

    /// The index in `slots` of bucket `index`'s count in a paged histogram, allocating its page on
    /// first use.
    mutating func slotIndex(ofPagedBucket index: Int) -> Int {
        let page = index >> Self.pageMagnitude
        var number = Int(pageTable[page])
        if number == 0 {
            if slots.count + Self.pageSize > slots.capacity {
                // Grow by a quarter, not Array's doubling: capacity is kept across resets, so
                // doubling would hold up to twice the high-water mark for good.
                let growth = Swift.max(slots.count / 4, 4 * Self.pageSize)
                slots.reserveCapacity(Swift.min(slots.count + growth, Self.bucketCount))
            }
            slots.append(contentsOf: repeatElement(0, count: Self.pageSize))
            number = slots.count >> Self.pageMagnitude
            pageTable[page] = UInt16(number)
        }
        return ((number - 1) << Self.pageMagnitude) | (index & (Self.pageSize - 1))
    }

    /// Adds the page of counts at `other.slots[source...]` to the one at `slots[target...]`,
    /// saturating: the inner loop of a merge, which folds a window's head into its slices and
    /// builds every window's snapshot. Both are whole pages, checked once, so the loop has no
    /// per-count bounds check.
    mutating func addPage(of other: Histogram, at source: Int, to target: Int) {
        precondition(
            source >= 0 && source + Self.pageSize <= other.slots.count && target >= 0 && target + Self.pageSize <= slots.count,
            "Histogram.addPage: a page outside the counts")
        other.slots.withUnsafeBufferPointer { from in
            slots.withUnsafeMutableBufferPointer { into in
                // In range by the precondition; `into` is this histogram's own buffer (unique,
                // copied first if `other` shares it), so the two never overlap.
                let from = from.baseAddress! + source
                let into = into.baseAddress! + target
                for offset in 0..<Self.pageSize {
                    let (sum, overflow) = into[offset].addingReportingOverflow(from[offset])
                    into[offset] = overflow ? .max : sum
                }
            }
        }
    }

    /// Calls `body` with each non-empty bucket's index and count, in bucket order.
    func forEachCount(_ body: (_ index: Int, _ count: UInt64) throws -> Void) rethrows {
        if isSparse {
            if soleEntry != 0 { try body(Int(soleEntry >> Self.sparseIndexShift), soleEntry & Self.sparseCountMask) }
            for entry in slots {
                try body(Int(entry >> Self.sparseIndexShift), entry & Self.sparseCountMask)
            }
            return
        }
        for page in 0..<pageTable.count where pageTable[page] != 0 {
            let first = (Int(pageTable[page]) - 1) << Self.pageMagnitude
            for offset in 0..<Self.pageSize where slots[first + offset] != 0 {
                try body(page << Self.pageMagnitude | offset, slots[first + offset])
            }
        }
    }
}
