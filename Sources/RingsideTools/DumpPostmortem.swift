import RingsideCommandLine
import CRingside
import Ringside
import RingsideJSON
import RingsideSystem
import RingsideText
import RingsideTrace
#if canImport(Glibc)
import Glibc
#endif

/// `ringside-dump postmortem BOT|FILE [--out DIR] [--live]`: everything a dead bot's files still
/// tell, without a collector: every record still in their lanes (consumed or not) as a trace
/// (Chrome's JSON and Perfetto's protobuf) and an HdrHistogram interval log, and, printed, its
/// lanes' records and thread names, counters' totals and gauges' last values. Reads read-only
/// (``RingInspector``): a file whose process was SIGKILLed reads as any other.
enum PostmortemCommand {
    /// One file read: its trace source, records, and what is printed of it.
    struct FileRead {
        var source: TraceSource
        var records: [PeekedRecord]
        var status: RingStatus
    }

    static func run(_ target: String, outDirectory: String, live: Bool, _ context: DumpContext) -> Int32 {
        let console = context.console
        // A path names a file (`DIR/ringside.NAME`); anything else is a ring of --dir.
        var directory = context.directory, name = target
        if target.contains("/") {
            let slash = target.lastIndex(of: "/")!
            let fileName = String(target[target.index(after: slash)...])
            guard fileName.hasPrefix(RingDirectory.filePrefix) else {
                console.printError(
                    "ringside-dump postmortem: \(target): not a ring file (its name does not begin with \(RingDirectory.filePrefix))")
                return ExitStatus.failure
            }
            directory = RingDirectory(slash == target.startIndex ? "/" : String(target[..<slash]))
            name = String(fileName.dropFirst(RingDirectory.filePrefix.count))
        }
        do throws(RingError) { try RingDirectory.validate(ringName: name) } catch { return context.fail(error) }
        let fileContext = DumpContext(
            directory: directory, allowedOwners: context.allowedOwners, console: console, json: context.json, raw: context.raw)

        // The bot's file, then its workers' (a worker's file named: that file alone).
        var names = [name]
        if WorkerRing(name) == nil { names += directory.ringNames().filter { WorkerRing($0)?.bot == name }.sorted() }
        var reads: [FileRead] = []
        var failed = false
        for ring in names {
            do throws(RingError) {
                let read = try readFile(ring, context: fileContext)
                if read.status.producerAlive && !live {
                    console.printError(
                        "ringside-dump postmortem: ring \(ring): its producer (pid \(read.status.producerPID)) is alive: its lanes "
                            + "are being overwritten as they are read, so a post-mortem of it would be a moment's sample. "
                            + "--live reads it anyway; a collector's capture is the way to trace a live bot")
                    if ring == name { return ExitStatus.failure }
                    failed = true
                    continue
                }
                reads.append(read)
            } catch {
                console.printError(
                    "ringside-dump postmortem: \(error)" + (ring == name ? "" : " (the trace leaves this worker's file out)"))
                if ring == name { return ExitStatus.failure }
                failed = true
            }
        }

        let sources = reads.map(\.source)
        let records = reads.enumerated().flatMap { index, read in
            read.records.map { TraceRecord(source: UInt32(index), lane: UInt32($0.lane), record: $0.record) }
        }
        let trace = TraceFiles(sources: sources, records: records, program: DumpTool.versionLine)
        let model = trace.model
        let base = (outDirectory.hasSuffix("/") ? outDirectory : outDirectory + "/") + name + "-postmortem"
        let outputs = trace.files.map { (path: base + $0.suffix, bytes: $0.bytes) }
        for output in outputs {
            do throws(Errno) { try writeReplacing(output.path, output.bytes) } catch {
                console.printError("ringside-dump postmortem: cannot write \(output.path): \(error)")
                return ExitStatus.failure
            }
        }
        if context.json {
            console.print(reportJSON(reads, model: model, outputs: outputs).text)
        } else {
            for line in report(reads, model: model, outputs: outputs) { console.print(line) }
        }
        return failed ? ExitStatus.failure : ExitStatus.success
    }

    /// One file's status, records (consumed ones included), registry, thread names and cells.
    static func readFile(_ ring: String, context: DumpContext) throws(RingError) -> FileRead {
        let inspector = try context.inspector(ring)
        let contents = try RingContents(inspector)
        var finalValues: [(metric: MetricDescriptor, value: MetricValue)] = []
        for case let metric? in contents.metrics where metric.kind != .histogram {
            let cells = try inspector.cells(of: metric)
            if metric.kind == .counter {
                finalValues.append((metric, metric.value(ofStored: cells.total)))
            } else if let last = cells.lastValue {
                finalValues.append((metric, .double(last)))
            }
        }
        let status = contents.status
        let worker = WorkerRing(ring)
        let source = TraceSource(
            ringName: ring, bot: worker?.bot ?? ring, pid: status.producerPID, isWorker: worker != nil, metrics: contents.metrics,
            threadNames: status.lanes.map(threadName),
            wallClockOffsetNanos: status.createdRealtimeNanos &- status.createdMonotonicNanos, finalValues: finalValues,
            finalValuesMonotonicNanos: status.heartbeatMonotonicNanos)
        return FileRead(source: source, records: contents.records, status: status)
    }

    /// A lane's thread track name: the name of the thread that holds it (or held it last), and,
    /// when threads took it in turn, so: the earlier holders' records are on the same track.
    static func threadName(_ lane: LaneStatus) -> String {
        let name = lane.threadName.isEmpty ? "lane \(lane.index)" : lane.threadName
        return lane.claims > 1 ? "\(name) (lane \(lane.index), claimed \(lane.claims) times)" : name
    }

    /// What is printed: each file's producer, lanes (thread names, threads that held it, records
    /// still in it of those written), counters and gauges, then the files written.
    static func report(_ reads: [FileRead], model: TraceModel, outputs: [(path: String, bytes: [UInt8])]) -> [String] {
        var lines: [String] = []
        for read in reads {
            let status = read.status
            let producer = ProducerLiveness(status: status)
            lines.append("ring \(read.source.ringName): producer pid \(status.producerPID), \(producer.short)")
            lines.append(
                "  \(status.lanesText) of \(status.capacity) records each; written \(status.writeCursor), "
                    + "dropped \(status.dropped), every lane's added up; last heartbeat "
                    + utcTimestamp(microseconds: true, realtimeNanos: status.realtimeNanos(ofMonotonic: status.heartbeatMonotonicNanos)))
            var table = TextTable(
                ["LANE", "THREAD", "TID", "CLAIMS", "RECORDS", "WRITTEN", "DROPPED"],
                right: ["LANE", "TID", "CLAIMS", "RECORDS", "WRITTEN", "DROPPED"])
            for lane in status.lanes {
                let held = read.records.filter { $0.lane == lane.index }.count
                table.add([
                    "\(lane.index)", lane.threadName.isEmpty ? "-" : lane.threadName, lane.ownerTID != 0 ? "\(lane.ownerTID)" : "-",
                    "\(lane.claims)", "\(held)", "\(lane.writeCursor)", "\(lane.dropped)",
                ])
            }
            lines += table.lines.map { "  " + $0 }
            let finals = read.source.finalValues
            if finals.isEmpty {
                lines.append("  no counters or gauges")
            } else {
                lines += keyValueLines(
                    finals.map { ("\($0.metric.kind) \($0.metric.displayName)", $0.value.text(unit: $0.metric.unit)) }, indent: "  ")
            }
        }
        let threads = model.processes.flatMap(\.threads)
        let rows = threads.reduce(0) { $0 + $1.rows }
        lines.append(
            "trace: \(model.slices.count) slices, \(model.counters.count) counter samples, \(model.processes.count) "
                + "process\(model.processes.count == 1 ? "" : "es"), \(threads.count) threads"
                + (rows > threads.count ? " on \(rows) rows (slices that overlap without nesting go on rows of their own)" : "")
                + "; \(model.unreadableRecords) records unreadable")
        for output in outputs { lines.append("wrote \(output.path) (\(humanBytes(output.bytes.count)))") }
        return lines
    }

    /// `report`'s facts as one JSON document (`--json`).
    static func reportJSON(_ reads: [FileRead], model: TraceModel, outputs: [(path: String, bytes: [UInt8])]) -> JSON {
        let files: [JSON] = reads.map { read in
            let status = read.status
            let lanes: [JSON] = status.lanes.map { lane in
                .object([
                    ("lane", .uint(UInt64(lane.index))), ("thread", .string(lane.threadName)), ("tid", .int(Int64(lane.ownerTID))),
                    ("claims", .uint(UInt64(lane.claims))), ("records", .uint(UInt64(read.records.filter { $0.lane == lane.index }.count))),
                    ("written", .uint(lane.writeCursor)), ("dropped", .uint(lane.dropped)),
                ])
            }
            let finals: [JSON] = read.source.finalValues.map { final in
                .object([
                    ("metric", .string(final.metric.name)), ("labels", final.metric.labelsJSON),
                    ("kind", .string(final.metric.kind.description)), ("value", final.value.json),
                ])
            }
            return .object([
                ("ring", .string(read.source.ringName)), ("producer", ProducerLiveness(status: status).json),
                ("lanes", .array(lanes)), ("counters_and_gauges", .array(finals)),
            ])
        }
        let threads = model.processes.flatMap(\.threads)
        return .object([
            ("files", .array(files)),
            (
                "trace",
                .object([
                    ("slices", .uint(UInt64(model.slices.count))), ("counter_samples", .uint(UInt64(model.counters.count))),
                    ("processes", .uint(UInt64(model.processes.count))), ("threads", .uint(UInt64(threads.count))),
                    ("rows", .uint(UInt64(threads.reduce(0) { $0 + $1.rows }))), ("unreadable_records", .uint(model.unreadableRecords)),
                ])
            ),
            ("wrote", .array(outputs.map { .object([("path", .string($0.path)), ("bytes", .uint(UInt64($0.bytes.count)))]) })),
        ])
    }

    /// Writes `bytes` at `path` whole or not at all: a new file beside it, synced, renamed over it.
    static func writeReplacing(_ path: String, _ bytes: [UInt8]) throws(Errno) {
        let slash = path.lastIndex(of: "/")!
        let directoryPath = slash == path.startIndex ? "/" : String(path[..<slash])
        let fileName = String(path[path.index(after: slash)...])
        let directory = try System.open(directoryPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { System.close(directory) }
        let temporary = ".\(fileName).\(getpid()).tmp"
        let fd = try System.openat(directory, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode: 0o644)
        do throws(Errno) {
            defer { System.close(fd) }
            try System.writeAll(fd, bytes)
            try System.fsync(fd)
        } catch {
            try? System.unlinkat(directory, temporary)
            throw error
        }
        do throws(Errno) { try System.renameat(directory, temporary, directory, fileName) } catch {
            try? System.unlinkat(directory, temporary)
            throw error
        }
        try System.fsync(directory)
    }
}

// MARK: - Its command line

extension PostmortemCommand: DumpCommand {
    static let name = "postmortem"
    static var options: OptionSpec { OptionSpec(flags: ["--live"], valued: ["--out"]) }
    static let usage = """
        usage: ringside-dump postmortem BOT|FILE [--out DIR] [--live]

        What a dead bot's files still tell, without a collector, read-only: every record still in
        the lanes of the bot's file and of its workers' files (BOT@PID), consumed or not, written
        as a trace: BOT-postmortem.trace.json (Chrome's Trace Event Format, which Perfetto's UI
        and chrome://tracing open) and BOT-postmortem.pftrace (Perfetto's protobuf trace), a
        process per file and a thread per lane; times as slices, other values and gauges as
        counter tracks, exemplars as slice arguments; and BOT-postmortem.hlog (HdrHistogram's
        interval log, a line per histogram per second). Prints each file's lanes (records,
        thread names), counters' totals and gauges' last values. A process killed with SIGKILL
        leaves a file that reads as any other. FILE is a path (DIR/ringside.NAME); a worker's
        name or file is read alone. Each output is written whole (a new file renamed over).
          --out DIR   where to write (default: the current directory)
          --live      read a bot whose producer is alive: refused without it, as its lanes are
                      overwritten while they are read
        """

    static func run(parsing arguments: DumpArguments, _ context: DumpContext) throws(UsageError) -> Int32 {
        let positionals = arguments.positionals
        guard positionals.count <= 1 else { throw arguments.error("unexpected argument \(positionals[1]) (one bot or file)") }
        guard let target = positionals.first, !target.isEmpty else {
            throw arguments.error("which bot? give its name (ringside-dump list shows them) or its file's path")
        }
        // A bot's name is checked as every command's is; a path (with a '/') names a file.
        if !target.contains("/") {
            do { try RingDirectory.validate(ringName: target) } catch { throw arguments.error("\(error)") }
        }
        let out = arguments.value("--out") ?? "."
        if out.isEmpty { throw arguments.error("--out is empty") }
        return run(target, outDirectory: out, live: arguments.has("--live"), context)
    }
}
