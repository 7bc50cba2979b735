import CRingside
import Foundation
import Ringside
import RingsideTrace

/// The record reader (`RecordReader.swift`: `RecordCheck`, `ExemplarAssembler`) and the trace
/// built from records (`TraceFiles`: the post-mortem's and the captures' Chrome JSON, Perfetto
/// protobuf and HdrHistogram log), fed records of any bytes in lanes, as a drain hands them over.
///
/// The input: a byte `m` (metrics `(m & 0x7F) % 9`; bit 7: the registry could not be read), then 3
/// bytes a metric (kind, or an entry that did not decode; unit and sign; scale), 8 bytes of the
/// file's wall-clock offset, then 33 bytes a record: its lane (bits 0-1; bit 7 keeps the record's
/// own `sequence`, else it is the lane's cursor, as a sound record's is) and its 32 bytes.
/// Checks: an exemplar put back together is one the producer's check (`Bot.Exemplar`) takes, of
/// the length its value said; the calls gathered beside the records (`GatherPlacement`) are all
/// placed, each at a value of its lane and metric; the trace's JSON is JSON.
enum RecordTarget {
    static let target = FuzzTarget(
        name: "records",
        covers: "records of any bytes: the record checks, exemplar reassembly, the trace files",
        run: run,
        seeds: seeds)

    static func run(_ bytes: [UInt8]) {
        func finding(_ what: String) -> Never { FuzzFinding.report("records", what) }
        var input = FuzzBytes(bytes)
        let head = input.byte()
        let metrics = (0..<Int((head & 0x7F) % 9)).map { index in metric(index, &input) }
        let offset = input.take(8).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        var cursors = [UInt64](repeating: 0, count: 4)
        var records: [TraceRecord] = []
        while !input.isAtEnd {
            let place = input.byte()
            let lane = Int(place & 3)
            var record = input.take(32).withUnsafeBytes { $0.loadUnaligned(as: RingRecord.self) }
            if place & 0x80 == 0 { record.sequence = cursors[lane] }
            records.append(TraceRecord(source: 0, lane: UInt32(lane), record: record))
            cursors[lane] &+= 1
        }
        check(records, metrics: head >= 0x80 ? nil : metrics, finding: finding)
        checkPlacement(records, calls: offset >> 48, latest: offset & 0xFFFF, finding: finding)
        let source = TraceSource(
            ringName: "fuzz", bot: "fuzz", pid: 4242, isWorker: false, metrics: metrics,
            threadNames: ["main", "", "ордер", "x\"y\\z"], wallClockOffsetNanos: offset)
        let trace = TraceFiles(sources: [source], records: records, program: "ringside-fuzz")
        for file in trace.files where file.suffix == ".trace.json" {
            if (try? JSONSerialization.jsonObject(with: Data(file.bytes))) == nil {
                finding("the trace's JSON is not JSON: \(String(decoding: file.bytes.prefix(300), as: UTF8.self))")
            }
        }
    }

    /// A registry entry from 3 bytes: nil when its first is 0xF0 or more (an entry that does not decode).
    private static func metric(_ index: Int, _ input: inout FuzzBytes) -> MetricDescriptor? {
        let (kindByte, form, scaleByte) = (input.byte(), input.byte(), input.byte())
        guard kindByte < 0xF0 else { return nil }
        let kind = [MetricKind.counter, .gauge, .histogram][Int(kindByte % 3)]
        let unit = MetricUnit(rawValue: form % 6) ?? .none
        let signed = kind == .histogram && form & 0x40 != 0
        let scale = kind == .gauge ? 0 : Int8(Int(scaleByte % 37) - 18)
        return MetricDescriptor(
            index: UInt32(index), name: "m\(index)", kind: kind, unit: unit, encodedLabels: index % 2 == 0 ? "" : "k=v\nq=\"",
            help: "", sampleEvery: UInt32(form >> 7) + 1, isSigned: signed, scale: scale)
    }

    /// Each lane's records through `RecordCheck`, and exemplars put back together as the drain does.
    private static func check(_ records: [TraceRecord], metrics: [MetricDescriptor?]?, finding: (String) -> Never) {
        var recordCheck = RecordCheck(metrics: metrics)
        var exemplars = ExemplarAssembler()
        var lengths: [Int: Int] = [:]
        for (index, traced) in records.enumerated() {
            let record = traced.record, lane = Int(traced.lane)
            _ = recordCheck.problem(with: record, at: record.sequence, lane: lane)
            if record.isExemplarPart {
                if case .complete(_, _, _, let labels) = exemplars.take(record, at: record.sequence, lane: lane) {
                    guard (try? Bot.Exemplar(encoded: labels)) != nil else {
                        finding("record \(index): an exemplar the producer refuses: \(labels)")
                    }
                    if labels.utf8.count != lengths[lane] {
                        finding("record \(index): an exemplar of \(labels.utf8.count) bytes from a value that said \(lengths[lane] ?? 0)")
                    }
                }
                continue
            }
            _ = exemplars.abandon(lane: lane)
            if record.kind == MetricKind.histogram.rawValue, record.carriesExemplar,
                exemplars.begin(record, at: record.sequence, lane: lane, slot: index)
            {
                lengths[lane] = Int(record.exemplar_length)
            }
        }
    }

    /// Places `calls` gathered calls of each lane and metric beside the valid histogram records
    /// (the drain's way: each lane's records a batch, the calls taken after them, then the lanes
    /// drained): every call is placed, at a value a record of its lane and metric carried (a call
    /// left over, which `placeUnclaimed` hands without its lane: of its metric) or at the cell's
    /// `latest`.
    private static func checkPlacement(_ records: [TraceRecord], calls: UInt64, latest: UInt64, finding: (String) -> Never) {
        var placement = GatherPlacement()
        var values: [[UInt64]: Set<UInt64>] = [:]  // by [lane, metric]
        var placed: UInt64 = 0
        func count(_ value: UInt64, _ calls: UInt64, lane: Int, metric: UInt32, orLatest: Bool = false) {
            guard values[[UInt64(lane), UInt64(metric)]]?.contains(value) == true || (orLatest && value == latest) else {
                finding("lane \(lane), metric \(metric): a call placed at \(value), no record's\(orLatest ? " nor the cell's" : "")")
            }
            placed += calls
        }
        for lane in 0..<4 {
            let batch = records.filter { $0.lane == lane }.map(\.record)
            batch.withUnsafeBufferPointer { batch in
                for (cursor, record) in batch.enumerated() {
                    values[[UInt64(lane), UInt64(record.metric)], default: []].insert(record.value)
                    let histogram = MetricKind.histogram
                    guard record.kind == histogram.rawValue, record.fault(at: UInt64(cursor), registeredAs: histogram) == nil else {
                        continue
                    }
                    let earlier = UnsafeBufferPointer(rebasing: batch[..<cursor])
                    placement.placeBeside(record, after: earlier, firstCursor: 0, lane: lane, timeNanos: 0) { value, calls in
                        count(value, calls, lane: lane, metric: record.metric)
                    }
                }
            }
        }
        for key in values.keys {
            let (lane, metric) = (Int(key[0]), UInt32(key[1]))
            placement.take(GatheredCalls(calls: calls, sum: 0, max: 0, latest: latest), metric: Int(metric), lane: lane) {
                value, _, calls in count(value, calls, lane: lane, metric: metric)
            }
        }
        placement.placeUnclaimed(isDrained: { _ in true }) { metric, value, calls in
            let lane = (0..<4).first { values[[UInt64($0), UInt64(metric)]]?.contains(value) == true } ?? 0
            count(value, calls, lane: lane, metric: UInt32(metric), orLatest: true)
        }
        if placed != calls * UInt64(values.count) {
            finding("\(placed) calls placed of \(calls * UInt64(values.count)) taken")
        }
    }

    /// Lanes as a producer writes them: histograms (a span, a weight, an exemplar of two parts),
    /// a gauge; and the same records out of place.
    static func seeds() throws -> [FuzzSeed] {
        let metrics: [UInt8] = [3, 2, 0x01, 18, 1, 0x00, 18, 2, 0x42, 16]  // a histogram (ns), a gauge, a signed histogram
        let offset = withUnsafeBytes(of: UInt64(1_700_000_000_000_000_000).littleEndian) { Array($0) }
        func record(
            _ lane: UInt8, _ time: UInt64, _ value: UInt64, metric: UInt32, kind: UInt8, flags: UInt8 = 0, length: UInt16 = 0
        ) -> [UInt8] {
            var record = RingRecord()
            (record.timestamp_ns, record.value, record.metric, record.kind) = (time, value, metric, kind)
            (record.flags, record.exemplar_length) = (flags, length)
            return [lane] + withUnsafeBytes(of: record) { Array($0) }
        }
        let exemplar = Array("order_id=A-17\ntrace=4bf92f3577b3".utf8)  // 32 bytes: two parts
        func part(_ lane: UInt8, _ bytes: ArraySlice<UInt8>) -> [UInt8] {
            let padded = Array(bytes) + [UInt8](repeating: 0, count: 16 - bytes.count)
            let time = padded[0..<8].withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
            let value = padded[8..<16].withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
            return record(lane, time, value, metric: 0, kind: UInt8(RS_KIND_EXEMPLAR.rawValue))
        }
        let histogram = UInt8(RS_KIND_HISTOGRAM.rawValue), gauge = UInt8(RS_KIND_GAUGE.rawValue)
        let span = UInt8(RS_FLAG_SPAN), withExemplar = UInt8(RS_FLAG_EXEMPLAR)
        var chunks = [
            record(0, 1_000_000, 1_500, metric: 0, kind: histogram),
            record(0, 2_000_000, 250_000, metric: 0, kind: histogram, flags: span),
            record(1, 2_500_000, 0x4004_0000_0000_0000, metric: 1, kind: gauge),  // 2.5
            record(0, 3_000_000, 7, metric: 0, kind: histogram, flags: 3 << 4),  // weight 8
            record(1, 3_100_000, 99, metric: 0, kind: histogram, flags: withExemplar, length: UInt16(exemplar.count)),
            part(1, exemplar[0..<16]), part(1, exemplar[16...]),
            record(2, 3_200_000, RS_OFFSET_BINARY_BIAS &- 350, metric: 2, kind: histogram),  // -350 steps
        ]
        let lanes = chunks.flatMap { $0 }
        chunks.swapAt(4, 5)  // an exemplar's part before its value
        let outOfPlace = chunks.flatMap { $0 }
        return [
            FuzzSeed("lanes", metrics + offset + lanes),
            FuzzSeed("unreadable-registry", [0x83] + metrics.dropFirst() + offset + lanes),
            FuzzSeed("out-of-place", metrics + offset + outOfPlace),
            FuzzSeed("empty", []),
        ]
    }
}
