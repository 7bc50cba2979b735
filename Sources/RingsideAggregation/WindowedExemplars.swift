/// One exemplar a series kept: a value, when it was recorded, the labels that name it (an order
/// id, a trace id), and who recorded it.
package struct KeptExemplar: Sendable, Equatable {
    /// The value, in the series' unit.
    package var value: UInt64
    /// When it was recorded (CLOCK_MONOTONIC nanoseconds, as the record says), and that time on
    /// the wall (CLOCK_REALTIME nanoseconds), for exports.
    package var timeNanos: UInt64
    package var wallTimeNanos: UInt64
    /// The labels: `key=value` pairs joined by newlines, as the producer wrote them (checked).
    package var labels: String
    /// The process that recorded it, and its thread (kernel id and name, from its lane).
    package var pid: Int32
    package var threadID: Int32
    package var threadName: String

    package init(
        value: UInt64, timeNanos: UInt64, wallTimeNanos: UInt64, labels: String, pid: Int32, threadID: Int32, threadName: String
    ) {
        self.value = value
        self.timeNanos = timeNanos
        self.wallTimeNanos = wallTimeNanos
        self.labels = labels
        self.pid = pid
        self.threadID = threadID
        self.threadName = threadName
    }

    /// The labels as pairs, in the producer's order.
    package var pairs: [(key: String, value: String)] {
        labels.split(separator: "\n").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (key: String(parts[0]), value: parts.count > 1 ? String(parts[1]) : "")
        }
    }

    /// The larger first; of equal values, the later.
    static func ranksAbove(_ a: KeptExemplar, _ b: KeptExemplar) -> Bool {
        a.value != b.value ? a.value > b.value : a.timeNanos > b.timeNanos
    }
}

/// The `capacity` largest exemplars of a slice of time, largest first.
struct TopExemplars: WindowSlice {
    static let capacity = 5
    var kept: [KeptExemplar] = []

    mutating func add(_ exemplar: KeptExemplar) {
        guard kept.count < Self.capacity || KeptExemplar.ranksAbove(exemplar, kept[kept.count - 1]) else { return }
        let at = kept.firstIndex { KeptExemplar.ranksAbove(exemplar, $0) } ?? kept.count
        kept.insert(exemplar, at: at)
        if kept.count > Self.capacity { kept.removeLast() }
    }

    mutating func reset() { kept.removeAll(keepingCapacity: true) }

    mutating func merge(_ other: TopExemplars) {
        for exemplar in other.kept { add(exemplar) }
    }
}

/// A histogram series' exemplars: the largest few of each sliding window (the exemplar of its
/// maximum first), and the latest exemplar of each bucket of the caller's (a native histogram's
/// bucket index, say), at most ``maxBuckets`` of them, the oldest let go first.
///
/// Memory is bounded: `TopExemplars.capacity` (5) exemplars in each of the windows' slices and
/// the head (`windows * (slicesPerWindow + 1) + 1`, 16 with the standard layout: 80 exemplars),
/// and ``maxBuckets`` (64) for the buckets: at most 144 exemplars of about 100 bytes each with
/// their strings (labels and thread names of up to 15 bytes are stored inline).
package struct WindowedExemplars: Sendable {
    /// Buckets whose latest exemplar is kept, at the most.
    package static let maxBuckets = 64

    var windows: SlidingWindows<TopExemplars>
    /// Each bucket's latest exemplar, by bucket.
    package private(set) var latestByBucket: [Int32: KeptExemplar] = [:]

    package init(layout: WindowLayout = .standard) {
        windows = SlidingWindows(layout: layout)
    }

    /// Keeps `exemplar`, in `bucket` (nil: among the windows' largest only).
    package mutating func record(_ exemplar: KeptExemplar, bucket: Int32?) {
        windows.update(atNanos: exemplar.timeNanos) { $0.add(exemplar) }
        guard let bucket else { return }
        if latestByBucket.count >= Self.maxBuckets && latestByBucket[bucket] == nil,
            let oldest = latestByBucket.min(by: { $0.value.timeNanos < $1.value.timeNanos })?.key
        {
            latestByBucket[oldest] = nil
        }
        if let held = latestByBucket[bucket], held.timeNanos > exemplar.timeNanos { return }
        latestByBucket[bucket] = exemplar
    }

    /// Moves the current tick into the windows once `now` has passed it.
    package mutating func advance(toNanos now: UInt64) {
        windows.advance(toNanos: now)
    }

    /// Window `window`'s largest exemplars at `now`, largest first (at most 5).
    package func largest(window: Int, nowNanos now: UInt64) -> [KeptExemplar] {
        var result = TopExemplars()
        windows.merge(window: window, nowNanos: now, into: &result)
        return result.kept
    }
}
