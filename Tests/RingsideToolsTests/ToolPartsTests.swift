import Ringside
import RingsideText
@testable import RingsideTools
import Testing
import RingsideJSON
import RingsideCommandLine

@Suite("The tools' parts: JSON, times, percentiles, values, arguments")
struct ToolPartsTests {
    @Test("JSON escapes strings and keeps 64-bit integers exact")
    func json() {
        let value = JSON.object([
            ("a\"b", .string("line\nquote\"back\\tab\t\u{01}é")), ("max", .uint(.max)),
            ("nan", .double(.nan)), ("list", .array([.bool(true), .null, .int(-3), .double(1.5)])),
        ])
        #expect(
            value.text == #"{"a\"b":"line\nquote\"back\\tab\t\u0001é","max":18446744073709551615,"nan":null,"list":[true,null,-3,1.5]}"#)
    }

    @Test("ISO 8601 in UTC with microseconds")
    func isoTimes() {
        #expect(utcTimestamp(microseconds: true, realtimeNanos: 0) == "1970-01-01T00:00:00.000000Z")
        #expect(utcTimestamp(microseconds: true, realtimeNanos: 1_763_758_201_123_456_789) == "2025-11-21T20:50:01.123456Z")
    }

    @Test("nearest-rank percentiles match their definition")
    func percentiles() {
        let metric = MetricDescriptor(index: 0, name: "m", kind: .histogram, unit: .none, encodedLabels: "", help: "", sampleEvery: 1)
        let stats = MetricStatistics(metric: metric, values: (1...10).reversed().map(UInt64.init))
        #expect(stats.percentile(0.5) == 5 && stats.percentile(0.9) == 9 && stats.percentile(0.99) == 10)
        #expect(MetricStatistics(metric: metric, values: [42]).percentile(0.001) == 42)
        #expect(MetricStatistics(metric: metric, values: []).percentile(0.5) == nil)
    }

    @Test("a sampled record counts by its weight in the percentiles and the calls")
    func weightedPercentiles() {
        let metric = MetricDescriptor(index: 0, name: "m", kind: .histogram, unit: .none, encodedLabels: "", help: "", sampleEvery: 1)
        // 1 and 2 as they came, then 100 standing for 8 calls: 10 calls, 8 of them around 100.
        let stats = MetricStatistics(metric: metric, values: [100, 1, 2], weights: [8, 1, 1])
        #expect(stats.count == 3 && stats.calls == 10)
        #expect(stats.percentile(0.1) == 1 && stats.percentile(0.2) == 2 && stats.percentile(0.21) == 100)
        #expect(stats.percentile(0.5) == 100, "unweighted, it would be 2")
    }

    @Test("a metric's cells as info shows them: a counter's total, a gauge's last value, drops")
    func cells() {
        #expect(InfoCommand.cellText(MetricCells(total: 42), kind: .counter) == "total 42")
        #expect(InfoCommand.cellText(MetricCells(dropped: 3, lastValue: -1.5), kind: .gauge) == "last -1.5")
        #expect(InfoCommand.cellText(MetricCells(), kind: .gauge) == "last -")
        #expect(InfoCommand.cellText(MetricCells(dropped: 7), kind: .histogram) == "-")
        #expect(InfoCommand.cellsJSON(MetricCells(total: 42), kind: .counter).text == #"{"total":42}"#)
        #expect(InfoCommand.cellsJSON(MetricCells(dropped: 3), kind: .gauge).text == #"{"last":null,"dropped":3}"#)
        #expect(
            InfoCommand.cellsJSON(MetricCells(dropped: 7, droppedSum: 700, droppedMax: 250), kind: .histogram).text
                == #"{"dropped":7,"dropped_sum":700,"dropped_max":250}"#)
        // Stats read a counter's total and a gauge's last value from the cells, not the records.
        let gauge = MetricDescriptor(index: 0, name: "g", kind: .gauge, unit: .none, encodedLabels: "", help: "", sampleEvery: 1)
        let stats = MetricStatistics(metric: gauge, values: [2.0, 9.0].map(\.bitPattern), cells: MetricCells(lastValue: 4))
        #expect(stats.last == 4 && stats.minimum == 2 && stats.maximum == 9 && stats.count == 2)
    }

    @Test("emit's values: whole numbers for histograms and counters, finite decimals for gauges")
    func values() throws {
        #expect(try EmitTool.parseValue("42", kind: .histogram, unit: .nanoseconds).get() == 42)
        #expect(try EmitTool.parseValue("-0.25", kind: .gauge, unit: .none).get() == (-0.25).bitPattern)
        for bad in ["", "x", "1.5", "-1", "1e30", "0x10"] {
            #expect((try? EmitTool.parseValue(bad, kind: .counter, unit: .none).get()) == nil, "\(bad)")
        }
        for bad in ["inf", "nan", "x", "0x1p3"] {
            #expect((try? EmitTool.parseValue(bad, kind: .gauge, unit: .none).get()) == nil, "\(bad)")
        }
    }

    @Test("a negative number is a value, not an option; -- ends the options")
    func arguments() throws {
        let spec = OptionSpec(flags: ["--drop"], valued: ["--ring"])
        let parsed = try ParsedArguments(["--ring=r", "m", "-1.5", "--drop", "--", "--ring"], spec: spec, context: "t")
        #expect(parsed.positionals == ["m", "-1.5", "--ring"])
        #expect(parsed.value("--ring") == "r" && parsed.has("--drop"))
        #expect(throws: UsageError("t: --ring is given twice")) {
            try ParsedArguments(["--ring", "a", "--ring", "b"], spec: spec, context: "t")
        }
    }

    @Test("one duration grammar: a number and a unit everywhere, a number alone as seconds only where asked")
    func durations() {
        #expect(durationNanos("500ms") == 500_000_000 && durationNanos("2m") == 120_000_000_000)
        #expect(durationNanos("100µs") == 100_000 && durationNanos("100us") == 100_000 && durationNanos("1.5s") == 1_500_000_000)
        #expect(durationNanos("1.5") == nil && durationNanos("1.5", bareSeconds: true) == 1_500_000_000)
        for bad in ["0s", "-1s", "1x", "ms", "", "inf"] { #expect(durationNanos(bad, bareSeconds: true) == nil, "\(bad)") }
    }

    @Test("one duration form: window names exact, ages to a tenth of their largest unit; the grammar reads both back")
    func durationText() {
        // Exact: the largest unit that divides it, so `/metrics` names each window one way.
        let exact: [UInt64] = [1_000_000_000, 60_000_000_000, 1_500_000_000, 90_000_000_000, 250_000, 7, 7_200_000_000_000, 0]
        #expect(exact.map { formatDuration($0) } == ["1s", "1m", "1500ms", "90s", "250us", "7ns", "2h", "0ns"])
        for nanos in exact where nanos > 0 { #expect(durationNanos(formatDuration(nanos)) == nanos, "\(nanos)") }
        // Approximate: the largest unit it reaches once rounded (59.97 s is a minute, 999 ns a microsecond).
        let ages: [UInt64] = [
            850_123_456, 4_213_000_000, 185_000_000_000, 59_970_000_000, 7_830_000_000_000, 95_000_000_000_000,
            949, 999, 0,
        ]
        #expect(
            ages.map { formatDuration($0, approximate: true) }
                == ["850.1ms", "4.2s", "3.1m", "1m", "2.2h", "26.4h", "949ns", "1us", "0ns"])
        #expect(durationNanos(formatDuration(4_213_000_000, approximate: true)) == 4_200_000_000)
    }

    @Test("the in-process runner captures output and the exit status")
    func inProcess() {
        let result = Console.capture { DumpTool.run(["--help"], console: $0) }
        #expect(result.status == 0 && result.output.hasPrefix("usage: ringside-dump") && result.errors.isEmpty)
        let emitted = Console.capture { EmitTool.run(["--ring"], console: $0, input: LineInput(lines: [])) }
        #expect(emitted.status == 2 && emitted.errors == "ringside-emit: --ring needs a value\n")
    }
}
