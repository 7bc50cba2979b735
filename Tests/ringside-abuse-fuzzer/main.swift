// The reader fuzzer of the abuse tests: builds valid bot files (format 2: a header, a registry,
// metric cells, and lanes of per-thread records with their own cursors and cells) with the real
// producer API, from several threads, damages copies of them in thousands of targeted and random
// ways (every field of the header, of a lane's header, lanes_allocated, the cells, the registry
// entries and the records, and the file's size), and feeds each damaged file to every
// reader (RingInspector, RingConsumer, a Collector pass and its exporters, and now and then the
// real ringside-dump), checking that each file is read correctly or refused with an error that
// names the ring and the problem. Not for users.
//
//   ringside-abuse-fuzzer --dir DIR --seed S --count N [--dump-every K] [--case-seconds T]
//                         [--known-issues include|avoid|only]
//
// --count N: at least N cases: the targeted catalogue first, then random mutations up to N.
// --known-issues: what to do with the cases that hit a library bug listed in `knownIssue(_:)`
// below (each fixed since, and kept as a regression case): include them (the default: a pure
// fuzzer), avoid them (the targeted ones are left out and random ones drawn again; the summary
// counts them), or run only the targeted ones that hit one.
//
// A process of its own, so that a crash or a hang is reported (with the case that caused it)
// instead of taking the test runner down, and so that the allocator can be watched: every
// malloc is seen (CAbuseWatch), and the largest single request is reported.
// Prints one JSON summary line on standard output; the violations found, one per line, on
// standard error. Exit 0 when there were none, 1 otherwise, 2 for a usage error.
import CAbuseWatch
import CRingside
import Dispatch
import Foundation
import Ringside
import RingsideCollector
import RingsideExport
import RingsideTestSupport  // SplitMix64 (the same sequence for the same seed on every machine), the layout's offsets, runProcess, CapturedLog

// MARK: - Arguments

func usage(_ message: String) -> Never {
    FileHandle.standardError.write(Data("ringside-abuse-fuzzer: \(message)\n".utf8))
    exit(2)
}

var settings: [String: String] = [:]
do {
    var rest = Array(CommandLine.arguments.dropFirst())[...]
    while let flag = rest.popFirst() {
        guard flag.hasPrefix("--"), let value = rest.popFirst() else { usage("expected --flag VALUE, got \(flag)") }
        settings[String(flag.dropFirst(2))] = value
    }
}
guard let directoryPath = settings["dir"] else { usage("--dir is required") }
let seed = UInt64(settings["seed"] ?? "1") ?? 1
let caseCount = Int(settings["count"] ?? "2000") ?? 2000
let dumpEvery = Int(settings["dump-every"] ?? "50") ?? 50
let caseSeconds = UInt32(settings["case-seconds"] ?? "10") ?? 10
let knownIssues = settings["known-issues"] ?? "include"
guard ["include", "avoid", "only"].contains(knownIssues) else { usage("--known-issues is include, avoid or only") }
let directory = RingDirectory(directoryPath)
let ringName = "fuzz"
let ringPath = directory.filePath(for: ringName)

// MARK: - Valid bot files to start from

/// The header of a file's bytes (zeros past the end), as a reader would copy it.
func parseHeader(_ bytes: [UInt8]) -> rs_header {
    var header = rs_header()
    withUnsafeMutableBytes(of: &header) { raw in
        for i in 0..<min(raw.count, bytes.count) { raw[i] = bytes[i] }
    }
    return header
}

/// A valid bot file's bytes and what the test knows about it: its layout, as the reader validates
/// its own header.
struct BaseRing {
    let label: String
    let bytes: [UInt8]
    let header: rs_header
    let layout: RingLayout
    let metricCount: Int

    var registryCapacity: Int { Int(layout.registryCapacity) }
    var lanes: Int { Int(header.lanes_allocated) }
    func laneStart(_ lane: Int) -> Int { layout.lanesOffset + lane * layout.laneSize }
    func entryStart(_ index: Int) -> Int { layout.registryOffset + index * Int(RS_REGISTRY_ENTRY_SIZE) }
    func recordStart(lane: Int, cursor: UInt64) -> Int {
        laneStart(lane) + layout.laneRecordsOffset + Int(cursor & (layout.capacity - 1)) * Int(RS_RECORD_SIZE)
    }
}

func readFile(_ path: String) -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else { usage("cannot read \(path)") }
    return [UInt8](data)
}

func writeFile(_ path: String, _ bytes: [UInt8]) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { usage("cannot write \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    guard written == bytes.count else { usage("short write to \(path)") }
}

/// Makes a bot file with the real producer API (Bot: several metrics of each kind, labels,
/// help, sampling), written by `threads` threads at once (a lane each, up to `maxLanes`; beyond
/// it a thread has none and its counts land in the shared cells): `before` records in all, then
/// up to `drain` drained from each lane, then `after` more from a second set of threads (which
/// take the retired lanes over, so cursors wrap). Returns its bytes.
func makeBase(
    _ label: String, capacity: Int, maxMetrics: Int, maxLanes: Int = Int(RS_DEFAULT_MAX_LANES), metrics: Int,
    threads: Int, before: Int, drain: Int, after: Int
) throws -> BaseRing {
    try? directory.remove(ringName)
    do {
        let bot = try Bot.attach(
            ringName, directory: directory.path,
            options: .init(laneCapacity: capacity, maxMetrics: maxMetrics, maxLanes: maxLanes))
        var writers: [@Sendable (UInt64) -> Void] = []
        for index in 0..<metrics {
            switch index % 3 {
            case 0:
                let histogram = try bot.histogram(
                    "fill_latency", unit: index % 2 == 0 ? .nanoseconds : .microseconds,
                    labels: ["symbol": "S\(index)", "venue": "v=\"\\ \(index)"],
                    help: "latency of fills, µs or ns", sampleEvery: index == 3 ? 4 : 1)
                writers.append { histogram.record($0) }
            case 1:
                let counter = try bot.counter(
                    "orders", labels: ["side": index % 2 == 0 ? "buy" : "sell", "n": "\(index)"],
                    help: "orders sent")
                // A counter writes no record: a histogram record beside it keeps the lanes busy.
                let beside = try bot.histogram("order_size", unit: .bytes, labels: ["n": "\(index)"])
                writers.append {
                    counter.increment(by: $0 % 7 + 1)
                    beside.record($0 % 1000)
                }
            default:
                let gauge = try bot.gauge("exposure_\(index)", unit: .bytes, help: index % 2 == 0 ? "" : "gross exposure")
                writers.append { gauge.set(Double($0) * 1.5 - 20) }
            }
        }
        let recorders = writers
        func phase(_ total: Int, start: UInt64, step: UInt64) {
            onConcurrentThreads(threads) { thread in
                var value = UInt64(thread)
                while value < UInt64(total) {
                    recorders[Int(value) % recorders.count](start + value * step)
                    value += UInt64(threads)
                }
            }
        }
        phase(before, start: 1, step: 1_000)
        if drain > 0 {
            let consumer = try RingConsumer(ringName, directory: directory)
            try consumer.drain(limitPerLane: drain) { _, _, _ in }
        }
        phase(after, start: 3, step: 977)
    }
    let bytes = readFile(ringPath)
    let header = parseHeader(bytes)
    let layout: RingLayout
    do { layout = try RingLayout(validating: header, fileSize: bytes.count) } catch {
        usage("base \(label) is not a valid bot file: \(error)")
    }
    return BaseRing(label: label, bytes: bytes, header: header, layout: layout, metricCount: Int(header.metric_count))
}

// MARK: - Mutations

/// What a damaged file must lead to.
enum Expectation: CustomStringConvertible {
    /// Either outcome is acceptable, as long as it is one of them.
    case any
    /// Read without error.
    case readable
    /// Refused (or reported as not ready), with a message containing this text.
    case refused(String)

    var description: String {
        switch self {
        case .any: return "any"
        case .readable: return "readable"
        case let .refused(text): return "refused(\(text))"
        }
    }
}

struct Mutation {
    var description: String
    var expectation: Expectation
    var apply: (inout [UInt8]) -> Void
}

func load<T: FixedWidthInteger>(_ bytes: [UInt8], _ offset: Int, as: T.Type) -> T {
    var value: T = 0
    withUnsafeMutableBytes(of: &value) { raw in
        for i in 0..<MemoryLayout<T>.size where offset + i >= 0 && offset + i < bytes.count { raw[i] = bytes[offset + i] }
    }
    return T(littleEndian: value)
}

func store<T: FixedWidthInteger>(_ bytes: inout [UInt8], _ offset: Int, _ value: T) {
    withUnsafeBytes(of: value.littleEndian) { raw in
        for i in 0..<raw.count where offset + i >= 0 && offset + i < bytes.count { bytes[offset + i] = raw[i] }
    }
}

/// A field of the header, a lane's header, a cell, a registry entry or a record: where it is and how wide.
struct Field {
    let name: String
    let offset: Int
    let width: Int
}

/// The header's layout line: written once by the creator; every field is checked by the readers.
let layoutFields: [Field] = [
    Field(name: "magic", offset: headerOffset(\.magic), width: 8),
    Field(name: "version", offset: headerOffset(\.version), width: 4),
    Field(name: "header_size", offset: headerOffset(\.header_size), width: 4),
    Field(name: "record_size", offset: headerOffset(\.record_size), width: 4),
    Field(name: "capacity_log2", offset: headerOffset(\.capacity_log2), width: 4),
    Field(name: "registry_capacity", offset: headerOffset(\.registry_capacity), width: 4),
    Field(name: "registry_entry_size", offset: headerOffset(\.registry_entry_size), width: 4),
    Field(name: "registry_offset", offset: headerOffset(\.registry_offset), width: 8),
    Field(name: "cells_offset", offset: headerOffset(\.cells_offset), width: 8),
    Field(name: "lanes_offset", offset: headerOffset(\.lanes_offset), width: 8),
    Field(name: "lane_size", offset: headerOffset(\.lane_size), width: 8),
    Field(name: "lane_records_offset", offset: headerOffset(\.lane_records_offset), width: 4),
    Field(name: "max_lanes", offset: headerOffset(\.max_lanes), width: 4),
    Field(name: "metric_cell_size", offset: headerOffset(\.metric_cell_size), width: 4),
    Field(name: "lane_header_size", offset: headerOffset(\.lane_header_size), width: 4),
]
/// The producer's counts that the readers depend on.
let lanesAllocatedField = Field(name: "lanes_allocated", offset: headerOffset(\.lanes_allocated), width: 4)
let metricCountOffset = headerOffset(\.metric_count)
/// Header fields a reader shows but does not depend on.
let informationalFields: [Field] = [
    Field(name: "created_realtime_ns", offset: headerOffset(\.created_realtime_ns), width: 8),
    Field(name: "created_monotonic_ns", offset: headerOffset(\.created_monotonic_ns), width: 8),
    Field(name: "layout_reserved", offset: headerOffset(\.layout_reserved), width: 8),
    Field(name: "heartbeat_ns", offset: headerOffset(\.heartbeat_ns), width: 8),
    Field(name: "producer_start_ns", offset: headerOffset(\.producer_start_ns), width: 8),
    Field(name: "producer_pid", offset: headerOffset(\.producer_pid), width: 4),
    Field(name: "producer_attaches", offset: headerOffset(\.producer_attaches), width: 4),
    Field(name: "lanes_exhausted", offset: headerOffset(\.lanes_exhausted), width: 8),
    Field(name: "sample_above", offset: headerOffset(\.sample_above), width: 4),
    Field(name: "producer_reserved", offset: headerOffset(\.producer_reserved), width: 8),
    Field(name: "consumer_pid", offset: headerOffset(\.consumer_pid), width: 4),
    Field(name: "weights_reader_pid", offset: headerOffset(\.weights_reader_pid), width: 4),
    Field(name: "consumer_heartbeat_ns", offset: headerOffset(\.consumer_heartbeat_ns), width: 8),
    Field(name: "consumer_reserved", offset: headerOffset(\.consumer_reserved), width: 8),
    Field(name: "header_page_tail", offset: Int(RS_HEADER_SIZE) - 8, width: 8),
]
/// A lane header's fields besides the cursors: shown by readers, never trusted for an offset.
let laneInformationalFields: [Field] = [
    Field(name: "dropped_total", offset: laneHeaderOffset(\.dropped_total), width: 8),
    Field(name: "heartbeat_ns", offset: laneHeaderOffset(\.heartbeat_ns), width: 8),
    Field(name: "state", offset: laneHeaderOffset(\.state), width: 4),
    Field(name: "owner_tid", offset: laneHeaderOffset(\.owner_tid), width: 4),
    Field(name: "claims", offset: laneHeaderOffset(\.claims), width: 4),
    Field(name: "producer_reserved", offset: laneHeaderOffset(\.producer_reserved), width: 8),
    Field(name: "consumer_heartbeat_ns", offset: laneHeaderOffset(\.consumer_heartbeat_ns), width: 8),
    Field(name: "consumer_reserved", offset: laneHeaderOffset(\.consumer_reserved), width: 8),
]
let writeCursorField = Field(name: "write_cursor", offset: laneHeaderOffset(\.write_cursor), width: 8)
let readCursorField = Field(name: "read_cursor", offset: laneHeaderOffset(\.read_cursor), width: 8)
/// A metric's shared cell.
let metricCellFields: [Field] = [
    Field(name: "gauge_bits", offset: metricCellOffset(\.gauge_bits), width: 8),
    Field(name: "gauge_set", offset: metricCellOffset(\.gauge_set), width: 8),
    Field(name: "unlaned", offset: metricCellOffset(\.unlaned), width: 8),
    Field(name: "clamped", offset: metricCellOffset(\.clamped), width: 8),
    Field(name: "exemplars_refused", offset: metricCellOffset(\.exemplars_refused), width: 8),
]

let entryFields: [Field] = [
    Field(name: "index", offset: entryOffset(\.index), width: 4),
    Field(name: "kind", offset: entryOffset(\.kind), width: 1),
    Field(name: "unit", offset: entryOffset(\.unit), width: 1),
    Field(name: "gauge_merge", offset: entryOffset(\.gauge_merge), width: 1),
    Field(name: "form", offset: entryOffset(\.form), width: 1),
    Field(name: "sample_every", offset: entryOffset(\.sample_every), width: 4),
    Field(name: "name_length", offset: entryOffset(\.name_length), width: 2),
    Field(name: "labels_length", offset: entryOffset(\.labels_length), width: 2),
    Field(name: "help_length", offset: entryOffset(\.help_length), width: 2),
    Field(name: "scale", offset: entryOffset(\.scale), width: 1),
]
let recordFields: [Field] = [
    Field(name: "timestamp_ns", offset: recordOffset(\.timestamp_ns), width: 8),
    Field(name: "value", offset: recordOffset(\.value), width: 8),
    Field(name: "sequence", offset: recordOffset(\.sequence), width: 8),
    Field(name: "metric", offset: recordOffset(\.metric), width: 4),
    Field(name: "kind", offset: recordOffset(\.kind), width: 1),
    Field(name: "flags", offset: recordOffset(\.flags), width: 1),
    Field(name: "exemplar_length", offset: recordOffset(\.exemplar_length), width: 2),
]

func read(_ bytes: [UInt8], _ field: Field, at base: Int = 0) -> UInt64 {
    switch field.width {
    case 1: return UInt64(load(bytes, base + field.offset, as: UInt8.self))
    case 2: return UInt64(load(bytes, base + field.offset, as: UInt16.self))
    case 4: return UInt64(load(bytes, base + field.offset, as: UInt32.self))
    default: return load(bytes, base + field.offset, as: UInt64.self)
    }
}

func write(_ bytes: inout [UInt8], _ field: Field, at base: Int = 0, _ value: UInt64) {
    switch field.width {
    case 1: store(&bytes, base + field.offset, UInt8(truncatingIfNeeded: value))
    case 2: store(&bytes, base + field.offset, UInt16(truncatingIfNeeded: value))
    case 4: store(&bytes, base + field.offset, UInt32(truncatingIfNeeded: value))
    default: store(&bytes, base + field.offset, value)
    }
}

/// The values tried on a field: 0, the maximum, one off each way, the high bit, and random.
func interestingValues(original: UInt64, width: Int, rng: inout SplitMix64) -> [(String, UInt64)] {
    let max = width == 8 ? UInt64.max : (UInt64(1) << UInt64(width * 8)) - 1
    let high = UInt64(1) << UInt64(width * 8 - 1)
    return [
        ("0", 0), ("max", max), ("+1", (original &+ 1) & max), ("-1", (original &- 1) & max),
        ("high bit", original ^ high), ("random", rng.next() & max),
    ]
}

/// What the specification (`ringside.h`) says a reader must make of a file whose registry
/// entries and records are sound, whatever its header, lanes' cursors and size say: the checks
/// in the order the readers make them. An independent statement of the format's rules, so the
/// targeted cases test the readers against it rather than against themselves.
func specVerdict(_ bytes: [UInt8]) -> Expectation {
    let size = bytes.count
    guard size > 0 else { return .refused("being created") }
    guard size >= Int(RS_HEADER_SIZE) else { return .refused("truncated") }
    let h = parseHeader(bytes)
    if h.version == 0 && (h.magic == 0 || h.magic == RS_MAGIC) { return .refused("being created") }
    guard h.magic == RS_MAGIC else { return .refused("bad magic") }
    guard (RS_FORMAT_VERSION_MIN...RS_FORMAT_VERSION).contains(h.version) else {
        return .refused("unsupported format version \(h.version)")
    }
    let fixed: [(String, UInt64, UInt64)] = [
        ("header_size", UInt64(h.header_size), UInt64(RS_HEADER_SIZE)), ("record_size", UInt64(h.record_size), UInt64(RS_RECORD_SIZE)),
        ("registry_entry_size", UInt64(h.registry_entry_size), UInt64(RS_REGISTRY_ENTRY_SIZE)),
        ("metric_cell_size", UInt64(h.metric_cell_size), UInt64(RS_METRIC_CELL_SIZE)),
        ("lane_header_size", UInt64(h.lane_header_size), UInt64(RS_LANE_HEADER_SIZE)),
    ]
    for (field, value, expected) in fixed where value != expected { return .refused("bad layout: \(field)") }
    guard (RS_MIN_CAPACITY_LOG2...RS_MAX_CAPACITY_LOG2).contains(h.capacity_log2) else { return .refused("bad layout: capacity_log2") }
    guard (1...RS_MAX_REGISTRY_CAPACITY).contains(h.registry_capacity) else { return .refused("bad layout: registry_capacity") }
    guard (1...RS_MAX_LANES).contains(h.max_lanes) else { return .refused("bad layout: max_lanes") }
    let g = rs_geometry_of(h.capacity_log2, h.registry_capacity)
    let derived: [(String, UInt64, UInt64)] = [
        ("registry_offset", h.registry_offset, g.registry_offset), ("cells_offset", h.cells_offset, g.cells_offset),
        ("lanes_offset", h.lanes_offset, g.lanes_offset), ("lane_size", h.lane_size, g.lane_size),
        ("lane_records_offset", UInt64(h.lane_records_offset), UInt64(g.lane_records_offset)),
    ]
    for (field, value, expected) in derived where value != expected { return .refused("bad layout: \(field)") }
    guard UInt64(size) >= g.lanes_offset else { return .refused("truncated") }
    guard h.lanes_allocated <= h.max_lanes else { return .refused("bad layout: lanes_allocated") }
    guard UInt64(size) >= g.lanes_offset + UInt64(h.lanes_allocated) * g.lane_size else { return .refused("truncated") }
    let capacity = UInt64(1) << UInt64(h.capacity_log2)
    for lane in 0..<Int(h.lanes_allocated) {
        let start = Int(g.lanes_offset) + lane * Int(g.lane_size)
        let readCursor = read(bytes, readCursorField, at: start), writeCursor = read(bytes, writeCursorField, at: start)
        guard readCursor <= writeCursor, writeCursor - readCursor <= capacity else { return .refused("cursors out of range") }
    }
    guard h.metric_count <= h.registry_capacity else { return .refused("metric count") }
    return .readable
}

/// The targeted catalogue for one base file: every header field, every lane's cursors and the
/// other fields of its header, lanes_allocated, the metric count, the cells, every field of the
/// registry entries and their strings, the fields of the records, and the file's size.
func targetedMutations(_ base: BaseRing, rng: inout SplitMix64) -> [Mutation] {
    var list: [Mutation] = []
    let bytes = base.bytes
    /// A mutation judged by the specification's model.
    func judged(_ description: String, _ apply: @escaping (inout [UInt8]) -> Void) -> Mutation {
        var copy = bytes
        apply(&copy)
        return Mutation(description: description, expectation: specVerdict(copy), apply: apply)
    }
    for field in layoutFields {
        for (label, value) in interestingValues(original: read(bytes, field), width: field.width, rng: &rng) {
            list.append(judged("header \(field.name) = \(label) (\(value))") { write(&$0, field, value) })
        }
    }
    // The choices a layout is derived from, changed with their derived fields made to agree: a
    // sound layout of another shape, read (or refused by its cursors) by the rules of that shape.
    for (label, log2) in [("capacity x2", base.header.capacity_log2 + 1), ("capacity / 2", base.header.capacity_log2 - 1)] {
        list.append(
            judged("header capacity_log2 = \(label), lane_size to agree") { bytes in
                let g = rs_geometry_of(log2, base.header.registry_capacity)
                store(&bytes, headerOffset(\.capacity_log2), log2)
                store(&bytes, headerOffset(\.lane_size), g.lane_size)
            })
    }
    for (label, value) in [("lanes allocated", UInt32(base.lanes)), ("1", 1), ("1024", RS_MAX_LANES)] where value >= 1 {
        list.append(judged("header max_lanes = \(label) (\(value))") { store(&$0, headerOffset(\.max_lanes), value) })
    }
    for field in informationalFields {
        for (label, value) in interestingValues(original: read(bytes, field), width: field.width, rng: &rng) {
            list.append(
                Mutation(description: "header \(field.name) = \(label) (\(value))", expectation: .readable) {
                    write(&$0, field, value)
                })
        }
    }
    // lanes_allocated: fewer lanes, more than the file holds, more than max_lanes; and one more
    // lane appended to the file, zeroed (sound: a lane never claimed) or of garbage.
    for (label, value) in interestingValues(original: UInt64(base.lanes), width: 4, rng: &rng)
        + [("max_lanes", UInt64(base.header.max_lanes)), ("max_lanes + 1", UInt64(base.header.max_lanes) + 1)]
    {
        list.append(judged("lanes_allocated = \(label) (\(value))") { write(&$0, lanesAllocatedField, value) })
    }
    if base.lanes < Int(base.header.max_lanes) {
        let laneSize = base.layout.laneSize, lanes = UInt64(base.lanes)
        list.append(
            Mutation(description: "a zeroed lane appended and allocated", expectation: .readable) {
                $0 += [UInt8](repeating: 0, count: laneSize)
                write(&$0, lanesAllocatedField, lanes + 1)
            })
        let garbage = (0..<laneSize).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        list.append(
            judged("a lane of random bytes appended and allocated") {
                $0 += garbage
                write(&$0, lanesAllocatedField, lanes + 1)
            })
        var sound = garbage
        store(&sound, readCursorField.offset, UInt64(7))
        store(&sound, writeCursorField.offset, UInt64(7) + base.layout.capacity)
        list.append(
            Mutation(description: "a lane of random bytes with sound cursors appended and allocated", expectation: .readable) {
                [sound] bytes in
                bytes += sound
                write(&bytes, lanesAllocatedField, lanes + 1)
            })
    }
    // Each lane's cursors, alone and together, and the other fields of its header.
    for lane in Set([0, base.lanes - 1]) where lane >= 0 && lane < base.lanes {
        let start = base.laneStart(lane)
        let read0 = read(bytes, readCursorField, at: start), write0 = read(bytes, writeCursorField, at: start)
        var pairs: [(String, UInt64, UInt64)] = [
            ("read > write", write0 + 1, write0), ("write - read = capacity + 1", read0, read0 + base.layout.capacity + 1),
            ("write - read = capacity", read0, read0 + base.layout.capacity), ("read = write", write0, write0),
            ("both huge, equal", .max, .max), ("both huge, 5 apart", .max - 5, .max), ("write huge", read0, .max),
            ("read huge", .max, write0), ("write 0", read0, 0), ("read 0", 0, write0),
            ("shifted by 2^63", read0 &+ (1 << 63), write0 &+ (1 << 63)),
        ]
        for _ in 0..<4 {
            let r = rng.next()
            pairs.append(("random", r, r &+ rng.next() % (2 * base.layout.capacity + 2)))
        }
        for (label, read, write) in pairs {
            list.append(
                judged("lane \(lane) cursors \(label) (read \(read), write \(write))") {
                    store(&$0, start + readCursorField.offset, read)
                    store(&$0, start + writeCursorField.offset, write)
                })
        }
        for field in laneInformationalFields {
            for (label, value) in interestingValues(original: read(bytes, field, at: start), width: field.width, rng: &rng) {
                list.append(
                    Mutation(description: "lane \(lane) \(field.name) = \(label) (\(value))", expectation: .readable) {
                        write(&$0, field, at: start, value)
                    })
            }
        }
        // The lane's cells: a counter's increments or another metric's drops, whatever they say.
        for metric in Set([0, base.metricCount - 1]) where metric >= 0 {
            let cell = Field(name: "cell", offset: start + Int(RS_LANE_HEADER_SIZE) + metric * 8, width: 8)
            for (label, value) in interestingValues(original: read(bytes, cell), width: 8, rng: &rng) {
                list.append(
                    Mutation(description: "lane \(lane) cell of metric \(metric) = \(label) (\(value))", expectation: .readable) {
                        write(&$0, cell, value)
                    })
            }
        }
    }
    // The metric cells: any gauge value (NaN and infinities included), set or not, any unlaned count.
    for metric in Set([0, 2, base.metricCount - 1]) where metric >= 0 && metric < base.registryCapacity {
        let cell = base.layout.cellsOffset + metric * Int(RS_METRIC_CELL_SIZE)
        for field in metricCellFields {
            var values = interestingValues(original: read(bytes, field, at: cell), width: 8, rng: &rng)
            if field.name == "gauge_bits" {
                values += [
                    ("NaN", Double.nan.bitPattern), ("+Inf", Double.infinity.bitPattern),
                    ("-Inf", (-Double.infinity).bitPattern), ("-0", (-0.0).bitPattern),
                    ("subnormal", Double.leastNonzeroMagnitude.bitPattern),
                ]
            }
            for (label, value) in values {
                list.append(
                    Mutation(description: "metric \(metric) cell \(field.name) = \(label) (\(value))", expectation: .readable) {
                        write(&$0, field, at: cell, value)
                        if field.name == "gauge_bits" { store(&$0, cell + metricCellOffset(\.gauge_set), UInt64(1)) }
                    })
            }
        }
    }
    for (label, value) in interestingValues(original: UInt64(base.metricCount), width: 4, rng: &rng)
        + [("capacity", UInt64(base.registryCapacity)), ("capacity + 1", UInt64(base.registryCapacity + 1))]
    {
        var copy = bytes
        store(&copy, metricCountOffset, UInt32(truncatingIfNeeded: value))
        var expectation = specVerdict(copy)
        if case .readable = expectation, value > UInt64(base.metricCount) { expectation = .refused("registry entry \(base.metricCount)") }
        list.append(
            Mutation(description: "metric_count = \(label) (\(value))", expectation: expectation) {
                store(&$0, metricCountOffset, UInt32(truncatingIfNeeded: value))
            })
    }
    // Registry entries: every field, and the strings' bytes.
    for index in Set([0, base.metricCount - 1]) where index >= 0 {
        let entry = base.entryStart(index)
        for field in entryFields {
            for (label, value) in interestingValues(original: read(bytes, field, at: entry), width: field.width, rng: &rng) {
                list.append(
                    Mutation(
                        description: "entry \(index) \(field.name) = \(label) (\(value))",
                        expectation: .any
                    ) { write(&$0, field, at: entry, value) })
            }
        }
        let strings: [(String, Int, Int)] = [
            ("name", entryOffset(\.name), Int(read(bytes, entryFields[5], at: entry))),
            ("labels", entryOffset(\.labels), Int(read(bytes, entryFields[6], at: entry))),
            ("help", entryOffset(\.help), Int(read(bytes, entryFields[7], at: entry))),
        ]
        let replacements: [(String, [UInt8])] = [
            ("0xFF", [0xFF]), ("NUL", [0]), ("newline", [10]), ("'='", [61]), ("digit", [0x39]), ("'-'", [0x2D]),
            ("overlong UTF-8", [0xC0, 0x80]), ("a UTF-16 surrogate", [0xED, 0xA0, 0x80]), ("a lone continuation", [0x80]),
            ("a truncated sequence", [0xE2, 0x82]),
        ]
        for (name, offset, length) in strings where length > 0 {
            for position in Set([0, length / 2, length - 1]) {
                for (label, replacement) in replacements {
                    list.append(
                        Mutation(description: "entry \(index) \(name)[\(position)] = \(label)", expectation: .any) {
                            for (i, byte) in replacement.enumerated() where position + i < length {
                                $0[entry + offset + position + i] = byte
                            }
                        })
                }
            }
        }
        // Labels out of order: swap the first two lines.
        let labelsStart = entry + entryOffset(\.labels)
        let labelsLength = Int(read(bytes, entryFields[6], at: entry))
        let labels = Array(bytes[labelsStart..<(labelsStart + labelsLength)])
        let lines = labels.split(separator: 10, omittingEmptySubsequences: false)
        if lines.count >= 2 {
            var swapped = Array(lines[1]) + [10] + Array(lines[0])
            for line in lines.dropFirst(2) { swapped += [10] + line }
            list.append(
                Mutation(description: "entry \(index) labels unsorted", expectation: .refused("registry entry \(index)")) {
                    [swapped] bytes in for (i, byte) in swapped.enumerated() { bytes[labelsStart + i] = byte }
                })
            let duplicated = Array(lines[0]) + [10] + Array(lines[0])
            list.append(
                Mutation(description: "entry \(index) labels with a repeated key", expectation: .refused("registry entry \(index)")) {
                    [duplicated] bytes in
                    for (i, byte) in duplicated.enumerated() where i < Int(RS_LABELS_MAX) { bytes[labelsStart + i] = byte }
                    store(&bytes, entry + entryOffset(\.labels_length), UInt16(min(duplicated.count, Int(RS_LABELS_MAX))))
                })
        }
    }
    if base.metricCount >= 2 {
        let size = Int(RS_REGISTRY_ENTRY_SIZE)
        let first = base.entryStart(0), second = base.entryStart(1)
        list.append(
            Mutation(description: "entry 0 copied over entry 1 (a duplicate metric)", expectation: .refused("registry entry 1")) {
                let copy = Array($0[first..<(first + size)])
                $0.replaceSubrange(second..<(second + size), with: copy)
            })
        list.append(
            Mutation(description: "entry 0 copied over entry 1, index fixed (a duplicate metric)", expectation: .readable) {
                let copy = Array($0[first..<(first + size)])
                $0.replaceSubrange(second..<(second + size), with: copy)
                store(&$0, second, UInt32(1))
            })
    }
    // Records: every field of the oldest and newest record of each lane that holds records.
    for lane in 0..<base.lanes {
        let start = base.laneStart(lane)
        let read0 = read(bytes, readCursorField, at: start), write0 = read(bytes, writeCursorField, at: start)
        guard write0 > read0 else { continue }
        for cursor in Set([read0, write0 - 1]) {
            let record = base.recordStart(lane: lane, cursor: cursor)
            for field in recordFields {
                var values = interestingValues(original: read(bytes, field, at: record), width: field.width, rng: &rng)
                if field.name == "metric" { values += [("count", UInt64(base.metricCount)), ("capacity", UInt64(base.registryCapacity))] }
                if field.name == "kind" { values += [("counter", 1), ("gauge", 2), ("histogram", 3), ("4", 4)] }
                if field.name == "timestamp_ns" {
                    values += [("far future", rs_clock_precise_ns() &+ 1_000_000_000_000_000), ("now", rs_clock_precise_ns()), ("1", 1)]
                }
                if field.name == "value" {
                    values += [
                        ("NaN", Double.nan.bitPattern), ("signalling NaN", Double.signalingNaN.bitPattern),
                        ("+Inf", Double.infinity.bitPattern), ("-Inf", (-Double.infinity).bitPattern),
                        ("-0", (-0.0).bitPattern), ("subnormal", Double.leastNonzeroMagnitude.bitPattern),
                        ("-max", (-Double.greatestFiniteMagnitude).bitPattern),
                    ]
                }
                for (label, value) in values {
                    list.append(
                        Mutation(
                            description: "lane \(lane) record \(cursor) \(field.name) = \(label) (\(value))",
                            expectation: .readable
                        ) {
                            write(&$0, field, at: record, value)
                        })
                }
            }
        }
    }
    // Sizes: before the header's end, before the lanes, inside the last lane, and longer (sound:
    // the file grows by whole lanes, and a lane being added makes it longer than its count says).
    for (label, size) in [
        ("empty", 0), ("1 byte", 1), ("half a header", 2048), ("the header only", 4096),
        ("one byte before the lanes", base.layout.lanesOffset - 1), ("up to the lanes", base.layout.lanesOffset),
        ("one byte short", bytes.count - 1), ("half a lane short", bytes.count - base.layout.laneSize / 2),
        ("one byte long", bytes.count + 1), ("a record long", bytes.count + 32),
        ("a lane long", bytes.count + base.layout.laneSize), ("doubled", bytes.count * 2),
    ] where size >= 0 {
        list.append(
            judged("file size \(label) (\(size) bytes)") {
                if size < $0.count { $0.removeLast($0.count - size) } else { $0 += [UInt8](repeating: 0, count: size - $0.count) }
            })
    }
    return list
}

/// A random mutation: byte flips anywhere or in one region, garbage over a range, a zeroed
/// range, a random size, or random fields of the header, a lane and an entry set to random values.
func randomMutation(_ base: BaseRing, rng: inout SplitMix64) -> Mutation {
    let size = base.bytes.count
    var regions: [(String, Range<Int>)] = [
        ("header", 0..<MemoryLayout<rs_header>.size), ("registry", base.layout.registryOffset..<base.layout.cellsOffset),
        ("metric cells", base.layout.cellsOffset..<base.layout.lanesOffset), ("anywhere", 0..<size),
    ]
    if base.lanes > 0 {
        let lane = Int(rng.next() % UInt64(base.lanes))
        let start = base.laneStart(lane)
        regions += [
            ("lane \(lane) header", start..<(start + Int(RS_LANE_HEADER_SIZE))),
            ("lane \(lane) cells", (start + Int(RS_LANE_HEADER_SIZE))..<(start + base.layout.laneRecordsOffset)),
            ("lane \(lane) records", (start + base.layout.laneRecordsOffset)..<(start + base.layout.laneSize)),
        ]
    }
    switch rng.next() % 6 {
    case 0, 1:
        let (name, range) = regions[Int(rng.next() % UInt64(regions.count))]
        let flips = (0..<Int(1 + rng.next() % 8)).map { _ in
            (range.lowerBound + Int(rng.next() % UInt64(range.count)), UInt8(truncatingIfNeeded: 1 << (rng.next() % 8)))
        }
        return Mutation(description: "\(flips.count) bit flips in the \(name) at \(flips.map(\.0))", expectation: .any) {
            for (offset, bit) in flips { $0[offset] ^= bit }
        }
    case 2:
        let (name, range) = regions[Int(rng.next() % UInt64(regions.count))]
        let start = range.lowerBound + Int(rng.next() % UInt64(range.count))
        let length = min(Int(1 + rng.next() % 64), size - start)
        let garbage = (0..<length).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        return Mutation(description: "\(length) random bytes in the \(name) at \(start)", expectation: .any) {
            $0.replaceSubrange(start..<(start + length), with: garbage)
        }
    case 3:
        let start = Int(rng.next() % UInt64(size))
        let length = min(Int(1 + rng.next() % 512), size - start)
        return Mutation(description: "\(length) bytes zeroed at \(start)", expectation: .any) {
            $0.replaceSubrange(start..<(start + length), with: [UInt8](repeating: 0, count: length))
        }
    case 4:
        let newSize = Int(rng.next() % UInt64(size * 2 + 1))
        return Mutation(description: "size \(newSize)", expectation: newSize >= size ? .readable : .any) {
            if newSize < $0.count { $0.removeLast($0.count - newSize) } else { $0 += [UInt8](repeating: 0xA5, count: newSize - $0.count) }
        }
    default:
        let all = layoutFields + informationalFields + [lanesAllocatedField]
        let field = all[Int(rng.next() % UInt64(all.count))]
        let value = rng.next() >> (rng.next() % 64)
        let laneFields = laneInformationalFields + [writeCursorField, readCursorField]
        let laneField = laneFields[Int(rng.next() % UInt64(laneFields.count))]
        let lane = base.laneStart(Int(rng.next() % UInt64(max(1, base.lanes))))
        let laneValue = rng.next() >> (rng.next() % 64)
        let entry = base.entryStart(Int(rng.next() % UInt64(max(1, base.metricCount))))
        let entryField = entryFields[Int(rng.next() % UInt64(entryFields.count))]
        let entryValue = rng.next() >> (rng.next() % 64)
        return Mutation(
            description: "header \(field.name) = \(value), lane at \(lane) \(laneField.name) = \(laneValue), "
                + "entry at \(entry) \(entryField.name) = \(entryValue)", expectation: .any
        ) {
            write(&$0, field, value)
            write(&$0, laneField, at: lane, laneValue)
            write(&$0, entryField, at: entry, entryValue)
        }
    }
}

// MARK: - Known library bugs

/// The known library bug a damaged file hits, or nil. Each is a reader crash on a file whose every
/// field the readers check is in range; each is reported, and stays here until it is fixed.
///
/// - cursor sums: `RingStatus.backlog` (Sources/Ringside/RingStatus.swift) is `writeCursor -
///   readCursor`, the lanes' cursors summed with wrapping additions (`&+=` in `status()`). Lanes
///   whose cursors are each in range (read <= write, write - read <= capacity) but whose sums wrap
///   past 2^64 differently (one lane at read = write = 2^64 - 1, another at read 0 and write 5)
///   make that subtraction trap: the inspector, the consumer's status, the collector (Collector.swift
///   reads `status.backlog`) and ringside-dump all die of SIGILL.
func knownIssue(_ bytes: [UInt8]) -> String? {
    guard bytes.count >= Int(RS_HEADER_SIZE) else { return nil }
    let h = parseHeader(bytes)
    guard h.lane_size > 0, h.lanes_offset <= UInt64(bytes.count) else { return nil }
    let fitting = (UInt64(bytes.count) - h.lanes_offset) / h.lane_size
    let lanes = Int(min(UInt64(h.lanes_allocated), fitting, UInt64(RS_MAX_LANES)))
    var reads: UInt64 = 0, writes: UInt64 = 0, readsWrapped = false, writesWrapped = false
    for lane in 0..<lanes {
        let start = Int(h.lanes_offset) + lane * Int(h.lane_size)
        let readCursor = read(bytes, readCursorField, at: start), writeCursor = read(bytes, writeCursorField, at: start)
        let r = reads.addingReportingOverflow(readCursor), w = writes.addingReportingOverflow(writeCursor)
        (reads, writes) = (r.partialValue, w.partialValue)
        readsWrapped = readsWrapped || r.overflow
        writesWrapped = writesWrapped || w.overflow
    }
    return readsWrapped || writesWrapped ? "cursor sums" : nil
}

// MARK: - Checking one file

struct Tally {
    var cases = 0
    var readable = 0
    var refused: [String: Int] = [:]
    /// Records the collector drained from the readable cases, and those it rejected.
    var recordsDrained = 0, recordsRejected = 0
    var dumpRuns = 0
    /// Cases refused because lanes_allocated exceeds max_lanes.
    var lanesRefused = 0
    /// The most lanes a readable case had, and readable cases with more than one.
    var mostLanesRead = 0, multiLaneReadable = 0
    /// The longest case's time and all cases' time.
    var maxCaseNanos: UInt64 = 0, totalCaseNanos: UInt64 = 0
    var violations: [String] = []
}

// One thread runs the cases; the tally is theirs.
nonisolated(unsafe) var tally = Tally()

func violation(_ text: String) {
    tally.violations.append(text)
    FileHandle.standardError.write(Data("violation: \(text)\n".utf8))
}

/// Records in [read, write) of every lane the collector must accept: a registered metric that is
/// not a counter (counters write no records), its kind, and the record's cursor as its sequence;
/// and, as the collector's exemplar assembler takes them (EXEMPLARS in ringside.h), the parts of
/// exemplars that follow their value as they should. What it must reject besides the rest: a
/// value with flags or an exemplar length no producer writes (`isSoundValue`), an exemplar that
/// another record cuts short, and the parts of an exemplar whose bytes are none.
func expectedValid(_ bytes: [UInt8], status: RingStatus, metrics: [MetricDescriptor]) -> (valid: Int, histogramWeight: UInt64) {
    var valid = 0
    var weight: UInt64 = 0
    let header = parseHeader(bytes)  // validated by the readers that read it
    for lane in status.lanes {
        let records = Int(header.lanes_offset) + lane.index * Int(header.lane_size) + Int(header.lane_records_offset)
        var pending: (metric: UInt32, length: Int, next: UInt64, bytes: [UInt8])?
        var cursor = lane.readCursor
        while cursor < lane.writeCursor {
            let at = records + Int(cursor & (status.capacity - 1)) * Int(RS_RECORD_SIZE)
            let metric = Int(load(bytes, at + recordOffset(\.metric), as: UInt32.self))
            let kind = bytes[at + recordOffset(\.kind)]
            let sequence = load(bytes, at + recordOffset(\.sequence), as: UInt64.self)
            let flags = bytes[at + recordOffset(\.flags)]
            let length = Int(load(bytes, at + recordOffset(\.exemplar_length), as: UInt16.self))
            defer { cursor += 1 }
            if kind == UInt8(RS_KIND_EXEMPLAR.rawValue) {
                guard var part = pending, sequence == cursor, cursor == part.next, UInt32(metric) == part.metric, flags == 0,
                    length == 0
                else {
                    pending = nil
                    continue  // a stray part: rejected
                }
                valid += 1  // a part taken: not rejected, unless its exemplar's bytes turn out to be none
                part.bytes += bytes[(at + recordOffset(\.timestamp_ns))..<(at + recordOffset(\.sequence))]
                part.next += 1
                pending = part.bytes.count >= part.length ? nil : part
                if pending == nil, !isExemplar(part.bytes, length: part.length) { valid -= (part.length + 15) / 16 }
                continue
            }
            if pending != nil {
                valid -= 1  // cut short: its exemplar is rejected, counted once
                pending = nil
            }
            if metric < metrics.count, metrics[metric].kind.rawValue == kind, metrics[metric].kind != .counter, sequence == cursor,
                isSoundValue(histogram: metrics[metric].kind == .histogram, flags: flags, exemplarLength: length)
            {
                valid += 1
                if metrics[metric].kind == .histogram {
                    // A record is one call, times its metric's sample_every (the calls gathered before it
                    // are counted from the gather cells, below: SAMPLING in ringside.h).
                    weight = saturatingAdd(weight, UInt64(metrics[metric].sampleEvery))
                    if flags & UInt8(RS_FLAG_EXEMPLAR) != 0 { pending = (UInt32(metric), length, cursor + 1, []) }
                }
            }
        }
        // A lane no consumer drained yet is counted from the start of its gather cells: each
        // histogram's calls, once its `gathered` moved (a collector reads the cells only then).
        if lane.readCursor == 0, lane.gathered != 0 {
            let cells = Int(header.lanes_offset) + lane.index * Int(header.lane_size) + Int(header.lane_gather_offset)
            for (metric, descriptor) in metrics.enumerated() where descriptor.kind == .histogram {
                let calls = load(bytes, cells + metric * Int(RS_GATHER_CELL_SIZE), as: UInt64.self)
                let (scaled, overflow) = calls.multipliedReportingOverflow(by: UInt64(descriptor.sampleEvery))
                weight = saturatingAdd(weight, overflow ? .max : scaled)
            }
        }
    }
    return (valid, weight)
}

/// Whether a value's flags and exemplar length are ones a producer writes (RECORDS in
/// ringside.h): only the span, exemplar and weight flags, only on a histogram's record, and an
/// exemplar's length of 1 to RS_EXEMPLAR_MAX with its flag, 0 without. Written here apart from
/// the reader's `RingRecord.fault`, which the collector must agree with.
func isSoundValue(histogram: Bool, flags: UInt8, exemplarLength length: Int) -> Bool {
    guard flags & ~UInt8(RS_FLAG_SPAN | RS_FLAG_EXEMPLAR | RS_FLAG_WEIGHT_MASK) == 0, flags == 0 || histogram else { return false }
    return flags & UInt8(RS_FLAG_EXEMPLAR) != 0 ? (1...Int(RS_EXEMPLAR_MAX)).contains(length) : length == 0
}

/// `a + b`, or `UInt64.max` past it: a histogram's count saturates.
func saturatingAdd(_ a: UInt64, _ b: UInt64) -> UInt64 {
    let (sum, overflow) = a.addingReportingOverflow(b)
    return overflow ? .max : sum
}

/// Whether an exemplar's parts hold one: its bytes pass the producer's check, are UTF-8, and the
/// padding after them is zero.
func isExemplar(_ parts: [UInt8], length: Int) -> Bool {
    let checked = parts.prefix(length).withUnsafeBytes { raw in
        rs_exemplar_check(raw.baseAddress?.assumingMemoryBound(to: CChar.self), length, nil) == 0
    }
    return checked && parts.dropFirst(length).allSatisfy { $0 == 0 } && String(validating: parts.prefix(length), as: UTF8.self) != nil
}

/// Whether a refusal names the ring and says what is wrong.
func refusalIsClear(_ error: RingError) -> Bool {
    switch error {
    case .corrupt(let ring, _, _), .notReady(let ring):
        let text = error.description
        return ring == ringName && text.hasPrefix("ring \(ringName): ") && text.count > "ring \(ringName): ".count + 10
    default:
        return false
    }
}

func kindName(_ error: RingError) -> String {
    switch error {
    case .corrupt(_, _, let problem):
        let text = "\(problem)"
        return "corrupt: " + String(text.prefix { $0 != ":" && !$0.isNumber }).trimmingCharacters(in: .whitespaces)
    case .notReady: return "not ready"
    default: return "other: \(error)"
    }
}

/// Runs ringside-dump with a deadline of 10 s (a hang is a finding, not a stuck fuzzer).
func runTool(_ arguments: [String]) -> ProcessRun {
    do { return try runProcess("ringside-dump", arguments, timeoutSeconds: 10) } catch {
        return ProcessRun(status: nil, output: "", errors: "cannot run ringside-dump: \(error)")
    }
}

func isRegistryEntryProblem(_ error: RingError) -> Bool {
    if case .corrupt(_, _, .badRegistryEntry) = error { return true }
    return false
}

func checkDump(_ label: String, verdict: Result<RingStatus, RingError>, collectorRejected: UInt64?) {
    tally.dumpRuns += 1
    let common = ["--dir", directory.path]
    let check = runTool(["check", ringName] + common)
    guard let checkStatus = check.status else { return violation("\(label): ringside-dump check crashed or hung: \(check.errors)") }
    if checkStatus != 0 && checkStatus != 1 { violation("\(label): ringside-dump check exited \(checkStatus)") }
    if checkStatus == 1 && !(check.output + check.errors).contains("ring \(ringName)") {
        violation("\(label): ringside-dump check failed without naming the ring: \(check.output) \(check.errors)")
    }
    if case .failure = verdict, checkStatus == 0 { violation("\(label): check says ok for a ring the readers refuse") }
    if checkStatus == 0, let rejected = collectorRejected, rejected > 0 {
        violation("\(label): check says ok, but the collector rejected \(rejected) records")
    }
    for command in [["info", ringName, "--json", "--raw"], ["records", ringName, "--json", "--raw"], ["stats", ringName, "--json"]] {
        let run = runTool(command + common)
        guard let status = run.status else {
            violation("\(label): ringside-dump \(command[0]) crashed or hung: \(run.errors)")
            continue
        }
        switch status {
        case 0:
            if (try? JSONSerialization.jsonObject(with: Data(run.output.utf8))) == nil {
                violation("\(label): ringside-dump \(command[0]) --json printed no valid JSON: \(run.output.prefix(300))")
            }
            // records and stats read around a bad registry entry (its records show as unregistered);
            // nothing reads around a bad layout, cursors or metric count.
            if case .failure(let error) = verdict, !(command[0] != "info" && isRegistryEntryProblem(error)) {
                violation("\(label): ringside-dump \(command[0]) read a ring the readers refuse: \(error)")
            }
        case 1:
            let line = run.errors.split(separator: "\n").first.map(String.init) ?? ""
            if !line.hasPrefix("ringside-dump: ring \(ringName): ") {
                violation("\(label): ringside-dump \(command[0]) failed without naming the ring: \(run.errors.prefix(300))")
            }
            if case .success = verdict { violation("\(label): ringside-dump \(command[0]) refused a readable ring: \(line)") }
        default:
            violation("\(label): ringside-dump \(command[0]) exited \(status): \(run.errors.prefix(300))")
        }
    }
}

/// Feeds one damaged file to every reader and checks what each says.
func check(_ label: String, _ bytes: [UInt8], expectation: Expectation, runDump: Bool) {
    writeFile(ringPath, bytes)
    // 1. The inspector: open, status, registry, peek.
    var verdict: Result<RingStatus, RingError>
    var metrics: [MetricDescriptor] = []
    do throws(RingError) {
        let inspector = try RingInspector(ringName, directory: directory)
        let status = try inspector.status()
        metrics = try inspector.metrics()
        let records = try inspector.peek()
        let last = try inspector.peek(last: 3)
        let recent = try inspector.peek(includingConsumed: true)
        _ = try inspector.registryEntries()
        _ = inspector.header
        for metric in metrics { _ = try inspector.cells(of: metric) }
        if records.count != Int(status.backlog) { violation("\(label): peek copied \(records.count) of \(status.backlog) records") }
        let lastExpected = status.lanes.reduce(0) { $0 + min(3, Int($1.backlog)) }
        if last.count != lastExpected { violation("\(label): peek(last: 3) copied \(last.count), expected \(lastExpected)") }
        // Consumed records are shown only where the slot's sequence names them, and never more than a lane holds.
        if let replaced = recent.first(where: { $0.consumed && $0.record.sequence != $0.cursor }) {
            violation(
                "\(label): peek(includingConsumed:) showed cursor \(replaced.cursor) from a slot of sequence \(replaced.record.sequence)")
        }
        if recent.filter({ !$0.consumed }).count != records.count || recent.count > status.lanes.count * Int(status.capacity) {
            violation("\(label): peek(includingConsumed:) copied \(recent.count), \(records.count) of them waiting")
        }
        if status.lanes.count != Int(parseHeader(bytes).lanes_allocated) {
            violation("\(label): status lists \(status.lanes.count) lanes of \(parseHeader(bytes).lanes_allocated)")
        }
        if status.writeCursor != status.lanes.reduce(0, { $0 &+ $1.writeCursor })
            || status.readCursor != status.lanes.reduce(0, { $0 &+ $1.readCursor })
        {
            violation("\(label): the bot's cursors are not its lanes' summed")
        }
        for lane in status.lanes where lane.writeCursor != lane.readCursor &+ lane.backlog {
            violation("\(label): lane \(lane.index): written != consumed + backlog")
        }
        verdict = .success(status)
    } catch {
        verdict = .failure(error)
    }
    switch verdict {
    case .success(let status):
        tally.readable += 1
        tally.mostLanesRead = max(tally.mostLanesRead, status.lanes.count)
        if status.lanes.count > 1 { tally.multiLaneReadable += 1 }
        if case .refused(let text) = expectation { violation("\(label): read, but should be refused (\(text))") }
    case .failure(let error):
        tally.refused[kindName(error), default: 0] += 1
        if case .corrupt(_, _, .badLayout(field: "lanes_allocated", _, _)) = error { tally.lanesRefused += 1 }
        if !refusalIsClear(error) { violation("\(label): unclear refusal: \(error)") }
        if case .readable = expectation { violation("\(label): refused, but should be readable: \(error)") }
        if case .refused(let text) = expectation, !text.isEmpty, !error.description.contains(text) {
            violation("\(label): refused with \"\(error)\", expected a message containing \"\(text)\"")
        }
    }

    // 2. A collector pass over the directory, and both exporters.
    var collectorRejected: UInt64?
    do {
        let captured = CapturedLog()
        let options = CollectorOptions(directory: directory)
        guard let collector = try? Collector(options: options, log: captured.log) else {
            violation("\(label): no collector for \(directory.path): another holds its lock")
            return
        }
        collector.runPass(nowNanos: rs_clock_precise_ns(), forcePublish: true)
        let snapshot = collector.snapshot
        let ring = snapshot.rings.first { $0.name == ringName }
        switch verdict {
        case .success(let status):
            if let ring, ring.state != .skipped {
                let expected = expectedValid(bytes, status: status, metrics: metrics)
                tally.recordsDrained += Int(ring.drainedTotal)
                tally.recordsRejected += Int(ring.rejectedTotal)
                collectorRejected = ring.rejectedTotal
                if ring.drainedTotal != status.backlog {
                    violation("\(label): collector drained \(ring.drainedTotal) of \(status.backlog)")
                }
                if ring.rejectedTotal != status.backlog - UInt64(expected.valid) {
                    violation("\(label): collector rejected \(ring.rejectedTotal), expected \(status.backlog - UInt64(expected.valid))")
                }
                let series = snapshot.series.filter { $0.ring == ringName }
                let counted = series.filter { $0.metric.kind == .histogram }.reduce(UInt64(0)) { saturatingAdd($0, $1.cumulativeCount) }
                if counted != expected.histogramWeight {
                    violation("\(label): histogram series count \(counted), expected \(expected.histogramWeight)")
                }
                for entry in series where !metrics.contains(entry.metric) {
                    violation("\(label): a series for a metric the registry does not hold: \(entry.metric)")
                }
            } else {
                violation(
                    "\(label): the readers read it, but the collector says \(ring.map { "\($0.state) \($0.problem ?? "")" } ?? "nothing")")
            }
        case .failure(let error):
            if case .notReady = error {
                if ring != nil { violation("\(label): a ring being created is shown: \(String(describing: ring?.state))") }
            } else if ring?.state != .skipped || ring?.problem?.contains("ring \(ringName): ") != true {
                violation(
                    "\(label): a refused ring is not skipped with a problem: \(String(describing: ring?.state)) \(ring?.problem ?? "")")
            } else if !captured.all.contains(where: { $0.contains("skipping ring \(ringName): ") }) {
                violation("\(label): a skipped ring is not logged")
            }
        }
        let prometheus = PrometheusExporter.render(snapshot)
        if prometheus.isEmpty || String(validating: prometheus, as: UTF8.self) == nil { violation("\(label): /metrics is not UTF-8") }
        let json = JSONExporter.latest(snapshot)
        if (try? JSONSerialization.jsonObject(with: Data(json))) == nil {
            violation("\(label): /latest is not valid JSON: \(String(decoding: json.prefix(300), as: UTF8.self))")
        }
    }

    // 3. The consumer on a fresh copy (the collector moved the cursor): open, drain, status.
    writeFile(ringPath, bytes)
    do throws(RingError) {
        let consumer = try RingConsumer(ringName, directory: directory)
        var drained = 0
        try consumer.drain { records, _ in drained += records.count }
        _ = try consumer.status()
        if case .success(let status) = verdict, drained != Int(status.backlog) {
            violation("\(label): the consumer drained \(drained) of \(status.backlog)")
        }
        if case .failure(let error) = verdict { violation("\(label): the consumer read what the inspector refused (\(error))") }
    } catch {
        if case .success = verdict { violation("\(label): the consumer refused what the inspector read: \(error)") }
        if !refusalIsClear(error) { violation("\(label): unclear refusal by the consumer: \(error)") }
    }

    // 4. The real dump tool, now and then (a process each: slow).
    if runDump {
        writeFile(ringPath, bytes)
        checkDump(label, verdict: verdict, collectorRejected: collectorRejected)
    }
}

// MARK: - The run

abuse_install_crash_reporter()
var rng = SplitMix64(seed: seed)
let bases: [BaseRing]
do {
    bases = [
        // Two lanes that wrapped and dropped: 20 records a thread into 16 slots, 12 drained, 20 more.
        try makeBase("wrapped", capacity: 16, maxMetrics: 8, metrics: 6, threads: 2, before: 40, drain: 12, after: 40),
        // One lane, full.
        try makeBase("full", capacity: 64, maxMetrics: 4, metrics: 3, threads: 1, before: 120, drain: 0, after: 0),
        // No lane at all: registered, never recorded.
        try makeBase("empty", capacity: 16, maxMetrics: 2, metrics: 1, threads: 0, before: 0, drain: 0, after: 0),
        // Three lanes drained to the end, then a few records more.
        try makeBase("drained", capacity: 32, maxMetrics: 16, metrics: 9, threads: 3, before: 30, drain: 100, after: 9),
        // Three threads, two lanes: one thread's counts and drops are in the shared cells.
        try makeBase("crowded", capacity: 16, maxMetrics: 8, maxLanes: 2, metrics: 4, threads: 3, before: 30, drain: 0, after: 0),
    ]
} catch {
    usage("cannot make the base rings: \(error)")
}

/// Whether a case hits a known library bug (`knownIssue(_:)`).
func hitsKnownIssue(_ base: BaseRing, _ mutation: Mutation) -> Bool {
    var bytes = base.bytes
    mutation.apply(&bytes)
    return knownIssue(bytes) != nil
}

// The base rings themselves must read cleanly.
var mutations: [(BaseRing, Mutation)] = []
var knownIssueCasesAvoided = 0
for base in bases {
    mutations.append((base, Mutation(description: "undamaged", expectation: .readable) { _ in }))
    mutations += targetedMutations(base, rng: &rng).map { (base, $0) }
}
switch knownIssues {
case "avoid":
    let before = mutations.count
    mutations.removeAll { hitsKnownIssue($0.0, $0.1) }
    knownIssueCasesAvoided += before - mutations.count
case "only":
    mutations.removeAll { !hitsKnownIssue($0.0, $0.1) }
default:
    break
}
let targetedCount = mutations.count
let totalCases = knownIssues == "only" ? targetedCount : max(caseCount, targetedCount)

/// A random case, drawn again while it hits a known issue that is to be avoided.
@MainActor
func randomCase() -> (BaseRing, Mutation) {
    while true {
        let base = bases[Int(rng.next() % UInt64(bases.count))]
        let mutation = randomMutation(base, rng: &rng)
        if knownIssues == "avoid" && hitsKnownIssue(base, mutation) {
            knownIssueCasesAvoided += 1
            continue
        }
        return (base, mutation)
    }
}
abuse_reset_largest_allocation()
let started = rs_clock_precise_ns()
var index = 0
while index < totalCases {
    let (base, mutation) = index < targetedCount ? mutations[index] : randomCase()
    let label = "case \(index) (seed \(seed), ring \(base.label)): \(mutation.description)"
    abuse_begin_case(label, caseSeconds)
    var bytes = base.bytes
    mutation.apply(&bytes)
    let caseStart = rs_clock_precise_ns()
    check(label, bytes, expectation: mutation.expectation, runDump: dumpEvery > 0 && index % dumpEvery == 0)
    let elapsed = rs_clock_precise_ns() - caseStart
    tally.maxCaseNanos = max(tally.maxCaseNanos, elapsed)
    tally.totalCaseNanos += elapsed
    tally.cases += 1
    index += 1
}
abuse_begin_case("finished", 0)
let largest = abuse_largest_allocation()
try? directory.remove(ringName)

let refusals = tally.refused.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",")
print(
    "{\"cases\":\(tally.cases),\"targeted\":\(targetedCount),\"readable\":\(tally.readable),"
        + "\"refused\":{\(refusals)},\"records_drained\":\(tally.recordsDrained),\"records_rejected\":\(tally.recordsRejected),"
        + "\"dump_runs\":\(tally.dumpRuns),\"lanes_refused\":\(tally.lanesRefused),\"most_lanes_read\":\(tally.mostLanesRead),"
        + "\"multi_lane_readable\":\(tally.multiLaneReadable),\"known_issue_cases_avoided\":\(knownIssueCasesAvoided),\"max_case_ms\":\(Double(tally.maxCaseNanos) / 1e6),"
        + "\"mean_case_ms\":\(Double(tally.totalCaseNanos) / 1e6 / Double(max(1, tally.cases))),"
        + "\"seconds\":\(Double(rs_clock_precise_ns() - started) / 1e9),\"largest_allocation\":\(largest),"
        + "\"violations\":\(tally.violations.count)}")
exit(tally.violations.isEmpty ? 0 : 1)
