import CRingside
import Ringside
@testable import RingsideCollector
import RingsideTrace
import Testing

private let second: UInt64 = 1_000_000_000

/// A value record of metric 0, or (`exemplar`) an exemplar part whose time field holds label bytes.
private func record(time: UInt64, sequence: UInt64, exemplar: Bool = false, flags: UInt8 = 0) -> RingRecord {
    var record = RingRecord()
    record.metric = 0
    record.kind = exemplar ? ExemplarAssembler.exemplarKind : MetricKind.histogram.rawValue
    record.timestamp_ns = exemplar ? 0x4131_3D64_695F_7265 : time  // "er_id=1A": nowhere near the span
    record.value = sequence
    record.sequence = sequence
    record.flags = flags
    record.exemplar_length = exemplar ? 0 : (flags != 0 ? 8 : 0)
    return record
}

/// A capture job of one bot, one file, one lane holding `records`, over `from...to` around `at`.
private func job(_ records: [RingRecord], from: UInt64, to: UInt64, at: UInt64) -> CaptureWriter.Job {
    let entries = ContiguousArray(records.map { TraceRecord(source: 7, lane: 2, record: $0) })
    let chunk = RecordedChunk(records: entries, firstNanos: from, lastNanos: to)
    let source = RecordedSource(ring: "bot", pid: 42, isWorker: false)
    return CaptureWriter.Job(
        id: 1, kind: "request", baseName: "capture", fromNanos: from, toNanos: to, atNanos: at,
        bots: [RecordedBot(bot: "bot", sources: [7: source], chunks: [chunk])], wallClockOffsetNanos: 0, threadSamples: [])
}

@Suite("captures: the desk's rate limit, and the records a capture takes")
struct CaptureTests {
    @Test("a trigger makes one capture per interval, each trigger on its own; the rest are counted as suppressed")
    func rateLimitPerTrigger() {
        let desk = CaptureDesk(minIntervalNanos: 60 * second)
        let now = 1_000 * second
        #expect(desk.submit(.request, nowNanos: now) == .accepted(id: 1))
        #expect(desk.submit(.request, nowNanos: now + 10 * second) == .suppressed(retryAfterNanos: 50 * second))
        #expect(desk.submit(.botDied("a"), nowNanos: now + 10 * second) == .accepted(id: 2))
        #expect(desk.submit(.botDied("b"), nowNanos: now + 10 * second) == .accepted(id: 3))
        #expect(desk.submit(.botDied("a"), nowNanos: now + 20 * second) == .suppressed(retryAfterNanos: 50 * second))
        desk.finished(3)
        #expect(desk.submit(.request, nowNanos: now + 60 * second) == .accepted(id: 4))
        let taken = desk.take()
        #expect(taken.requests.map(\.id) == [1, 2, 3, 4])
        #expect(taken.suppressed == ["request": 1, "bot_died": 1])
        #expect(desk.take().requests.isEmpty)
    }

    @Test("at most four captures are made at once: a fifth is answered busy and counted, and room comes back as they finish")
    func inFlightBound() {
        let desk = CaptureDesk(minIntervalNanos: second)
        let now = 1_000 * second
        for bot in 0..<CaptureDesk.maxInFlight {
            guard case .accepted = desk.submit(.botStopped("\(bot)"), nowNanos: now) else {
                Issue.record("capture \(bot) refused")
                return
            }
        }
        #expect(desk.submit(.request, nowNanos: now) == .busy)
        desk.finished(1)
        #expect(desk.submit(.request, nowNanos: now) == .accepted(id: UInt64(CaptureDesk.maxInFlight) + 1))
        #expect(desk.take().suppressed == ["request": 1])
    }

    @Test("records outside the span are left out; an exemplar's parts go with their value record, whatever their time field holds")
    func spanAndExemplars() throws {
        let records = [
            record(time: 5 * second, sequence: 0, flags: UInt8(RS_FLAG_EXEMPLAR)),  // before the span, with its exemplar
            record(time: 0, sequence: 1, exemplar: true),
            record(time: 10 * second, sequence: 2, flags: UInt8(RS_FLAG_EXEMPLAR)),  // in it, with its exemplar
            record(time: 0, sequence: 3, exemplar: true),
            record(time: 11 * second, sequence: 4),
            record(time: 13 * second, sequence: 5),  // after it
        ]
        let input = CaptureWriter.traceInput(of: job(records, from: 9 * second, to: 12 * second, at: 10 * second), maxRecords: 1_000)
        #expect(input.records.map(\.record.sequence) == [2, 3, 4])
        #expect(input.records.allSatisfy { $0.source == 0 && $0.lane == 2 }, "renumbered from the recorder's id 7")
        #expect(input.leftOut == 0)
        let source = try #require(input.sources.first)
        #expect(input.sources.count == 1 && source.ringName == "bot" && source.pid == 42 && !source.isWorker)
    }

    @Test("past --capture-max-records, the records nearest the trigger are kept, in their order, and the rest counted")
    func nearestTheTriggerKept() {
        let records = (0..<10).map { record(time: UInt64($0) * second, sequence: UInt64($0)) }
        let input = CaptureWriter.traceInput(of: job(records, from: 0, to: 9 * second, at: 6 * second), maxRecords: 3)
        #expect(input.records.map(\.record.sequence) == [5, 6, 7])
        #expect(input.leftOut == 7)
    }

    @Test("bounds and the SLO option parse; what is wrong is said")
    func parsing() throws {
        let bound = try CaptureBound(parsing: "order_fill_latency{symbol=\"AAPL\"}>5ms")
        #expect(bound.selector.metric == "order_fill_latency" && bound.selector.labels == ["symbol": "AAPL"])
        #expect(bound.threshold(in: .microseconds) == 5_000 && bound.threshold(in: .bytes) == nil)
        #expect(try CaptureBound(parsing: "queue_depth>1000").threshold(in: .none) == 1_000)
        #expect(throws: SLORule.ParseError.self) { try CaptureBound(parsing: "order_fill_latency<5ms") }
        #expect(throws: SLORule.ParseError.self) { try CaptureBound(parsing: "order_fill_latency>fast") }
        #expect(try SLORule(parsing: "lat:p99<1ms@1m capture severity=P0").capture)
        #expect(try !SLORule(parsing: "lat:p99<1ms@1m").capture)
    }
}
