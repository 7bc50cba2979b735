/// A command-line mistake: one line saying what is wrong. Every Ringside executable prints it
/// and exits with status 2.
package struct UsageError: Error, Equatable, CustomStringConvertible {
    package let description: String
    /// Which argument it is about (its index in the arguments read), when the reader knows:
    /// so that an argument that came from a file can be named by its line.
    package var argumentIndex: Int?
    package init(_ description: String, argumentIndex: Int? = nil) {
        self.description = description
        self.argumentIndex = argumentIndex
    }

    /// Errors are equal when they say the same (where it came from is not what it says).
    package static func == (lhs: UsageError, rhs: UsageError) -> Bool { lhs.description == rhs.description }
}

/// The one reader of every executable's command line, token by token: `--flag=value` and
/// `--flag value` read alike, `-h` is `--help`, `--` ends the options, and `-` or a number
/// (`-1.5`) is an argument, not an option.
package struct ArgumentStream {
    package enum Token: Equatable {
        case option(String)
        case argument(String)
    }

    private var remaining: ArraySlice<String>
    /// The value of `--flag=value`, until `value(for:)` takes it.
    private var inline: (flag: String, value: String)?
    private var optionsEnded = false
    /// Names the command at the head of each message (`ringside-dump records: ...`); nil: none.
    private let context: String?

    package init(_ arguments: [String], context: String? = nil) {
        remaining = arguments[...]
        self.context = context
    }

    /// The index of the argument read last (the option being read, and its `=value`), or -1.
    package var lastIndex: Int { remaining.startIndex - 1 }

    /// The next option or argument, or nil at the end.
    /// - Throws: `UsageError` ("FLAG takes no value") when the last option's `=value` was not taken.
    package mutating func next() throws(UsageError) -> Token? {
        if let inline { throw error("\(inline.flag) takes no value") }
        while let token = remaining.popFirst() {
            if optionsEnded || !token.hasPrefix("-") || token == "-" || Double(token) != nil { return .argument(token) }
            if token == "--" {
                optionsEnded = true
                continue
            }
            if token.hasPrefix("--"), let equals = token.firstIndex(of: "=") {
                let flag = String(token[..<equals])
                inline = (flag, String(token[token.index(after: equals)...]))
                return .option(flag)
            }
            return .option(token == "-h" ? "--help" : token)
        }
        return nil
    }

    /// The value that follows `flag`.
    /// - Throws: `UsageError` ("FLAG needs a value") at the end of the command line.
    package mutating func value(for flag: String) throws(UsageError) -> String {
        if let inline {
            self.inline = nil
            return inline.value
        }
        guard let next = remaining.popFirst() else { throw error("\(flag) needs a value") }
        return next
    }

    /// The next option, for a command that takes options only.
    /// - Throws: `UsageError` at an argument.
    package mutating func nextOption() throws(UsageError) -> String? {
        switch try next() {
        case nil: return nil
        case let .option(option): return option
        case let .argument(argument): throw unexpected(argument)
        }
    }

    /// The error for an option the command does not have.
    package func unknown(_ option: String) -> UsageError {
        error("unknown option \(option) (see \(context.map { "\($0) " } ?? "")--help)")
    }

    /// The error for an argument the command does not take.
    package func unexpected(_ argument: String) -> UsageError {
        error("unexpected argument \(argument) (see \(context.map { "\($0) " } ?? "")--help)")
    }

    private func error(_ message: String) -> UsageError {
        UsageError(context.map { "\($0): \(message)" } ?? message)
    }
}

/// The options one command accepts: flags that stand alone, and options that take a value.
package struct OptionSpec {
    package var flags: Set<String>
    package var valued: Set<String>
    /// Valued options that may be given more than once (`--label k=v --label k2=v2`).
    package var repeatable: Set<String>

    package init(flags: Set<String> = [], valued: Set<String> = [], repeatable: Set<String> = []) {
        self.flags = flags
        self.valued = valued
        self.repeatable = repeatable
    }
}

/// A command line read by `ArgumentStream` against an `OptionSpec`: its arguments, flags and
/// option values, for the tools' subcommands.
package struct ParsedArguments {
    package private(set) var positionals: [String] = []
    package private(set) var flags: Set<String> = []
    package private(set) var values: [String: [String]] = [:]

    package func has(_ flag: String) -> Bool { flags.contains(flag) }
    package func value(_ option: String) -> String? { values[option]?.last }
    package func all(_ option: String) -> [String] { values[option] ?? [] }

    /// - Parameter context: names the command in error messages (`ringside-dump records`).
    package init(_ arguments: [String], spec: OptionSpec, context: String) throws(UsageError) {
        var stream = ArgumentStream(arguments, context: context)
        while let token = try stream.next() {
            switch token {
            case let .argument(argument):
                positionals.append(argument)
            case let .option(name) where spec.flags.contains(name):
                flags.insert(name)
            case let .option(name) where spec.valued.contains(name):
                let value = try stream.value(for: name)
                if values[name] != nil && !spec.repeatable.contains(name) {
                    throw UsageError("\(context): \(name) is given twice")
                }
                values[name, default: []].append(value)
            case let .option(name):
                throw stream.unknown(name)
            }
        }
    }
}

// MARK: - Durations

/// The one duration grammar: a number and a unit, ns, us (or µs), ms, s, m, h or d (`250ms`, `1.5s`,
/// `2m`); where `bareSeconds`, a number alone is seconds (`0.5`, `2`). Nil for anything else, for
/// zero and negatives, and past 2^64 ns.
package func durationNanos(_ text: String, bareSeconds: Bool = false) -> UInt64? {
    let units: [(String, Double)] = [
        ("ns", 1), ("us", 1e3), ("µs", 1e3), ("ms", 1e6), ("s", 1e9), ("m", 60e9), ("h", 3600e9), ("d", 86_400e9),
    ]
    var nanos = bareSeconds ? Double(text).map { $0 * 1e9 } : nil
    for (suffix, scale) in units where nanos == nil && text.hasSuffix(suffix) {
        // "ms" also ends in "s": only a number before the suffix counts.
        nanos = Double(text.dropLast(suffix.count)).map { $0 * scale }
    }
    guard let nanos, nanos.isFinite, nanos >= 1, nanos < 1.8e19 else { return nil }
    return UInt64(nanos)
}

/// A duration as the grammar above reads it back, one number and a unit: `250ms`, `30s`, `1m`.
/// Exact (window names in labels, settings): in the largest unit that divides it, `1500ms` and
/// never `1.5s`, so a window has one name. `approximate` (ages, for people): in the largest unit
/// it reaches, to a tenth at most: `1.5s`, `4.2m`, `26.3h`.
package func formatDuration(_ nanos: UInt64, approximate: Bool = false) -> String {
    let units: [(String, UInt64)] = [
        ("d", 86_400_000_000_000), ("h", 3_600_000_000_000), ("m", 60_000_000_000), ("s", 1_000_000_000),
        ("ms", 1_000_000), ("us", 1_000), ("ns", 1),
    ]
    // Days name an availability's period exactly (`30d`); ages stay in hours (`26.3h`).
    for (suffix, scale) in units where !(approximate && suffix == "d") {
        if approximate {
            // Rounded first, so that 59.97 s reaches a minute (`1m`, not `60s`).
            let tenths = UInt64((Double(nanos) / Double(scale) * 10).rounded())
            if tenths >= 10 { return "\(tenths / 10)" + (tenths % 10 == 0 ? "" : ".\(tenths % 10)") + suffix }
        } else if nanos >= scale && nanos % scale == 0 {
            return "\(nanos / scale)\(suffix)"
        }
    }
    return "\(nanos)ns"
}

/// Parses a duration (see `durationNanos`) given to `flag`.
package func parseDuration(_ text: String, flag: String, bareSeconds: Bool = false) throws(UsageError) -> UInt64 {
    guard let nanos = durationNanos(text, bareSeconds: bareSeconds) else {
        throw UsageError("\(flag): \(text) is not a duration (\(bareSeconds ? "seconds, or " : "")a number and ns, us, ms, s, m or h)")
    }
    return nanos
}
