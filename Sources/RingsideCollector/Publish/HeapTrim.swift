import RingsideSystem

/// Gives the heap's free pages back to the kernel after the windows of many series were let go
/// at once (they went idle: see `SlidingWindows`): freed in bulk, their memory would otherwise
/// stay in the collector's resident set, since the allocator keeps what it was given. At most
/// every `intervalNanos`, and only after `seriesAtLeast` series let theirs go since the last time.
struct HeapTrim {
    static let seriesAtLeast = 1_000
    static let intervalNanos: UInt64 = 10_000_000_000

    private var letGo = 0
    private var lastNanos: UInt64 = 0

    /// Counts `count` more series whose windows were let go, and trims the heap when due.
    mutating func note(letGo count: Int, nowNanos now: UInt64) {
        letGo += count
        guard letGo >= Self.seriesAtLeast, now &- lastNanos >= Self.intervalNanos else { return }
        letGo = 0
        lastNanos = now
        System.trimHeap()
    }
}

/// What the publisher said in the log, so it says each thing once: the series that reached a
/// ceiling (bot, metric, labels), and each series's operator switches as last said, by series
/// id (none: as registered).
struct SaidInLog {
    var saturated: Set<[String]> = []
    var controls: [UInt64: UInt32] = [:]

    /// The switches last said of series `id` (0, as registered, when none was said).
    func control(of id: UInt64) -> UInt32 { controls.isEmpty ? 0 : controls[id] ?? 0 }
}
