import Foundation
@testable import RingsideBench
import Testing

/// `ringside-bench soak` for five minutes, through the same code (`SoakBenchmark.run`), with a
/// warm-up of 100 s: eight producers at full speed starve a machine of two cores, so it runs only
/// with `RINGSIDE_SOAK=1`, which `.ci/run` sets in a step of its own after `swift test`
/// (`swift test --filter SoakTests`), when it has the machine alone.
@Suite("ringside-bench soak")
struct SoakTests {
    static let enabled = ProcessInfo.processInfo.environment["RINGSIDE_SOAK"] == "1"

    @Test(
        "five minutes of eight producers at full speed, workers recycled and OTLP failing every other minute: RSS and fds flat, nothing lost, every counter exact",
        .enabled(
            if: enabled, "the soak takes the machine for five minutes: RINGSIDE_SOAK=1 swift test --filter SoakTests runs it (.ci/run does)"
        ),
        .timeLimit(.minutes(10)))
    func fiveMinutes() throws {
        var settings = SoakSettings()
        settings.seconds = 300
        settings.warmupSeconds = 100
        let report = try SoakBenchmark.run(settings) { print("soak: \($0)") }
        print(report.table)
        #expect(report.samples.count == 30)
        for check in report.checks {
            #expect(check.passed, "\(check.name): \(check.detail)")
        }
        #expect(report.passed)
    }
}

/// The soak's parts that need no processes: its flags, its flatness checks, the producers' lines.
@Suite("ringside-bench soak's parts")
struct SoakPartsTests {
    @Test("soak's flags: the defaults, each one's range, soak alone, and a run long enough for the warm-up and two minutes")
    func commandLine() throws {
        let plain = try #require(try BenchCommand.parse(["soak"]))
        #expect(plain.benchmarks == [.soak] && plain.soak == SoakSettings())
        #expect(
            plain.soak.seconds == 3600 && plain.soak.intervalSeconds == 10 && plain.soak.producers == 8 && plain.soak.warmupSeconds == 300)
        let set = try #require(
            try BenchCommand.parse([
                "soak", "--duration", "15m", "--interval", "5", "--producers", "2", "--workers", "0", "--warmup", "0", "--json",
            ]))
        #expect(set.json && set.soak.seconds == 900 && set.soak.intervalSeconds == 5 && set.soak.producers == 2)
        #expect(set.soak.workers == 0 && set.soak.warmupSeconds == 0)
        #expect(try BenchCommand.parse(["soak", "--duration", "1h", "--warmup", "5m"])?.soak.seconds == 3600)
        for arguments in [
            ["soak", "--duration", "300"],  // the default warm-up of 300 s and two minutes do not fit
            ["soak", "--duration", "179"], ["soak", "--duration", "8d"], ["soak", "--interval", "30"], ["soak", "--interval", "0"],
            ["soak", "--producers", "0"], ["soak", "--producers", "65"], ["soak", "--workers", "33"], ["soak", "--warmup", "2d"],
            ["soak", "emit"], ["emit", "--interval", "5"], ["--workers", "2"],
        ] {
            #expect(throws: (any Error).self, "\(arguments)") { try BenchCommand.parse(arguments) }
        }
        #expect(try BenchCommand.parse([])?.benchmarks.contains(.soak) == false)
    }

    /// Samples every 10 s for 300 s, RSS `level(t)` KiB, descriptors `fds(t)`.
    func samples(level: (Double) -> Int, fds: (Double) -> Int = { _ in 60 }) -> [SoakSample] {
        stride(from: 10.0, through: 300, by: 10).map { time in
            SoakSample(
                elapsed: time, rssKiB: level(time), anonKiB: level(time) - 20_000, shmemKiB: 20_000, descriptors: fds(time), mappings: 50,
                cpuPercent: 50, drainedPerSecond: 1e6, backlog: 0, files: 10, otlpTaken: 0, otlpRefused: 0, receiverFailing: false)
        }
    }

    @Test("RSS flat: noise around a level passes, a steady leak of 1 % between the two minutes fails; fds: a count that climbs fails")
    func flatness() {
        var settings = SoakSettings()
        settings.seconds = 300
        settings.warmupSeconds = 100
        let windows = SoakFlatness.windows(samples(level: { _ in 1 }), settings: settings)
        #expect(windows.baseline.map(\.elapsed) == [110, 120, 130, 140, 150, 160])
        #expect(windows.last.map(\.elapsed) == [250, 260, 270, 280, 290, 300])
        // ±0.8 % spikes, and a sample of 3 % once in each minute: the medians stay.
        let noisy = samples { time in
            let spike = Int(time) % 60 == 20 ? 9_000 : 0
            return 300_000 + (Int(time) / 10 % 2 == 0 ? 2_400 : -2_400) + spike
        }
        #expect(SoakFlatness.memory(noisy, settings: settings).passed)
        // 1 % more from one minute's middle to the other's.
        let leaking = samples { time in 300_000 + Int((time - 135) * 300_000 * 0.0101 / 140) }
        #expect(!SoakFlatness.memory(leaking, settings: settings).passed)
        #expect(SoakFlatness.descriptors(samples(level: { _ in 1 }, fds: { 60 + Int($0) % 30 / 10 }), settings: settings).passed)
        #expect(!SoakFlatness.descriptors(samples(level: { _ in 1 }, fds: { 60 + Int($0) / 20 }), settings: settings).passed)
        #expect(SoakFlatness.median([3, 1, 2]) == 2 && SoakFlatness.median([4, 1, 2, 3]) == 2.5)
        // A fall is said as one: the report once printed "- %" for it.
        #expect(SoakFlatness.percent(-0.0003) == "-0.03 %" && SoakFlatness.percent(0.0004) == "+0.04 %")
    }

    @Test("a producer's last line: blast's with its increments, the pool's with its workers; others are not read")
    func producerLines() throws {
        let blast = try #require(SoakBenchmark.producerResult("soak-0", "attempts 10 written 7 dropped 3 faults 0 late 0 increments 10"))
        #expect(blast.attempts == 10 && blast.written == 7 && blast.dropped == 3 && blast.increments == 10 && blast.workers == 0)
        let pool = try #require(SoakBenchmark.producerResult("soak-pool", "workers 4 attempts 80 written 79 dropped 1 increments 80"))
        #expect(pool.workers == 4 && pool.attempts == 80 && pool.written == 79 && pool.dropped == 1 && pool.increments == 80)
        #expect(SoakBenchmark.producerResult("soak-0", "attempts 10 written 7 dropped 3 faults 0 late 0") == nil)
        #expect(SoakBenchmark.producerResult("soak-pool", "workers 4 attempts 80") == nil)
    }

    @Test("the report: the verdict and the exit status follow the checks; a long run's table shows a sample a minute; --json has every one")
    func report() throws {
        var settings = SoakSettings()
        settings.seconds = 300
        settings.warmupSeconds = 100
        let checks = [
            SoakCheck(name: "RSS flat", passed: true, detail: "+0.1 %"), SoakCheck(name: "nothing lost", passed: true, detail: ""),
        ]
        let producer = SoakProducerResult(bot: "soak-0", attempts: 10, written: 7, dropped: 3, increments: 10, workers: 0)
        var report = SoakReport(
            machine: ReportTests.machine, method: "m", settings: settings, samples: samples(level: { _ in 300_000 }),
            producers: [producer], checks: checks)
        #expect(report.passed && report.shownSamples.count == 30 && report.table.contains("verdict: PASS"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(report.json.text.utf8)) as? [String: Any])
        #expect(object["benchmark"] as? String == "soak" && object["passed"] as? Bool == true)
        #expect((object["samples"] as? [[String: Any]])?.count == 30 && (object["checks"] as? [[String: Any]])?.count == 2)
        #expect((object["producers"] as? [[String: Any]])?.first?["written"] as? Int == 7)
        report.checks[1].passed = false
        #expect(!report.passed && report.table.contains("verdict: FAIL"))
        #expect(report.table.split(separator: "\n").contains { $0.hasPrefix("nothing lost") && $0.hasSuffix("FAIL") })
        // An hour at 10 s: 360 samples, one a minute shown (the minute's first), and the last.
        report.samples = stride(from: 10.0, through: 3600, by: 10).map { time in
            var sample = report.samples[0]
            sample.elapsed = time
            return sample
        }
        #expect(report.shownSamples.map(\.elapsed) == [10] + stride(from: 60.0, through: 3600, by: 60).map { $0 })
        #expect(SoakReport.formatElapsed(3725) == "1:02:05" && SoakReport.formatElapsed(65) == "1:05")
    }

    @Test("OTLP: passes when each attempt the collector counted is one the receiver saw, none failed or dropped; a miscount fails")
    func otlpCounts() {
        var seen = SoakReceiver.Figures()
        (seen.taken, seen.refused, seen.cut) = (30, 9, 8)
        let exact = LatestFigures.OTLP(sent: 30, failed: 0, dropped: 0, retries: 17, timeouts: 0)
        #expect(SoakVerdict.otlpCheck(exact, seen, outages: true).passed)
        var missed = exact
        missed.sent = 29
        #expect(!SoakVerdict.otlpCheck(missed, seen, outages: true).passed)
        // An attempt that timed out after the receiver took it: sent again, taken twice.
        let timedOut = LatestFigures.OTLP(sent: 29, failed: 0, dropped: 0, retries: 18, timeouts: 1)
        #expect(SoakVerdict.otlpCheck(timedOut, seen, outages: true).passed)
        var dropped = exact
        dropped.dropped = 1
        #expect(!SoakVerdict.otlpCheck(dropped, seen, outages: true).passed)
        (seen.refused, seen.cut) = (0, 0)
        #expect(
            !SoakVerdict.otlpCheck(LatestFigures.OTLP(sent: 30, failed: 0, dropped: 0, retries: 0, timeouts: 0), seen, outages: true).passed
        )
        #expect(!SoakVerdict.otlpCheck(nil, seen, outages: false).passed)
    }
}
