import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
@testable import RingsideCollector
import RingsideTestSupport
import Testing

@Suite("ringside-collector's capture flags: what it refuses, and why")
struct CaptureFlagTests {
    /// Runs the collector with `arguments` over a fresh ring directory (it must exit at once).
    func refusal(_ arguments: [String], in directory: RingDirectory) throws -> ProcessRun {
        try runProcess("ringside-collector", ["--dir", directory.path, "--listen", "127.0.0.1:0"] + arguments, timeoutSeconds: 60)
    }

    @Test(
        "usage errors (exit 2): capture flags without --capture-dir, a bound that does not parse, --capture-dir with the recorder off, values out of range, an SLO marked capture without --capture-dir"
    )
    func usageErrors() throws {
        try withRingDirectory { directory in
            let captures = try TemporaryDirectory("ringside-captures")
            defer { captures.remove() }
            let dir = ["--capture-dir", captures.path]
            let cases: [(arguments: [String], says: String)] = [
                (["--capture-when", "order_fill_latency>5ms"], "--capture-when needs --capture-dir DIR"),
                (["--capture-after", "1s"], "--capture-after needs --capture-dir DIR"),
                (["--capture-min-interval", "1m"], "--capture-min-interval needs --capture-dir DIR"),
                (["--capture-max-records", "5000"], "--capture-max-records needs --capture-dir DIR"),
                (dir + ["--capture-when", "order_fill_latency>fast"], "fast is not a threshold"),
                (dir + ["--capture-when", "order_fill_latency"], "expected METRIC>THRESHOLD"),
                (dir + ["--capture-when", "order_fill_latency{symbol=\"AAPL\">5ms"], "--capture-when"),
                (dir + ["--recorder-seconds", "0"], "--capture-dir needs the flight recorder: --recorder-seconds 0 turns it off"),
                (dir + ["--capture-after", "2m"], "must be from 0 to 1m"),
                (dir + ["--capture-min-interval", "100ms"], "must be from 1s to 24h"),
                (dir + ["--capture-max-records", "10"], "expected a number of records from 1000 to 10000000"),
                (["--slo", "order_fill_latency:p99<1ms@1s capture"], "capture needs --capture-dir DIR"),
            ]
            for (arguments, says) in cases {
                let run = try refusal(arguments, in: directory)
                #expect(
                    run.status == 2 && run.errors.contains(says), "\(arguments): \(run.status.map(String.init) ?? "killed") \(run.errors)")
            }
        }
    }

    @Test("the capture flags' defaults are the documented ones: 2 s after, one a minute per trigger, 250,000 records")
    func defaults() throws {
        let options = try #require(try CollectorOptions.parse(["--capture-dir", "/tmp/a"]))
        #expect(options.captureDirectory == "/tmp/a" && options.captureBounds.isEmpty)
        #expect(options.captureAfterNanos == 2_000_000_000 && options.captureMinIntervalNanos == 60_000_000_000)
        #expect(options.captureMaxRecords == 250_000)
        #expect(CollectorOptions.usage.contains("(default 250000; 1000 to 10000000"))
    }

    @Test("a reload that changes the capture flags applies them at the next start, and says so")
    func reloadWaitsForAStart() throws {
        let running = try #require(try CollectorOptions.parse(["--capture-dir", "/tmp/a"]))
        for flags in [
            ["--capture-dir", "/tmp/b"], ["--capture-dir", "/tmp/a", "--capture-after", "5s"],
            ["--capture-dir", "/tmp/a", "--capture-min-interval", "5m"], ["--capture-dir", "/tmp/a", "--capture-max-records", "5000"],
            ["--capture-dir", "/tmp/a", "--capture-when", "x>1ms"], [],
        ] {
            let next = try #require(try CollectorOptions.parse(flags))
            #expect(ReloadPlan.startOnlyChanges(from: running, to: next) == ["--capture-*"], "\(flags)")
            #expect(ReloadPlan.effective(next, running: running) == running, "\(flags)")
        }
    }

    @Test("a capture directory it cannot use stops it at start (exit 1), saying why: not a directory, writable by others, another user's")
    func unusableDirectories() throws {
        try withRingDirectory { directory in
            let parent = try TemporaryDirectory("ringside-captures")
            defer { parent.remove() }
            let notDirectory = parent.path + "/file"
            try "not a directory".write(toFile: notDirectory, atomically: true, encoding: .utf8)
            let open = parent.path + "/open"
            mkdir(open, 0o755)
            chmod(open, 0o777)  // writable by anyone, not sticky
            var cases: [(path: String, says: String)] = [
                (notDirectory, "--capture-dir \(notDirectory): "), (open, "--capture-dir \(open): "),
                (parent.path + "/missing/deeper", "--capture-dir \(parent.path)/missing/deeper: "),
            ]
            if try requiredRoot("a capture directory of user nobody") {
                let others = parent.path + "/nobodys"
                mkdir(others, 0o755)
                try #require(chown(others, 65534, 65534) == 0)
                cases.append((others, "--capture-dir \(others): "))
            }
            for (path, says) in cases {
                let run = try refusal(["--capture-dir", path], in: directory)
                #expect(run.status == 1 && run.errors.contains(says) && run.errors.contains("not starting"), "\(path): \(run.errors)")
            }
            let mode = try FileManager.default.attributesOfItem(atPath: open)[.posixPermissions] as? Int
            #expect(mode == 0o777, "the directory refused is left as it was")
        }
    }

    @Test(
        "a capture directory the collector's user cannot write (run as nobody, the directory root's) stops it at start (exit 1), saying so")
    func unwritableDirectory() throws {
        guard try requiredRoot("a collector run as user nobody (setpriv)"), let setpriv = try requiredSystemTool("setpriv") else { return }
        try withRingDirectory { directory in
            try #require(chown(directory.path, 65534, 65534) == 0)
            let captures = try TemporaryDirectory("ringside-captures")
            defer { captures.remove() }
            chmod(captures.path, 0o755)  // root's: nobody may look, not write
            let run = try runProcess(
                setpriv,
                [
                    "--reuid=65534", "--regid=65534", "--clear-groups", try builtExecutable("ringside-collector"), "--dir", directory.path,
                    "--listen", "127.0.0.1:0", "--capture-dir", captures.path,
                ], timeoutSeconds: 60)
            #expect(
                run.status == 1 && run.errors.contains("--capture-dir \(captures.path): ") && run.errors.contains("Permission denied"),
                "\(run.status.map(String.init) ?? "killed"): \(run.errors)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: captures.path).isEmpty)
        }
    }
}
