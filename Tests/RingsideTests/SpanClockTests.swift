import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import Ringside
import RingsideTestSupport
import Testing

// The span clock (THE SPAN CLOCK in ringside.h). Which clock a process chooses is decided once a
// process, from its environment, so those tests ask a process of their own; the calibration's are
// made here, with starts read on a named clock (never the process's choice, which another test may
// switch with rs_span_clock_select).

/// Whether spans on this machine belong on the TSC, judged apart from the C library: x86-64,
/// /proc/cpuinfo's flags constant_tsc and nonstop_tsc (the kernel's reading of CPUID 0x80000007
/// EDX bit 8), and the kernel's clocksource tsc.
let machineHasUsableTSC: Bool = {
    #if arch(x86_64)
    let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
    let flags = Set(
        (cpuinfo.split(separator: "\n").first { $0.hasPrefix("flags") } ?? "").split(separator: " ").map(String.init))
    let source = try? String(
        contentsOfFile: "/sys/devices/system/clocksource/clocksource0/current_clocksource", encoding: .utf8)
    return flags.isSuperset(of: ["constant_tsc", "nonstop_tsc"])
        && source?.trimmingCharacters(in: .whitespacesAndNewlines) == "tsc"
    #else
    return false
    #endif
}()

/// A span's start on the TSC where the machine has a usable one, else on CLOCK_MONOTONIC.
func spanStartOnTheBestClock() -> UInt64 {
    machineHasUsableTSC ? rs_clock_tsc() | RS_SPAN_TSC_BIT : rs_clock_precise_ns()
}

@Suite("The span clock: the TSC where it serves, calibrated against CLOCK_MONOTONIC")
struct SpanClockTests {
    /// What `ringside-test-producer span-clock` printed: "clock C start S", "described TEXT", ...
    struct SpanClockReport {
        var lines: [String: [String]] = [:]
        var described: [String] = []
        var spans: [UInt64] = []

        init(_ run: ProcessRun, directory: RingDirectory) throws {
            for line in run.outputLines {
                if line.hasPrefix("described ") {
                    described.append(String(line.dropFirst("described ".count)))
                } else {
                    let words = line.split(separator: " ").map(String.init)
                    lines[words[0]] = Array(words.dropFirst())
                }
            }
            spans = try drainAll(directory, "clock").filter { $0.flags == UInt8(RS_FLAG_SPAN) }.map(\.value)
        }
    }

    func runSpanClock(
        _ directory: RingDirectory, environment: [String: String], _ options: [String] = []
    ) throws
        -> (ProcessRun, SpanClockReport)
    {
        let run = try runProcess(
            "ringside-test-producer", ["span-clock", "--dir", directory.path, "--ring", "clock"] + options,
            environment: environment)
        return (run, try SpanClockReport(run, directory: directory))
    }

    /// Each span timed a 20 ms sleep: 20 ms at least (less twice the rate's error at worst, 0.2 %), and not minutes.
    func expectSleepSpans(_ spans: [UInt64], count: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(spans.count == count, sourceLocation: sourceLocation)
        #expect(spans.allSatisfy { $0 >= 19_960_000 && $0 < 10_000_000_000 }, "\(spans)", sourceLocation: sourceLocation)
    }

    @Test(
        "a process times its spans on the TSC where the CPU's is invariant and the kernel keeps time with it, else on CLOCK_MONOTONIC, and says which and why"
    )
    func chosenByTheMachine() throws {
        try withRingDirectory { directory in
            let (run, report) = try runSpanClock(directory, environment: ["RINGSIDE_SPAN_CLOCK": "auto"])
            #expect(run.status == 0, "\(run.errors)")
            let expected = machineHasUsableTSC ? "tsc" : "monotonic"
            #expect(report.lines["clock"] == [expected, "start", expected], "\(run.output)")
            let described = try #require(report.described.first)
            #expect(described.hasPrefix(expected + ": "), "\(described)")
            if machineHasUsableTSC {
                // "tsc: invariant TSC, clocksource tsc; 2.4454 GHz, 2 anchors, the last within 24 ns"
                #expect(described.contains("invariant TSC, clocksource tsc") && described.contains(" GHz, "), "\(described)")
            }
            expectSleepSpans(report.spans, count: 1)
        }
    }

    @Test(
        "RINGSIDE_SPAN_CLOCK=monotonic times a process's spans on CLOCK_MONOTONIC; a value it does not know is said on stderr and taken as auto"
    )
    func chosenByTheEnvironment() throws {
        try withRingDirectory { directory in
            let (run, report) = try runSpanClock(directory, environment: ["RINGSIDE_SPAN_CLOCK": "monotonic"])
            #expect(run.status == 0, "\(run.errors)")
            #expect(report.lines["clock"] == ["monotonic", "start", "monotonic"], "\(run.output)")
            let described = try #require(report.described.first)
            #expect(described.hasPrefix("monotonic: "), "\(described)")
            if machineHasUsableTSC { #expect(described == "monotonic: RINGSIDE_SPAN_CLOCK=monotonic") }
            expectSleepSpans(report.spans, count: 1)
        }
        try withRingDirectory { directory in
            let (run, report) = try runSpanClock(directory, environment: ["RINGSIDE_SPAN_CLOCK": "rdtsc"])
            #expect(run.status == 0)
            #expect(run.errors.contains("RINGSIDE_SPAN_CLOCK=rdtsc is none of auto, tsc, monotonic: taken as auto"), "\(run.errors)")
            let expected = machineHasUsableTSC ? "tsc" : "monotonic"
            #expect(report.lines["clock"] == [expected, "start", expected], "\(run.output)")
        }
    }

    @Test(
        "a span under way when the clock is switched ends on the clock it started on, and later spans start on the new one",
        arguments: ["monotonic", "tsc"])
    func switchedUnderway(to clock: String) throws {
        try withRingDirectory { directory in
            let first = clock == "tsc" ? "monotonic" : "auto"
            let (run, report) = try runSpanClock(directory, environment: ["RINGSIDE_SPAN_CLOCK": first], ["--select", clock])
            guard machineHasUsableTSC || clock == "monotonic" else {
                #expect(run.status != 0 && run.errors.contains("rs_span_clock_select(tsc) refused"), "\(run.errors)")
                return
            }
            #expect(run.status == 0, "\(run.errors)")
            #expect(report.lines["selected"] == [clock, "start", clock], "\(run.output)")
            let described = try #require(report.described.last)
            #expect(described.hasPrefix(clock + ": ") && described.contains("chosen by rs_span_clock_select"), "\(described)")
            // The first span, the one under way at the switch (started on the other clock), the last.
            expectSleepSpans(report.spans, count: 3)
        }
    }

    @Test(
        "a span of a 50 ms sleep on the TSC is CLOCK_MONOTONIC's time around it within 0.2 % and 20 us, and its record's end is CLOCK_MONOTONIC's within RS_SPAN_CLOCK_BOUND_NS"
    )
    func sleepSpan() async throws {
        try await withRingDirectory { directory in
            let bot = try Bot.attach("sleep", directory: directory.path, options: .init(laneCapacity: 64))
            let histogram = try bot.histogram("sleep_span", unit: .nanoseconds)
            // Two spans of the same sleep: one started on the TSC by name (CLOCK_MONOTONIC where
            // there is none), one through Timing, on whatever clock the process's spans are on.
            let outerStart = rs_clock_precise_ns()
            let start = spanStartOnTheBestClock()
            let timing = histogram.startTiming()
            let innerStart = rs_clock_precise_ns()
            try await Task.sleep(for: .milliseconds(50))
            let innerEnd = rs_clock_precise_ns()
            timing.stop()
            #expect(rs_bot_record_span(bot.attachment.pointer, histogram.target.metric, start) == 1)
            let outerEnd = rs_clock_precise_ns()

            let records = try drainAll(directory, "sleep")
            #expect(records.count == 2 && records.allSatisfy { $0.flags == UInt8(RS_FLAG_SPAN) })
            let inner = innerEnd - innerStart, outer = outerEnd - outerStart
            let tolerance = outer / 500 + 20_000  // 0.2 %: twice the rate's error in a process's first milliseconds
            for record in records {
                #expect(
                    record.value + tolerance >= inner && record.value <= outer + tolerance,
                    "a span of \(record.value) ns around a sleep of \(inner) to \(outer) ns by CLOCK_MONOTONIC")
                #expect(
                    record.timestamp_ns + UInt64(RS_SPAN_CLOCK_BOUND_NS) >= innerEnd
                        && record.timestamp_ns <= outerEnd + UInt64(RS_SPAN_CLOCK_BOUND_NS),
                    "a span ending at \(record.timestamp_ns), between \(innerEnd) and \(outerEnd) by CLOCK_MONOTONIC")
            }
        }
    }

    @Test(
        "a start read on CLOCK_MONOTONIC (rs_clock_precise_ns) ends on CLOCK_MONOTONIC, one on the TSC on the TSC: the same span either way"
    )
    func startsEndOnTheirClock() async throws {
        let monotonicStart = rs_clock_precise_ns()
        let start = spanStartOnTheBestClock()
        try await Task.sleep(for: .milliseconds(5))
        let before = rs_clock_precise_ns()
        let onItsClock = rs_span_clock_end(start)
        let onMonotonic = rs_span_clock_end(monotonicStart)
        let after = rs_clock_precise_ns()
        // The CLOCK_MONOTONIC span is exactly the clock's; the other began after and ended before it.
        #expect(onMonotonic.elapsed_ns >= before - monotonicStart && onMonotonic.elapsed_ns <= after - monotonicStart)
        #expect(onMonotonic.end_ns >= before && onMonotonic.end_ns <= after)
        #expect(onItsClock.elapsed_ns >= 5_000_000 - 10_000 && onItsClock.elapsed_ns <= onMonotonic.elapsed_ns + 10_000)
        #expect(onItsClock.end_ns + UInt64(RS_SPAN_CLOCK_BOUND_NS) >= before && onItsClock.end_ns <= after + UInt64(RS_SPAN_CLOCK_BOUND_NS))
        // A span whose end read less than its start (a start from the future) lasted 0.
        #expect(rs_span_clock_end(rs_clock_precise_ns() + 1_000_000_000).elapsed_ns == 0)
        if machineHasUsableTSC { #expect(rs_span_clock_end((rs_clock_tsc() + 1 << 40) | RS_SPAN_TSC_BIT).elapsed_ns == 0) }
    }

    @Test(
        "the TSC converted to CLOCK_MONOTONIC stays within RS_SPAN_CLOCK_BOUND_NS of it for a minute, anchored again about once a second",
        .enabled(if: machineHasUsableTSC))
    // No time limit: the minute is the sampler thread's clock, and a whole suite beside a build on
    // two cores once kept the cooperative pool from resuming the test for 11 minutes after it.
    func driftOverAMinute() async throws {
        rs_span_clock_init()
        var first = rs_tsc_calibration()
        rs_span_clock_calibration(&first)
        try #require(first.mult != 0, "the TSC was not calibrated: \(Bot.spanClockDescription)")
        let bound = Int64(RS_SPAN_CLOCK_BOUND_NS)
        // On a thread of its own: a loaded test run starves the cooperative pool, whose sleeps
        // then last seconds (CI once saw 9 samples in the minute).
        let (samples, worst, outside) = await withCheckedContinuation { (done: CheckedContinuation<(Int, Int64, [String]), Never>) in
            let sampler = Thread {
                let began = rs_clock_precise_ns()
                var samples = 0, worst: Int64 = 0, outside: [String] = []
                while rs_clock_precise_ns() - began < 60_000_000_000 {
                    // Each sample is a span's end: the first one past the calibration's refresh anchors again.
                    let before = rs_clock_precise_ns()
                    let converted = rs_span_clock_end(rs_clock_tsc() | RS_SPAN_TSC_BIT).end_ns
                    let after = rs_clock_precise_ns()
                    let error = converted < before ? Int64(before - converted) : converted > after ? Int64(converted - after) : 0
                    worst = max(worst, error)
                    if error > bound && outside.count < 5 { outside.append("\(converted) against [\(before), \(after)]") }
                    samples += 1
                    usleep(20_000)
                }
                done.resume(returning: (samples, worst, outside))
            }
            sampler.start()
        }
        var last = rs_tsc_calibration()
        rs_span_clock_calibration(&last)
        print("span clock: \(samples) samples over 60 s, the furthest \(worst) ns from CLOCK_MONOTONIC; \(Bot.spanClockDescription)")
        #expect(samples > 500)
        #expect(worst <= bound, "\(outside)")
        // Anchored again as spans end, once a second at most (the refresh grows to a second). How
        // often is the machine's to say: an anchor needs a clock-TSC-clock bracket under 1 us, which
        // a loaded machine may deny for a while (the end then converts with the anchor it has).
        let anchors = last.anchors - first.anchors
        #expect(anchors >= 1 && anchors <= 70, "\(anchors) anchors in 60 s")
    }
}
