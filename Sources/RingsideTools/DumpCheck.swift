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
        var check = RecordCheck(metrics: metrics)
        // Lane by lane in cursor order, as a reader drains them: the peek is sorted by timestamp,
        // and an exemplar record's `timestamp_ns` holds its bytes, not a time.
        for peeked in records.sorted(by: { ($0.lane, $0.cursor) < ($1.lane, $1.cursor) }) {
            if let problem = check.problem(with: peeked.record, at: peeked.cursor, lane: peeked.lane) {
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
