import CRingside
import Glibc
import Ringside
import RingsideJSON

/// What `check` found in one ring.
struct RingCheck {
    enum Outcome: String { case ok, problems, notReady = "not_ready" }

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

        // The lanes first, read by check itself: the reader stops at the first bad lane without
        // naming it, and check names each one.
        let laneProblems = LaneScan.problems(path: context.directory.filePath(for: name), header: inspector.header)
        found += laneProblems.map(corrupt)

        var status: RingStatus?
        do throws(RingError) { status = try inspector.settledStatus() } catch {
            if laneProblems.isEmpty { found.append("\(error)") } // else the scan above said it, lane by lane
        }
        if let status {
            for lane in status.lanes {
                if case let .invalid(raw) = lane.state { found.append(corrupt("lane \(lane.index): unknown state \(raw)")) }
            }
        }

        var records: [PeekedRecord] = []
        do throws(RingError) { records = try inspector.settledPeek() } catch {
            if status != nil && laneProblems.isEmpty { found.append("\(error)") } // else said once already
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
        for peeked in records {
            if let problem = Self.problem(with: peeked.record, at: peeked.cursor, metrics: metrics) {
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
            summary = "ring \(name): ok (\(records.count) record\(records.count == 1 ? "" : "s") in \(status.lanesText), "
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
        guard let kind = MetricKind(rawValue: record.kind) else { return "\(slot): unknown kind \(record.kind)" }
        guard kind != .counter else { return "\(slot): a counter's record (counters live in cells and write none)" }
        if let metric = metrics?[Int(record.metric)], metric.kind != kind {
            return "\(slot): kind \(kind) but metric \(metric.index) (\(metric.name)) is a \(metric.kind)"
        }
        guard record.flags & ~UInt8(RS_FLAG_SPAN) == 0 else { return "\(slot): unknown flags 0x\(String(record.flags, radix: 16))" }
        if record.flags & UInt8(RS_FLAG_SPAN) != 0 && kind != .histogram { return "\(slot): a span flag on a \(kind)" }
        guard record.reserved == 0 else { return "\(slot): reserved bytes are \(record.reserved), not 0" }
        return nil
    }

    var json: JSON {
        .object([("name", .string(name)), ("ok", .bool(outcome != .problems)), ("state", .string(outcome.rawValue)),
                 ("problems", .array(problems.map(JSON.string)))])
    }
}

/// The lanes' part of `check`: how many are allocated, whether the file holds them, and each
/// lane's cursors, read from the file with `pread` (so a short file cannot fault).
enum LaneScan {
    /// Times a lane's cursors are read again when a consumer moves them during the look.
    static let attempts = 5

    /// One sentence per problem (without the ring's name); none for sound lanes.
    /// - Parameter header: the header as the inspector sees it now (its layout validated at open).
    static func problems(path: String, header: rs_header) -> [String] {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return [] } // gone meanwhile: the reader says so
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return [] }
        var problems: [String] = []
        let allocated = Int(header.lanes_allocated), maxLanes = Int(header.max_lanes)
        if allocated > maxLanes {
            problems.append("lanes_allocated is \(allocated), more than max_lanes \(maxLanes)")
        }
        let lanesOffset = Int(header.lanes_offset), laneSize = Int(header.lane_size)
        // Past max_lanes the count itself is the problem (and the size it asks for may not fit in an Int).
        let needed = lanesOffset + min(allocated, maxLanes) * laneSize
        if allocated <= maxLanes && Int(info.st_size) < needed {
            problems.append("truncated: the file has \(info.st_size) bytes, its \(allocated) "
                + (allocated == 1 ? "lane needs" : "lanes need") + " \(needed)")
        }
        // Each lane the file and max_lanes both hold.
        let readable = min(min(allocated, maxLanes), max(0, (Int(info.st_size) - lanesOffset) / laneSize))
        let capacity = UInt64(1) << UInt64(header.capacity_log2)
        for lane in 0..<readable {
            if let problem = cursorProblem(fd, at: lanesOffset + lane * laneSize, capacity: capacity) {
                problems.append("lane \(lane): \(problem)")
            }
        }
        return problems
    }

    /// What is wrong with the cursors of the lane whose header is at `offset`, or nil.
    private static func cursorProblem(_ fd: Int32, at offset: Int, capacity: UInt64) -> String? {
        let readOffset = offset + MemoryLayout<rs_lane_header>.offset(of: \.read_cursor)!
        let writeOffset = offset + MemoryLayout<rs_lane_header>.offset(of: \.write_cursor)!
        for _ in 0..<attempts {
            // The read cursor before and after the write cursor: unchanged, the pair is one moment's.
            guard let read = load(fd, at: readOffset), let write = load(fd, at: writeOffset),
                  let readAgain = load(fd, at: readOffset) else { return nil }
            guard read == readAgain else { continue } // a consumer is draining it: look again
            if read > write { return "cursors out of range: the read cursor \(read) is past the write cursor \(write)" }
            if write - read > capacity {
                return "cursors out of range: read \(read), write \(write): \(write - read) records, more than the lane's "
                    + "capacity of \(capacity)"
            }
            return nil
        }
        return nil // moving all along: a live consumer, not a corrupt lane
    }

    private static func load(_ fd: Int32, at offset: Int) -> UInt64? {
        var value: UInt64 = 0
        return pread(fd, &value, 8, off_t(offset)) == 8 ? UInt64(littleEndian: value) : nil
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
