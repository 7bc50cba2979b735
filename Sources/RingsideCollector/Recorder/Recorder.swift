import Ringside
import RingsideSnapshot
import RingsideTrace

/// The flight recorder (`--recorder-seconds`, `--recorder-max-bytes`): the last seconds of every
/// bot's drained raw records, as the drain took them, for a capture to turn into a trace.
///
/// Records are kept per bot in chunks of `chunkRecords`: a chunk that fills becomes an
/// immutable `RecordedChunk`, which a capture takes without copying (`records(fromNanos:toNanos:)`).
/// Chunks go oldest first: when their records are older than the retention (age: not a loss),
/// and when a new one would take the recorder past its byte budget (the records in it still
/// within the retention are counted in `evictedRecords`: the budget held less than the seconds
/// asked for). The budget counts the chunks' storage, and is never exceeded: records that find
/// no room (every chunk is one being filled, one per bot) are counted as evicted too.
///
/// Owned by the drain thread; what other threads see is its `figures`, in the snapshot.
final class Recorder {
    /// Records a chunk holds when full: 160 KiB.
    static let chunkRecords = 4_096
    /// The capacity a bot's first chunk (or its first after a quiet spell) starts at; it doubles
    /// as it fills, so a quiet bot holds little.
    static let initialChunkRecords = 64
    static let recordBytes = MemoryLayout<TraceRecord>.stride
    /// How often chunks are looked at for age, and the figures computed.
    static let sweepIntervalNanos: UInt64 = 100_000_000

    let retentionNanos: UInt64
    let budgetBytes: Int
    private var bots: [String: BotRecording] = [:]
    /// Every bot's full chunks, in the order they filled: the oldest goes first.
    private var fillOrder = FIFO<BotRecording>()
    /// The chunks' storage (their arrays' capacities), records held, and records lost to the
    /// budget since the start.
    private(set) var bytes = 0
    private(set) var recordCount = 0
    private(set) var evictedRecords: UInt64 = 0
    /// A let-go chunk's storage, kept (and counted in `bytes`) for the next chunk a bot begins.
    private var spare: ContiguousArray<TraceRecord>?
    /// The oldest record time held, as of the last sweep.
    private var oldestNanos: UInt64?
    private var lastSweepNanos: UInt64 = 0

    init(retentionNanos: UInt64, budgetBytes: Int) {
        precondition(
            retentionNanos > 0 && budgetBytes >= Self.chunkRecords * Self.recordBytes, "a recorder needs seconds and a chunk's bytes")
        self.retentionNanos = retentionNanos
        self.budgetBytes = budgetBytes
    }

    /// The recorder's store of bot `name` (kept by the bot's series: a retired one is asked again).
    func recording(ofBot name: String) -> BotRecording {
        if let bot = bots[name] { return bot }
        let bot = BotRecording(name: name)
        bots[name] = bot
        return bot
    }

    /// The drain's hook: what `BotAggregator.drain` hands each lane's records to.
    struct Feed {
        let recorder: Recorder
        let bot: BotRecording
        /// The file's id in the bot's recording.
        let source: UInt32

        /// Keeps `records` of lane `lane` of `consumer`, the feed's file, drained at `now`.
        func take(_ records: UnsafeBufferPointer<RingRecord>, lane: Int, of consumer: RingConsumer, nowNanos now: UInt64) {
            recorder.record(records, into: bot, source: source, lane: lane, nowNanos: now)
            bot.sources[source]?.update(from: consumer, lane: lane, nowNanos: now)
        }
    }

    /// Keeps `records`, drained from lane `lane` of file `source` of `bot` at `now`, in the
    /// bot's open chunk, sealing and starting chunks (within the budget) as it fills.
    func record(_ records: UnsafeBufferPointer<RingRecord>, into bot: BotRecording, source: UInt32, lane: Int, nowNanos now: UInt64) {
        let floor = now > retentionNanos ? now - retentionNanos : 0
        var offset = 0
        while offset < records.count {
            if bot.open.isEmpty, bot.fillsChunks {
                // A busy bot's next chunk: the storage of the oldest one let go, if it can go.
                if spare == nil, bytes + Self.chunkRecords * Self.recordBytes > budgetBytes, !fillOrder.isEmpty {
                    evictOldest(nowNanos: now, forBudget: true)
                }
                if let storage = spare {
                    spare = nil
                    bot.open = storage
                }
            }
            if bot.open.count == bot.open.capacity {
                let before = bot.open.capacity
                let target =
                    bot.open.isEmpty
                    ? (bot.fillsChunks ? Self.chunkRecords : Self.initialChunkRecords) : min(Self.chunkRecords, before * 2)
                // Room for what it grows by (a growing array is copied: both are held a moment).
                guard makeRoom((target - before) * Self.recordBytes, nowNanos: now) else {
                    evictedRecords += UInt64(records.count - offset)
                    return
                }
                bot.open.reserveCapacity(target)
                bytes += (bot.open.capacity - before) * Self.recordBytes
                _ = makeRoom(0, nowNanos: now)  // the allocator may have given a little more
            }
            let take = min(records.count - offset, min(bot.open.capacity, Self.chunkRecords) - bot.open.count)
            bot.append(
                UnsafeBufferPointer(rebasing: records[offset..<offset + take]), source: source,
                lane: UInt32(truncatingIfNeeded: lane), floorNanos: floor, nowNanos: now)
            recordCount += take
            offset += take
            // Full: sealed at once, so that the budget can let it go (its storage moves with it).
            if bot.open.count >= Self.chunkRecords {
                bot.full.append(bot.sealOpen())
                fillOrder.append(bot)
            }
        }
    }

    /// Lets full chunks go, oldest first, until `extra` more bytes fit in the budget.
    /// - Returns: false when they do not (no full chunk is left: the rest are being filled).
    private func makeRoom(_ extra: Int, nowNanos now: UInt64) -> Bool {
        while bytes + extra > budgetBytes {
            if let storage = spare {
                bytes -= storage.capacity * Self.recordBytes
                spare = nil
                continue
            }
            guard !fillOrder.isEmpty else { return false }
            evictOldest(nowNanos: now, forBudget: true)
        }
        return true
    }

    /// Lets the oldest full chunk go; for the budget, its records still within the retention are
    /// counted as evicted.
    private func evictOldest(nowNanos now: UInt64, forBudget: Bool) {
        let bot = fillOrder.removeFirst()
        var chunk = bot.full.removeFirst()
        recordCount -= chunk.records.count
        if forBudget {
            let cutoff = now > retentionNanos ? now - retentionNanos : 0
            if chunk.firstNanos >= cutoff {
                evictedRecords += UInt64(chunk.records.count)
            } else if chunk.lastNanos >= cutoff {
                evictedRecords += UInt64(chunk.records.reduce(0) { $0 + ($1.record.timestamp_ns >= cutoff ? 1 : 0) })
            }
        }
        // Kept for the next chunk, unless a capture holds it (or a spare is kept already).
        if spare == nil, chunk.records.capacity >= Self.chunkRecords, isKnownUniquelyReferenced(&chunk) {
            spare = chunk.recycle()
        } else {
            bytes -= chunk.records.capacity * Self.recordBytes
        }
    }

    /// Lets go of what is older than the retention (not a loss), forgets bots that hold nothing,
    /// and computes the span held; at most every `sweepIntervalNanos` unless `whole`.
    func sweep(nowNanos now: UInt64, whole: Bool = false) {
        guard whole || now &- lastSweepNanos >= Self.sweepIntervalNanos else { return }
        lastSweepNanos = now
        let cutoff = now > retentionNanos ? now - retentionNanos : 0
        while let bot = fillOrder.first, let chunk = bot.full.first, chunk.lastNanos < cutoff {
            evictOldest(nowNanos: now, forBudget: false)
        }
        var oldest: UInt64?
        for (name, bot) in bots {
            if !bot.open.isEmpty, bot.openLastNanos < cutoff {
                bytes -= bot.open.capacity * Self.recordBytes
                recordCount -= bot.dropOpen()
            }
            if bot.isEmpty {
                bytes -= bot.open.capacity * Self.recordBytes
                _ = bot.dropOpen()
                bot.isRetired = true
                bots[name] = nil
            } else if let held = bot.oldestNanos {
                oldest = min(oldest ?? held, held)
                bot.forgetSourcesGone()
            }
        }
        oldestNanos = oldest
        if recordCount == 0, let storage = spare {  // nothing recorded lately: no chunk to begin soon
            bytes -= storage.capacity * Self.recordBytes
            spare = nil
        }
    }

    /// What the snapshot shows (the span as of the last sweep).
    var figures: RecorderStats {
        var stats = RecorderStats()
        stats.bytes = bytes
        stats.bytesLimit = budgetBytes
        stats.records = recordCount
        stats.retentionSeconds = Double(retentionNanos) / 1e9
        stats.secondsHeld = oldestNanos.map { Double(lastSweepNanos &- min(lastSweepNanos, $0)) / 1e9 } ?? 0
        stats.evictedRecords = evictedRecords
        return stats
    }

    /// Each bot's records that may fall in `from...to`, as chunks in drain order: the full ones
    /// shared (no copy), the one being filled copied. A record's own time decides whether it is
    /// in the span; a chunk's span only says it may hold some.
    func records(fromNanos from: UInt64, toNanos to: UInt64) -> [RecordedBot] {
        bots.values.sorted { $0.name < $1.name }.compactMap { bot in
            var chunks = bot.full.elements.filter { $0.overlaps(fromNanos: from, toNanos: to) }
            if !bot.open.isEmpty, bot.openLastNanos >= from, bot.openFirstNanos <= to {
                // A copy of its own: shared, the drain's next append would copy it into storage of
                // another capacity than the one `bytes` counts.
                let copy = ContiguousArray(bot.open[bot.open.indices])
                chunks.append(RecordedChunk(records: copy, firstNanos: bot.openFirstNanos, lastNanos: bot.openLastNanos))
            }
            return chunks.isEmpty ? nil : RecordedBot(bot: bot.name, sources: bot.sources, chunks: chunks)
        }
    }
}

/// One bot's recorded chunks, as `Recorder.records(fromNanos:toNanos:)` hands them out.
package struct RecordedBot: Sendable {
    package var bot: String
    /// Its files, by the id their records carry (`TraceRecord.source`).
    package var sources: [UInt32: RecordedSource]
    package var chunks: [RecordedChunk]
}
