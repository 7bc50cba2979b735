import RingsideCommandLine

/// One of the collector's options, declared once: its flag, its value's placeholder and help
/// lines (for `--help`), how its value is read and checked, where it may be given (the command
/// line, the configuration file) and whether a reload applies it. `CollectorOption.all` lists
/// them; the parser, `--help`, the configuration file's keys and the reload plan read that list.
struct CollectorOption {
    /// What follows the flag.
    enum Takes: Equatable {
        /// Nothing: a switch (`true` or `false` in the configuration file).
        case nothing
        /// One value, shown in `--help` as the placeholder.
        case value(String)
        /// A comma-separated list (a YAML list of its items in the configuration file).
        case list(String)
    }

    /// Where the option may be given.
    enum Scope: Equatable {
        case anywhere
        case commandLineOnly
    }

    /// The flag (`--dir`), then its other spellings (`--web.config.file`).
    let names: [String]
    let takes: Takes
    /// What `--help` says, a line each (already wrapped); empty: said with the option before it.
    let help: [String]
    /// `--help`'s head for the option when it is not the flag and its placeholder.
    let head: String?
    let scope: Scope
    /// The settings it sets that only a start changes (a reload keeps them as running, and says
    /// so); empty: a reload applies it.
    let startOnly: [StartOnlySetting]
    /// Reads the value (checked against its range) into the options being read.
    let read: (inout OptionsReading, OptionValue) throws(UsageError) -> Void

    init(
        _ names: [String], _ takes: Takes = .nothing, help: [String], head: String? = nil, scope: Scope = .anywhere,
        startOnly: [StartOnlySetting] = [], read: @escaping (inout OptionsReading, OptionValue) throws(UsageError) -> Void
    ) {
        self.names = names
        self.takes = takes
        self.help = help
        self.head = head
        self.scope = scope
        self.startOnly = startOnly
        self.read = read
    }

    var name: String { names[0] }

    /// Every option, in the order `--help` lists them.
    static var all: [CollectorOption] {
        startAndServe + figures + latencyLog + seriesBounds + state + recorder + captures + threadSamples + OTLPFlags.options
            + running
    }

    /// Each option by each of its names.
    static func byName() -> [String: CollectorOption] {
        var table: [String: CollectorOption] = [:]
        for option in all {
            for name in option.names { table[name] = option }
        }
        return table
    }

    /// The names (without `--`) the configuration file may not set, those that take no value,
    /// those whose value is a comma-separated list, and the other spellings of each name.
    static var configKeys: ConfigKeys {
        var keys = ConfigKeys()
        for option in all {
            let bare = option.names.map { String($0.dropFirst(2)) }
            switch (option.scope, option.takes) {
            case (.commandLineOnly, _): keys.commandLineOnly.formUnion(bare)
            case (.anywhere, .nothing): keys.switches.formUnion(bare)
            case (.anywhere, .list): keys.commaLists.formUnion(bare)
            case (.anywhere, .value): break
            }
            for name in bare { keys.spellings[name] = Set(bare) }
        }
        return keys
    }

    /// The option's lines in `--help`: the flag and its placeholder, the help beside it (or below,
    /// for a long head), each further line under the first.
    var usageLines: [String] {
        guard let first = help.first else { return [] }
        let head: String
        switch takes {
        case .nothing: head = self.head ?? name
        case let .value(placeholder), let .list(placeholder): head = self.head ?? "\(name) \(placeholder)"
        }
        let indent = String(repeating: " ", count: 25)
        var lines: [String]
        if head.count <= 22 {
            lines = ["  " + head + String(repeating: " ", count: 23 - head.count) + first]
        } else {
            lines = ["  " + head, indent + first]
        }
        lines += help.dropFirst().map { indent + $0 }
        return lines
    }
}

/// The configuration file's keys, as the option table says (names without `--`).
struct ConfigKeys {
    var commandLineOnly: Set<String> = []
    var switches: Set<String> = []
    var commaLists: Set<String> = []
    /// Every spelling of each name's option (itself included).
    var spellings: [String: Set<String>] = [:]
}

/// What the flags read so far say: the options, and what is kept until the end of the line.
struct OptionsReading {
    var options = CollectorOptions()
    /// `--dir`'s value (the directory is made once every flag is read).
    var directory: String?
    /// Kept until the end: `--otlp-endpoint` may come after the others.
    var otlp = OTLPFlags()
    /// `--help` or `--version`, which end the reading.
    var asked: Invocation<CollectorOptions>?
}

/// An option's value as given (empty for a switch), and the readers that check it against a
/// range and say the option's own message otherwise.
struct OptionValue {
    let flag: String
    let text: String

    /// A duration within `range` (see `parseDuration`); `message` says why one is refused.
    func duration(
        _ range: ClosedRange<UInt64>, zeroIsOff: Bool = false, step: UInt64 = 1, bareSeconds: Bool = false,
        _ message: (String) -> String
    ) throws(UsageError) -> UInt64 {
        try parseDuration(text, flag: flag, bareSeconds: bareSeconds, in: range, step: step, zeroIsOff: zeroIsOff, else: message)
    }

    /// Bytes, with K, M and G suffixes; `bounds` says the range in its message ("from 1M to 4G").
    func bytes(_ range: ClosedRange<UInt64>, _ bounds: String) throws(UsageError) -> UInt64 {
        try parseByteSize(text, in: range) { "\(flag) \($0): expected a number of bytes \(bounds) (K, M and G suffixes: 1024s)" }
    }

    func count(_ range: ClosedRange<Int>, _ message: (String) -> String) throws(UsageError) -> Int {
        try parseCount(text, in: range, else: message)
    }

    /// A number of series, 1 to 100,000,000.
    func series() throws(UsageError) -> Int {
        try count(1...100_000_000) { "\(flag): \($0) is not a number of series from 1 to 100000000" }
    }

    /// A path, not empty.
    func file() throws(UsageError) -> String {
        guard !text.isEmpty else { throw UsageError("\(flag) is empty") }
        return text
    }
}
