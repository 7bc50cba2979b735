import CRingside
import Foundation
import Ringside
@testable import RingsideCollector
import RingsideExport
import RingsideSnapshot
import RingsideTestSupport
import Testing

/// `count` records of metric 0 stamped `timeNanos`, their sequences from `first`.
private func records(_ count: Int, timeNanos: UInt64, first: UInt64 = 0) -> [RingRecord] {
    (0..<count).map { index in
        RingRecord(
            timestamp_ns: timeNanos, value: UInt64(index), sequence: first + UInt64(index), metric: 0,
            kind: MetricKind.histogram.rawValue, flags: 0, exemplar_length: 0)
    }
}

/// Hands `batch` to the recorder as a drain does: from the lane's own buffer.
private func record(_ batch: [RingRecord], _ recorder: Recorder, bot: String, source: UInt32 = 0, lane: Int = 0, nowNanos now: UInt64) {
    batch.withUnsafeBufferPointer { recorder.record($0, into: recorder.recording(ofBot: bot), source: source, lane: lane, nowNanos: now) }
}

private let second: UInt64 = 1_000_000_000
private let chunkBytes = Recorder.chunkRecords * Recorder.recordBytes

/// A recorder within a 1 MiB budget, filled batch by batch and checked after each, and how many
/// records it was handed.
private struct FilledRecorder {
    let budget = 1 << 20
    let recorder: Recorder
    private(set) var written = 0

    init(retentionNanos: UInt64) { recorder = Recorder(retentionNanos: retentionNanos, budgetBytes: budget) }

    /// Hands `batch` to the recorder (see `record`); the budget is never exceeded.
    mutating func fill(_ batch: [RingRecord], bot: String, nowNanos now: UInt64, sourceLocation: SourceLocation = #_sourceLocation) {
        record(batch, recorder, bot: bot, nowNanos: now)
        written += batch.count
        #expect(recorder.bytes <= budget, sourceLocation: sourceLocation)
    }

    /// Some records were let go of, and every one is counted: held and evicted make what was written.
    func expectEvictionsCounted(sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(recorder.evictedRecords > 0, sourceLocation: sourceLocation)
        #expect(recorder.recordCount + Int(recorder.evictedRecords) == written, sourceLocation: sourceLocation)
    }
}

@Suite("Recorder: the last seconds of raw records per bot, within a byte budget")
struct RecorderTests {
    @Test("records older than the retention go at a sweep, uncounted; newer ones stay, in drain order with source and lane")
    func retentionBySeconds() {
        let recorder = Recorder(retentionNanos: second, budgetBytes: 16 << 20)
        let start: UInt64 = 100 * second
        record(records(5_000, timeNanos: start), recorder, bot: "a", lane: 2, nowNanos: start)
        record(
            records(100, timeNanos: start + 2 * second, first: 5_000), recorder, bot: "a", source: 1, lane: 3, nowNanos: start + 2 * second)
        recorder.sweep(nowNanos: start + 2 * second, whole: true)
        // The full chunk's records are all older than 1 s; the open chunk holds one newer record.
        #expect(recorder.recordCount == 5_100 - Recorder.chunkRecords)
        let held = recorder.records(fromNanos: 0, toNanos: .max)
        #expect(held.map(\.bot) == ["a"])
        let kept = held.flatMap { $0.chunks.flatMap(\.records) }
        #expect(kept.count == recorder.recordCount)
        #expect(kept.map(\.record.sequence) == Array(UInt64(Recorder.chunkRecords)..<5_100))
        #expect(kept.prefix(5_000 - Recorder.chunkRecords).allSatisfy { $0.source == 0 && $0.lane == 2 })
        #expect(kept.suffix(100).allSatisfy { $0.source == 1 && $0.lane == 3 })
        #expect(recorder.figures.secondsHeld == 2, "the oldest record held is 2 s old")
        recorder.sweep(nowNanos: start + 3 * second + 1, whole: true)
        #expect(recorder.recordCount == 0 && recorder.bytes == 0)
        #expect(recorder.evictedRecords == 0, "age is not a loss")
        #expect(recorder.records(fromNanos: 0, toNanos: .max).isEmpty, "a bot that holds nothing is forgotten")
    }

    @Test("a record's time outside the drain's retention and now is clamped for its chunk's span")
    func untrustedTimesAreClamped() {
        let recorder = Recorder(retentionNanos: 10 * second, budgetBytes: 16 << 20)
        let now: UInt64 = 100 * second
        record(records(1, timeNanos: 0) + records(1, timeNanos: .max, first: 1), recorder, bot: "a", nowNanos: now)
        let chunk = recorder.records(fromNanos: 0, toNanos: .max)[0].chunks[0]
        #expect(chunk.firstNanos == now - 10 * second && chunk.lastNanos == now)
        #expect(chunk.records.count == 2)
    }

    @Test("the budget is never exceeded; every record it lets go of within the retention is counted, exactly")
    func budgetHeldAndEvictionsCounted() {
        var filled = FilledRecorder(retentionNanos: 60 * second)
        let recorder = filled.recorder, budget = filled.budget
        var now: UInt64 = 100 * second
        for batch in 0..<200 {
            filled.fill(records(1_000 + batch % 7, timeNanos: now, first: UInt64(filled.written)), bot: "a", nowNanos: now)
            now += 1_000_000
            recorder.sweep(nowNanos: now)
        }
        filled.expectEvictionsCounted()
        let written = filled.written
        #expect(recorder.bytes > budget - 2 * chunkBytes, "the budget is used")
        #expect(recorder.figures.bytes == recorder.bytes && recorder.figures.bytesLimit == budget)
        // What is held is the newest, in order.
        let kept = recorder.records(fromNanos: 0, toNanos: .max).flatMap { $0.chunks.flatMap(\.records) }
        #expect(kept.map(\.record.sequence) == Array(UInt64(written - kept.count)..<UInt64(written)))
    }

    @Test("records past the retention when the budget lets them go are not counted as lost")
    func budgetEvictionOfOldRecordsIsNotALoss() {
        let recorder = Recorder(retentionNanos: 10 * second, budgetBytes: 1 << 20)
        let start: UInt64 = 100 * second
        // Six full chunks of records 1 s old, then, 20 s later, enough to need their room.
        record(records(6 * Recorder.chunkRecords, timeNanos: start - second), recorder, bot: "old", nowNanos: start)
        let later = start + 20 * second
        record(records(2 * Recorder.chunkRecords, timeNanos: later), recorder, bot: "new", nowNanos: later)
        #expect(recorder.bytes <= 1 << 20)
        #expect(recorder.evictedRecords == 0)
        // Now the newest bot's own chunks go for the budget, within the retention: counted.
        record(records(6 * Recorder.chunkRecords, timeNanos: later), recorder, bot: "new", nowNanos: later)
        #expect(recorder.bytes <= 1 << 20)
        #expect(recorder.evictedRecords > 0)
        let held = recorder.records(fromNanos: 0, toNanos: .max).flatMap { $0.chunks.flatMap(\.records) }.count
        #expect(recorder.recordCount == held)
        #expect(Int(recorder.evictedRecords) == 8 * Recorder.chunkRecords - held)
    }

    @Test("records a full budget of chunks being filled has no room for are counted as evicted, not kept")
    func noRoomIsCounted() {
        var filled = FilledRecorder(retentionNanos: 10 * second)
        let now: UInt64 = 100 * second
        // Each bot fills its open chunk up to just below a whole one: nothing is full, so nothing can go.
        for bot in 0..<10 { filled.fill(records(Recorder.chunkRecords - 1, timeNanos: now), bot: "bot-\(bot)", nowNanos: now) }
        filled.expectEvictionsCounted()
    }

    @Test("a file's id is never another's; a file none of whose records is held is forgotten")
    func sourceIDs() {
        let recorder = Recorder(retentionNanos: second, budgetBytes: 16 << 20)
        let start: UInt64 = 100 * second
        let bot = recorder.recording(ofBot: "a")
        let first = bot.add(RecordedSource(ring: "a", pid: 10, isWorker: false), nowNanos: start)
        let worker = bot.add(RecordedSource(ring: "a@11", pid: 11, isWorker: true), nowNanos: start)
        #expect(first != worker)
        record(records(Recorder.chunkRecords, timeNanos: start), recorder, bot: "a", source: first, nowNanos: start)
        bot.sources[first]?.lastDrainNanos = start
        // Later, only the bot's own file records: the worker's (gone) is forgotten once none of its records is held.
        let later = start + 2 * second
        record(records(10, timeNanos: later), recorder, bot: "a", source: first, nowNanos: later)
        bot.sources[first]?.lastDrainNanos = later
        recorder.sweep(nowNanos: later, whole: true)
        #expect(bot.sources.keys.sorted() == [first])
        let next = bot.add(RecordedSource(ring: "a@12", pid: 12, isWorker: true), nowNanos: later)
        #expect(next != first && next != worker, "a new file gets a new id")
        #expect(recorder.records(fromNanos: 0, toNanos: .max)[0].sources.keys.sorted() == [first, next])
    }

    @Test("a chunk a capture holds is never reused when the recorder lets it go; one no one holds is, within the budget")
    func heldChunksSurviveEviction() {
        let budget = 1 << 20
        let recorder = Recorder(retentionNanos: 60 * second, budgetBytes: budget)
        let now: UInt64 = 100 * second
        record(records(6 * Recorder.chunkRecords, timeNanos: now), recorder, bot: "a", nowNanos: now)
        let held = recorder.records(fromNanos: 0, toNanos: .max)[0].chunks
        let before = held.map { $0.records.map(\.record.sequence) }
        // Eighteen chunks more: every one held above is let go of, and the later ones reused.
        for round in 1...18 {
            record(records(Recorder.chunkRecords, timeNanos: now, first: UInt64(round) << 32), recorder, bot: "a", nowNanos: now)
            #expect(recorder.bytes <= budget)
        }
        #expect(held.map { $0.records.map(\.record.sequence) } == before, "the capture's chunks are as they were")
        let kept = recorder.records(fromNanos: 0, toNanos: .max)[0].chunks
        #expect(!kept.contains { chunk in held.contains { $0 === chunk } })
        #expect(
            kept.allSatisfy { chunk in
                chunk.records.map(\.record.sequence) == chunk.records.indices.map { (chunk.records[0].record.sequence) + UInt64($0) }
            })
        #expect(recorder.recordCount + Int(recorder.evictedRecords) == 24 * Recorder.chunkRecords)
    }

    @Test("a chunk let go of, by age or for the budget, is freed at once (or reused): the bytes counted are the bytes held")
    func evictedChunksAreFreed() {
        let recorder = Recorder(retentionNanos: second, budgetBytes: 1 << 20)
        let start: UInt64 = 100 * second
        record(records(2 * Recorder.chunkRecords, timeNanos: start), recorder, bot: "a", nowNanos: start)
        weak let byAge = recorder.records(fromNanos: 0, toNanos: .max)[0].chunks[0]
        weak let second2 = recorder.records(fromNanos: 0, toNanos: .max)[0].chunks[1]
        recorder.sweep(nowNanos: start + 2 * second, whole: true)
        #expect(byAge == nil && second2 == nil, "aged out: freed")
        #expect(recorder.bytes == 0 && recorder.recordCount == 0)
        let later = start + 10 * second
        record(records(6 * Recorder.chunkRecords, timeNanos: later), recorder, bot: "a", nowNanos: later)
        weak let oldest = recorder.records(fromNanos: 0, toNanos: .max)[0].chunks[0]
        #expect(oldest != nil)
        record(records(2 * Recorder.chunkRecords, timeNanos: later), recorder, bot: "a", nowNanos: later)
        #expect(oldest == nil, "let go of for the budget: freed, its storage reused")
        #expect(recorder.bytes <= 1 << 20)
    }

    @Test("full chunks are handed out shared, not copied; the chunk being filled as a copy; by their span")
    func chunksHandedOutCheaply() {
        let recorder = Recorder(retentionNanos: 60 * second, budgetBytes: 16 << 20)
        let start: UInt64 = 100 * second
        record(records(Recorder.chunkRecords, timeNanos: start), recorder, bot: "a", nowNanos: start)
        record(records(Recorder.chunkRecords, timeNanos: start + second), recorder, bot: "a", nowNanos: start + second)
        record(records(10, timeNanos: start + 2 * second), recorder, bot: "a", nowNanos: start + 2 * second)
        let first = recorder.records(fromNanos: 0, toNanos: .max)[0].chunks
        let again = recorder.records(fromNanos: 0, toNanos: .max)[0].chunks
        #expect(first.count == 3)
        #expect(first[0] === again[0] && first[1] === again[1], "the full chunks are the recorder's own")
        #expect(first[2] !== again[2], "the open chunk is a copy each time")
        // A copy handed out stays as it was while the recorder goes on filling, and the bytes
        // counted stay the bytes held (the open chunk's storage is the recorder's alone).
        let bytes = recorder.bytes
        record(records(5, timeNanos: start + 2 * second), recorder, bot: "a", nowNanos: start + 2 * second)
        #expect(first[2].records.count == 10)
        #expect(recorder.bytes == bytes)
        #expect(
            recorder.bytes == recorder.recording(ofBot: "a").full.elements.map(\.records.capacity).reduce(0, +) * Recorder.recordBytes
                + recorder.recording(ofBot: "a").open.capacity * Recorder.recordBytes)
        // By span: only the chunk of start + 1 s.
        let middle = recorder.records(fromNanos: start + second / 2, toNanos: start + second)[0].chunks
        #expect(middle.count == 1 && middle[0] === first[1])
        #expect(recorder.records(fromNanos: start + 3 * second, toNanos: .max).isEmpty)
    }
}

@Suite("Recorder in the collector: the drain's records kept raw, and its figures published")
struct RecorderCollectorTests {
    @Test("a bot's records are kept raw, exemplar records too, in lane order, and the figures published")
    func drainFeedsTheRecorder() throws {
        try withBot("rec", options: .init(laneCapacity: 4_096)) { directory, bot in
            let latency = try bot.histogram("latency", unit: .nanoseconds)
            for value in 1...100 { latency.record(UInt64(value)) }
            latency.record(500, exemplar: try Bot.Exemplar("order_id", "A17"))
            var options = CollectorOptions(directory: directory)
            options.recorderNanos = 60 * second
            let collector = try Collector(options: options, log: CapturedLog().log)
            let snapshot = pass(collector)
            let recorded = collector.recordedRecords(fromNanos: 0, toNanos: .max)
            #expect(recorded.map(\.bot) == ["rec"])
            let kept = recorded.flatMap { $0.chunks.flatMap(\.records) }
            #expect(Array(kept.prefix(101).map(\.record.value)) == (1...100).map { UInt64($0) } + [500])
            #expect(kept.map(\.record.sequence) == (0..<UInt64(kept.count)).map { $0 }, "every record of the lane, in order")
            #expect(kept.count > 101, "the exemplar's own records are kept after its value")
            #expect(kept.dropFirst(101).allSatisfy { $0.record.kind == ExemplarAssembler.exemplarKind })
            // The file its records came from, by their id: its name, registry and lane's thread.
            let sources = recorded[0].sources
            #expect(Set(kept.map(\.source)) == Set(sources.keys) && sources.count == 1)
            let file = try #require(sources[kept[0].source])
            #expect(file.ring == "rec" && !file.isWorker && file.pid == getpid())
            #expect(file.metrics.map(\.name) == ["latency"])
            #expect(file.threads[Int(kept[0].lane)].id == currentThreadID())
            let figures = try #require(snapshot.collector.recorder)
            #expect(figures.records == kept.count && figures.evictedRecords == 0)
            #expect(figures.bytes > 0 && figures.bytesLimit == 256 << 20 && figures.retentionSeconds == 60)
            #expect(snapshot.collector.recordsDrained == UInt64(kept.count))
        }
    }

    // The collector may attach a bot between its attach and its first registration (CI saw it:
    // a capture's trace without the bot's values). Its records drained in one batch, with none
    // after, still name their metric in the recorder.
    @Test("a bot attached before it registers its metric: the records drained after it did name that metric in the recorder")
    func registryReadAfterTheBatch() throws {
        try withBot("late", options: .init(laneCapacity: 4_096)) { directory, bot in
            _ = bot.currentThreadLane  // its lane held already: the collector's first pass adopts it
            var options = CollectorOptions(directory: directory)
            options.recorderNanos = 60 * second
            let collector = try Collector(options: options, log: CapturedLog().log)
            #expect(pass(collector).series.isEmpty, "attached, nothing registered yet")
            let latency = try bot.histogram("latency", unit: .nanoseconds)
            for value in 1...50 { latency.record(UInt64(value)) }
            // Its lane is adopted at a pass, drained at the next.
            var drained: UInt64 = 0
            for _ in 0..<5 where drained < 50 { drained = pass(collector).collector.recordsDrained }
            #expect(drained == 50)
            let recorded = collector.recordedRecords(fromNanos: 0, toNanos: .max)
            let kept = recorded.flatMap { $0.chunks.flatMap(\.records) }
            #expect(kept.map(\.record.value) == (1...50).map { UInt64($0) })
            let file = try #require(recorded.first?.sources[kept[0].source])
            #expect(file.metrics.map(\.name) == ["latency"], "the registry as it stands after the records it names")
        }
    }

    @Test("with --recorder-seconds 0 nothing is kept and nothing is exported")
    func offKeepsNothing() throws {
        try withBot("off", options: .init(laneCapacity: 1_024)) { directory, bot in
            try bot.histogram("latency").record(5)
            var options = CollectorOptions(directory: directory)
            options.recorderNanos = 0
            let collector = try Collector(options: options, log: CapturedLog().log)
            let snapshot = pass(collector)
            #expect(snapshot.collector.recordsDrained == 1)
            #expect(snapshot.collector.recorder == nil)
            #expect(collector.recordedRecords(fromNanos: 0, toNanos: .max).isEmpty)
            let page = String(decoding: PrometheusRenderer().render(snapshot, format: .text), as: UTF8.self)
            #expect(page.contains("ringside_collector_records_drained_total 1"))
            #expect(!page.contains("ringside_recorder_"))
        }
    }
}
