// MARK: - Tables for people

/// A plain-text table: a header row and rows, columns padded to their widest cell, numbers
/// aligned right. Trailing spaces are trimmed so the output diffs and greps cleanly.
package struct TextTable {
    package enum Alignment: Sendable { case left, right }

    private let headers: [String]
    private let alignments: [Alignment]
    /// Whether a rule of dashes runs under the headers.
    private let ruled: Bool
    private var rows: [[String]] = []

    /// A table with these column headers; `right` names the right-aligned (numeric) columns
    /// (the tools' tables).
    package init(_ headers: [String], right: Set<String> = []) {
        self.headers = headers
        alignments = headers.map { right.contains($0) ? .right : .left }
        ruled = false
    }

    /// A table of results: the first column names the row, the others are figures (aligned
    /// right), and a rule runs under the headers (the benchmark's tables).
    package init(columns: [String]) {
        headers = columns
        alignments = columns.indices.map { $0 == 0 ? .left : .right }
        ruled = true
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
        var lines = all.map { row in
            var line = ""
            for (column, cell) in row.enumerated() {
                if column > 0 { line += "  " }
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                line += alignments[column] == .right ? padding + cell : cell + padding
            }
            while line.last == " " { line.removeLast() }
            return line
        }
        if ruled { lines.insert(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "), at: 1) }
        return lines
    }

    /// The table's lines, each ended by a newline.
    package var text: String { lines.joined(separator: "\n") + "\n" }
}

/// Lines of `label  value` pairs with the labels padded to one width.
package func keyValueLines(_ pairs: [(String, String)], indent: String = "  ", width minimum: Int = 0) -> [String] {
    let width = max(minimum, pairs.map(\.0.count).max() ?? 0)
    return pairs.map { indent + $0.0 + String(repeating: " ", count: width - $0.0.count + 2) + $0.1 }
}
