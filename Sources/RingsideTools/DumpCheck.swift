import RingsideCommandLine
import CRingside
import Ringside
import RingsideJSON
import RingsideText

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
        var found = Findings(ring: name, path: inspector.path)
        let (status, records) = Self.checkLanes(inspector, found: &found)
        // Read after the peek, so every record's metric is published.
        let metrics = Self.checkRegistry(inspector, found: &found)
        Self.checkRecords(records, metrics: metrics, found: &found)

        problems = found.lines
        outcome = found.lines.isEmpty ? .ok : .problems
        if let status, found.lines.isEmpty {
            let metricCount = metrics?.count ?? 0
            summary =
                "ring \(name): ok (\(records.count) record\(records.count == 1 ? "" : "s") in \(status.lanesText), "
                + "\(metricCount) metric\(metricCount == 1 ? "" : "s"), producer \(ProducerLiveness(status: status).word))"
        } else {
            summary = ""
        }
    }

    /// The problems found in one ring so far, one line each, every line naming the ring.
    private struct Findings {
        let ring: String
        let path: String
        var lines: [String] = []

        /// A problem in the file's bytes: the line says the file is corrupt.
        mutating func corrupt(_ problem: String) { lines.append("ring \(ring): \(path) is corrupt: \(problem)") }

        /// An error the reader threw (its text names the ring and its file).
        mutating func failed(_ error: RingError) { lines.append("\(error)") }
    }

    /// Checks the lanes: each bad one named, then the ring's status (which stops at the first)
    /// and each lane's state; then peeks at their records. An error is said once: when the lanes
    /// were named one by one, not again for the status or the peek. Returns the status, if it was
    /// read, and the records peeked.
    private static func checkLanes(_ inspector: RingInspector, found: inout Findings) -> (RingStatus?, [PeekedRecord]) {
        let laneProblems = inspector.laneProblems()
        for problem in laneProblems { found.corrupt("\(problem)") }

        var status: RingStatus?
        do throws(RingError) { status = try inspector.settledStatus() } catch {
            if laneProblems.isEmpty { found.failed(error) }  // else the scan above said it, lane by lane
        }
        if let status {
            for lane in status.lanes {
                if case let .invalid(raw) = lane.state { found.corrupt("lane \(lane.index): unknown state \(raw)") }
            }
        }

        var records: [PeekedRecord] = []
        do throws(RingError) { records = try inspector.settledPeek() } catch {
            if status != nil && laneProblems.isEmpty { found.failed(error) }  // else said once already
        }
        return (status, records)
    }

    /// Checks the metric registry: every entry decodes, and no two name the same series. Returns
    /// the metrics by index (nil for an entry that does not decode), or nil when the registry
    /// cannot be read: its records' metrics are then not checked.
    private static func checkRegistry(_ inspector: RingInspector, found: inout Findings) -> [MetricDescriptor?]? {
        let entries: [Result<MetricDescriptor, RingCorruption>]
        do throws(RingError) { entries = try inspector.registryEntries() } catch {
            found.failed(error)
            return nil
        }
        var seen: [String: UInt32] = [:]
        for entry in entries {
            switch entry {
            case let .success(metric):
                let key = metric.displayName
                if let earlier = seen[key] {
                    found.corrupt("registry entries \(earlier) and \(metric.index) are both \(key)")
                } else {
                    seen[key] = metric.index
                }
            case let .failure(problem):
                found.corrupt(problem.description)
            }
        }
        return entries.map { try? $0.get() }
    }

    /// Checks every record peeked against the registry (`metrics`) and its lane's order; names the
    /// first `recordProblemLimit` problems and counts the rest in one line.
    private static func checkRecords(_ records: [PeekedRecord], metrics: [MetricDescriptor?]?, found: inout Findings) {
        var recordProblems: [String] = []
        var check = RecordCheck(metrics: metrics)
        // Lane by lane in cursor order, as a reader drains them: the peek is sorted by timestamp,
        // and an exemplar record's `timestamp_ns` holds its bytes, not a time.
        for peeked in records.sorted(by: { ($0.lane, $0.cursor) < ($1.lane, $1.cursor) }) {
            if let problem = check.problem(with: peeked.record, at: peeked.cursor, lane: peeked.lane) {
                recordProblems.append("lane \(peeked.lane) " + problem)
            }
        }
        for problem in recordProblems.prefix(recordProblemLimit) { found.corrupt(problem) }
        if recordProblems.count > recordProblemLimit {
            found.corrupt("\(recordProblems.count - recordProblemLimit) more records have problems")
        }
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

// MARK: - Its command line

extension CheckCommand: DumpCommand {
    static let name = "check"
    static var options: OptionSpec { OptionSpec(flags: ["--all"]) }
    static let usage = """
        usage: ringside-dump check NAME | --all [--json]

        Validates ring files: magic, version, sizes, the lanes (how many, the file's length for
        them, each lane's state and cursors), the registry, and every record now in the lanes
        (sequence, metric index, kind, flags; counters write none). Exit 0 when sound; exit 1
        with one line per problem. A ring still being created is reported as such.
        """

    static func run(parsing arguments: DumpArguments, _ context: DumpContext) throws(UsageError) -> Int32 {
        switch (try arguments.ringName(), arguments.has("--all")) {
        case (nil, false): throw arguments.error("give a ring name or --all")
        case (_?, true): throw arguments.error("give a ring name or --all, not both")
        case let (ring, _): return run(ring, context)
        }
    }
}
