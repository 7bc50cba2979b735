import Ringside
import RingsideExport
#if canImport(Glibc)
import Glibc
import RingsideJSON
#endif

// MARK: - Tables

/// A plain-text table: a header row and rows, columns padded to their widest cell, numbers
/// aligned right. Trailing spaces are trimmed so the output diffs and greps cleanly.
package struct TextTable {
    package enum Alignment: Sendable { case left, right }

    private let headers: [String]
    private let alignments: [Alignment]
    private var rows: [[String]] = []

    /// A table with these column headers; `right` names the right-aligned (numeric) columns.
    package init(_ headers: [String], right: Set<String> = []) {
        self.headers = headers
        alignments = headers.map { right.contains($0) ? .right : .left }
    }

    package mutating func add(_ row: [String]) {
        precondition(row.count == headers.count, "a row has one cell per column")
        rows.append(row)
    }

    package var isEmpty: Bool { rows.isEmpty }

    /// The table's lines.
    package var lines: [String] {
        let all = [headers] + rows
        let widths = headers.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        return all.map { row in
            var line = ""
            for (column, cell) in row.enumerated() {
                if column > 0 { line += "  " }
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                line += alignments[column] == .right ? padding + cell : cell + padding
            }
            while line.last == " " { line.removeLast() }
            return line
        }
    }
}

/// Lines of `label  value` pairs with the labels padded to one width.
package func keyValueLines(_ pairs: [(String, String)], indent: String = "  ", width minimum: Int = 0) -> [String] {
    let width = max(minimum, pairs.map(\.0.count).max() ?? 0)
    return pairs.map { indent + $0.0 + String(repeating: " ", count: width - $0.0.count + 2) + $0.1 }
}

// MARK: - Sizes and numbers (durations: `formatDuration`, with the duration grammar)

/// A size for people: `512 B`, `4.0 KiB`, `4.1 MiB`, `1.0 GiB`.
package func humanBytes(_ bytes: Int) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes)
    var unit = 0
    while value >= 1024 && unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    return unit == 0 ? "\(bytes) B" : "\(oneDecimal(value)) \(units[unit])"
}

/// `12.3`, with exactly one decimal.
package func oneDecimal(_ value: Double) -> String {
    guard value.isFinite else { return "-" }
    let tenths = (value * 10).rounded()
    let whole = Int64(tenths / 10)
    let fraction = Int64(abs(tenths.truncatingRemainder(dividingBy: 10)))
    return (tenths < 0 && whole == 0 ? "-" : "") + "\(whole).\(fraction)"
}

/// The bytes of a value, as lowercase hex without separators.
package func hexBytes<T>(of value: T) -> String {
    withUnsafeBytes(of: value) { raw in
        raw.map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined()
    }
}

// MARK: - Metrics and values

extension MetricDescriptor {
    /// The labels as a JSON object.
    package var labelsJSON: JSON { .object(labels.map { ($0.key, .string($0.value)) }) }

    /// "1/N" for sampled metrics, "all" for the others.
    package var samplingText: String { sampleEvery > 1 ? "1/\(sampleEvery)" : "all" }
}

extension MetricDescriptor {
    /// Its unit, with its values' resolution and sign where it has them: `none`, `none in 0.01, signed`.
    var valuesText: String {
        guard hasSteps else { return unit.description }
        return unit.description + (scale != 0 ? " in " + ExactDecimal.text(1, exponent: Int(scale)) : "") + (isSigned ? ", signed" : "")
    }
}
