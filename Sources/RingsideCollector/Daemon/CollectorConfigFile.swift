import Glibc
import RingsideCommandLine
import RingsideHTTP
import RingsideSystem

/// The collector's configuration file (`--config FILE`): YAML whose keys are the long flags'
/// names and whose values are theirs, a list for a flag that repeats (or a list of a list's items):
///
///     listen: 0.0.0.0:9464
///     web-config-file: /etc/ringside/web.yml
///     windows: [1s, 5s, 1m]
///     allow-uid: [1500, 1501]
///     slo:
///       - order_fill_latency:p99<100us@1m
///       - orders_rejected/orders_total<0.05%@30d severity=P0
///     otlp-endpoint: http://otel-collector:4318
///
/// A flag that takes no value is `true` or `false`. What the command line gives overrides the
/// file's (every value of a repeated flag). The file is read as `TrustedFile` reads it (a regular
/// file of at most 1 MiB that only the collector's user or root can change), and what it cannot
/// be is refused with its line: another shape, an unknown key, a key that only the command line
/// takes, nesting or values past the YAML reader's bounds.
struct CollectorConfigFile {
    /// One option: the flag's name (without `--`), its value, and the line it is on.
    struct Entry: Equatable {
        var flag: String
        var value: String
        var line: Int
    }

    /// The file's options, in order: a list gives one entry per item.
    let entries: [Entry]

    /// A configuration file is small: past this it is refused unread.
    static let maxBytes = 1 << 20
    /// Which names it takes, and how, from the option table.
    static let keys = CollectorOption.configKeys
    /// Flags that take no value: `true` gives the flag, `false` leaves it out.
    static var switches: Set<String> { keys.switches }
    /// Flags of the command line alone.
    static var commandLineOnly: Set<String> { keys.commandLineOnly }
    /// Flags whose value is a comma-separated list: a YAML list of its items is joined.
    static var commaLists: Set<String> { keys.commaLists }

    /// Reads and checks the file at `path`.
    init(path: String) throws(UsageError) {
        func fail(_ reason: String) -> UsageError { UsageError("--config \(path): \(reason)") }
        // Trusted as the web configuration is (it names it, and the listener): a regular file of
        // the collector's user or root that no one else can change; a FIFO is refused unopened.
        let bytes: [UInt8]
        do { bytes = try TrustedFile.read(path, maxBytes: Self.maxBytes) } catch { throw fail(error.reason) }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw fail("not UTF-8 text") }
        let document: YAMLValue
        do { document = try YAMLSubset.parse(text) } catch { throw fail("\(error)") }
        var entries: [Entry] = []
        switch document {
        case .null: break
        case let .mapping(keys, _):
            for key in keys { entries += try Self.entries(of: key, fail: fail) }
        default:
            throw fail("line \(document.line): expected a mapping of options (listen: 127.0.0.1:9464, slo: [...])")
        }
        self.entries = entries
    }

    private static func entries(of key: YAMLEntry, fail: (String) -> UsageError) throws(UsageError) -> [Entry] {
        let flag = key.key
        guard !commandLineOnly.contains(flag) else { throw fail("line \(key.line): \(flag) is given on the command line only") }
        guard !flag.hasPrefix("-") else {
            throw fail("line \(key.line): write the option's name without dashes: \(flag.drop { $0 == "-" })")
        }
        switch key.value {
        case let .scalar(value, _, line):
            if switches.contains(flag) {
                switch value {
                case "true": return [Entry(flag: flag, value: "", line: line)]
                case "false": return []
                default: throw fail("line \(line): \(flag) is true or false")
                }
            }
            return [Entry(flag: flag, value: value, line: line)]
        case let .sequence(items, line):
            var values: [(String, Int)] = []
            for item in items {
                guard case let .scalar(value, _, itemLine) = item else {
                    throw fail("line \(item.line): \(flag)'s items are values, not lists or mappings")
                }
                values.append((value, itemLine))
            }
            guard !values.isEmpty else { throw fail("line \(line): \(flag) is an empty list") }
            if commaLists.contains(flag) { return [Entry(flag: flag, value: values.map(\.0).joined(separator: ","), line: line)] }
            return values.map { Entry(flag: flag, value: $0.0, line: $0.1) }
        case let .null(line):
            throw fail("line \(line): \(flag) has no value")
        case let .mapping(_, line):
            throw fail("line \(line): \(flag) takes a value or a list of values, not a mapping")
        }
    }

    /// The arguments as the command line gives them: the file's as `--flag=value` (a switch as
    /// `--flag`), each at the index of its entry.
    func arguments(excluding given: Set<String>) -> (arguments: [String], entries: [Entry]) {
        let kept = entries.filter { !given.contains($0.flag) }
        return (kept.map { Self.switches.contains($0.flag) ? "--\($0.flag)" : "--\($0.flag)=\($0.value)" }, kept)
    }

    /// `--config FILE` and the other arguments, if the command line gives it (once).
    static func split(_ arguments: [String]) throws(UsageError) -> (path: String, rest: [String])? {
        var path: String?
        var rest: [String] = []
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            var value: String?
            if argument == "--config" {
                guard index + 1 < arguments.endIndex else { throw UsageError("--config needs a value") }
                value = arguments[index + 1]
                index += 1
            } else if argument.hasPrefix("--config=") {
                value = String(argument.dropFirst("--config=".count))
            } else {
                rest.append(argument)
            }
            if let value {
                guard path == nil else { throw UsageError("--config is given once") }
                guard !value.isEmpty else { throw UsageError("--config is empty") }
                path = value
            }
            index += 1
        }
        return path.map { ($0, rest) }
    }

    /// The flags (without `--`) a command line names, so that they override the file's.
    static func flagNames(in arguments: [String]) -> Set<String> {
        var names: Set<String> = []
        for argument in arguments where argument.hasPrefix("--") && argument.count > 2 {
            let name = argument.dropFirst(2).prefix { $0 != "=" }
            names.insert(String(name))
            // The spellings of one flag are one flag.
            names.formUnion(keys.spellings[String(name)] ?? [])
        }
        return names
    }
}
