import Ringside
import RingsideTrace

/// One bot's recorded records: its full chunks, oldest first, and the chunk it is filling.
/// Owned by the `Recorder` (the drain thread); only full chunks leave it, shared.
final class BotRecording {
    let name: String
    /// Full chunks, oldest first (in the order they filled).
    var full = FIFO<RecordedChunk>()
    /// The chunk being filled, and its records' earliest and latest times.
    var open = ContiguousArray<TraceRecord>()
    var openFirstNanos = UInt64.max
    var openLastNanos: UInt64 = 0
    /// Its last chunk filled: the next starts at a whole chunk's capacity, not small (a busy bot
    /// never grows one, a quiet one holds little).
    var fillsChunks = false
    /// The recorder forgot it (it held nothing): whoever kept it asks for the bot's store again.
    var isRetired = false
    /// Its files, by the id their records carry; one is forgotten once none of its records is held.
    var sources: [UInt32: RecordedSource] = [:]
    private var nextSource: UInt32 = 0

    init(name: String) { self.name = name }

    var isEmpty: Bool { full.isEmpty && open.isEmpty }

    /// Adds a file of the bot (drained from `now`): returns its id, never another's before.
    func add(_ source: RecordedSource, nowNanos now: UInt64) -> UInt32 {
        let id = nextSource
        nextSource &+= 1
        var source = source
        source.lastDrainNanos = now
        sources[id] = source
        return id
    }

    /// Forgets the files none of whose records is held: the drain last took records of them
    /// before the oldest record held.
    func forgetSourcesGone() {
        guard let oldest = oldestNanos else { return sources.removeAll() }
        if sources.values.contains(where: { $0.lastDrainNanos < oldest }) { sources = sources.filter { $0.value.lastDrainNanos >= oldest } }
    }

    /// Appends `records` (lane `lane` of source `source`) to the open chunk, which has room for
    /// them; each record's time is clamped to `floor...now` for the chunk's span.
    func append(_ records: UnsafeBufferPointer<RingRecord>, source: UInt32, lane: UInt32, floorNanos floor: UInt64, nowNanos now: UInt64) {
        guard !records.isEmpty else { return }
        // The span of the raw times, then clamped (clamping keeps their order); one loop, which
        // a micro-benchmark found faster than `append(contentsOf:)` of a lazy map (2.7 ns a record,
        // not 5 to 7), into the chunk moved out of the class: appended to as the class's property,
        // its exclusive access was checked at run time on every record.
        var first = UInt64.max, last: UInt64 = 0
        var chunk = ContiguousArray<TraceRecord>()
        swap(&chunk, &open)
        for record in records {
            first = min(first, record.timestamp_ns)
            last = max(last, record.timestamp_ns)
            chunk.append(TraceRecord(source: source, lane: lane, record: record))
        }
        swap(&chunk, &open)
        openFirstNanos = min(openFirstNanos, min(max(first, floor), now))
        openLastNanos = max(openLastNanos, min(max(last, floor), now))
    }

    /// The open chunk, full, made immutable (its array moved, not copied); a new one begins empty.
    func sealOpen() -> RecordedChunk {
        let chunk = RecordedChunk(records: open, firstNanos: openFirstNanos, lastNanos: openLastNanos)
        open = ContiguousArray()
        openFirstNanos = .max
        openLastNanos = 0
        fillsChunks = true
        return chunk
    }

    /// Lets go of the open chunk (its records aged out): returns how many records it held.
    func dropOpen() -> Int {
        let count = open.count
        open = ContiguousArray()
        openFirstNanos = .max
        openLastNanos = 0
        fillsChunks = false
        return count
    }

    /// The earliest time it holds a record of, if any.
    var oldestNanos: UInt64? {
        if let chunk = full.first { return min(chunk.firstNanos, openFirstNanos) }
        return open.isEmpty ? nil : openFirstNanos
    }
}
