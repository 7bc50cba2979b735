import CRingside
import Ringside
import RingsideExport
import RingsideTestSupport
import RingsideTrace
import Testing

@Suite("the trace's model and its encodings")
struct TraceBuilderTests {
    static let latency = MetricDescriptor(
        index: 0, name: "fill", kind: .histogram, unit: .microseconds, encodedLabels: "venue=X", help: "", sampleEvery: 1)
    static let level = MetricDescriptor(index: 1, name: "level", kind: .gauge, unit: .none, encodedLabels: "", help: "", sampleEvery: 1)
    static let slippage = MetricDescriptor(
        index: 2, name: "slippage", kind: .histogram, unit: .none, encodedLabels: "", help: "", sampleEvery: 1, isSigned: true, scale: -2)

    static func record(
        _ metric: UInt32, kind: UInt8, value: UInt64, time: UInt64, sequence: UInt64, flags: UInt8 = 0, length: UInt16 = 0
    )
        -> RingRecord
    {
        var record = RingRecord()
        record.metric = metric
        record.kind = kind
        record.value = value
        record.timestamp_ns = time
        record.sequence = sequence
        record.flags = flags
        record.exemplar_length = length
        return record
    }

    @Test("a time is a slice ending at its record with its exemplar; a gauge and a signed value are exact counter samples")
    func mapping() {
        // Monotonic 5 s is wall 1,000,000,005 s: the origin is that whole second.
        let offset: UInt64 = 1_000_000_000 * 1_000_000_000
        let source = TraceSource(
            ringName: "bot", bot: "bot", pid: 42, isWorker: false, metrics: [Self.latency, Self.level, Self.slippage],
            threadNames: ["", "fills"], wallClockOffsetNanos: offset)
        let histogram = UInt8(RS_KIND_HISTOGRAM.rawValue), gauge = UInt8(RS_KIND_GAUGE.rawValue)
        let records = [
            TraceRecord(
                source: 0, lane: 1,
                record: Self.record(0, kind: histogram, value: 250, time: 5_000_300_000, sequence: 7, flags: 2, length: 10)),
            TraceRecord(source: 0, lane: 1, record: .exemplarPart("order_id=A", sequence: 8)),
            TraceRecord(source: 0, lane: 0, record: Self.record(1, kind: gauge, value: (2.5).bitPattern, time: 5_000_400_000, sequence: 0)),
            TraceRecord(
                source: 0, lane: 0,
                record: Self.record(
                    2, kind: histogram, value: UInt64(bitPattern: -350) ^ RS_OFFSET_BINARY_BIAS, time: 5_000_500_000, sequence: 1)),
            TraceRecord(source: 0, lane: 0, record: Self.record(9, kind: histogram, value: 1, time: 5_000_600_000, sequence: 2)),
        ]
        let model = TraceBuilder.build(sources: [source], records: records)
        #expect(model.originRealtimeNanos == offset + 5_000_000_000)
        #expect(model.processes.map(\.name) == ["bot bot (pid 42)"])
        #expect(model.processes[0].threads.map(\.name) == ["lane 0", "fills"])
        #expect(model.slices.count == 1)
        let slice = model.slices[0]
        #expect(slice.name == "fill{venue=\"X\"}" && slice.lane == 1)
        #expect(slice.startNanos == 50_000 && slice.durationNanos == 250_000)
        #expect(slice.args.map(\.key) == ["value", "exemplar.order_id"] && slice.args.map(\.value) == ["250 us", "A"])
        #expect(model.counters.map(\.name) == ["level", "slippage"])
        #expect(model.counters.map(\.value.text) == ["2.5", "-3.5"])
        #expect(model.unreadableRecords == 1, "the record of a metric the registry does not have")

        let json = ChromeTraceJSON.encode(model)
        #expect(json.contains(#""ph":"X","cat":"ringside","name":"fill{venue=\"X\"}","pid":42,"tid":1,"ts":50.000,"dur":250.000"#))
        #expect(json.contains(#""name":"slippage","pid":42,"ts":500.000,"args":{"value":-3.5}"#))
        #expect(json.contains(#""name":"thread_name","pid":42,"tid":1,"args":{"name":"fills"}"#))

        let log = TraceHistogramLog.encode(
            sources: [source], records: records, originRealtimeNanos: model.originRealtimeNanos, program: "test")
        let lines = log.split(separator: "\n").filter { $0.hasPrefix("Tag=") }
        #expect(lines.count == 1 && lines[0].hasPrefix("Tag=bot.fill{venue=X}@us,0.000,1.000,250.0,"), "\(log)")
        #expect(HdrHistogramEncoding.decode(base64: String(lines[0].split(separator: ",").last!))?.totalCount == 1)
    }

    @Test("the protobuf trace holds a track per process, thread and counter, and a begin and end per slice")
    func perfetto() {
        let source = TraceSource(
            ringName: "bot", bot: "bot", pid: 42, isWorker: false, metrics: [Self.latency, Self.level], threadNames: ["main"],
            wallClockOffsetNanos: 0)
        let records = [
            TraceRecord(
                source: 0, lane: 0,
                record: Self.record(0, kind: UInt8(RS_KIND_HISTOGRAM.rawValue), value: 3, time: 2_000_000_000, sequence: 0)),
            TraceRecord(
                source: 0, lane: 0,
                record: Self.record(1, kind: UInt8(RS_KIND_GAUGE.rawValue), value: (1.0).bitPattern, time: 2_000_000_001, sequence: 1)),
        ]
        let bytes = PerfettoTrace.encode(TraceBuilder.build(sources: [source], records: records))
        // Trace.packet (field 1, length-delimited) throughout: 3 descriptors, 2 slice events, 1 counter sample.
        var packets = 0, position = 0
        while position < bytes.count {
            #expect(bytes[position] == 0x0A)
            var length = 0, shift = 0
            position += 1
            while true {
                let byte = Int(bytes[position])
                position += 1
                length |= (byte & 0x7f) << shift
                shift += 7
                if byte < 0x80 { break }
            }
            position += length
            packets += 1
        }
        #expect(position == bytes.count && packets == 6)
    }

    @Test("slices that overlap without nesting go on rows of their own; nested ones share a row; every end closes the slice begun last")
    func rows() {
        let source = TraceSource(
            ringName: "bot", bot: "bot", pid: 7, isWorker: false, metrics: [Self.latency], threadNames: ["t"], wallClockOffsetNanos: 0)
        let histogram = UInt8(RS_KIND_HISTOGRAM.rawValue)
        // In us, ending at (ms) 10, 12, 9, 20: [0, 10] holds [8, 9]; [2, 12] overlaps [0, 10]; [15, 20] follows.
        let ends: [UInt64] = [10, 12, 9, 20], values: [UInt64] = [10_000, 10_000, 1_000, 5_000]
        let records = zip(ends, values).enumerated().map { index, pair in
            TraceRecord(
                source: 0, lane: 0,
                record: Self.record(0, kind: histogram, value: pair.1, time: 1_000_000_000 + pair.0 * 1_000_000, sequence: UInt64(index)))
        }
        let model = TraceBuilder.build(sources: [source], records: records)
        #expect(model.processes[0].threads.map(\.rows) == [2])
        #expect(model.processes[0].threads[0].name(row: 1) == "t #2")
        let placed = model.slices.map { ($0.startNanos / 1_000_000, $0.row) }
        #expect(placed.map(\.0) == [0, 2, 8, 15] && placed.map(\.1) == [0, 1, 0, 0], "\(placed)")
        #expect(ChromeTraceJSON.encode(model).contains(#""name":"thread_name","pid":7,"tid":65536,"args":{"name":"t #2"}"#))
    }
}
