import Foundation
import Ringside
import RingsideTestSupport
import Testing

/// One bad command line and what its one line of standard error must say.
struct BadCommandLine: CustomTestStringConvertible, Sendable {
    let tool: String
    let arguments: [String]
    let message: String
    var testDescription: String { "\(tool) \(arguments.joined(separator: " "))" }
}

private func collector(_ arguments: [String], _ message: String) -> BadCommandLine {
    BadCommandLine(tool: "ringside-collector", arguments: arguments, message: message)
}

private func dump(_ arguments: [String], _ message: String) -> BadCommandLine {
    BadCommandLine(tool: "ringside-dump", arguments: arguments, message: message)
}

private func emit(_ arguments: [String], _ message: String) -> BadCommandLine {
    BadCommandLine(tool: "ringside-emit", arguments: arguments, message: message)
}

private let badCommandLines: [BadCommandLine] = [
    collector(["--bogus"], "unknown option --bogus"),
    collector(["-x"], "unknown option -x"),
    collector(["stray"], "unexpected argument stray"),
    collector(["--dir"], "--dir needs a value"),
    collector(["--dir", ""], "--dir is empty"),
    collector(["--ring", "../x"], "invalid ring name \"../x\""),
    collector(["--ring", ""], "it is empty"),
    collector(["--ring", "a/b"], "contains '/'"),
    collector(["--ring", String(repeating: "r", count: 201)], "at most 200"),
    collector(["--ring", "caf\u{E9}"], "non-ASCII"),
    collector(["--listen", "9464"], "expected HOST:PORT"),
    collector(["--listen", "127.0.0.1:99999"], "port must be a number from 0 to 65535"),
    collector(["--listen", "127.0.0.1:"], "port must be a number"),
    collector(["--listen", ":9464"], "missing host"),
    collector(["--listen", "::1:9464"], "in brackets"),
    collector(["--listen", "[::1:9464"], "missing ]"),
    collector(["--windows", "5x"], "not a duration"),
    collector(["--windows", "1s,1s"], "windows repeat"),
    collector(["--windows", "10ms"], "from 100ms to 24h"),
    collector(["--windows", "2d"], "from 100ms to 24h"),
    collector(["--windows", "2w"], "not a duration"),
    collector(["--config", ""], "--config is empty"),
    collector(["--config", "/nonexistent/ringside.yml"], "--config /nonexistent/ringside.yml: No such file"),
    collector(["--config"], "--config needs a value"),
    collector(["--windows", ""], "comma-separated"),
    collector(["--quantiles", "1.5"], "not a quantile"),
    collector(["--quantiles", "0"], "not a quantile"),
    collector(["--quantiles", "nan"], "not a quantile"),
    collector(["--quantiles", "0.5,,0.9"], "comma-separated"),
    collector(["--dump-interval", "10ms"], "at least 100ms"),
    collector(["--dump-interval", "soon"], "not a duration"),
    collector(["--json-dump"], "--json-dump needs a value"),
    collector(["--slo", "garbage"], "--slo 'garbage'"),
    collector(["--slo", "lat:p99<100us@7s"], "window 7s is not one of --windows"),
    collector(["--slo", "lat:p99=100us@1s"], "expected '<', '<=', '>' or '>='"),
    collector(["--slo", "orders:rate>5ms@1m"], "5ms is not a rate"),
    collector(["--slo", "pnl:min>-1@91d"], "neither one of --windows 1s,5s,1m (a histogram's) nor a period from 1s to 90d"),
    collector(["--poll", "0s"], "not a duration"),
    collector(["--poll", "500us"], "from 1ms to 10s"),
    collector(["--poll", "1h"], "from 1ms to 10s"),
    collector(["--poll", "-1s"], "not a duration"),
    collector(["--allow-uid", "me"], "not a user id"),
    collector(["--allow-uid", "-1"], "not a user id"),
    collector(["--allow-uid", "99999999999"], "not a user id"),
    collector(["--log-format", "xml"], "--log-format xml: use text or json"),
    collector(["--log-format"], "--log-format needs a value"),

    dump([], "no command given"),
    dump(["frobnicate"], "unknown command \"frobnicate\""),
    dump(["info"], "which ring?"),
    dump(["info", "../etc/passwd"], "invalid ring name"),
    dump(["info", "/etc/passwd"], "invalid ring name"),
    dump(["info", ""], "it is empty"),
    dump(["info", "a", "b"], "unexpected argument b"),
    dump(["info", "a", "--bogus"], "unknown option --bogus"),
    dump(["list", "x"], "takes no ring name"),
    dump(["list", "--json=1"], "--json takes no value"),
    dump(["list", "--dir", ""], "--dir is empty"),
    dump(["list", "--dir"], "--dir needs a value"),
    dump(["list", "--allow-uid", "bob"], "not a user id"),
    dump(["records", "a", "--last", "-1"], "--last -1 is not a whole number"),
    dump(["records", "a", "--last", "many"], "--last many is not a whole number"),
    dump(["records", "a", "--last", "1", "--last", "2"], "--last is given twice"),
    dump(["records", "a", "--last"], "--last needs a value"),
    dump(["watch", "--interval", "0"], "not an interval"),
    dump(["watch", "--interval", "forever"], "not an interval"),
    dump(["watch", "--count", "0"], "--count 0 is not a whole number"),
    dump(["check"], "give a ring name or --all"),
    dump(["check", "a", "--all"], "not both"),
    dump(["clean", "a"], "takes no ring name"),
    dump(["stats", "a", "--raw"], "unknown option --raw"),
    dump(["postmortem"], "which bot?"),
    dump(["postmortem", "a b"], "invalid ring name"),
    dump(["postmortem", "a", "b"], "unexpected argument b"),
    dump(["postmortem", "a", "--out", ""], "--out is empty"),
    dump(["postmortem", "a", "--out"], "--out needs a value"),
    dump(["postmortem", "a", "--last", "1"], "unknown option --last"),

    emit([], "--ring NAME is required"),
    emit(["--ring", "../x", "m", "1"], "invalid ring name"),
    emit(["--ring", "r"], "which metric?"),
    emit(["--ring", "r", "9bad", "1"], "metric \"9bad\""),
    emit(["--ring", "r", "m", "--kind", "summary"], "--kind summary"),
    emit(["--ring", "r", "m", "--unit", "parsecs"], "--unit parsecs"),
    emit(["--ring", "r", "m", "--kind", "counter", "--unit", "s"], "counters have no unit"),
    emit(["--ring", "r", "m", "--label", "novalue"], "expected KEY=VALUE"),
    emit(["--ring", "r", "m", "--label", "=v"], "expected KEY=VALUE"),
    emit(["--ring", "r", "m", "--label", "k=v", "--label", "k=w"], "--label k is given twice"),
    emit(["--ring", "r", "m", "--label", "9k=v"], "--label:"),
    emit(["--ring", "r", "m", "--capacity", "1000"], "a power of two"),
    emit(["--ring", "r", "m", "--capacity", "8"], "a power of two"),
    emit(["--ring", "r", "m", "--capacity", "536870912"], "a power of two"),
    emit(["--ring", "r", "m", "abc"], "value 1 \"abc\": not a number"),
    emit(["--ring", "r", "m", "1", "-5"], "value 2 \"-5\": negative"),
    emit(["--ring", "r", "m", "1.5"], "not a whole number"),
    emit(["--ring", "r", "m", "99999999999999999999999"], "out of range"),
    emit(["--ring", "r", "m", "--kind", "gauge", "nan"], "not a finite number"),
    emit(["--ring", "r", "m", "--kind", "gauge", "inf"], "not a finite number"),
    emit(["--ring", "r", "m", "--kind", "gauge", "0x10"], "not a number"),
    emit(["--ring", "r", "m", "--dir", ""], "--dir is empty"),
    emit(["--ring", "r", "m", "--bogus"], "unknown option --bogus"),
    emit(["--ring", "r", "--ring", "s", "m"], "--ring is given twice"),
]

@Suite("Bad command lines: one clear line and a non-zero exit, for every tool")
struct CommandLineTests {
    @Test(
        "every bad flag, value and name: exit 2, one line naming the tool and the problem, nothing else",
        arguments: badCommandLines)
    func badCommandLine(_ line: BadCommandLine) throws {
        try withRingDirectory { directory in
            // The tools look in the test's own directory, so nothing is created anywhere else.
            let arguments = line.arguments.contains("--dir") ? line.arguments : ["--dir", directory.path] + line.arguments
            let run = try runProcess(line.tool, arguments, timeoutSeconds: 20)
            #expect(run.status == 2, "exit \(String(describing: run.status)): \(run.errors)")
            #expect(run.output.isEmpty, "standard output: \(run.output)")
            #expect(run.errorLines.count == 1, "standard error: \(run.errors)")
            let first = run.errorLines.first ?? ""
            #expect(first.hasPrefix(line.tool + ":") || first.hasPrefix(line.tool + " "), "\(first)")
            #expect(first.contains(line.message), "\(first)")
            // Nothing was written: no ring appeared.
            #expect(directory.ringNames().isEmpty)
        }
    }

    @Test(
        "a ring that cannot be read is one line and exit 1, naming the ring",
        arguments: [
            ("ringside-dump", ["info", "missing"], "ring missing: no such ring"),
            ("ringside-dump", ["records", "missing"], "ring missing: no such ring"),
            ("ringside-dump", ["stats", "missing"], "ring missing: no such ring"),
        ])
    func unreadableRing(tool: String, arguments: [String], message: String) throws {
        try withRingDirectory { directory in
            let run = try runProcess(tool, arguments + ["--dir", directory.path])
            #expect(run.status == 1)
            #expect(run.errorLines.count == 1 && run.errors.contains(message), "\(run.errors)")
        }
    }

    @Test("a directory that does not exist is one line and a non-zero exit")
    func missingDirectory() throws {
        let run = try runProcess("ringside-dump", ["list", "--dir", "/nonexistent/ringside-abuse"])
        #expect(run.status == 1)
        #expect(run.errorLines.count == 1 && run.errors.contains("/nonexistent/ringside-abuse"), "\(run.errors)")
    }

    @Test("an address the collector cannot bind is one line and exit 1")
    func unbindableAddress() throws {
        try withRingDirectory { directory in
            // 192.0.2.1 (TEST-NET-1) is not an address of this machine.
            let run = try runProcess("ringside-collector", ["--dir", directory.path, "--listen", "192.0.2.1:0"])
            #expect(run.status == 1)
            #expect(run.errorLines.count == 1 && run.errors.contains("cannot serve HTTP"), "\(run.errors)")
        }
    }
}
