import Ringside
import RingsideJSON
import RingsideSnapshot
import Synchronization

/// The last hour (`--history`) of per-second figures for every series, in bounded memory, for
/// `GET /api/history`. Fed one snapshot at a time; it lives in the collector's memory only, so a
/// restart loses it.
///
/// Each series (by its snapshot `id`; ring, metric, kind, unit and labels kept once) has one
/// fixed ring buffer of `retentionSeconds` points, allocated when the series is first seen:
/// a point is a Unix second (`UInt32`) and five `UInt64`s, 44 bytes, so an hour is 158,400
/// bytes per series. The second of each point is that of the snapshot's
/// `generatedRealtimeNanos`; a second without a snapshot is a gap, never a repeated value.
///
/// - histograms: count (the increase of the all-time `cumulativeCount` since the previous
///   snapshot, so the counts add up to what was recorded), then p50, p99, p999 and max of the
///   smallest window at the second's last snapshot (null when that window is empty or the
///   quantile is not one of `--quantiles`; max is the largest of the second's snapshots);
/// - counters: increase (of the all-time total), and the all-time total;
/// - gauges: the value (the last set), and the smallest and largest set in the smallest window.
///
/// At most `maxSeries` series are kept. A new series past the cap takes the slot of the series
/// absent from the snapshot the longest; when every kept series is in the snapshot it is refused,
/// and counted (`seriesRefused`). A series that disappears is kept until its points age out.
///
/// Thread safety: `record` (the daemon loop) and `query` (the HTTP thread) take a mutex; a query
/// copies out the points it needs and writes its JSON outside it.
public final class HistoryStore: Sendable {
    /// Numbers per point besides its second.
    public static let valuesPerPoint = 5
    /// Memory per point: its second and its numbers.
    public static let bytesPerPoint = MemoryLayout<UInt32>.size + valuesPerPoint * MemoryLayout<UInt64>.size
    /// The most points one answer carries.
    public static let maxPointsPerAnswer = 100_000
    /// Retention bounds (`--history`).
    public static let minRetentionSeconds = 10
    public static let maxRetentionSeconds = 86_400

    public let retentionSeconds: Int
    public let maxSeries: Int
    /// Memory of one series' points.
    public var bytesPerSeries: Int { retentionSeconds * Self.bytesPerPoint }

    private let state: Mutex<State>

    public init(retentionSeconds: Int, maxSeries: Int) {
        precondition(retentionSeconds > 0 && maxSeries > 0)
        self.retentionSeconds = retentionSeconds
        self.maxSeries = maxSeries
        state = Mutex(State())
    }

    /// Series held, and series of the last snapshot refused for want of a slot.
    public var counts: (series: Int, refused: Int) {
        state.withLock { ($0.slots.count, $0.refused) }
    }

    /// The generation of the last snapshot taken in: answers to a query change only when it moves.
    public var generation: UInt64 {
        state.withLock { $0.lastGeneration }
    }

    /// Takes in a snapshot; returns at once when its generation was already recorded.
    public func record(_ snapshot: Snapshot) {
        let realSecond = Int64(snapshot.generatedRealtimeNanos / 1_000_000_000)
        guard realSecond > 0, realSecond <= Int64(UInt32.max) else { return }
        let positions = [0.5, 0.99, 0.999].map { q in snapshot.quantiles.firstIndex(where: { abs($0 - q) < 1e-12 }) }
        let capacity = retentionSeconds
        let maxSeries = maxSeries
        state.withLock { state in
            guard snapshot.generation != state.lastGeneration else { return }
            state.lastGeneration = snapshot.generation
            let generation = snapshot.generation
            // The clock may step back: a point never goes before the newest one.
            let second = max(realSecond, state.newestSecond)
            state.newestSecond = second
            var newSeries: [Int] = []
            for (position, series) in snapshot.series.enumerated() {
                if let slot = state.index[series.id] {
                    state.slots[slot].update(series, second: second, generation: generation, positions: positions)
                } else {
                    newSeries.append(position)
                }
            }
            var refused = 0
            if !newSeries.isEmpty {
                // Slots to give up, past the cap: series absent from this snapshot, the longest absent first.
                var reusable: [Int] = []
                if state.slots.count + newSeries.count > maxSeries {
                    reusable = state.slots.indices.filter { state.slots[$0].seenGeneration != generation }
                    reusable.sort { state.slots[$0].lastSecond > state.slots[$1].lastSecond } // popped from the end
                }
                for position in newSeries {
                    let series = snapshot.series[position]
                    if state.slots.count < maxSeries {
                        state.index[series.id] = state.slots.count
                        state.slots.append(SeriesHistory(series, capacity: capacity))
                        state.slots[state.slots.count - 1].update(series, second: second, generation: generation, positions: positions)
                    } else if let slot = reusable.popLast() {
                        state.index[state.slots[slot].id] = nil
                        state.index[series.id] = slot
                        state.slots[slot].reuse(for: series) // the same buffer, cleared
                        state.slots[slot].update(series, second: second, generation: generation, positions: positions)
                    } else {
                        refused += 1
                    }
                }
            }
            state.refused = refused
            // Now and then, let go of the series whose every point aged out.
            if second - state.lastSweepSecond >= 10 {
                state.lastSweepSecond = second
                state.removeSeries { $0.seenGeneration != generation && $0.lastSecond <= second - Int64(capacity) }
            }
        }
    }

    /// The points of the series `query` selects, aggregated by its step (at most
    /// `maxPointsPerAnswer` of them), copied out of the store.
    public func query(_ query: HistoryQuery) -> HistoryAnswer {
        let capacity = Int64(retentionSeconds)
        var answer = HistoryAnswer(from: query.from, to: query.to, step: query.step, retentionSeconds: retentionSeconds,
                                   seriesCap: maxSeries)
        var budget = Self.maxPointsPerAnswer
        state.withLock { state in
            answer.seriesTotal = state.slots.count
            answer.seriesRefused = state.refused
            // Only what the buffers still hold.
            let from = max(query.from, state.newestSecond - capacity + 1, 1)
            let to = min(query.to, state.newestSecond)
            for slot in state.slots.indices where query.matches(state.slots[slot]) {
                let history = state.slots[slot]
                guard history.lastSecond >= from, from <= to else { continue }
                if budget == 0 {
                    answer.truncated = true
                    break
                }
                let points = history.points(from: from, to: to, step: Int64(query.step), budget: &budget, truncated: &answer.truncated)
                guard !points.isEmpty else { continue }
                answer.series.append(HistoryAnswer.Series(id: history.id, ring: history.ring, metric: history.metric, points: points))
            }
        }
        answer.series.sort { ($0.ring, $0.metric.name, $0.metric.encodedLabels, $0.id) < ($1.ring, $1.metric.name, $1.metric.encodedLabels, $1.id) }
        return answer
    }

    private struct State {
        var lastGeneration: UInt64 = 0
        var newestSecond: Int64 = 0
        var lastSweepSecond: Int64 = 0
        var slots: [SeriesHistory] = []
        var index: [UInt64: Int] = [:]
        var refused = 0

        mutating func removeSeries(where predicate: (SeriesHistory) -> Bool) {
            var slot = 0
            while slot < slots.count {
                if predicate(slots[slot]) {
                    index[slots[slot].id] = nil
                    slots.swapAt(slot, slots.count - 1)
                    slots.removeLast()
                    if slot < slots.count { index[slots[slot].id] = slot }
                } else {
                    slot += 1
                }
            }
        }
    }
}

/// The null of a point's integer fields.
let historyNull = UInt64.max
/// The null of a gauge's fields (non-finite: written as null).
let historyNullDouble = Double.nan.bitPattern

/// One series' points: a fixed ring buffer indexed by Unix second modulo its capacity.
struct SeriesHistory {
    private(set) var id: UInt64
    private(set) var ring: String
    private(set) var metric: MetricDescriptor
    /// Each slot's Unix second (0: empty), and its `valuesPerPoint` numbers.
    private var seconds: [UInt32]
    private var values: [UInt64]
    /// The all-time total at the last snapshot: the next increase counts from it.
    private var baseline: UInt128 = 0
    private(set) var lastSecond: Int64 = 0
    private(set) var seenGeneration: UInt64 = 0

    init(_ series: SeriesSnapshot, capacity: Int) {
        id = series.id
        ring = series.ring
        metric = series.metric
        seconds = [UInt32](repeating: 0, count: capacity)
        values = [UInt64](repeating: 0, count: capacity * HistoryStore.valuesPerPoint)
    }

    mutating func reuse(for series: SeriesSnapshot) {
        id = series.id
        ring = series.ring
        metric = series.metric
        baseline = 0
        lastSecond = 0
        seenGeneration = 0
        for slot in seconds.indices { seconds[slot] = 0 }
    }

    mutating func update(_ series: SeriesSnapshot, second realSecond: Int64, generation: UInt64, positions: [Int?]) {
        let second = max(realSecond, lastSecond)
        seenGeneration = generation
        lastSecond = second
        let slot = Int(second % Int64(seconds.count))
        let base = slot * HistoryStore.valuesPerPoint
        let window = series.windows.first
        if seconds[slot] != UInt32(second) {
            seconds[slot] = UInt32(second)
            switch metric.kind {
            case .histogram: (values[base], values[base + 1], values[base + 2], values[base + 3], values[base + 4]) =
                (0, historyNull, historyNull, historyNull, historyNull)
            case .counter: (values[base], values[base + 1], values[base + 2], values[base + 3], values[base + 4]) = (0, 0, 0, 0, 0)
            case .gauge: (values[base], values[base + 1], values[base + 2], values[base + 3], values[base + 4]) =
                (historyNullDouble, historyNullDouble, historyNullDouble, 0, 0)
            }
        }
        switch metric.kind {
        case .histogram, .counter:
            let total = metric.kind == .histogram ? UInt128(series.cumulativeCount) : series.cumulativeExactSum
            // A total never falls within a series; if it did, count from zero again.
            let increase = total >= baseline ? total - baseline : total
            baseline = total
            values[base] = saturatingAdd(values[base], UInt64(clamping: increase))
            if metric.kind == .counter {
                values[base + 1] = UInt64(clamping: total)
            } else if let window, window.count > 0 {
                for (offset, position) in positions.enumerated() {
                    if let position, position < window.quantileValues.count {
                        values[base + 1 + offset] = window.quantileValues[position]
                    }
                }
                values[base + 4] = values[base + 4] == historyNull ? window.max : max(values[base + 4], window.max)
            }
        case .gauge:
            if let value = series.lastValue { values[base] = value.bitPattern }
            if let low = window?.gaugeMin {
                let old = Double(bitPattern: values[base + 1])
                values[base + 1] = (old.isNaN ? low : min(old, low)).bitPattern
            }
            if let high = window?.gaugeMax {
                let old = Double(bitPattern: values[base + 2])
                values[base + 2] = (old.isNaN ? high : max(old, high)).bitPattern
            }
        }
    }

    /// The points from `from` to `to` (Unix seconds, within the buffer), `step` seconds each,
    /// as `[t, v1, ...]` rows flattened, the row width being the kind's column count.
    func points(from: Int64, to: Int64, step: Int64, budget: inout Int, truncated: inout Bool) -> [UInt64] {
        let width = HistoryAnswer.columns(metric.kind).count
        var rows: [UInt64] = []
        var bucket: Int64 = -1
        var row = [UInt64](repeating: 0, count: width)
        func flush() {
            guard bucket >= 0 else { return }
            rows.append(contentsOf: row)
            budget -= 1
        }
        var second = max(from, lastSecond - Int64(seconds.count) + 1)
        while second <= min(to, lastSecond) {
            defer { second += 1 }
            let slot = Int(second % Int64(seconds.count))
            guard seconds[slot] == UInt32(second) else { continue }
            let base = slot * HistoryStore.valuesPerPoint
            let start = second - second % step
            if start != bucket {
                flush()
                if budget <= 0 {
                    bucket = -1
                    truncated = true
                    break
                }
                bucket = start
                row[0] = UInt64(start)
                for column in 1..<width { row[column] = values[base + column - 1] }
                continue
            }
            // Another second of the same step.
            switch metric.kind {
            case .histogram:
                row[1] = saturatingAdd(row[1], values[base])
                for column in 2...5 where values[base + column - 1] != historyNull {
                    row[column] = row[column] == historyNull ? values[base + column - 1] : max(row[column], values[base + column - 1])
                }
            case .counter:
                row[1] = saturatingAdd(row[1], values[base])
                row[2] = values[base + 1]
            case .gauge:
                let value = Double(bitPattern: values[base]), low = Double(bitPattern: values[base + 1])
                let high = Double(bitPattern: values[base + 2])
                if !value.isNaN { row[1] = values[base] }
                let oldLow = Double(bitPattern: row[2]), oldHigh = Double(bitPattern: row[3])
                if !low.isNaN { row[2] = (oldLow.isNaN ? low : min(oldLow, low)).bitPattern }
                if !high.isNaN { row[3] = (oldHigh.isNaN ? high : max(oldHigh, high)).bitPattern }
            }
        }
        flush()
        return rows
    }
}

private func saturatingAdd(_ a: UInt64, _ b: UInt64) -> UInt64 {
    let (sum, overflow) = a.addingReportingOverflow(b)
    return overflow ? .max : sum
}

/// What `GET /api/history` asks for, parsed from its query string.
///
/// `series=ID` (repeatable), `ring=NAME`, `metric=NAME`, `label=KEY:VALUE` (repeatable; all must
/// match), `from` and `to` (Unix seconds; 0 or less: that many seconds before now; default the
/// last 300 seconds up to now) and `step` (seconds per point, 1 to 3600, default 1).
public struct HistoryQuery: Sendable, Equatable {
    public var ids: [UInt64] = []
    public var ring: String?
    public var metric: String?
    public var labels: [String: String] = [:]
    public var from: Int64
    public var to: Int64
    public var step = 1

    public static let defaultSeconds: Int64 = 300
    public static let maxStep = 3600

    public init(from: Int64, to: Int64) {
        self.from = from
        self.to = to
    }

    /// Parses a query string (without `?`); `nowSeconds` resolves relative times. Throws a one-line reason.
    public init(parsing query: String?, nowSeconds: Int64) throws(HistoryQueryError) {
        var from: Int64 = -Self.defaultSeconds, to: Int64 = 0
        var step = 1
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
            default:
                throw HistoryQueryError("unknown parameter \(name) (series, ring, metric, label, from, to, step)")
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

public struct HistoryQueryError: Error, Equatable, Sendable {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
}

/// `%XX` and `+` decoded, or nil when malformed or not UTF-8.
private func percentDecoded(_ text: Substring) -> String? {
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
public struct HistoryAnswer: Sendable {
    public struct Series: Sendable {
        public var id: UInt64
        public var ring: String
        public var metric: MetricDescriptor
        /// Rows of `columns(kind).count` numbers, flattened: the second first.
        public var points: [UInt64]
    }

    public var from: Int64
    public var to: Int64
    public var step: Int
    public var retentionSeconds: Int
    public var seriesCap: Int
    public var seriesTotal = 0
    public var seriesRefused = 0
    public var truncated = false
    public var series: [Series] = []

    /// Each point's numbers, by kind.
    public static func columns(_ kind: MetricKind) -> [String] {
        switch kind {
        case .histogram: ["t", "count", "p50", "p99", "p999", "max"]
        case .counter: ["t", "increase", "total"]
        case .gauge: ["t", "value", "min", "max"]
        }
    }

    /// The answer as JSON (see docs/collector.md's History section).
    public var json: [UInt8] {
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
                    json.field("ring", series.ring)
                    json.field("metric", metric.name)
                    json.field("kind", metric.kind.description)
                    json.field("unit", metric.unit.description)
                    json.key("labels")
                    json.object {
                        for (key, value) in metric.labels { json.field(key, value) }
                    }
                    json.key("columns")
                    json.array(columns) { json.value($0) }
                    json.key("points")
                    let rows = stride(from: 0, to: series.points.count, by: columns.count).map { $0 }
                    json.array(rows) { start in
                        json.array(Array(series.points[start..<(start + columns.count)].enumerated())) { item in
                            let (column, number) = (item.offset, item.element)
                            if column == 0 || (metric.kind == .counter) {
                                json.value(number)
                            } else if metric.kind == .gauge {
                                json.value(Double(bitPattern: number))
                            } else {
                                json.value(number == historyNull ? nil : number)
                            }
                        }
                    }
                }
            }
        }
        return json.bytes
    }
}
