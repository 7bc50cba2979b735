// The reader fuzzer of the abuse tests: builds valid rings with the real producer API, damages
// copies of them in thousands of targeted and random ways, and feeds each damaged file to every
// reader (RingInspector, RingConsumer, a Collector pass and its exporters, and now and then the
// real ringside-dump), checking that each file is read correctly or refused with an error that
// names the ring and the problem. Not for users.
//
//   ringside-abuse-fuzzer --dir DIR --seed S --count N [--dump-every K] [--case-seconds T]
//
// A process of its own, so that a crash or a hang is reported (with the case that caused it)
// instead of taking the test runner down, and so that the allocator can be watched: every
// malloc is seen (CAbuseWatch), and the largest single request is reported.
// Prints one JSON summary line on standard output; the violations found, one per line, on
// standard error. Exit 0 when there were none, 1 otherwise, 2 for a usage error.
import CAbuseWatch
import CRingside
import Foundation
import Ringside
import RingsideCollector
import RingsideTestSupport // SplitMix64: the same sequence for the same seed on every machine
import Synchronization

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
let directory = RingDirectory(directoryPath)
let ringName = "fuzz"
let ringPath = directory.filePath(for: ringName)

// MARK: - Valid rings to start from

/// A valid ring file's bytes and what the test knows about it.
struct BaseRing {
    let label: String
    let bytes: [UInt8]
    let capacity: UInt64
    let registryCapacity: Int
    let metricCount: Int
    var recordsOffset: Int { Int(RS_HEADER_SIZE) + registryCapacity * Int(RS_REGISTRY_ENTRY_SIZE) }
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

/// Makes a ring with the real producer API (several metrics of each kind, labels, help,
/// sampling; records written, some drained, so the cursors wrap), and returns its bytes.
func makeBase(_ label: String, capacity: Int, maxMetrics: Int, metrics: Int, before: Int, drain: Int, after: Int) throws -> BaseRing {
    try? directory.remove(ringName)
    do {
        let ring = try Ring.attach(ringName, directory: directory.path, options: .init(capacity: capacity, maxMetrics: maxMetrics))
        var writers: [(UInt64) -> Void] = []
        for index in 0..<metrics {
            switch index % 3 {
            case 0:
                let histogram = try ring.histogram("fill_latency", unit: index % 2 == 0 ? .nanoseconds : .microseconds,
                                                   labels: ["symbol": "S\(index)", "venue": "v=\"\\ \(index)"],
                                                   help: "latency of fills, µs or ns", sampleEvery: index == 3 ? 4 : 1)
                writers.append { histogram.record($0) }
            case 1:
                let counter = try ring.counter("orders", labels: ["side": index % 2 == 0 ? "buy" : "sell", "n": "\(index)"],
                                               help: "orders sent", sampleEvery: index == 4 ? 3 : 1)
                writers.append { counter.increment(by: $0 % 7 + 1) }
            default:
                let gauge = try ring.gauge("exposure_\(index)", unit: .bytes, help: index % 2 == 0 ? "" : "gross exposure")
                writers.append { gauge.set(Double($0) * 1.5 - 20) }
            }
        }
        for value in 0..<UInt64(before) { writers[Int(value) % writers.count](value * 1_000 + 1) }
        if drain > 0 {
            let consumer = try RingConsumer(ringName, directory: directory)
            try consumer.drain(limit: drain) { _, _ in }
        }
        for value in 0..<UInt64(after) { writers[Int(value) % writers.count](value * 977 + 3) }
    }
    let bytes = readFile(ringPath)
    return BaseRing(label: label, bytes: bytes, capacity: UInt64(capacity), registryCapacity: maxMetrics, metricCount: metrics)
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
        for i in 0..<MemoryLayout<T>.size where offset + i < bytes.count { raw[i] = bytes[offset + i] }
    }
    return T(littleEndian: value)
}

func store<T: FixedWidthInteger>(_ bytes: inout [UInt8], _ offset: Int, _ value: T) {
    withUnsafeBytes(of: value.littleEndian) { raw in
        for i in 0..<raw.count where offset + i < bytes.count { bytes[offset + i] = raw[i] }
    }
}

/// A header (or registry, or record) field: where it is and how wide.
struct Field {
    let name: String
    let offset: Int
    let width: Int
}

func headerOffset<T>(_ field: KeyPath<rs_header, T>) -> Int { MemoryLayout<rs_header>.offset(of: field)! }
func entryOffset<T>(_ field: KeyPath<rs_registry_entry, T>) -> Int { MemoryLayout<rs_registry_entry>.offset(of: field)! }
func recordOffset<T>(_ field: KeyPath<rs_record, T>) -> Int { MemoryLayout<rs_record>.offset(of: field)! }

/// Every field of the header, by line.
let layoutFields: [Field] = [
    Field(name: "magic", offset: headerOffset(\.magic), width: 8),
    Field(name: "version", offset: headerOffset(\.version), width: 4),
    Field(name: "header_size", offset: headerOffset(\.header_size), width: 4),
    Field(name: "record_size", offset: headerOffset(\.record_size), width: 4),
    Field(name: "capacity_log2", offset: headerOffset(\.capacity_log2), width: 4),
    Field(name: "registry_capacity", offset: headerOffset(\.registry_capacity), width: 4),
    Field(name: "registry_entry_size", offset: headerOffset(\.registry_entry_size), width: 4),
    Field(name: "registry_offset", offset: headerOffset(\.registry_offset), width: 8),
    Field(name: "records_offset", offset: headerOffset(\.records_offset), width: 8),
    Field(name: "file_size", offset: headerOffset(\.file_size), width: 8),
]
/// Header fields a reader shows but does not depend on.
let informationalFields: [Field] = [
    Field(name: "created_realtime_ns", offset: headerOffset(\.created_realtime_ns), width: 8),
    Field(name: "created_monotonic_ns", offset: headerOffset(\.created_monotonic_ns), width: 8),
    Field(name: "layout_reserved", offset: 0x48, width: 8),
    Field(name: "dropped_total", offset: headerOffset(\.dropped_total), width: 8),
    Field(name: "heartbeat_ns", offset: headerOffset(\.heartbeat_ns), width: 8),
    Field(name: "producer_start_ns", offset: headerOffset(\.producer_start_ns), width: 8),
    Field(name: "producer_pid", offset: headerOffset(\.producer_pid), width: 4),
    Field(name: "producer_attaches", offset: headerOffset(\.producer_attaches), width: 4),
    Field(name: "producer_reserved", offset: 0xB0, width: 8),
    Field(name: "consumer_pid", offset: headerOffset(\.consumer_pid), width: 4),
    Field(name: "consumer_reserved0", offset: headerOffset(\.consumer_reserved0), width: 4),
    Field(name: "consumer_heartbeat_ns", offset: headerOffset(\.consumer_heartbeat_ns), width: 8),
    Field(name: "header_page_tail", offset: 0x800, width: 8),
]
let writeCursorOffset = headerOffset(\.write_cursor)
let readCursorOffset = headerOffset(\.read_cursor)
let metricCountOffset = headerOffset(\.metric_count)

let entryFields: [Field] = [
    Field(name: "index", offset: entryOffset(\.index), width: 4),
    Field(name: "kind", offset: entryOffset(\.kind), width: 1),
    Field(name: "unit", offset: entryOffset(\.unit), width: 1),
    Field(name: "reserved0", offset: entryOffset(\.reserved0), width: 2),
    Field(name: "sample_every", offset: entryOffset(\.sample_every), width: 4),
    Field(name: "name_length", offset: entryOffset(\.name_length), width: 2),
    Field(name: "labels_length", offset: entryOffset(\.labels_length), width: 2),
    Field(name: "help_length", offset: entryOffset(\.help_length), width: 2),
]
let recordFields: [Field] = [
    Field(name: "timestamp_ns", offset: recordOffset(\.timestamp_ns), width: 8),
    Field(name: "value", offset: recordOffset(\.value), width: 8),
    Field(name: "sequence", offset: recordOffset(\.sequence), width: 8),
    Field(name: "metric", offset: recordOffset(\.metric), width: 4),
    Field(name: "kind", offset: recordOffset(\.kind), width: 1),
    Field(name: "flags", offset: recordOffset(\.flags), width: 1),
    Field(name: "reserved", offset: recordOffset(\.reserved), width: 2),
]

func read(_ bytes: [UInt8], _ field: Field, at base: Int = 0) -> UInt64 {
    switch field.width {
    case 1: return UInt64(bytes[base + field.offset])
    case 2: return UInt64(load(bytes, base + field.offset, as: UInt16.self))
    case 4: return UInt64(load(bytes, base + field.offset, as: UInt32.self))
    default: return load(bytes, base + field.offset, as: UInt64.self)
    }
}

func write(_ bytes: inout [UInt8], _ field: Field, at base: Int = 0, _ value: UInt64) {
    switch field.width {
    case 1: bytes[base + field.offset] = UInt8(truncatingIfNeeded: value)
    case 2: store(&bytes, base + field.offset, UInt16(truncatingIfNeeded: value))
    case 4: store(&bytes, base + field.offset, UInt32(truncatingIfNeeded: value))
    default: store(&bytes, base + field.offset, value)
    }
}

/// The values tried on a field: 0, the maximum, one off each way, the high bit, and random.
func interestingValues(original: UInt64, width: Int, rng: inout SplitMix64) -> [(String, UInt64)] {
    let max = width == 8 ? UInt64.max : (UInt64(1) << UInt64(width * 8)) - 1
    let high = UInt64(1) << UInt64(width * 8 - 1)
    return [("0", 0), ("max", max), ("+1", (original &+ 1) & max), ("-1", (original &- 1) & max),
            ("high bit", original ^ high), ("random", rng.next() & max)]
}

/// The targeted catalogue for one base ring: every header field, the cursors, the metric count,
/// every field of the registry entries and their strings, and the fields of the records.
func targetedMutations(_ base: BaseRing, rng: inout SplitMix64) -> [Mutation] {
    var list: [Mutation] = []
    let bytes = base.bytes
    for field in layoutFields {
        for (label, value) in interestingValues(original: read(bytes, field), width: field.width, rng: &rng) {
            let changed = value != read(bytes, field)
            list.append(Mutation(description: "header \(field.name) = \(label) (\(value))",
                                 expectation: changed ? .refused(field.name == "version" && value == 0 ? "being created" : "")
                                                      : .readable) { write(&$0, field, value) })
        }
    }
    for field in informationalFields {
        for (label, value) in interestingValues(original: read(bytes, field), width: field.width, rng: &rng) {
            list.append(Mutation(description: "header \(field.name) = \(label) (\(value))", expectation: .readable) {
                write(&$0, field, value)
            })
        }
    }
    // The cursors, alone and together.
    let read0 = load(bytes, readCursorOffset, as: UInt64.self), write0 = load(bytes, writeCursorOffset, as: UInt64.self)
    var pairs: [(String, UInt64, UInt64)] = [
        ("read > write", write0 + 1, write0), ("write - read = capacity + 1", read0, read0 + base.capacity + 1),
        ("write - read = capacity", read0, read0 + base.capacity), ("read = write", write0, write0),
        ("both huge, equal", .max, .max), ("both huge, 5 apart", .max - 5, .max), ("write huge", read0, .max),
        ("read huge", .max, write0), ("write 0", read0, 0), ("read 0", 0, write0),
        ("shifted by 2^63", read0 &+ (1 << 63), write0 &+ (1 << 63)),
    ]
    for _ in 0..<4 { let r = rng.next(); pairs.append(("random", r, r &+ rng.next() % (2 * base.capacity + 2))) }
    for (label, read, write) in pairs {
        let sound = read <= write && write - read <= base.capacity
        list.append(Mutation(description: "cursors \(label) (read \(read), write \(write))",
                             expectation: sound ? .readable : .refused("cursors out of range")) {
            store(&$0, readCursorOffset, read)
            store(&$0, writeCursorOffset, write)
        })
    }
    for (label, value) in interestingValues(original: UInt64(base.metricCount), width: 4, rng: &rng)
        + [("capacity", UInt64(base.registryCapacity)), ("capacity + 1", UInt64(base.registryCapacity + 1))] {
        let expectation: Expectation = value <= UInt64(base.metricCount) ? .readable
            : value > UInt64(base.registryCapacity) ? .refused("metric count") : .refused("registry entry \(base.metricCount)")
        list.append(Mutation(description: "metric_count = \(label) (\(value))", expectation: expectation) {
            store(&$0, metricCountOffset, UInt32(truncatingIfNeeded: value))
        })
    }
    // Registry entries: every field, and the strings' bytes.
    for index in [0, base.metricCount - 1] where index >= 0 {
        let entry = Int(RS_HEADER_SIZE) + index * Int(RS_REGISTRY_ENTRY_SIZE)
        for field in entryFields {
            for (label, value) in interestingValues(original: read(bytes, field, at: entry), width: field.width, rng: &rng) {
                list.append(Mutation(description: "entry \(index) \(field.name) = \(label) (\(value))",
                                     expectation: .any) { write(&$0, field, at: entry, value) })
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
                    list.append(Mutation(description: "entry \(index) \(name)[\(position)] = \(label)", expectation: .any) {
                        for (i, byte) in replacement.enumerated() where position + i < length { $0[entry + offset + position + i] = byte }
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
            list.append(Mutation(description: "entry \(index) labels unsorted", expectation: .refused("registry entry \(index)")) {
                [swapped] bytes in for (i, byte) in swapped.enumerated() { bytes[labelsStart + i] = byte }
            })
            let duplicated = Array(lines[0]) + [10] + Array(lines[0])
            list.append(Mutation(description: "entry \(index) labels with a repeated key", expectation: .refused("registry entry \(index)")) {
                [duplicated] bytes in
                for (i, byte) in duplicated.enumerated() where i < Int(RS_LABELS_MAX) { bytes[labelsStart + i] = byte }
                store(&bytes, entry + entryOffset(\.labels_length), UInt16(min(duplicated.count, Int(RS_LABELS_MAX))))
            })
        }
    }
    if base.metricCount >= 2 {
        let size = Int(RS_REGISTRY_ENTRY_SIZE)
        let first = Int(RS_HEADER_SIZE), second = first + size
        list.append(Mutation(description: "entry 0 copied over entry 1 (a duplicate metric)", expectation: .refused("registry entry 1")) {
            let copy = Array($0[first..<second])
            $0.replaceSubrange(second..<(second + size), with: copy)
        })
        list.append(Mutation(description: "entry 0 copied over entry 1, index fixed (a duplicate metric)", expectation: .readable) {
            let copy = Array($0[first..<second])
            $0.replaceSubrange(second..<(second + size), with: copy)
            store(&$0, second, UInt32(1))
        })
    }
    // Records: every field of the oldest and newest record in the ring.
    if write0 > read0 {
        let mask = base.capacity - 1
        for cursor in Set([read0, write0 - 1]) {
            let record = base.recordsOffset + Int(cursor & mask) * Int(RS_RECORD_SIZE)
            for field in recordFields {
                var values = interestingValues(original: read(bytes, field, at: record), width: field.width, rng: &rng)
                if field.name == "metric" { values += [("count", UInt64(base.metricCount)), ("capacity", UInt64(base.registryCapacity))] }
                if field.name == "kind" { values += [("counter", 1), ("gauge", 2), ("histogram", 3), ("4", 4)] }
                if field.name == "timestamp_ns" {
                    values += [("far future", rs_clock_precise_ns() &+ 1_000_000_000_000_000), ("now", rs_clock_precise_ns()), ("1", 1)]
                }
                if field.name == "value" {
                    values += [("NaN", Double.nan.bitPattern), ("signalling NaN", Double.signalingNaN.bitPattern),
                               ("+Inf", Double.infinity.bitPattern), ("-Inf", (-Double.infinity).bitPattern),
                               ("-0", (-0.0).bitPattern), ("subnormal", Double.leastNonzeroMagnitude.bitPattern),
                               ("-max", (-Double.greatestFiniteMagnitude).bitPattern)]
                }
                for (label, value) in values {
                    list.append(Mutation(description: "record \(cursor) \(field.name) = \(label) (\(value))", expectation: .readable) {
                        write(&$0, field, at: record, value)
                    })
                }
            }
        }
    }
    // Sizes.
    for (label, size) in [("empty", 0), ("1 byte", 1), ("half a header", 2048), ("the header only", 4096),
                          ("one byte short", bytes.count - 1), ("one byte long", bytes.count + 1),
                          ("a record long", bytes.count + 32), ("doubled", bytes.count * 2)] {
        let expectation: Expectation = size == 0 ? .refused("being created") : .refused("")
        list.append(Mutation(description: "file size \(label) (\(size) bytes)", expectation: expectation) {
            if size < $0.count { $0.removeLast($0.count - size) } else { $0 += [UInt8](repeating: 0, count: size - $0.count) }
        })
    }
    return list
}

/// A random mutation: byte flips anywhere or in one region, garbage over a range, a zeroed
/// range, a random size, or a random field set to a random value.
func randomMutation(_ base: BaseRing, rng: inout SplitMix64) -> Mutation {
    let size = base.bytes.count
    let regions: [(String, Range<Int>)] = [
        ("header", 0..<0x180), ("registry", Int(RS_HEADER_SIZE)..<base.recordsOffset), ("records", base.recordsOffset..<size),
        ("anywhere", 0..<size),
    ]
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
        return Mutation(description: "size \(newSize)", expectation: newSize == size ? .readable : .any) {
            if newSize < $0.count { $0.removeLast($0.count - newSize) } else { $0 += [UInt8](repeating: 0xA5, count: newSize - $0.count) }
        }
    default:
        let all = layoutFields + informationalFields
        let field = all[Int(rng.next() % UInt64(all.count))]
        let value = rng.next() >> (rng.next() % 64)
        let entry = Int(RS_HEADER_SIZE) + Int(rng.next() % UInt64(max(1, base.metricCount))) * Int(RS_REGISTRY_ENTRY_SIZE)
        let entryField = entryFields[Int(rng.next() % UInt64(entryFields.count))]
        let entryValue = rng.next() >> (rng.next() % 64)
        return Mutation(description: "header \(field.name) = \(value), entry at \(entry) \(entryField.name) = \(entryValue)",
                        expectation: .any) {
            write(&$0, field, value)
            write(&$0, entryField, at: entry, entryValue)
        }
    }
}

// MARK: - Checking one file

/// Log lines of a collector, kept for the check.
final class CapturedLog: Sendable {
    private let lines = Mutex<[String]>([])
    var log: CollectorLog { CollectorLog { [self] line in lines.withLock { $0.append(line) } } }
    var all: [String] { lines.withLock { $0 } }
}

struct Tally {
    var cases = 0
    var readable = 0
    var refused: [String: Int] = [:]
    var recordsDrained = 0
    var recordsRejected = 0
    var dumpRuns = 0
    var maxCaseNanos: UInt64 = 0
    var totalCaseNanos: UInt64 = 0
    var violations: [String] = []
}

// One thread runs the cases; the tally is theirs.
nonisolated(unsafe) var tally = Tally()

func violation(_ text: String) {
    tally.violations.append(text)
    FileHandle.standardError.write(Data("violation: \(text)\n".utf8))
}

/// Records in [read, write) the collector must accept: a registered metric, its kind, its cursor.
func expectedValid(_ bytes: [UInt8], status: RingStatus, metrics: [MetricDescriptor]) -> (valid: Int, histogramWeight: UInt64) {
    var valid = 0
    var weight: UInt64 = 0
    let recordsOffset = Int(RS_HEADER_SIZE) + status.maxMetrics * Int(RS_REGISTRY_ENTRY_SIZE)
    var cursor = status.readCursor
    while cursor < status.writeCursor {
        let at = recordsOffset + Int(cursor & (status.capacity - 1)) * Int(RS_RECORD_SIZE)
        let metric = Int(load(bytes, at + recordOffset(\.metric), as: UInt32.self))
        let kind = bytes[at + recordOffset(\.kind)]
        let sequence = load(bytes, at + recordOffset(\.sequence), as: UInt64.self)
        if metric < metrics.count, metrics[metric].kind.rawValue == kind, sequence == cursor {
            valid += 1
            if metrics[metric].kind == .histogram { weight += UInt64(metrics[metric].sampleEvery) }
        }
        cursor += 1
    }
    return (valid, weight)
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

/// Runs a tool, with a deadline; returns its status (or nil if it died of a signal or hung),
/// standard output and standard error.
func runTool(_ arguments: [String]) -> (status: Int32?, output: String, errors: String) {
    let process = Process()
    let exe = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "")
    process.executableURL = exe.deletingLastPathComponent().appendingPathComponent("ringside-dump")
    process.arguments = arguments
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    do { try process.run() } catch { return (nil, "", "cannot run ringside-dump: \(error)") }
    // Read both pipes while it runs (their outputs are small, but never risk a full pipe).
    let outputBox = Mutex(Data()), errorBox = Mutex(Data())
    let group = DispatchGroup()
    group.enter()
    DispatchQueue.global().async { let data = out.fileHandleForReading.readDataToEndOfFile(); outputBox.withLock { $0 = data }; group.leave() }
    group.enter()
    DispatchQueue.global().async { let data = err.fileHandleForReading.readDataToEndOfFile(); errorBox.withLock { $0 = data }; group.leave() }
    if group.wait(timeout: .now() + 10) == .timedOut {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        return (nil, "", "hung for 10 s")
    }
    process.waitUntilExit()
    let output = String(decoding: outputBox.withLock { $0 }, as: UTF8.self)
    let errors = String(decoding: errorBox.withLock { $0 }, as: UTF8.self)
    return (process.terminationReason == .exit ? process.terminationStatus : nil, output, errors)
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
        guard let status = run.status else { violation("\(label): ringside-dump \(command[0]) crashed or hung: \(run.errors)"); continue }
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
        _ = try inspector.registryEntries()
        _ = inspector.header
        if records.count != Int(status.backlog) { violation("\(label): peek copied \(records.count) of \(status.backlog) records") }
        if last.count != min(3, Int(status.backlog)) { violation("\(label): peek(last: 3) copied \(last.count)") }
        verdict = .success(status)
    } catch {
        verdict = .failure(error)
    }
    switch verdict {
    case .success:
        tally.readable += 1
        if case .refused(let text) = expectation { violation("\(label): read, but should be refused (\(text))") }
    case .failure(let error):
        tally.refused[kindName(error), default: 0] += 1
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
        var options = CollectorOptions()
        options.directory = directory
        let collector = Collector(options: options, log: captured.log)
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
                if ring.drainedTotal != status.backlog { violation("\(label): collector drained \(ring.drainedTotal) of \(status.backlog)") }
                if ring.rejectedTotal != status.backlog - UInt64(expected.valid) {
                    violation("\(label): collector rejected \(ring.rejectedTotal), expected \(status.backlog - UInt64(expected.valid))")
                }
                let series = snapshot.series.filter { $0.ring == ringName }
                let counted = series.filter { $0.metric.kind == .histogram }.reduce(UInt64(0)) { $0 + $1.cumulativeCount }
                if counted != expected.histogramWeight {
                    violation("\(label): histogram series count \(counted), expected \(expected.histogramWeight)")
                }
                for entry in series where !metrics.contains(entry.metric) {
                    violation("\(label): a series for a metric the registry does not hold: \(entry.metric)")
                }
            } else {
                violation("\(label): the readers read it, but the collector says \(ring.map { "\($0.state) \($0.problem ?? "")" } ?? "nothing")")
            }
        case .failure(let error):
            if case .notReady = error {
                if ring != nil { violation("\(label): a ring being created is shown: \(String(describing: ring?.state))") }
            } else if ring?.state != .skipped || ring?.problem?.contains("ring \(ringName): ") != true {
                violation("\(label): a refused ring is not skipped with a problem: \(String(describing: ring?.state)) \(ring?.problem ?? "")")
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
        try makeBase("wrapped", capacity: 16, maxMetrics: 8, metrics: 6, before: 10, drain: 8, after: 12),
        try makeBase("full", capacity: 64, maxMetrics: 4, metrics: 3, before: 80, drain: 0, after: 0),
        try makeBase("empty", capacity: 16, maxMetrics: 2, metrics: 1, before: 0, drain: 0, after: 0),
        try makeBase("drained", capacity: 32, maxMetrics: 16, metrics: 9, before: 20, drain: 20, after: 5),
    ]
} catch {
    usage("cannot make the base rings: \(error)")
}

// The base rings themselves must read cleanly.
var mutations: [(BaseRing, Mutation)] = []
for base in bases {
    mutations.append((base, Mutation(description: "undamaged", expectation: .readable) { _ in }))
    mutations += targetedMutations(base, rng: &rng).map { (base, $0) }
}
let targetedCount = mutations.count
abuse_reset_largest_allocation()
let started = rs_clock_precise_ns()
var index = 0
while index < max(caseCount, targetedCount) {
    let (base, mutation) = index < targetedCount ? mutations[index]
        : { let base = bases[Int(rng.next() % UInt64(bases.count))]; return (base, randomMutation(base, rng: &rng)) }()
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
print("{\"cases\":\(tally.cases),\"targeted\":\(targetedCount),\"readable\":\(tally.readable),"
    + "\"refused\":{\(refusals)},\"records_drained\":\(tally.recordsDrained),\"records_rejected\":\(tally.recordsRejected),"
    + "\"dump_runs\":\(tally.dumpRuns),\"max_case_ms\":\(Double(tally.maxCaseNanos) / 1e6),"
    + "\"mean_case_ms\":\(Double(tally.totalCaseNanos) / 1e6 / Double(max(1, tally.cases))),"
    + "\"seconds\":\(Double(rs_clock_precise_ns() - started) / 1e9),\"largest_allocation\":\(largest),"
    + "\"violations\":\(tally.violations.count)}")
exit(tally.violations.isEmpty ? 0 : 1)
