import CRingside
import Ringside
@testable import RingsideCollector
import RingsideTrace
import Testing

/// A value record of metric 0 at `time`, with an exemplar of `exemplarBytes` bytes when not 0.
private func value(_ value: UInt64, at time: UInt64, sequence: UInt64, exemplarBytes: UInt16 = 0) -> RingRecord {
    RingRecord(
        timestamp_ns: time, value: value, sequence: sequence, metric: 0, kind: MetricKind.histogram.rawValue,
        flags: exemplarBytes > 0 ? UInt8(RS_FLAG_EXEMPLAR) : 0, exemplar_length: exemplarBytes)
}

/// A value's exemplar `text` as its exemplar records, after the value's at `sequence`: 16 of its
/// bytes each, the first 8 in the time field (so no time: "order_id" read as a number).
private func exemplarRecords(_ text: String, after sequence: UInt64) -> [RingRecord] {
    var bytes = Array(text.utf8)
    bytes += Array(repeating: 0, count: (16 - bytes.count % 16) % 16)
    func word(_ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * $1) } }
    return stride(from: 0, to: bytes.count, by: 16).enumerated().map { index, at in
        RingRecord(
            timestamp_ns: word(at), value: word(at + 8), sequence: sequence + 1 + UInt64(index), metric: 0,
            kind: UInt8(RS_KIND_EXEMPLAR.rawValue), flags: 0, exemplar_length: 0)
    }
}

/// A job over one bot's `chunks` (lane 0 of source 0 unless given), the span `from...to`, the trigger at `at`.
private func job(_ chunks: [[TraceRecord]], from: UInt64, to: UInt64, at: UInt64) -> CaptureWriter.Job {
    let sealed = chunks.map { records in
        let times = records.map(\.record.timestamp_ns).map { min(max($0, from / 2), to * 2) }  // clamped, as the recorder does
        return RecordedChunk(records: ContiguousArray(records), firstNanos: times.min() ?? 0, lastNanos: times.max() ?? 0)
    }
    return CaptureWriter.Job(
        id: 1, kind: "request", baseName: "capture", fromNanos: from, toNanos: to, atNanos: at,
        bots: [RecordedBot(bot: "b", sources: [0: RecordedSource(ring: "b", pid: 1, isWorker: false)], chunks: sealed)],
        wallClockOffsetNanos: 0, threadSamples: [])
}

private func lane0(_ records: [RingRecord], lane: UInt32 = 0) -> [TraceRecord] {
    records.map { TraceRecord(source: 0, lane: lane, record: $0) }
}

@Suite("CaptureWriter: the records of a capture's span, exemplars with their values")
struct CaptureWriterTests {
    @Test(
        "a value in the span keeps its exemplar records (whose time field is exemplar bytes), also those drained later into a chunk past the span; a value outside keeps none"
    )
    func exemplarsGoWithTheirValues() {
        // Lane 0: a value at 150 with a 20-byte exemplar (2 records), the second drained after
        // lane 1's record into a chunk past the span; then a value at 900 (outside) with its own.
        let order = "order_id=1234567890A"
        let parts = exemplarRecords(order, after: 0), later = exemplarRecords("order_id=7", after: 3)
        let first = lane0([value(7, at: 150, sequence: 0, exemplarBytes: 20), parts[0]]) + lane0([value(8, at: 160, sequence: 0)], lane: 1)
        let second =
            lane0([parts[1], value(9, at: 900, sequence: 3, exemplarBytes: 10)] + later) + lane0([value(10, at: 950, sequence: 1)], lane: 1)
        #expect(parts[0].timestamp_ns > 200 && parts.count == 2 && later.count == 1)
        let input = CaptureWriter.traceInput(of: job([first, second], from: 100, to: 200, at: 150), maxRecords: 1000)
        #expect(input.records.map(\.record.sequence) == [0, 1, 0, 2])
        #expect(input.records.map(\.lane) == [0, 0, 1, 0])
        #expect(input.leftOut == 0)
        // Read back as a trace: the value's exemplar is whole.
        let metric = MetricDescriptor(
            index: 0, name: "fill", kind: .histogram, unit: .nanoseconds, encodedLabels: "", help: "", sampleEvery: 1)
        let source = TraceSource(
            ringName: "b", bot: "b", pid: 1, isWorker: false, metrics: [metric], threadNames: ["t"], wallClockOffsetNanos: 0)
        let model = TraceBuilder.build(sources: [source], records: input.records)
        #expect(model.slices.count == 2 && model.unreadableRecords == 0)
        #expect(model.slices.first { $0.durationNanos == 7 }?.args.first { $0.key == "exemplar.order_id" }?.value == "1234567890A")
    }

    @Test(
        "past --capture-max-records: the values nearest the trigger, each whole with its exemplar records, those as near as the farthest kept together; the rest counted left out"
    )
    func maxRecordsKeepsValuesWhole() {
        // 100 values 1 ns apart, each with a 40-byte exemplar (3 records): 400 records; room for 50.
        var records: [RingRecord] = []
        for index in 0..<100 {
            let sequence = UInt64(records.count)
            records.append(value(UInt64(index), at: 1_000 + UInt64(index), sequence: sequence, exemplarBytes: 40))
            records += exemplarRecords("order_id=" + String(repeating: "7", count: 31), after: sequence)
        }
        let input = CaptureWriter.traceInput(of: job([lane0(records)], from: 1_000, to: 2_000, at: 1_050), maxRecords: 50)
        // 12 values of 4 records would fill 48 of the 50, but the 12th (1044) is as far as 1056,
        // which would not fit: both are left out, and the 11 from 1045 to 1055 kept.
        #expect(input.records.count == 44 && input.leftOut == 400 - 44)
        let kept = input.records.filter { $0.record.kind != UInt8(RS_KIND_EXEMPLAR.rawValue) }.map(\.record.value)
        #expect(kept == Array(45...55), "\(kept)")
        for (offset, entry) in input.records.enumerated() where offset % 4 != 0 {
            #expect(entry.record.kind == UInt8(RS_KIND_EXEMPLAR.rawValue), "a value's exemplar records follow it, whole")
        }
    }
}
