import Ringside
import RingsideJSON

/// `GET /api/history?format=csv`: the answer as CSV (RFC 4180), one row per point.
extension HistoryAnswer {
    /// The content type of the CSV answer.
    package static let csvContentType = "text/csv; charset=utf-8"

    /// The columns every CSV answer has, before its label columns and its points' numbers.
    package static let csvIdentity = ["id", "ring", "metric", "kind", "unit"]
    /// The points' numbers: every kind's columns after `t`, each once (`max` is a histogram's and a
    /// gauge's), empty where a kind has none.
    package static let csvNumbers = ["t", "count", "p50", "p99", "p999", "max", "increase", "total", "value", "min"]
    /// What prefixes a label's key in its column's name (`label_symbol`), so that no label can
    /// take a column of the identity or the numbers.
    package static let csvLabelPrefix = "label_"

    /// The answer as CSV: a header row, then a row per point of each series, in the JSON answer's
    /// order; each label key of the answer's series is a column (`label_KEY`, sorted), empty for a
    /// series without it. A null (an empty window's quantile, a gauge's NaN or infinity) is an
    /// empty field. Fields holding a comma, a double quote, CR or LF are quoted, their quotes
    /// doubled; rows end in CRLF. The answer's own figures (`truncated`, `series_refused`) are
    /// the response's headers (see `csvHeaders`).
    package var csv: [UInt8] {
        let keys = Set(series.flatMap { $0.metric.labels.map { $0.key } }).sorted()
        var out: [UInt8] = []
        Self.writeRow(Self.csvIdentity + keys.map { Self.csvLabelPrefix + $0 } + Self.csvNumbers, into: &out)
        for series in series {
            let metric = series.metric
            let labels = metric.labelDictionary
            let head =
                [String(series.id), series.ring, metric.name, metric.kind.description, metric.unit.description]
                + keys.map { labels[$0] ?? "" }
            let columns = Self.columns(metric.kind)
            let places = columns.map { Self.csvNumbers.firstIndex(of: $0)! }
            for start in stride(from: 0, to: series.points.count, by: columns.count) {
                var numbers = [String](repeating: "", count: Self.csvNumbers.count)
                for (column, place) in places.enumerated() {
                    numbers[place] = Self.text(Self.cell(of: metric, column: column, stored: series.points[start + column]))
                }
                Self.writeRow(head + numbers, into: &out)
            }
        }
        return out
    }

    /// The figures the JSON answer holds beside its series, as response headers of the CSV answer.
    package var csvHeaders: [(name: String, value: String)] {
        [
            ("X-Ringside-Truncated", truncated ? "true" : "false"), ("X-Ringside-Points-Max", String(HistoryStore.maxPointsPerAnswer)),
            ("X-Ringside-Series-Refused", String(seriesRefused)), ("X-Ringside-From", String(from)), ("X-Ringside-To", String(to)),
            ("X-Ringside-Step", String(step)),
        ]
    }

    private static func text(_ cell: Cell) -> String {
        switch cell {
        case let .whole(number): return String(number)
        case let .decimal(text): return text
        case let .double(number):
            guard number.isFinite else { return "" }
            var bytes: [UInt8] = []
            bytes.writeJSONNumber(number)
            return String(decoding: bytes, as: UTF8.self)
        case .null: return ""
        }
    }

    /// One row: fields joined by commas, each quoted when RFC 4180 needs it, then CRLF.
    static func writeRow(_ fields: [String], into out: inout [UInt8]) {
        for (index, field) in fields.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            let bytes = Array(field.utf8)
            let special: Set<UInt8> = [UInt8(ascii: ","), UInt8(ascii: "\""), 0x0D, 0x0A]
            guard bytes.contains(where: special.contains) else {
                out += bytes
                continue
            }
            out.append(UInt8(ascii: "\""))
            for byte in bytes {
                out.append(byte)
                if byte == UInt8(ascii: "\"") { out.append(byte) }
            }
            out.append(UInt8(ascii: "\""))
        }
        out += [0x0D, 0x0A]
    }
}
