import Ringside
@testable import RingsideCollector
import RingsideSnapshot
import Synchronization

// The history as it was before its points were kept in compact blocks (issue 44), kept here as
// the model `HistoryModelTests` checks the store's answers against: a fixed ring buffer of
// `retentionSeconds` points of every series, each its second and five numbers. Only its
// names changed (and it matches a query itself).

/// Whether `history` is one of the series `query` selects (`HistoryQuery.matches`, as it was).
private func matches(_ query: HistoryQuery, _ history: ReferenceSeriesHistory) -> Bool {
    if !query.ids.isEmpty, !query.ids.contains(history.id) { return false }
    if let ring = query.ring, history.ring != ring { return false }
    if let metric = query.metric, history.metric.name != metric { return false }
    let have = history.metric.labelDictionary
    for (key, value) in query.labels where have[key] != value { return false }
    return true
}

final class ReferenceHistoryStore: Sendable {
    /// Numbers per point besides its second.
    static let valuesPerPoint = 5
    /// Memory per point: its second and its numbers.
    static let bytesPerPoint = MemoryLayout<UInt32>.size + valuesPerPoint * MemoryLayout<UInt64>.size
    /// The most points one answer carries.
    static let maxPointsPerAnswer = 100_000
    /// Retention bounds (`--history`).
    static let minRetentionSeconds = 10
    static let maxRetentionSeconds = 86_400

    let retentionSeconds: Int
    let maxSeries: Int
    /// Memory of one series' points.
    var bytesPerSeries: Int { retentionSeconds * Self.bytesPerPoint }

    private let state: Mutex<State>

    init(retentionSeconds: Int, maxSeries: Int) {
        precondition(retentionSeconds > 0 && maxSeries > 0)
        self.retentionSeconds = retentionSeconds
        self.maxSeries = maxSeries
        state = Mutex(State())
    }

    /// Series held, and series of the last snapshot refused for want of a slot.
    var counts: (series: Int, refused: Int) {
        state.withLock { ($0.slots.count, $0.refused) }
    }

    /// The generation of the last snapshot taken in: answers to a query change only when it moves.
    var generation: UInt64 {
        state.withLock { $0.lastGeneration }
    }

    /// Takes in a snapshot; returns at once when its generation was already recorded.
    func record(_ snapshot: Snapshot) {
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
                    reusable.sort { state.slots[$0].lastSecond > state.slots[$1].lastSecond }  // popped from the end
                }
                for position in newSeries {
                    let series = snapshot.series[position]
                    if state.slots.count < maxSeries {
                        state.index[series.id] = state.slots.count
                        state.slots.append(ReferenceSeriesHistory(series, capacity: capacity))
                        state.slots[state.slots.count - 1].update(series, second: second, generation: generation, positions: positions)
                    } else if let slot = reusable.popLast() {
                        state.index[state.slots[slot].id] = nil
                        state.index[series.id] = slot
                        state.slots[slot].reuse(for: series)  // the same buffer, cleared
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
    func query(_ query: HistoryQuery) -> HistoryAnswer {
        let capacity = Int64(retentionSeconds)
        var answer = HistoryAnswer(
            from: query.from, to: query.to, step: query.step, retentionSeconds: retentionSeconds,
            seriesCap: maxSeries)
        var budget = HistoryStore.maxPointsPerAnswer
        state.withLock { state in
            answer.seriesTotal = state.slots.count
            answer.seriesRefused = state.refused
            // Only what the buffers still hold.
            let from = max(query.from, state.newestSecond - capacity + 1, 1)
            let to = min(query.to, state.newestSecond)
            for slot in state.slots.indices where matches(query, state.slots[slot]) {
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
        answer.series.sort {
            ($0.ring, $0.metric.name, $0.metric.encodedLabels, $0.id) < ($1.ring, $1.metric.name, $1.metric.encodedLabels, $1.id)
        }
        return answer
    }

    private struct State {
        var lastGeneration: UInt64 = 0
        var newestSecond: Int64 = 0
        var lastSweepSecond: Int64 = 0
        var slots: [ReferenceSeriesHistory] = []
        var index: [UInt64: Int] = [:]
        var refused = 0

        mutating func removeSeries(where predicate: (ReferenceSeriesHistory) -> Bool) {
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

/// One series' points: a fixed ring buffer indexed by Unix second modulo its capacity.
struct ReferenceSeriesHistory {
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
        values = [UInt64](repeating: 0, count: capacity * ReferenceHistoryStore.valuesPerPoint)
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
        let base = slot * ReferenceHistoryStore.valuesPerPoint
        let window = series.windows.first
        if seconds[slot] != UInt32(second) {
            seconds[slot] = UInt32(second)
            switch metric.kind {
            case .histogram:
                (values[base], values[base + 1], values[base + 2], values[base + 3], values[base + 4]) =
                    (0, historyNull, historyNull, historyNull, historyNull)
            case .counter: (values[base], values[base + 1], values[base + 2], values[base + 3], values[base + 4]) = (0, 0, 0, 0, 0)
            case .gauge:
                (values[base], values[base + 1], values[base + 2], values[base + 3], values[base + 4]) =
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
                        values[base + 1 + offset] = Self.stored(window.quantileValues[position], signed: metric.isSigned)
                    }
                }
                let high = Self.stored(window.max, signed: metric.isSigned)
                values[base + 4] = values[base + 4] == historyNull ? high : max(values[base + 4], high)
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
    /// A histogram's value as a point keeps it: a signed one in offset binary (VALUES in
    /// ringside.h), so that the larger of two points is still `max`, and short of `historyNull`.
    static func stored(_ value: Int128, signed: Bool) -> UInt64 {
        guard signed else { return min(UInt64(clamping: value), historyNull - 1) }
        return min(UInt64(bitPattern: Int64(clamping: value)) ^ (1 << 63), historyNull - 1)
    }

    /// A value `stored` keeps, in steps.
    static func value(stored: UInt64, signed: Bool) -> Int128 {
        signed ? Int128(OffsetBinary.value(stored)) : Int128(stored)
    }

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
            let base = slot * ReferenceHistoryStore.valuesPerPoint
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
