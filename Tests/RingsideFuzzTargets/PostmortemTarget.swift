import Foundation
import Ringside
import RingsideTools

/// The post-mortem reader and the rest of `ringside-dump`'s readers: the input is a dead bot's
/// file, read in-process by `ringside-dump postmortem --json` (every record still in its lanes,
/// consumed or not, its cells and thread names, then the trace's three files written and the
/// report), `check`, `info --json --raw`, `records --json --raw` and `stats --json`, as an operator
/// runs them. Checks: each says 0 with JSON on its output, or 1 with its first error line naming
/// the ring; never a usage error.
enum PostmortemTarget {
    static let target = FuzzTarget(
        name: "postmortem",
        covers: "a dead bot's file: ringside-dump postmortem, check, info, records, stats",
        run: run,
        seeds: { try RingFileSeeds.make(worker: false) })

    static let commands: [[String]] = [
        ["postmortem", "fuzz", "--json", "--out"], ["check", "fuzz"], ["info", "fuzz", "--json", "--raw"],
        ["records", "fuzz", "--json", "--raw"], ["stats", "fuzz", "--json"],
    ]

    static func run(_ bytes: [UInt8]) {
        func finding(_ what: String) -> Never { FuzzFinding.report("postmortem", what) }
        FuzzScratch.empty()
        FuzzScratch.write(RingDirectory.filePrefix + "fuzz", bytes)
        let out = FuzzScratch.path + "/out"
        guard mkdir(out, 0o700) == 0 else { finding("cannot make \(out)") }
        for command in commands {
            let arguments = (command.last == "--out" ? command + [out] : command) + ["--dir", FuzzScratch.path]
            let run = Console.capture { DumpTool.run(arguments, console: $0) }
            let said = "ringside-dump \(command[0]) said \(run.status): \(run.errors.prefix(300))"
            switch run.status {
            case 0:
                let json = command.contains("--json")
                if json, (try? JSONSerialization.jsonObject(with: Data(run.output.utf8))) == nil {
                    finding("ringside-dump \(command[0]) --json printed no JSON: \(run.output.prefix(300))")
                }
            case 1:
                // check also says 1 for a file it read and found wrong: what is wrong on its output.
                if !(run.errors + run.output).contains("ring fuzz") { finding("a failure that does not name the ring: \(said)") }
            default:
                finding(said)
            }
        }
    }
}
