import CRingside
import Ringside
import RingsideCommandLine
import RingsideJSON
#if canImport(Glibc)
import Glibc
#endif

/// `ringside-dump`: the operator's view of the rings in a directory, like AeronStat for Aeron
/// or babeltrace for LTTng. Every command but `clean` only reads: it opens rings read-only,
/// takes no lock, never moves a cursor, and works while producers write and a collector drains.
package enum DumpTool {
    /// The commands, in the order `--help` lists them.
    enum Command: String, CaseIterable {
        case list, info, records, watch, stats, check, clean, control, postmortem, capture

        /// The options the command takes besides the common ones.
        var spec: OptionSpec {
            var spec = OptionSpec(flags: ["--help", "--version", "--json"], valued: ["--dir", "--allow-uid"], repeatable: ["--allow-uid"])
            switch self {
            case .list: break
            case .info: spec.flags.insert("--raw")
            case .records:
                spec.flags.insert("--raw")
                spec.valued.formUnion(["--last", "--metric"])
                spec.repeatable.insert("--metric")
            case .watch: spec.valued.formUnion(["--interval", "--count"])
            case .stats:
                spec.valued.insert("--metric")
                spec.repeatable.insert("--metric")
            case .check: spec.flags.insert("--all")
            case .clean: spec.flags.formUnion(["--dry-run", "--force"])
            case .control:
                spec.flags.formUnion(["--off", "--on", "--bot-off", "--bot-on"])
                spec.valued.formUnion(["--metric", "--label", "--sample-every"])
                spec.repeatable.insert("--label")
            case .postmortem:
                spec.flags.insert("--live")
                spec.valued.insert("--out")
            case .capture:
                spec.valued.formUnion(["--collector", "--user", "--password-file"])
            }
            return spec
        }

        var usage: String {
            switch self {
            case .list:
                return """
                    usage: ringside-dump list [--json]

                    Every ring (bot file) in the directory: name, producer pid, alive or dead (and how that
                    is known: the producer's lock on the file, then whether the pid exists), heartbeat age,
                    lanes allocated of the most allowed, each lane's capacity, backlog (every lane's) and
                    fill (the fullest lane's), records written and dropped, file size, age and format version.
                    """
            case .info:
                return """
                    usage: ringside-dump info NAME [--json] [--raw]

                    The whole header (layout, producer and consumer lines); each lane (one per thread that
                    records): state, thread id, claims, cursors, backlog of its capacity, drops, heartbeat;
                    and the metric registry (index, kind, unit, name, labels, sampling, help) with each
                    metric's cells: a counter's exact total, a gauge's last value, the records dropped.
                    --raw adds the header's first 384 bytes in hex.
                    """
            case .records:
                return """
                    usage: ringside-dump records NAME [--last N] [--metric NAME]... [--json] [--raw]

                    The records now in the ring's lanes, oldest first, each with its lane and cursor, metric
                    name and wall-clock time (UTC). Counters write no records (see info for their totals).
                    Never moves a consumer's cursor and never shows a torn record: safe while the producer
                    writes and a collector drains.
                      --last N        only the last N records (of the metric, with --metric)
                      --metric NAME   only this metric's records (every label set); repeatable
                      --raw           add each record's 32 bytes in hex
                    """
            case .watch:
                return """
                    usage: ringside-dump watch [NAME] [--interval DUR] [--count N] [--json]

                    A refreshing view of every ring (or one): records written, consumed and dropped per
                    second over every lane, lanes, backlog and fill (the fullest lane's). Redraws the screen
                    on a terminal; otherwise prints one block per refresh (--json: one JSON object per line).
                      --interval DUR  time between refreshes: seconds or 250ms, 2s, 1m (default 1s)
                      --count N       stop after N refreshes (default: until interrupted)
                    """
            case .stats:
                return """
                    usage: ringside-dump stats NAME [--metric NAME]... [--json]

                    Quick statistics per metric: histograms' count, min, p50, p90, p99, p99.9 and max over the
                    records now in the lanes (exact, nearest rank); gauges' min and max over those records and
                    their last value; counters' total (exact, from the cells: counters write no records); and
                    the records each histogram and gauge dropped.
                    """
            case .check:
                return """
                    usage: ringside-dump check NAME | --all [--json]

                    Validates ring files: magic, version, sizes, the lanes (how many, the file's length for
                    them, each lane's state and cursors), the registry, and every record now in the lanes
                    (sequence, metric index, kind, flags; counters write none). Exit 0 when sound; exit 1
                    with one line per problem. A ring still being created is reported as such.
                    """
            case .clean:
                return """
                    usage: ringside-dump clean [--dry-run] [--force] [--json]

                    Removes rings whose producer is dead (its lock is free) and which are fully drained;
                    --force removes every ring whose producer is dead, drained or not, corrupt or not.
                    Never removes a ring whose producer is alive: the producer lock is held while deciding
                    and removing, so no producer can attach meanwhile. --dry-run only says what it would do.
                    """
            case .control:
                return """
                    usage: ringside-dump control BOT [--metric NAME [--label KEY=VALUE]...]
                                                [--off | --on | --sample-every N | --bot-off | --bot-on] [--json]

                    The operator's switches of a running bot, taking effect at each thread's next call, in
                    every process of the bot (its file and every worker file; a worker started later takes
                    the bot file's switches): --off stops recording a metric (every metric without
                    --metric), --on records it again as registered (sampling back to 1), --sample-every N
                    writes 1 histogram call in N (rounded up to a power of two, at most 32768; the others
                    are counted, summed and their largest kept exactly, while a collector reads them),
                    --bot-off / --bot-on switch the whole bot. Without a change, shows the switches. They
                    stay in the bot's file: a restarted bot keeps them until they are switched back.
                    The collector exports them (ringside_metric_enabled, ringside_metric_sample_every)
                    and logs each change.
                    """
            case .postmortem:
                return """
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
            case .capture:
                return """
                    usage: ringside-dump capture [BOT] [--collector HOST:PORT|URL] [--user NAME --password-file FILE]

                    Asks a running collector (started with --capture-dir) for a capture of its flight recorder's
                    records of BOT (of every bot without), now: the seconds before (--recorder-seconds) and after
                    (--capture-after) written as a trace and a latency log in its capture directory, listed at
                    /api/captures. The same as POST /api/capture, and rate-limited as it is (--capture-min-interval:
                    a request within it is refused, exit 1). Prints the capture's id.
                      --collector   the collector's address (default 127.0.0.1:9464), plain http://
                      --user        a basic-auth user of the collector's --web-config-file, its password the
                                    first line of --password-file
                    """
            }
        }
    }

    package static let usage = """
        usage: ringside-dump [--dir PATH] COMMAND [options]

        Inspects the Ringside rings in a directory without disturbing them.

        commands:
          list                              every ring: producer, heartbeat, lanes, backlog, drops, size, age
          info NAME                         the whole header, the lanes, and the metrics with their cells
          records NAME [--last N] [--metric NAME]
                                            the records now in the lanes, oldest first
          watch [NAME] [--interval DUR] [--count N]
                                            a refreshing view of rates, backlog and drops
          stats NAME [--metric NAME]        percentiles per metric, counters' totals
          check NAME | --all                validate ring files (exit 1 and one line per problem)
          clean [--dry-run] [--force]       remove rings whose producer is dead and which are drained
          control BOT [--metric NAME] [--off | --on | --sample-every N | --bot-off | --bot-on]
                                            switch a running bot's metrics off, on or sampled
          postmortem BOT|FILE [--out DIR] [--live]
                                            a dead bot's records as a trace and a latency log
          capture [BOT] [--collector HOST:PORT]
                                            ask a running collector for a capture of its recorder's records

        options (every command):
          --dir PATH         ring directory (default: $RINGSIDE_DIR, else /dev/shm)
          --allow-uid UID    also read rings owned by this user (repeatable)
          --json             JSON for scripts: one document (watch: one object per line)
          --raw              info, records: add the bytes in hex
          --help             this text; COMMAND --help describes a command
          --version          print the version and the git revision, and exit

        exit status: 0 success, 1 a ring error or problems found, 2 a usage error
        """

    /// What `--version` prints: `ringside-dump 0.4.0 (revision abc1234)`.
    package static var versionLine: String { RingsideVersion.line(program: "ringside-dump") }

    /// Runs `ringside-dump` with the process's arguments and exits with its status.
    package static func main() -> Never {
        let console = Console.standard()
        let status = run(Array(CommandLine.arguments.dropFirst()), console: console)
        console.flush()
        exit(status)
    }

    /// Runs `ringside-dump` with `arguments` (without the program name); returns the exit status.
    package static func run(_ arguments: [String], console: Console) -> Int32 {
        do {
            return try dispatch(arguments, console: console)
        } catch {
            console.printError("\(error)")
            return ExitStatus.usage
        }
    }

    private static func dispatch(_ arguments: [String], console: Console) throws(UsageError) -> Int32 {
        // The command is the first word that is neither an option nor an option's value.
        var commandIndex: Int?
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--dir" || argument == "--allow-uid" {
                index += 2
                continue
            }
            if !argument.hasPrefix("-") {
                commandIndex = index
                break
            }
            index += 1
        }
        guard let commandIndex else {
            if arguments.contains("--help") || arguments.contains("-h") {
                console.print(usage)
                return ExitStatus.success
            }
            if arguments.contains("--version") {
                console.print(versionLine)
                return ExitStatus.success
            }
            throw UsageError(
                "ringside-dump: no command given: one of \(Command.allCases.map(\.rawValue).joined(separator: ", ")) (see --help)")
        }
        var rest = arguments
        let word = rest.remove(at: commandIndex)
        if word == "help" {
            if let topic = rest.first, let command = Command(rawValue: topic) { console.print(command.usage) } else { console.print(usage) }
            return ExitStatus.success
        }
        guard let command = Command(rawValue: word) else {
            throw UsageError(
                "ringside-dump: unknown command \"\(word)\": use one of \(Command.allCases.map(\.rawValue).joined(separator: ", ")) (see --help)"
            )
        }
        let name = "ringside-dump \(command.rawValue)"
        let parsed = try ParsedArguments(rest, spec: command.spec, context: name)
        if parsed.has("--help") {
            console.print(command.usage)
            return ExitStatus.success
        }
        if parsed.has("--version") {
            console.print(versionLine)
            return ExitStatus.success
        }
        var owners: Set<UInt32> = []
        for text in parsed.all("--allow-uid") {
            guard let uid = UInt32(text) else { throw UsageError("\(name): --allow-uid \(text) is not a user id") }
            owners.insert(uid)
        }
        if let dir = parsed.value("--dir"), dir.isEmpty { throw UsageError("\(name): --dir is empty") }
        let context = DumpContext(
            directory: RingDirectory(parsed.value("--dir")), allowedOwners: owners, console: console,
            json: parsed.has("--json"), raw: parsed.has("--raw"))

        func ringName(required: Bool) throws(UsageError) -> String? {
            let positionals = parsed.positionals
            guard positionals.count <= 1 else {
                throw UsageError("\(name): unexpected argument \(positionals[1]) (one ring name at most)")
            }
            guard let ring = positionals.first else {
                if required { throw UsageError("\(name): which ring? give its name (ringside-dump list shows them)") }
                return nil
            }
            do { try RingDirectory.validate(ringName: ring) } catch { throw UsageError("\(name): \(error)") }
            return ring
        }

        switch command {
        case .list:
            if let ring = parsed.positionals.first { throw UsageError("\(name): takes no ring name (got \(ring))") }
            return ListCommand.run(context)
        case .info:
            return InfoCommand.run(try ringName(required: true)!, context)
        case .records:
            let last = try parsed.value("--last").map { text throws(UsageError) in
                try parseCount(text, option: "--last", context: name, range: 0...Int(Int32.max))
            }
            return RecordsCommand.run(try ringName(required: true)!, last: last, metrics: parsed.all("--metric"), context)
        case .watch:
            let intervalNanos =
                try parsed.value("--interval").map { text throws(UsageError) in
                    guard let nanos = durationNanos(text, bareSeconds: true), nanos >= 10_000_000, nanos <= 86_400_000_000_000 else {
                        throw UsageError("\(name): --interval \(text) is not an interval from 10ms to 24h (e.g. 1, 0.5, 250ms, 2s)")
                    }
                    return nanos
                } ?? UInt64(1_000_000_000)
            let count = try parsed.value("--count").map { text throws(UsageError) in
                try parseCount(text, option: "--count", context: name, range: 1...Int(Int32.max))
            }
            return WatchCommand.run(try ringName(required: false), intervalNanos: intervalNanos, count: count, context)
        case .stats:
            return StatsCommand.run(try ringName(required: true)!, metrics: parsed.all("--metric"), context)
        case .check:
            let ring = try ringName(required: false)
            switch (ring, parsed.has("--all")) {
            case (nil, false): throw UsageError("\(name): give a ring name or --all")
            case (_?, true): throw UsageError("\(name): give a ring name or --all, not both")
            default: return CheckCommand.run(ring, context)
            }
        case .clean:
            if let ring = parsed.positionals.first {
                throw UsageError("\(name): takes no ring name (got \(ring)); it looks at every ring")
            }
            return CleanCommand.run(dryRun: parsed.has("--dry-run"), force: parsed.has("--force"), context)
        case .control:
            let bot = try ringName(required: true)!
            var changes: [ControlCommand.Change] = []
            if parsed.has("--off") { changes.append(.metricOff) }
            if parsed.has("--on") { changes.append(.metricOn) }
            if parsed.has("--bot-off") { changes.append(.botOff) }
            if parsed.has("--bot-on") { changes.append(.botOn) }
            if let every = parsed.value("--sample-every") {
                let n = try parseCount(every, option: "--sample-every", context: name, range: 1...(1 << Int(RS_WEIGHT_LOG2_MAX)))
                changes.append(.sampleEvery(UInt32(n)))
            }
            guard changes.count <= 1 else {
                throw UsageError("\(name): one change at a time (--off, --on, --sample-every, --bot-off or --bot-on)")
            }
            let metric = parsed.value("--metric")
            if (changes.first == .botOff || changes.first == .botOn) && metric != nil {
                throw UsageError("\(name): --bot-off and --bot-on switch the whole bot: no --metric")
            }
            var labels: [String: String] = [:]
            for label in parsed.all("--label") {
                guard metric != nil else { throw UsageError("\(name): --label narrows --metric: give --metric too") }
                guard let equals = label.firstIndex(of: "="), equals != label.startIndex else {
                    throw UsageError("\(name): --label \(label): expected KEY=VALUE")
                }
                labels[String(label[..<equals])] = String(label[label.index(after: equals)...])
            }
            return ControlCommand.run(bot, metric: metric, labels: labels, change: changes.first, context)
        case .postmortem:
            let positionals = parsed.positionals
            guard positionals.count <= 1 else { throw UsageError("\(name): unexpected argument \(positionals[1]) (one bot or file)") }
            guard let target = positionals.first, !target.isEmpty else {
                throw UsageError("\(name): which bot? give its name (ringside-dump list shows them) or its file's path")
            }
            // A bot's name is checked as every command's is; a path (with a '/') names a file.
            if !target.contains("/") {
                do { try RingDirectory.validate(ringName: target) } catch { throw UsageError("\(name): \(error)") }
            }
            let out = parsed.value("--out") ?? "."
            if out.isEmpty { throw UsageError("\(name): --out is empty") }
            return PostmortemCommand.run(target, outDirectory: out, live: parsed.has("--live"), context)
        case .capture:
            let positionals = parsed.positionals
            guard positionals.count <= 1 else { throw UsageError("\(name): unexpected argument \(positionals[1]) (one bot at most)") }
            if let bot = positionals.first {
                do { try RingDirectory.validate(ringName: bot) } catch { throw UsageError("\(name): \(error)") }
            }
            return CaptureCommand.run(
                bot: positionals.first, collector: parsed.value("--collector") ?? "127.0.0.1:9464", user: parsed.value("--user"),
                passwordFile: parsed.value("--password-file"), context)
        }
    }
}

/// Parses a count: a non-negative integer within `range`.
func parseCount(_ text: String, option: String, context: String, range: ClosedRange<Int>) throws(UsageError) -> Int {
    try parseCount(text, in: range) { "\(context): \(option) \($0) is not a whole number from \(range.lowerBound) to \(range.upperBound)" }
}
