import Ringside
import RingsideCommandLine

/// One `ringside-dump` command: its name, its `--help`, the options it takes beside every
/// command's, and how it reads its arguments and runs. `DumpTool.commands` lists them; each
/// lives beside its code (`ListCommand` in DumpList.swift, ...).
protocol DumpCommand {
    static var name: String { get }
    static var usage: String { get }
    /// The options it takes beside every command's (`--dir`, `--allow-uid`, `--json`, `--help`, `--version`).
    static var options: OptionSpec { get }
    /// Reads its arguments (usage errors thrown) and runs; returns the exit status.
    static func run(parsing arguments: DumpArguments, _ context: DumpContext) throws(UsageError) -> Int32
}

extension DumpCommand {
    static var options: OptionSpec { OptionSpec() }
}

/// A command's arguments, read against its options and every command's, and the readers its
/// `run(parsing:)` uses: each message begins with the command (`ringside-dump records: ...`).
struct DumpArguments {
    let parsed: ParsedArguments
    /// `ringside-dump COMMAND`.
    let command: String

    var positionals: [String] { parsed.positionals }
    func has(_ flag: String) -> Bool { parsed.has(flag) }
    func value(_ option: String) -> String? { parsed.value(option) }
    func all(_ option: String) -> [String] { parsed.all(option) }

    func error(_ message: String) -> UsageError { UsageError("\(command): \(message)") }

    /// The ring's name, checked; nil when none is given.
    func ringName() throws(UsageError) -> String? {
        guard positionals.count <= 1 else { throw error("unexpected argument \(positionals[1]) (one ring name at most)") }
        guard let ring = positionals.first else { return nil }
        do { try RingDirectory.validate(ringName: ring) } catch { throw self.error("\(error)") }
        return ring
    }

    /// The ring's name, which the command needs.
    func ring() throws(UsageError) -> String {
        guard let ring = try ringName() else { throw error("which ring? give its name (ringside-dump list shows them)") }
        return ring
    }

    /// `option`'s whole number within `range`, if given.
    func count(_ option: String, _ range: ClosedRange<Int>) throws(UsageError) -> Int? {
        try value(option).map { text throws(UsageError) in try parseCount(text, option: option, context: command, range: range) }
    }
}

/// Parses a count: a non-negative integer within `range`.
func parseCount(_ text: String, option: String, context: String, range: ClosedRange<Int>) throws(UsageError) -> Int {
    try parseCount(text, in: range) { "\(context): \(option) \($0) is not a whole number from \(range.lowerBound) to \(range.upperBound)" }
}
