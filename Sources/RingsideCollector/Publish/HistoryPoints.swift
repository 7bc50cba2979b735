import Ringside
import RingsideAggregation

/// What an answer needs of one series' history: who it is, and the points it holds. The store's
/// `SeriesHistory` holds one, and so does the model `HistoryModelTests` checks it against (the
/// ring buffers it replaced): the answer is assembled and aggregated here, once, so that the two
/// differ only in how they keep the points.
protocol HistoryPointSource {
    var id: UInt64 { get }
    var ring: String { get }
    var metric: MetricDescriptor { get }
    /// The second of its newest point (0: none yet).
    var lastSecond: Int64 { get }
    /// Calls `body` with each point it holds from `from` to `to` (Unix seconds), none older than
    /// its retention, in order; stops when `body` returns false.
    func forEachPoint(from: Int64, to: Int64, _ body: (Int64, HistoryValues) -> Bool)
}

extension HistoryPointSource {
    /// The points from `from` to `to` (Unix seconds), `step` seconds each, as `[t, v1, ...]` rows
    /// flattened, the row width being the kind's column count. Each row takes one of `budget`;
    /// a row that finds it spent is not written, nor any after it, and `truncated` is set.
    func points(from: Int64, to: Int64, step: Int64, budget: inout Int, truncated: inout Bool) -> [UInt64] {
        let kind = metric.kind
        let width = HistoryAnswer.columns(kind).count
        var rows: [UInt64] = []
        var bucket: Int64 = -1
        var row = [UInt64](repeating: 0, count: width)
        func flush() {
            guard bucket >= 0 else { return }
            rows.append(contentsOf: row)
            budget -= 1
        }
        forEachPoint(from: from, to: to) { second, values in
            let start = second - second % step
            if start != bucket {
                flush()
                if budget <= 0 {
                    bucket = -1
                    truncated = true
                    return false
                }
                bucket = start
                row[0] = UInt64(start)
                for column in 1..<width { row[column] = values[column - 1] }
                return true
            }
            // Another second of the same step.
            switch kind {
            case .histogram:
                row[1] = row[1].saturatingAdd(values[0])
                for column in 2...5 where values[column - 1] != historyNull {
                    row[column] = row[column] == historyNull ? values[column - 1] : max(row[column], values[column - 1])
                }
            case .counter:
                row[1] = row[1].saturatingAdd(values[0])
                row[2] = values[1]
            case .gauge:
                let value = Double(bitPattern: values[0]), low = Double(bitPattern: values[1])
                let high = Double(bitPattern: values[2])
                if !value.isNaN { row[1] = values[0] }
                let oldLow = Double(bitPattern: row[2]), oldHigh = Double(bitPattern: row[3])
                if !low.isNaN { row[2] = (oldLow.isNaN ? low : min(oldLow, low)).bitPattern }
                if !high.isNaN { row[3] = (oldHigh.isNaN ? high : max(oldHigh, high)).bitPattern }
            }
            return true
        }
        flush()
        return rows
    }
}

extension HistoryAnswer {
    /// Takes in a store's series (`all`, `refused` of the last snapshot), those `matches` selects
    /// with their points within the answer's range and what the store still holds (its newest
    /// second and the retention before it), at most `HistoryStore.maxPointsPerAnswer` points in
    /// all. A store calls it under its lock: the points are copied out.
    mutating func collect<Source: HistoryPointSource>(
        _ all: [Source], refused: Int, newestSecond: Int64, where matches: (Source) -> Bool
    ) {
        seriesTotal = all.count
        seriesRefused = refused
        let first = max(from, newestSecond - Int64(retentionSeconds) + 1, 1)
        let last = min(to, newestSecond)
        var budget = HistoryStore.maxPointsPerAnswer
        for history in all where matches(history) {
            guard history.lastSecond >= first, first <= last else { continue }
            if budget == 0 {
                truncated = true
                break
            }
            let points = history.points(from: first, to: last, step: Int64(step), budget: &budget, truncated: &truncated)
            guard !points.isEmpty else { continue }
            series.append(Series(id: history.id, ring: history.ring, metric: history.metric, points: points))
        }
    }

    /// The series in the answer's order (ring, metric name, labels, id), not the store's: done
    /// after `collect`, outside the store's lock.
    mutating func sortSeries() {
        series.sort {
            ($0.ring, $0.metric.name, $0.metric.encodedLabels, $0.id) < ($1.ring, $1.metric.name, $1.metric.encodedLabels, $1.id)
        }
    }
}
