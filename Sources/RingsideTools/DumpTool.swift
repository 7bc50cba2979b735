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
    /// The commands, in the order `--help` lists them: each reads its own arguments.
    static var commands: [any DumpCommand.Type] {
        [
            ListCommand.self, InfoCommand.self, RecordsCommand.self, WatchCommand.self, StatsCommand.self, CheckCommand.self,
            CleanCommand.self, ControlCommand.self, PostmortemCommand.self, CaptureCommand.self,
        ]
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
        guard let commandIndex = commandIndex(in: arguments) else { return try withoutCommand(arguments, console: console) }
        var rest = arguments
        let word = rest.remove(at: commandIndex)
        if word == "help" {
            console.print(commands.first { $0.name == rest.first }?.usage ?? usage)
            return ExitStatus.success
        }
        guard let command = commands.first(where: { $0.name == word }) else {
            throw UsageError("ringside-dump: unknown command \"\(word)\": use one of \(commandNames) (see --help)")
        }
        let name = "ringside-dump \(word)"
        var spec = OptionSpec(flags: ["--help", "--version", "--json"], valued: ["--dir", "--allow-uid"], repeatable: ["--allow-uid"])
        spec.flags.formUnion(command.options.flags)
        spec.valued.formUnion(command.options.valued)
        spec.repeatable.formUnion(command.options.repeatable)
        let parsed = try ParsedArguments(rest, spec: spec, context: name)
        if parsed.has("--help") || parsed.has("--version") {
            console.print(parsed.has("--help") ? command.usage : versionLine)
            return ExitStatus.success
        }
        return try command.run(parsing: DumpArguments(parsed: parsed, command: name), context(parsed, name: name, console: console))
    }

    private static var commandNames: String { commands.map { $0.name }.joined(separator: ", ") }

    /// The command's index: the first word that is neither an option nor an option's value.
    private static func commandIndex(in arguments: [String]) -> Int? {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--dir" || argument == "--allow-uid" {
                index += 2
            } else if !argument.hasPrefix("-") {
                return index
            } else {
                index += 1
            }
        }
        return nil
    }

    /// A command line without a command: `--help`, `--version`, or a usage error.
    private static func withoutCommand(_ arguments: [String], console: Console) throws(UsageError) -> Int32 {
        if arguments.contains("--help") || arguments.contains("-h") {
            console.print(usage)
            return ExitStatus.success
        }
        if arguments.contains("--version") {
            console.print(versionLine)
            return ExitStatus.success
        }
        throw UsageError("ringside-dump: no command given: one of \(commandNames) (see --help)")
    }

    /// Every command's options: the ring directory, whose rings it may read, and how it prints.
    private static func context(_ parsed: ParsedArguments, name: String, console: Console) throws(UsageError) -> DumpContext {
        var owners: Set<UInt32> = []
        for text in parsed.all("--allow-uid") {
            guard let uid = UInt32(text) else { throw UsageError("\(name): --allow-uid \(text) is not a user id") }
            owners.insert(uid)
        }
        if let dir = parsed.value("--dir"), dir.isEmpty { throw UsageError("\(name): --dir is empty") }
        return DumpContext(
            directory: RingDirectory(parsed.value("--dir")), allowedOwners: owners, console: console,
            json: parsed.has("--json"), raw: parsed.has("--raw"))
    }
}
