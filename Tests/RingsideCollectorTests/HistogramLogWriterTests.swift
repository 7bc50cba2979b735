import Foundation
import Ringside
import RingsideAggregation
import RingsideCommandLine
@testable import RingsideCollector
@testable import RingsideExport
import RingsideTestSupport
import Testing

/// A folder of the test's own under the system's temporary folder, removed at the end.
private func withTemporaryFolder<Result>(_ body: (String) throws -> Result) throws -> Result {
    let folder = NSTemporaryDirectory() + "ringside-hlog-test." + UUID().uuidString
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    return try body(folder)
}

private let latency = MetricDescriptor(
    index: 0, name: "lat", kind: .histogram, unit: .nanoseconds,
    encodedLabels: "venue=X Y", help: "", sampleEvery: 1)

/// A capture at `second` seconds of one series (id 1) whose all-time histogram is `cumulative`.
private func capture(_ cumulative: Histogram, atSecond second: UInt64, id: UInt64 = 1) -> HistogramCapture {
    var capture = HistogramCapture(realtimeNanos: 1_700_000_000_000_000_000 + second * 1_000_000_000)
    capture.series[id] = HistogramCapture.Series(ring: "bot", metric: latency, cumulative: cumulative)
    return capture
}

/// A writer of `path` (in its directory, opened), its StartTime 1,700,000,000 s.
private func makeWriter(_ path: String, maxBytes: UInt64 = 1 << 20, log: CollectorLog) throws -> HistogramLogWriter {
    HistogramLogWriter(
        path: path, directory: try LogDirectory(path: LogDirectory.split(path).directory), maxBytes: maxBytes,
        startRealtimeNanos: 1_700_000_000_000_000_000, program: "test", log: log)
}

private func intervalLines(_ path: String) throws -> [[String]] {
    try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        .filter { $0.hasPrefix("Tag=") }.map { $0.split(separator: ",").map(String.init) }
}

@Suite("--hlog's writer")
struct HistogramLogWriterTests {
    @Test("each interval's line holds the records since the last, timed from the file's StartTime")
    func intervals() throws {
        try withTemporaryFolder { folder in
            let path = folder + "/latency.hlog"
            let captured = CapturedLog()
            let writer = try makeWriter(path, log: captured.log)
            var all = Histogram()
            for value: UInt64 in [1_000, 2_000, 3_000] { all.record(value) }
            writer.write(capture(all, atSecond: 1))
            writer.write(HistogramCapture(realtimeNanos: 1_700_000_002_000_000_000))  // nothing new: no line
            for value: UInt64 in [50_000, 60_000] { all.record(value) }
            writer.write(capture(all, atSecond: 3))
            writer.close()
            let text = try String(contentsOfFile: path, encoding: .utf8)
            #expect(text.hasPrefix("#[Logged with test]\n#[Histogram log format version 1.3]\n#[StartTime: 1700000000.000 "))
            let lines = try intervalLines(path)
            #expect(
                lines.map { Array($0.prefix(4)) } == [
                    ["Tag=bot.lat{venue=X%20Y}@ns", "0.000", "1.000", "3000.0"],
                    ["Tag=bot.lat{venue=X%20Y}@ns", "2.000", "1.000", "60000.0"],
                ])
            let second = try #require(HdrHistogramEncoding.decode(base64: lines[1][4]))
            #expect(second.totalCount == 2)
            // Each count in the lower HdrHistogram half of its Ringside bucket.
            #expect(
                Set(second.counts.keys)
                    == Set(
                        [50_000, 60_000].map {
                            HdrHistogramEncoding.countsIndex(of: Histogram.lowestEquivalentValue($0))
                        }))
            #expect(writer.errors == 0 && captured.all.isEmpty)
        }
    }

    @Test("at the size bound the file becomes PATH.1 and a new one begins with its header; a file already there is kept as PATH.1")
    func rotation() throws {
        try withTemporaryFolder { folder in
            let path = folder + "/latency.hlog"
            try "an older run's log\n".write(toFile: path, atomically: false, encoding: .utf8)
            let captured = CapturedLog()
            let bound: UInt64 = 2_000
            let writer = try makeWriter(path, maxBytes: bound, log: captured.log)
            #expect(try String(contentsOfFile: path + ".1", encoding: .utf8) == "an older run's log\n")
            var all = Histogram()
            var lines = 0
            for second in 1...40 as ClosedRange<UInt64> {
                for value in 0..<20 as Range<UInt64> { all.record(1_000 + value * 10_007 * second) }
                writer.write(capture(all, atSecond: second))
                lines += 1
                #expect(writer.size <= bound)
            }
            writer.close()
            #expect(writer.rotations >= 2)
            for file in [path, path + ".1"] {
                let text = try String(contentsOfFile: file, encoding: .utf8)
                #expect(text.hasPrefix("#[Logged with test]\n#[Histogram log format version 1.3]\n"), "\(file)")
                #expect(text.utf8.count <= Int(bound))
                // Each file's first interval starts at its own StartTime.
                #expect(try intervalLines(file).first?[1] == "0.000")
            }
            let last = try intervalLines(path)
            #expect(last.last?[1] == "39.000" || last.count < lines)
            #expect(writer.errors == 0)
        }
    }

    @Test("a PATH that cannot be written is logged once and counted, not fatal; what it missed is written once it can be")
    func writeError() throws {
        try withTemporaryFolder { folder in
            let path = folder + "/latency.hlog"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            let captured = CapturedLog()
            let writer = try makeWriter(path, log: captured.log)
            var all = Histogram()
            for second in 1...3 as ClosedRange<UInt64> {
                all.record(1_000 * second)
                writer.write(capture(all, atSecond: second))
            }
            #expect(writer.errors == 4)  // the open at start, then one per interval
            #expect(captured.all.count == 1)
            #expect(
                captured.contains(
                    "--hlog: \(path) is a directory, not a regular file of the collector's: left alone",
                    "tries again next interval"))
            #expect(FileManager.default.fileExists(atPath: path) && !FileManager.default.fileExists(atPath: path + ".1"))
            // A FIFO in its place: another error, said once, and no open that would block.
            try FileManager.default.removeItem(atPath: path)
            #expect(mkfifo(path, 0o644) == 0)
            expectNoBlock(on: path) {
                for second in 4...5 as ClosedRange<UInt64> {
                    all.record(1_000 * second)
                    writer.write(capture(all, atSecond: second))
                }
            }
            #expect(captured.all.count == 2 && captured.contains("\(path) is a FIFO (named pipe)"))
            try FileManager.default.removeItem(atPath: path)
            all.record(6_000)
            writer.write(capture(all, atSecond: 6))
            writer.close()
            #expect(captured.all.count == 3 && captured.contains("is written again"))
            let lines = try intervalLines(path)
            #expect(lines.count == 1)
            #expect(try #require(HdrHistogramEncoding.decode(base64: lines[0][4])).totalCount == 6, "every record since the start")
            #expect(lines[0][2] == "6.000")
            #expect(writer.errors == 6)
        }
    }

    @Test("a link planted at PATH while the log rotates is refused and counted, never written through; the log resumes once it is gone")
    func linkPlantedAtRotation() throws {
        try withTemporaryFolder { folder in
            let path = folder + "/latency.hlog"
            let target = try LinkTarget(in: folder)
            let captured = CapturedLog()
            let writer = try makeWriter(path, maxBytes: 4096, log: captured.log)
            var all = Histogram()
            var second: UInt64 = 0
            // Until the first rotation.
            while writer.rotations == 0 {
                second += 1
                for value in 0..<40 as Range<UInt64> { all.record(1_000 + value * 10_007 * second) }
                writer.write(capture(all, atSecond: second))
            }
            #expect(writer.errors == 0)
            // Between the move aside and the next create, as a racing attacker would: the file moved away, a link in its place.
            try FileManager.default.moveItem(atPath: path, toPath: folder + "/moved")
            #expect(symlink(target.path, path) == 0)
            // Writes go on into the open file until the bound calls for the next one.
            for _ in 1...40 where writer.errors < 3 {
                second += 1
                for value in 0..<40 as Range<UInt64> { all.record(1_000 + value * 10_007 * second) }
                writer.write(capture(all, atSecond: second))
            }
            #expect(target.isUnchanged && entryKind(path) == S_IFLNK)
            #expect(writer.errors == 3, "each interval's attempt counted")
            #expect(captured.all.count == 1 && captured.contains("\(path) is a symbolic link, not a regular file of the collector's"))
            try FileManager.default.removeItem(atPath: path)
            second += 1
            all.record(5)
            writer.write(capture(all, atSecond: second))
            writer.close()
            #expect(captured.contains("is written again") && entryKind(path) == S_IFREG && target.isUnchanged)
        }
    }

    @Test("series the collector let go of are forgotten")
    func forgetting() throws {
        try withTemporaryFolder { folder in
            let path = folder + "/latency.hlog"
            let writer = try makeWriter(path, log: CapturedLog().log)
            var all = Histogram()
            all.record(7)
            writer.write(capture(all, atSecond: 1, id: 1), liveSeries: [1])
            writer.write(capture(all, atSecond: 2, id: 2), liveSeries: [2])
            // Series 1 came back under its old id (it cannot, but this shows it was forgotten): all of it again.
            writer.write(capture(all, atSecond: 3, id: 1), liveSeries: [1, 2])
            let lines = try intervalLines(path)
            #expect(lines.count == 3)
        }
    }
}

@Suite("--hlog in the collector")
struct CollectorHistogramLogTests {
    @Test("the log follows the published snapshots: each interval holds the series that recorded since the last")
    func followsSnapshots() throws {
        try withRingDirectory { directory in
            try withTemporaryFolder { folder in
                let captured = CapturedLog()
                let collector = try makeCollector(directory, captured: captured)
                let path = folder + "/latency.hlog"
                let writer = try makeWriter(path, log: captured.log)
                let bot = try Bot.attach("capture-bot", directory: directory.path)
                let fast = try bot.histogram("fast", unit: .nanoseconds)
                let slow = try bot.histogram("slow", unit: .nanoseconds)
                for value in 1...100 as ClosedRange<UInt64> { fast.record(value * 1_000) }
                slow.record(5)
                writer.write(pass(collector))
                let first = try intervalLines(path)
                #expect(first.map { $0[0] } == ["Tag=capture-bot.fast@ns", "Tag=capture-bot.slow@ns"])
                let fastFirst = try #require(HdrHistogramEncoding.decode(base64: first[0][4]))
                #expect(fastFirst.totalCount == 100)
                for value in 1...10 as ClosedRange<UInt64> { fast.record(value) }
                writer.write(pass(collector))
                let second = try intervalLines(path).dropFirst(first.count)
                #expect(second.map { $0[0] } == ["Tag=capture-bot.fast@ns"], "slow recorded nothing since")
                let secondLine = try #require(second.first)
                let fastSecond = try #require(HdrHistogramEncoding.decode(base64: secondLine[4]))
                #expect(fastSecond.totalCount == 10, "only the interval's records")
                writer.write(pass(collector))
                #expect(try intervalLines(path).count == first.count + second.count, "nothing new: no line")
                writer.close()
            }
        }
    }
}

@Suite("--hlog's flags")
struct HistogramLogOptionsTests {
    @Test("--hlog, --hlog-interval and --hlog-max-bytes are read; the defaults are 1 s and 256 MiB")
    func flags() throws {
        let defaults = try #require(try CollectorOptions.parse(["--hlog", "/tmp/x.hlog"]))
        #expect(defaults.hlogPath == "/tmp/x.hlog" && defaults.hlogIntervalNanos == 1_000_000_000 && defaults.hlogMaxBytes == 256 << 20)
        #expect(try CollectorOptions.parse([]).map { $0.hlogPath == nil } == true)
        let options = try #require(
            try CollectorOptions.parse(["--hlog=/var/log/l.hlog", "--hlog-interval", "10s", "--hlog-max-bytes", "64M"]))
        #expect(options.hlogIntervalNanos == 10_000_000_000 && options.hlogMaxBytes == 64 << 20)
        #expect(try CollectorOptions.parse(["--hlog", "p", "--hlog-max-bytes", "5000"])?.hlogMaxBytes == 5000)
        #expect(try CollectorOptions.parse(["--hlog", "p", "--hlog-max-bytes", "2G"])?.hlogMaxBytes == 2 << 30)
    }

    @Test("a bad value is a usage error naming the flag; --hlog and --json-dump must name a file")
    func badValues() throws {
        for arguments in [
            ["--hlog", ""], ["--hlog"], ["--hlog", "p", "--hlog-interval", "50ms"], ["--hlog", "p", "--hlog-interval", "2h"],
            ["--hlog", "p", "--hlog-interval", "soon"], ["--hlog", "p", "--hlog-max-bytes", "100"],
            ["--hlog", "p", "--hlog-max-bytes", "-5"], ["--hlog", "p", "--hlog-max-bytes", "12X"],
            ["--hlog", "p", "--hlog-max-bytes", "99999999999999999999"], ["--hlog-interval", "5s"],
            ["--hlog-max-bytes", "1M"], ["--hlog", "/var/log/"], ["--hlog", "logs/.."], ["--json-dump", ""],
            ["--json-dump", "/tmp/"], ["--json-dump", "."],
        ] {
            #expect(throws: UsageError.self, "\(arguments)") { try CollectorOptions.parse(arguments) }
        }
        #expect(throws: UsageError("--hlog /var/log/: expected the path of a file (DIRECTORY/NAME), not of a directory")) {
            try CollectorOptions.parse(["--hlog", "/var/log/"])
        }
        #expect(try CollectorOptions.parse(["--json-dump", "latest.json"])?.jsonDumpPath == "latest.json")
    }
}
