import RingsideExport
import Ringside
import RingsideJSON

/// What `GET /api/history` asks for, parsed from its query string.
///
/// `series=ID` (repeatable), `ring=NAME`, `metric=NAME`, `label=KEY:VALUE` (repeatable; all must
/// match), `from` and `to` (Unix seconds; 0 or less: that many seconds before now; default the
/// last 300 seconds up to now), `step` (seconds per point, 1 to 3600, default 1) and `format`
/// (`json`, the default, or `csv`).
package struct HistoryQuery: Sendable, Equatable {
    /// How the answer is written: JSON (`HistoryAnswer.json`) or CSV (`HistoryAnswer.csv`).
    package enum Format: String, Sendable, Equatable, CaseIterable {
        case json, csv
    }

    package var ids: [UInt64] = []
    package var ring: String?
    package var metric: String?
    package var labels: [String: String] = [:]
    package var from: Int64
    package var to: Int64
    package var step = 1
    package var format = Format.json

    package static let defaultSeconds: Int64 = 300
    package static let maxStep = 3600

    package init(from: Int64, to: Int64) {
        self.from = from
        self.to = to
    }

    /// Parses a query string (without `?`); `nowSeconds` resolves relative times. Throws a one-line reason.
    package init(parsing query: String?, nowSeconds: Int64) throws(HistoryQueryError) {
        var from: Int64 = -Self.defaultSeconds, to: Int64 = 0
        var step = 1
        var format = Format.json
        var ids: [UInt64] = []
        var ring: String?, metric: String?
        var labels: [String: String] = [:]
        for item in (query ?? "").split(separator: "&", omittingEmptySubsequences: true) {
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = percentDecoded(parts[0]) else { throw HistoryQueryError("bad percent-encoding in \(item)") }
            guard parts.count == 2, let value = percentDecoded(parts[1]) else {
                throw HistoryQueryError("\(name): expected \(name)=VALUE")
            }
            switch name {
            case "series":
                guard let id = UInt64(value) else { throw HistoryQueryError("series=\(value): not a series id") }
                ids.append(id)
            case "ring": ring = value
            case "metric": metric = value
            case "label":
                guard let colon = value.firstIndex(of: ":"), colon != value.startIndex else {
                    throw HistoryQueryError("label=\(value): expected label=KEY:VALUE")
                }
                labels[String(value[..<colon])] = String(value[value.index(after: colon)...])
            case "from", "to":
                guard let seconds = Int64(value), seconds <= Int64(UInt32.max), seconds >= -Int64(UInt32.max) else {
                    throw HistoryQueryError("\(name)=\(value): not Unix seconds (or 0 or less: seconds before now)")
                }
                if name == "from" { from = seconds } else { to = seconds }
            case "step":
                guard let seconds = Int(value), seconds >= 1, seconds <= Self.maxStep else {
                    throw HistoryQueryError("step=\(value): not a number of seconds from 1 to \(Self.maxStep)")
                }
                step = seconds
            case "format":
                guard let taken = Format(rawValue: value) else {
                    throw HistoryQueryError("format=\(RouteQuery.shown(value)): not json or csv")
                }
                format = taken
            default:
                throw HistoryQueryError("unknown parameter \(name) (series, ring, metric, label, from, to, step, format)")
            }
        }
        if from <= 0 { from = nowSeconds + from }
        if to <= 0 { to = nowSeconds + to }
        from = max(from, 0)
        to = max(to, 0)
        guard from <= to else { throw HistoryQueryError("from (\(from)) is after to (\(to))") }
        self.init(from: from, to: to)
        self.ids = ids
        self.ring = ring
        self.metric = metric
        self.labels = labels
        self.step = step
        self.format = format
    }

    func matches(_ history: SeriesHistory) -> Bool {
        if !ids.isEmpty, !ids.contains(history.id) { return false }
        if let ring, history.ring != ring { return false }
        if let metric, history.metric.name != metric { return false }
        if !labels.isEmpty {
            let have = history.metric.labelDictionary
            for (key, value) in labels where have[key] != value { return false }
        }
        return true
    }
}

package struct HistoryQueryError: Error, Equatable, Sendable {
    package let reason: String
    package init(_ reason: String) { self.reason = reason }
}

/// `%XX` and `+` decoded, or nil when malformed or not UTF-8.
func percentDecoded(_ text: Substring) -> String? {
    var bytes: [UInt8] = []
    var iterator = Array(text.utf8).makeIterator()
    func hex(_ byte: UInt8?) -> UInt8? {
        switch byte {
        case let b? where b >= 48 && b <= 57: b - 48
        case let b? where b >= 65 && b <= 70: b - 55
        case let b? where b >= 97 && b <= 102: b - 87
        default: nil
        }
    }
    while let byte = iterator.next() {
        switch byte {
        case UInt8(ascii: "%"):
            guard let high = hex(iterator.next()), let low = hex(iterator.next()) else { return nil }
            bytes.append(high << 4 | low)
        case UInt8(ascii: "+"): bytes.append(UInt8(ascii: " "))
        default: bytes.append(byte)
        }
    }
    return String(validating: bytes, as: UTF8.self)
}

/// A history answer: the series and their points, copied out of the store.
package struct HistoryAnswer: Sendable {
    package struct Series: Sendable {
        package var id: UInt64
        package var ring: String
        package var metric: MetricDescriptor
        /// Rows of `columns(kind).count` numbers, flattened: the second first.
        package var points: [UInt64]
    }

    package var from: Int64
    package var to: Int64
    package var step: Int
    package var retentionSeconds: Int
    package var seriesCap: Int
    package var seriesTotal = 0
    package var seriesRefused = 0
    package var truncated = false
    package var series: [Series] = []

    /// Each point's numbers, by kind.
    package static func columns(_ kind: MetricKind) -> [String] {
        switch kind {
        case .histogram: ["t", "count", "p50", "p99", "p999", "max"]
        case .counter: ["t", "increase", "total"]
        case .gauge: ["t", "value", "min", "max"]
        }
    }

    /// A point's number as the answer writes it.
    enum Cell: Equatable {
        case whole(UInt64)
        /// A number of steps written as an exact decimal (`-3.5`).
        case decimal(String)
        /// A gauge's value; null in JSON and empty in CSV when not finite.
        case double(Double)
        case null
    }

    /// Column `column` of a point of `metric`, stored as `stored`.
    static func cell(of metric: MetricDescriptor, column: Int, stored number: UInt64) -> Cell {
        if column == 0 || (metric.kind == .counter && !metric.hasSteps) { return .whole(number) }
        if metric.kind == .counter { return .decimal(metric.value(ofStored: number).text) }
        if metric.kind == .gauge { return .double(Double(bitPattern: number)) }
        if number == historyNull { return .null }
        if column == 1 || !metric.hasSteps { return .whole(number) }
        return .decimal(metric.value(ofStored: number).text)
    }

    /// The answer as JSON (see docs/collector.md's History section).
    package var json: [UInt8] {
        let json = JSONWriter()
        json.object {
            json.field("from", from)
            json.field("to", to)
            json.field("step", step)
            json.field("retention_seconds", retentionSeconds)
            json.field("series_total", seriesTotal)
            json.field("series_cap", seriesCap)
            json.field("series_refused", seriesRefused)
            json.field("points_max", HistoryStore.maxPointsPerAnswer)
            json.field("truncated", truncated)
            json.key("series")
            json.array(series) { series in
                let metric = series.metric
                let columns = Self.columns(metric.kind)
                json.object {
                    json.field("id", series.id)
                    JSONExporter.writeIdentity(ring: series.ring, metric: metric, into: json)
                    json.key("columns")
                    json.array(columns) { json.value($0) }
                    json.key("points")
                    let rows = stride(from: 0, to: series.points.count, by: columns.count).map { $0 }
                    json.array(rows) { start in
                        json.array(Array(series.points[start..<(start + columns.count)].enumerated())) { item in
                            switch Self.cell(of: metric, column: item.offset, stored: item.element) {
                            case let .whole(number): json.value(number)
                            case let .decimal(text): json.value(decimal: text)
                            case let .double(number): json.value(number)
                            case .null: json.value(nil as UInt64?)
                            }
                        }
                    }
                }
            }
        }
        return json.bytes
    }
}
