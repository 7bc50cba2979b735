import CRingside
import Ringside
import RingsideExport
import RingsideJSON

/// What `check` found in one ring.
struct RingCheck {
    enum Outcome: String {
        case ok, problems
        case notReady = "not_ready"
    }

    let name: String
    let outcome: Outcome
    /// One line per problem (each names the ring).
    let problems: [String]
    /// A line saying what was checked, for a sound ring or one still being created.
    let summary: String

    /// Record problems shown per ring before the rest are counted in one line.
    static let recordProblemLimit = 20

    init(_ name: String, _ context: DumpContext) {
        self.name = name
        let inspector: RingInspector
        do throws(RingError) {
            inspector = try context.inspector(name)
        } catch {
            if case .notReady = error {
                outcome = .notReady
                problems = []
                summary = "ring \(name): not checked: the file is still being created (format version 0)"
            } else {
                outcome = .problems
                problems = ["\(error)"]
                summary = ""
            }
            return
        }
        var found: [String] = []
        let path = inspector.path
        func corrupt(_ problem: String) -> String { "ring \(name): \(path) is corrupt: \(problem)" }

        // The lanes first, each bad one named: the status below stops at the first.
        let laneProblems = inspector.laneProblems()
        found += laneProblems.map { corrupt("\($0)") }

        var status: RingStatus?
        do throws(RingError) { status = try inspector.settledStatus() } catch {
            if laneProblems.isEmpty { found.append("\(error)") }  // else the scan above said it, lane by lane
        }
        if let status {
            for lane in status.lanes {
                if case let .invalid(raw) = lane.state { found.append(corrupt("lane \(lane.index): unknown state \(raw)")) }
            }
        }

        var records: [PeekedRecord] = []
        do throws(RingError) { records = try inspector.settledPeek() } catch {
            if status != nil && laneProblems.isEmpty { found.append("\(error)") }  // else said once already
        }

        // Read after the peek, so every record's metric is published.
        // nil when the registry cannot be read: its records' metrics are then not checked.
        var metrics: [MetricDescriptor?]?
        do throws(RingError) {
            let entries = try inspector.registryEntries()
            metrics = entries.map { try? $0.get() }
            var seen: [String: UInt32] = [:]
            for entry in entries {
                switch entry {
                case let .success(metric):
                    let key = metric.displayName
                    if let earlier = seen[key] {
                        found.append(corrupt("registry entries \(earlier) and \(metric.index) are both \(key)"))
                    } else {
                        seen[key] = metric.index
                    }
                case let .failure(problem):
                    found.append(corrupt(problem.description))
                }
            }
        } catch {
            found.append("\(error)")
        }

        var recordProblems: [String] = []
        var exemplars = ExemplarGroups()
        // Lane by lane in cursor order, as a reader drains them: the peek is sorted by timestamp,
        // and an exemplar record's `timestamp_ns` holds its bytes, not a time.
        for peeked in records.sorted(by: { ($0.lane, $0.cursor) < ($1.lane, $1.cursor) }) {
            if let problem = Self.problem(with: peeked.record, at: peeked.cursor, metrics: metrics)
                ?? exemplars.problem(with: peeked.record, at: peeked.cursor, lane: peeked.lane)
            {
                recordProblems.append("lane \(peeked.lane) " + problem)
            }
        }
        let metricCount = metrics?.count ?? 0
        for problem in recordProblems.prefix(Self.recordProblemLimit) { found.append(corrupt(problem)) }
        if recordProblems.count > Self.recordProblemLimit {
            found.append(corrupt("\(recordProblems.count - Self.recordProblemLimit) more records have problems"))
        }

        problems = found
        outcome = found.isEmpty ? .ok : .problems
        if let status, found.isEmpty {
            summary =
                "ring \(name): ok (\(records.count) record\(records.count == 1 ? "" : "s") in \(status.lanesText), "
                + "\(metricCount) metric\(metricCount == 1 ? "" : "s"), producer \(ProducerLiveness(status: status).word))"
        } else {
            summary = ""
        }
    }

    /// What is wrong with a record read at `cursor`, or nil.
    static func problem(with record: RingRecord, at cursor: UInt64, metrics: [MetricDescriptor?]?) -> String? {
        let slot = "record \(cursor)"
        guard record.sequence == cursor else { return "\(slot): its sequence is \(record.sequence)" }
        if let metrics, Int(record.metric) >= metrics.count {
            return "\(slot): metric index \(record.metric) is not registered (the registry has \(metrics.count))"
        }
        if record.kind == UInt8(RS_KIND_EXEMPLAR.rawValue) {
            if let metric = metrics?[Int(record.metric)], metric.kind != .histogram {
                return "\(slot): an exemplar's record, but metric \(metric.index) (\(metric.name)) is a \(metric.kind)"
            }
            guard record.flags == 0, record.exemplar_length == 0 else { return "\(slot): an exemplar's record with flags or a length" }
            return nil
        }
        guard let kind = MetricKind(rawValue: record.kind) else { return "\(slot): unknown kind \(record.kind)" }
        guard kind != .counter else { return "\(slot): a counter's record (counters live in cells and write none)" }
        if let metric = metrics?[Int(record.metric)], metric.kind != kind {
            return "\(slot): kind \(kind) but metric \(metric.index) (\(metric.name)) is a \(metric.kind)"
        }
        // A histogram's record may be a span, carry an exemplar, and a weight (SAMPLING in ringside.h).
        let known = UInt8(RS_FLAG_SPAN | RS_FLAG_EXEMPLAR | RS_FLAG_WEIGHT_MASK)
        guard record.flags & ~known == 0 else { return "\(slot): unknown flags 0x\(String(record.flags, radix: 16))" }
        if record.flags & known != 0 && kind != .histogram { return "\(slot): a span, exemplar or weight flag on a \(kind)" }
        if record.flags & UInt8(RS_FLAG_EXEMPLAR) != 0 {
            guard (1...Int(RS_EXEMPLAR_MAX)).contains(Int(record.exemplar_length)) else {
                return "\(slot): an exemplar of \(record.exemplar_length) bytes (1 to \(RS_EXEMPLAR_MAX))"
            }
        } else if record.exemplar_length != 0 {
            return "\(slot): an exemplar length of \(record.exemplar_length) without the exemplar flag"
        }
        return nil
    }

    var json: JSON {
        .object([
            ("name", .string(name)), ("ok", .bool(outcome != .problems)), ("state", .string(outcome.rawValue)),
            ("problems", .array(problems.map(JSON.string))),
        ])
    }
}

/// `ringside-dump check NAME | --all`: validates ring files.
enum CheckCommand {
    static func run(_ name: String?, _ context: DumpContext) -> Int32 {
        let names: [String]
        if let name {
            names = [name]
        } else {
            do throws(RingError) { names = try context.ringNames() } catch { return context.fail(error) }
        }
        let checks = names.map { RingCheck($0, context) }
        let sound = checks.allSatisfy { $0.outcome != .problems }
        let console = context.console
        if context.json {
            console.print(JSON.object([("ok", .bool(sound)), ("rings", .array(checks.map(\.json)))]).text)
        } else {
            if checks.isEmpty { console.print("no rings in \(context.directory.path)") }
            for check in checks {
                if check.outcome == .problems { check.problems.forEach { console.print($0) } } else { console.print(check.summary) }
            }
        }
        return sound ? ExitStatus.success : ExitStatus.failure
    }
}

/// Whether each value's exemplar records follow it whole (EXEMPLARS in ringside.h), lane by lane,
/// as the collector puts them back together: the parts in place, and their bytes an exemplar.
private struct ExemplarGroups {
    private var pending: [Int: (metric: UInt32, length: Int, next: UInt64, bytes: [UInt8])] = [:]

    /// What is wrong with a record's place in its exemplar group, or nil.
    mutating func problem(with record: RingRecord, at cursor: UInt64, lane: Int) -> String? {
        let slot = "record \(cursor)"
        if record.kind == UInt8(RS_KIND_EXEMPLAR.rawValue) {
            guard var group = pending[lane], cursor == group.next, record.metric == group.metric else {
                pending[lane] = nil
                return "\(slot): an exemplar's record with no value before it"
            }
            withUnsafeBytes(of: record.timestamp_ns) { group.bytes += $0 }
            withUnsafeBytes(of: record.value) { group.bytes += $0 }
            group.next += 1
            guard group.bytes.count >= group.length else {
                pending[lane] = group
                return nil
            }
            pending[lane] = nil
            let checked = group.bytes.prefix(group.length).withUnsafeBytes { raw in
                rs_exemplar_check(raw.baseAddress?.assumingMemoryBound(to: CChar.self), group.length, nil) == 0
            }
            guard checked, group.bytes.dropFirst(group.length).allSatisfy({ $0 == 0 }),
                String(validating: group.bytes.prefix(group.length), as: UTF8.self) != nil
            else { return "\(slot): the exemplar ending here is malformed" }
            return nil
        }
        var problem: String?
        if let group = pending[lane] { problem = "\(slot): the exemplar of the value at \(group.next - 1) stops before its bytes do" }
        pending[lane] = nil
        if record.kind == UInt8(RS_KIND_HISTOGRAM.rawValue), record.flags & UInt8(RS_FLAG_EXEMPLAR) != 0,
            (1...Int(RS_EXEMPLAR_MAX)).contains(Int(record.exemplar_length))
        {
            pending[lane] = (record.metric, Int(record.exemplar_length), cursor + 1, [])
        }
        return problem
    }
}
