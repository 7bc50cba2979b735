import Foundation
@testable import RingsideCollector
import RingsideCommandLine
import RingsideTestSupport
import Testing

@Suite("The collector's options, declared once: --help, the parser, the configuration file's keys and the reload read one table")
struct CollectorOptionTableTests {
    @Test("every option has one name of its own, is in --help with its placeholder, and is read by the parser")
    func everyOptionOnce() throws {
        let options = CollectorOption.all
        let names = options.flatMap(\.names)
        #expect(Set(names).count == names.count, "a name given twice: \(names)")
        #expect(names.allSatisfy { $0.hasPrefix("--") && $0.count > 2 })
        let usage = CollectorOptions.usage
        for option in options {
            switch option.takes {
            case .nothing: #expect(usage.contains("  \(option.name) "), "\(option.name) in --help")
            case let .value(placeholder), let .list(placeholder):
                #expect(usage.contains("\(option.name) \(placeholder)"), "\(option.name) \(placeholder) in --help")
            }
        }
        // Each switch a configuration file may give is read by the parser (the others need values).
        #expect(try CollectorOptions.parse(["--web.enable-lifecycle"])?.reloadEndpoint == true)
        #expect(try CollectorOptions.parse(["--demo"])?.demo == true)
        #expect(try CollectorOptions.parse(["--help"]) == nil)
    }

    @Test("--help keeps its shape: a flag and its help on one line, a long one's help below it, every line under 100 columns")
    func usageShape() {
        let lines = CollectorOptions.usage.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.contains("  --dir PATH             ring directory (default: $RINGSIDE_DIR, else /dev/shm)"))
        #expect(lines.contains("  --web-enable-lifecycle POST /-/reload re-reads the configuration, as SIGHUP does"))
        #expect(lines.contains("  --native-histograms SCHEMA"))
        #expect(lines.contains("  --otlp-cert-file FILE, --otlp-key-file FILE"))
        #expect(!lines.contains { $0.hasPrefix("  --otlp-key-file") }, "said with --otlp-cert-file's line")
        #expect(lines.allSatisfy { $0.count < 100 }, "\(lines.filter { $0.count >= 100 })")
    }

    @Test("the configuration file's keys come from the table: switches, lists, the command line's own, and both spellings")
    func configKeys() {
        let keys = CollectorOption.configKeys
        #expect(keys.switches == ["web-enable-lifecycle", "web.enable-lifecycle"])
        #expect(keys.commandLineOnly == ["config", "help", "version", "demo"])
        #expect(keys.commaLists == ["windows", "quantiles"])
        #expect(CollectorConfigFile.flagNames(in: ["--web.config.file=/x"]) == ["web.config.file", "web-config-file"])
        #expect(CollectorConfigFile.flagNames(in: ["--listen", "x"]) == ["listen"])
    }

    @Test("what a reload keeps for the next start is what the table says, each named by its flag")
    func startOnly() throws {
        let flags = Set(ReloadPlan.startOnly.map(\.flag))
        #expect(
            flags == [
                "--dir", "--ring", "--windows", "--allow-uid", "--poll", "--max-series*", "--native-histograms", "--history*",
                "--thread-sample-interval", "--recorder-*", "--capture-*", "--log-format", "--web-enable-lifecycle", "--state-*",
            ])
        let changed = try #require(try CollectorOptions.parse(["--max-series-per-ring", "10", "--poll", "5ms", "--listen", "127.0.0.1:0"]))
        #expect(ReloadPlan.startOnlyChanges(from: CollectorOptions(), to: changed) == ["--poll", "--max-series*"])
        let effective = ReloadPlan.effective(changed, running: CollectorOptions())
        #expect(effective.maxSeriesPerRing == CollectorOptions().maxSeriesPerRing && effective.listen == "127.0.0.1:0")
    }

    @Test("the docs' check of a flag table names the options it misses and the ones that do not exist")
    func docCheckFindsProblems() {
        let doc = """
            # Things
            | not | this |
            | --- | --- |
            | `--nothing` | table |

            ## Flags and defaults

            Some words.

            | flag | default | meaning |
            | --- | --- | --- |
            | `--dir PATH` | `/dev/shm` | the ring directory, not `--ring` |
            | `--web-config-file PATH` (also `--web.config.file`) | off | see `--listen` |
            | `--otlp-temporality cumulative\\|delta` | x | y |
            | `--no-such-flag N` | 1 | z |

            | `--later` | table |
            """
        let problems = DocFlagTable.problems(in: doc)
        #expect(problems.unknown == ["--no-such-flag"])
        #expect(problems.missing.contains("--ring") && problems.missing.contains("--listen"))
        #expect(!problems.missing.contains("--dir") && !problems.missing.contains("--web-config-file"))
        #expect(!problems.missing.contains("--otlp-temporality"))
        #expect(DocFlagTable.problems(in: "# The collector\n| `--dir` |\n").tableFound == false)
    }

    @Test("docs/collector.md's flag table names every option and no other")
    func docTableMatches() throws {
        let doc = try String(contentsOfFile: packageRoot + "/docs/collector.md", encoding: .utf8)
        let problems = DocFlagTable.problems(in: doc)
        #expect(problems.tableFound, "docs/collector.md: no table under a heading that starts with Flags or Options")
        #expect(problems.missing.isEmpty, "options missing from docs/collector.md's flag table: \(problems.missing)")
        #expect(problems.unknown.isEmpty, "docs/collector.md's flag table names options that do not exist: \(problems.unknown)")
    }
}

/// The first markdown table under the first heading that starts with "Flags" or "Options", read
/// for the flags in backticks in its rows' first cells, against the option table.
enum DocFlagTable {
    struct Problems {
        var tableFound = false
        /// Options the table does not name (by none of their spellings).
        var missing: [String] = []
        /// Flags the table names that are no option's.
        var unknown: [String] = []
    }

    static func problems(in markdown: String) -> Problems {
        let documented = flags(in: markdown)
        var problems = Problems(tableFound: documented != nil)
        guard let documented else { return problems }
        let options = CollectorOption.all
        let known = Set(options.flatMap(\.names))
        problems.missing = options.filter { Set($0.names).isDisjoint(with: documented) }.map(\.name)
        problems.unknown = documented.subtracting(known).sorted()
        return problems
    }

    /// The flags named in the table's first cells; nil when there is no such table.
    static func flags(in markdown: String) -> Set<String>? {
        let lines = markdown.split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard
            let heading = lines.firstIndex(where: { line in
                guard line.hasPrefix("#") else { return false }
                let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces)
                return title.hasPrefix("Flags") || title.hasPrefix("Options")
            }),
            let start = lines[(heading + 1)...].firstIndex(where: { $0.hasPrefix("|") })
        else { return nil }
        let rows = lines[start...].prefix { $0.hasPrefix("|") }.dropFirst(2)  // the header and its rule
        var flags: Set<String> = []
        for row in rows { flags.formUnion(backtickedFlags(in: firstCell(of: row))) }
        return flags
    }

    /// The row's first cell: up to its second pipe not escaped.
    private static func firstCell(of row: String) -> String {
        var cell = ""
        var previous: Character = " "
        for character in row.dropFirst() {
            if character == "|" && previous != "\\" { break }
            cell.append(character)
            previous = character
        }
        return cell
    }

    /// `--name` of each backticked span that begins with `--` (`--dir PATH` gives `--dir`).
    private static func backtickedFlags(in text: String) -> Set<String> {
        let spans = text.split(separator: "`", omittingEmptySubsequences: false)
        var flags: Set<String> = []
        for (index, span) in spans.enumerated() where index % 2 == 1 && span.hasPrefix("--") {
            flags.insert(String(span.prefix { $0 != " " && $0 != "=" }))
        }
        return flags
    }
}
