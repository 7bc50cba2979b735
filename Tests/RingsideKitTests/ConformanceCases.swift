import CRingside
import Foundation
import Ringside
import RingsideTestSupport

/// One case of the producers' conformance table (Tests/conformance/cases.txt), as a reader
/// expects its file: the registry, the records of its one lane, and the cells.
struct ConformanceCase {
    /// A metric as the case registers it, and what its calls add up to.
    struct Metric {
        var descriptor: MetricDescriptor
        /// Calls made: a histogram sampled 1 in N writes calls 0, N, 2N...
        var calls = 0
        var counted: UInt64 = 0
        var lastSet: Double?
        /// Its records a full lane dropped: how many, their values' sum and the largest.
        var dropped: UInt64 = 0
        var droppedSum: UInt64 = 0
        var droppedMax: UInt64 = 0
        /// Exemplars refused (given to a signed histogram), their values recorded without them.
        var exemplarsRefused: UInt64 = 0
        /// Retired (RETIRING A SERIES in ringside.h): its entry's `retired` word odd.
        var retired = false
    }

    /// A record as the reader reads it, its exemplar put back together.
    struct Record: Equatable, CustomStringConvertible {
        var metric: UInt32
        var kind: UInt8
        var value: UInt64
        var exemplar: String?

        var description: String { "(metric \(metric), kind \(kind), value \(value), exemplar \(exemplar ?? "none"))" }
    }

    var name: String
    var worker = false
    /// What the suite plants at the bot's name, as user nobody, before the runners run.
    var planted: PlantedFile?
    /// Whether the attach must fail (the runner says why, and skips the case's other lines).
    var refused = false
    var metrics: [Metric] = []
    /// The records the lane keeps: no consumer drains it, and a producer never samples while
    /// none reads weights (SAMPLING in ringside.h), so past its capacity each record is dropped.
    var records: [Record] = []
    var laneCapacity = 1 << Int(RS_DEFAULT_LANE_CAPACITY_LOG2)
    private var slotsUsed = 0

    /// Keeps a record, and its exemplar's, if the lane has room for all of them; else counts a drop.
    private mutating func write(_ record: Record) {
        let slots = 1 + (record.exemplar.map { ExemplarAssembler.parts(ofLength: $0.utf8.count) } ?? 0)
        guard slotsUsed + slots <= laneCapacity else {
            let metric = Int(record.metric)
            metrics[metric].dropped += 1
            if record.kind == MetricKind.histogram.rawValue {
                metrics[metric].droppedSum &+= record.value
                metrics[metric].droppedMax = max(metrics[metric].droppedMax, record.value)
            }
            return
        }
        slotsUsed += slots
        records.append(record)
    }

    /// The file's name in the runner's directory: the bot's, or a worker's (`NAME@PID`).
    func fileName(in directory: String) throws -> String {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter {
            worker ? $0.hasPrefix("ringside.\(name)@") : $0 == "ringside.\(name)"
        }
        guard names.count == 1 else { throw ConformanceError("case \(name): files \(names) in \(directory), expected one") }
        return String(names[0].dropFirst("ringside.".count))
    }

    /// The table at `path` without the cases named `dropped` (each from its `case` line to the next).
    static func text(of path: String, dropping dropped: Set<String>) throws -> String {
        var keep = true
        return try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).filter { line in
            let words = line.split(separator: " ")
            if words.first == "case", words.count > 1 { keep = !dropped.contains(String(words[1])) }
            return keep
        }.joined(separator: "\n")
    }

    /// Reads the table.
    static func load(_ path: String) throws -> [ConformanceCase] {
        var cases: [ConformanceCase] = []
        for (number, line) in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
            .enumerated()
        {
            let words = line.split(separator: " ").map(String.init)
            guard let op = words.first, !op.hasPrefix("#") else { continue }
            do {
                if op == "case" {
                    cases.append(ConformanceCase(name: words[1]))
                } else if let last = cases.indices.last {
                    try cases[last].apply(op, Array(words.dropFirst()))
                }
            } catch {
                throw ConformanceError("\(path):\(number + 1): \(error)")
            }
        }
        return cases
    }

    private mutating func apply(_ op: String, _ args: [String]) throws {
        func option(_ word: String) -> (key: String, value: String) {
            let pair = word.split(separator: "=", maxSplits: 1).map(String.init)
            return (pair[0], pair.count > 1 ? pair[1] : "")
        }
        func index(of name: String) throws -> Int {
            guard let index = metrics.firstIndex(where: { $0.descriptor.name == name }) else {
                throw ConformanceError("unknown metric \(name)")
            }
            return index
        }
        switch op {
        case "plant":
            planted = try PlantedFile(rawValue: args.first ?? "") ?? { throw ConformanceError("plant \(args)") }()
        case "attach":
            worker = args.contains("worker=1")
            refused = args.contains("refused=1")
            if let capacity = args.map(option).first(where: { $0.key == "lane_capacity" }) { laneCapacity = Int(capacity.value) ?? 0 }
        case "histogram", "counter", "gauge":
            var unit = MetricUnit.none, merge = GaugeMerge.last, help = "", sampleEvery: UInt32 = 1, labels: [String] = []
            var scale: Int8 = 0, signed = false
            for (key, value) in args.dropFirst().map(option) {
                switch key {
                case "unit":
                    unit = try MetricUnit.allCases.first { $0.description == value } ?? { throw ConformanceError("unit \(value)") }()
                case "merge":
                    merge = try GaugeMerge.allCases.first { $0.description == value } ?? { throw ConformanceError("merge \(value)") }()
                case "help": help = value
                case "sample_every": sampleEvery = UInt32(value) ?? 0
                case "label": labels.append(value)
                case "scale": scale = Int8(value) ?? 0
                case "signed": signed = value == "1"
                default: throw ConformanceError("unknown option \(key)")
                }
            }
            let kind: MetricKind = op == "histogram" ? .histogram : op == "counter" ? .counter : .gauge
            metrics.append(
                Metric(
                    descriptor: MetricDescriptor(
                        index: UInt32(metrics.count), name: args[0], kind: kind, unit: unit, encodedLabels: labels.joined(separator: "\n"),
                        help: help, sampleEvery: sampleEvery, gaugeMerge: merge, isSigned: signed, scale: scale)))
        case "observe":
            let metric = try index(of: args[0])
            defer { metrics[metric].calls += 1 }
            guard metrics[metric].calls % Int(metrics[metric].descriptor.sampleEvery) == 0 else { return }
            let exemplar = args.dropFirst(2).map { String($0.dropFirst("exemplar=".count)) }.joined(separator: "\n")
            guard !metrics[metric].descriptor.isSigned else {
                // EXEMPLARS in ringside.h: a signed histogram's values carry none; the value is
                // recorded (steps, in offset binary) and the exemplar counted refused.
                if !exemplar.isEmpty { metrics[metric].exemplarsRefused += 1 }
                let steps = UInt64(bitPattern: Int64(args[1]) ?? 0) ^ RS_OFFSET_BINARY_BIAS
                return write(Record(metric: UInt32(metric), kind: MetricKind.histogram.rawValue, value: steps))
            }
            write(
                Record(
                    metric: UInt32(metric), kind: MetricKind.histogram.rawValue, value: UInt64(args[1]) ?? 0,
                    exemplar: exemplar.isEmpty ? nil : exemplar))
        case "observe_value":
            // VALUES in ringside.h: steps of 10^scale, to the nearest (ties to even); signed in offset binary.
            let metric = try index(of: args[0]), descriptor = metrics[metric].descriptor
            let steps = ((Double(args[1]) ?? .nan) * pow(10, -Double(descriptor.scale))).rounded(.toNearestOrEven)
            let signed = Int64(exactly: steps).map { UInt64(bitPattern: $0) ^ RS_OFFSET_BINARY_BIAS }
            guard let stored = descriptor.isSigned ? signed : UInt64(exactly: steps) else {
                throw ConformanceError("\(args[1]) is out of \(descriptor.name)'s range: a case of clamping needs its own expectation")
            }
            write(Record(metric: UInt32(metric), kind: MetricKind.histogram.rawValue, value: stored))
        case "count": metrics[try index(of: args[0])].counted += UInt64(args[1]) ?? 0
        case "set":
            let metric = try index(of: args[0]), value = Double(args[1]) ?? .nan
            metrics[metric].lastSet = value
            write(Record(metric: UInt32(metric), kind: MetricKind.gauge.rawValue, value: value.bitPattern))
        case "retire":
            let metric = try index(of: args[0])
            metrics[metric].retired = true
            if metrics[metric].descriptor.kind == .gauge { metrics[metric].lastSet = nil }  // its value forgotten
        case "end": break
        default: throw ConformanceError("unknown operation \(op)")
        }
    }
}

/// The bytes of a bot file that differ between two runs of one producer, or between producers
/// that agree: the times, the process and thread ids and names, each value record's time; and
/// `sample_above`, which a producer that never samples (Python's pure backend) writes 0 (the
/// suite checks it apart). An exemplar record's time field holds the exemplar's bytes: it is
/// compared.
enum ConformanceMask {
    /// `bytes` with those regions zeroed (from the layout the file's header gives).
    static func masked(_ bytes: [UInt8]) -> [UInt8] {
        var bytes = bytes
        func load<T: FixedWidthInteger>(_ offset: Int, as: T.Type) -> T {
            bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: T.self) }
        }
        func zero(_ range: Range<Int>) {
            for index in range where index < bytes.count { bytes[index] = 0 }
        }
        let header = Int(RS_HEADER_SIZE)
        guard bytes.count >= header else { return bytes }
        zero(0x38..<0x48)  // created_realtime_ns, created_monotonic_ns
        zero(0x88..<0x9C)  // heartbeat_ns, producer_start_ns, producer_pid
        zero(0xB0..<0xB8)  // sample_above, rings_doorbell (1 where the kernel lets the process register)
        let lanesOffset = Int(load(0x30, as: UInt64.self)), laneSize = Int(load(0x48, as: UInt64.self))
        let recordsOffset = Int(load(0x50, as: UInt32.self)), capacity = 1 << Int(load(0x14, as: UInt32.self) & 31)
        let lanes = Int(load(0x80, as: UInt32.self))
        for lane in 0..<min(lanes, Int(RS_MAX_LANES)) {
            let base = lanesOffset + lane * laneSize
            guard base + laneSize <= bytes.count else { break }
            zero(base + 0x10..<base + 0x18)  // heartbeat_ns
            zero(base + 0x1C..<base + 0x20)  // owner_tid
            zero(base + 0x28..<base + 0x48)  // thread_name
            for slot in 0..<capacity {
                let record = base + recordsOffset + slot * Int(RS_RECORD_SIZE)
                guard record + Int(RS_RECORD_SIZE) <= bytes.count else { break }
                if bytes[record + 0x1C] != UInt8(RS_KIND_EXEMPLAR.rawValue) { zero(record..<record + 8) }  // timestamp_ns
            }
        }
        return bytes
    }

    /// The first offset where two masked files differ, or nil.
    static func firstDifference(_ left: [UInt8], _ right: [UInt8]) -> Int? {
        if let index = zip(left, right).enumerated().first(where: { $0.element.0 != $0.element.1 })?.offset { return index }
        return left.count == right.count ? nil : min(left.count, right.count)
    }
}

struct ConformanceError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
