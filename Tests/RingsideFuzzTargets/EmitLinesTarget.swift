import CRingside
import Ringside
import RingsideTools

/// `ringside-emit`'s lines: the input's first byte chooses the metric (kind, unit, resolution,
/// sign), the rest is standard input, a line at a time (as `readLine` gives it: decoded as UTF-8,
/// its newline stripped), run in-process through `ringside-emit` into a fresh file, then read back
/// with the inspector.
///
/// Checks: each line the value parser takes (`parseSteps`, `parseValue`) is written as exactly
/// that value (a record's, in order; a counter's total), each line it refuses is skipped and the
/// exit status says so; `ringside-emit` never says it was used wrongly.
enum EmitLinesTarget {
    static let target = FuzzTarget(
        name: "emit-lines",
        covers: "ringside-emit's standard input: its value parser, written and read back exactly",
        run: run,
        seeds: { seeds })

    /// The metric the first byte chooses: bits 0-1 the kind, 2-4 the unit, 5 signed, 6-7 the resolution.
    struct Metric {
        let kind: MetricKind, unit: MetricUnit, signed: Bool, scale: Int8

        init(_ byte: UInt8) {
            kind = [MetricKind.histogram, .counter, .gauge, .histogram][Int(byte & 3)]
            unit = kind == .counter ? .none : MetricUnit(rawValue: ((byte >> 2) & 7) % 6) ?? .none
            signed = kind == .histogram && byte & 0x20 != 0
            scale = kind == .gauge ? 0 : [0, -2, -6, 3][Int(byte >> 6)]
        }

        var arguments: [String] {
            var arguments = ["--kind", "\(kind)", "--unit", "\(unit)"]
            if scale != 0 { arguments += ["--resolution", "1e\(scale)"] }
            if signed { arguments.append("--signed") }
            return arguments
        }

        /// What the value parser makes of a line's text (trimmed, not blank).
        func parse(_ text: String) -> UInt64? {
            if scale == 0 && !signed {
                guard case .success(let bits) = EmitTool.parseValue(text, kind: kind, unit: unit) else { return nil }
                return bits
            }
            guard case .success(let steps) = EmitTool.parseSteps(text, scale: scale, signed: signed) else { return nil }
            return signed ? UInt64(bitPattern: Int64(steps)) : UInt64(steps)
        }
    }

    static func run(_ bytes: [UInt8]) {
        func finding(_ what: String) -> Never { FuzzFinding.report("emit-lines", what) }
        FuzzScratch.empty()
        let metric = Metric(bytes.first ?? 0)
        let lines = readLines(bytes.dropFirst())
        let arguments = ["--ring", "fuzz", "--dir", FuzzScratch.path, "--drop", "--capacity", "4096", "value"] + metric.arguments
        let run = Console.capture { EmitTool.run(arguments, console: $0, input: LineInput(lines: lines)) }
        let texts = lines.map(trimmed).filter { !$0.isEmpty }
        let expected = texts.compactMap(metric.parse)
        let bad = texts.count - expected.count
        guard run.status == (bad == 0 ? 0 : 1) else {
            finding("exit status \(run.status) with \(bad) bad lines of \(texts.count): \(run.errors.prefix(300))")
        }
        do throws(RingError) {
            let inspector = try RingInspector("fuzz", directory: FuzzScratch.ringDirectory)
            guard let registered = try inspector.metrics().first else { finding("no metric registered") }
            if metric.kind == .counter {
                let (sum, overflow) = expected.reduce((UInt64(0), false)) { total, steps in
                    let (next, over) = total.0.addingReportingOverflow(steps)
                    return (next, total.1 || over)
                }
                let total = try inspector.cells(of: registered).total
                if !overflow && total != sum { finding("a counter's total of \(total) for increments of \(sum) in all") }
                return
            }
            let records = try inspector.peek().filter { !$0.record.isExemplarPart }.map(\.record.value)
            guard try inspector.status().dropped == 0 else { return }
            let stored = expected.map { metric.signed ? $0 ^ RS_OFFSET_BINARY_BIAS : $0 }
            if records != stored { finding("lines \(texts.prefix(20)) read as \(stored.prefix(20)), written as \(records.prefix(20))") }
        } catch {
            finding("the file ringside-emit wrote: \(error)")
        }
    }

    /// The lines `readLine(strippingNewline:)` gives: split at each LF, a CR before it stripped,
    /// decoded as UTF-8 (invalid bytes replaced); a last line without LF counts if not empty.
    static func readLines(_ bytes: ArraySlice<UInt8>) -> [String] {
        var lines = bytes.split(separator: 10, omittingEmptySubsequences: false)
        if lines.last?.isEmpty == true { lines.removeLast() }
        return lines.map { line in
            String(decoding: line.last == 13 ? line.dropLast() : line, as: UTF8.self)
        }
    }

    /// A line without the spaces, tabs, CRs and LFs (characters) at its ends, as emit reads it.
    static func trimmed(_ line: String) -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard let start = line.firstIndex(where: { !isSpace($0) }), let end = line.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(line[start...end])
    }

    static let seeds = [
        FuzzSeed("histogram", [0x00] + Array("1500\n250000\n  42 \r\n\n18446744073709551615\n-1\n1.5\nx\n".utf8)),
        FuzzSeed("counter", [0x01] + Array("1\n2\n3e2\n0\n".utf8)),
        FuzzSeed("gauge", [0x02] + Array("-1.5\n2\n3e6\n1e309\nnan\n0x10\n-0\n".utf8)),
        FuzzSeed("signed-hundredths", [0x60] + Array("-3.25\n0.01\n+7\n-0.001\n92233720368547758.07\n".utf8)),
        FuzzSeed("micro", [0x80 | 0x04] + Array("0.000001\n1.5\n.5\n5.\n".utf8)),
        FuzzSeed("thousands", [0xC0] + Array("3000\n1e3\n2500\n".utf8)),
    ]
}
