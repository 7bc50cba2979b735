import RingsideCommandLine
/// The exit statuses of both tools.
package enum ExitStatus {
    /// Done, and nothing wrong was found.
    package static let success: Int32 = 0
    /// A ring error, or problems found (`check`), or bad input lines (`emit`).
    package static let failure: Int32 = 1
    /// The command line is wrong.
    package static let usage: Int32 = 2
}

/// The options one command accepts: flags that stand alone, and options that take a value.
struct OptionSpec {
    var flags: Set<String> = []
    var valued: Set<String> = []
    /// Valued options that may be given more than once (`--label k=v --label k2=v2`).
    var repeatable: Set<String> = []
}

/// A command line split into positional arguments, flags and option values.
struct ParsedArguments {
    private(set) var positionals: [String] = []
    private(set) var flags: Set<String> = []
    private(set) var values: [String: [String]] = [:]

    func has(_ flag: String) -> Bool { flags.contains(flag) }
    func value(_ option: String) -> String? { values[option]?.last }
    func all(_ option: String) -> [String] { values[option] ?? [] }

    /// Parses `arguments` against `spec`. Accepts `--option value` and `--option=value`; `--`
    /// ends the options; a token that reads as a number (`-1.5`) is an argument, not an option.
    /// - Parameter context: names the command in error messages (`ringside-dump records`).
    init(_ arguments: some Sequence<String>, spec: OptionSpec, context: String) throws(UsageError) {
        var remaining = Array(arguments)[...]
        var optionsEnded = false
        while let argument = remaining.popFirst() {
            if optionsEnded || !argument.hasPrefix("-") || argument == "-" || Double(argument) != nil {
                positionals.append(argument)
                continue
            }
            if argument == "--" { optionsEnded = true; continue }
            var name = argument == "-h" ? "--help" : argument
            var inline: String?
            if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                name = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            if spec.flags.contains(name) {
                guard inline == nil else { throw UsageError("\(context): \(name) takes no value") }
                flags.insert(name)
            } else if spec.valued.contains(name) {
                guard let value = inline ?? remaining.popFirst() else {
                    throw UsageError("\(context): \(name) needs a value")
                }
                if values[name] != nil && !spec.repeatable.contains(name) {
                    throw UsageError("\(context): \(name) is given twice")
                }
                values[name, default: []].append(value)
            } else {
                throw UsageError("\(context): unknown option \(name) (see \(context) --help)")
            }
        }
    }
}

/// Parses a count: a non-negative integer within `range`.
func parseCount(_ text: String, option: String, context: String, range: ClosedRange<Int>) throws(UsageError) -> Int {
    guard let value = Int(text), range.contains(value) else {
        throw UsageError("\(context): \(option) \(text) is not a whole number from \(range.lowerBound) to \(range.upperBound)")
    }
    return value
}

/// Parses an interval: seconds (`0.5`, `2`) or a number and a unit (`250ms`, `2s`, `1m`).
func parseInterval(_ text: String, option: String, context: String) throws(UsageError) -> Double {
    let units: [(String, Double)] = [("ms", 1e-3), ("us", 1e-6), ("s", 1), ("m", 60), ("h", 3600)]
    var seconds = Double(text)
    if seconds == nil {
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            if let number = Double(text.dropLast(suffix.count)) { seconds = number * scale; break }
        }
    }
    guard let seconds, seconds.isFinite, seconds >= 0.01, seconds <= 86_400 else {
        throw UsageError("\(context): \(option) \(text) is not an interval from 10ms to 24h (e.g. 1, 0.5, 250ms, 2s)")
    }
    return seconds
}
