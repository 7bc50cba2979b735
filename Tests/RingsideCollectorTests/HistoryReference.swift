import RingsideSystem
import Ringside
@testable import RingsideCollector
import RingsideSnapshot
import Synchronization

// The history as it was before its points were kept in compact blocks (issue 44), kept here as
// the model `HistoryModelTests` checks the store's answers against: a fixed ring buffer of
// `retentionSeconds` points of every series, each its second and five numbers. Only its
// names changed (and it matches a query itself); it takes snapshots by the store's
// `HistoryClock` and hands its points to the store's code that assembles an answer and
// aggregates it by step (`HistoryPointSource`), so that what it checks is what the store keeps,
// drops and refuses.

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

    private let state: Locked<State>

    init(retentionSeconds: Int, maxSeries: Int) {
        precondition(retentionSeconds > 0 && maxSeries > 0)
        self.retentionSeconds = retentionSeconds
        self.maxSeries = maxSeries
        state = Locked(State())
    }

    /// Series held, and series of the last snapshot refused for want of a slot.
    var counts: (series: Int, refused: Int) {
        state.withLock { ($0.slots.count, $0.refused) }
    }

    /// The generation of the last snapshot taken in: answers to a query change only when it moves.
    var generation: UInt64 {
        state.withLock { $0.clock.lastGeneration }
    }

    /// Takes in a snapshot; returns at once when its generation was already recorded.
    func record(_ snapshot: Snapshot) {
        let capacity = retentionSeconds
        let maxSeries = maxSeries
        state.withLock { state in
            guard let (second, positions) = state.clock.take(snapshot) else { return }
            let generation = snapshot.generation
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
        var answer = HistoryAnswer(
            from: query.from, to: query.to, step: query.step, retentionSeconds: retentionSeconds,
            seriesCap: maxSeries)
        state.withLock { state in
            answer.collect(state.slots, refused: state.refused, newestSecond: state.clock.newestSecond) { matches(query, $0) }
        }
        answer.sortSeries()
        return answer
    }

    private struct State {
        var clock = HistoryClock()
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
struct ReferenceSeriesHistory: HistoryPointSource {
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
            } else if let window, let quantiles = window.quantileValues, let largest = window.max {
                for (offset, position) in positions.enumerated() {
                    if let position, position < quantiles.count {
                        values[base + 1 + offset] = Self.stored(quantiles[position], signed: metric.isSigned)
                    }
                }
                let high = Self.stored(largest, signed: metric.isSigned)
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

    /// Calls `body` with each point the buffer holds from `from` to `to` (Unix seconds), in
    /// order; stops when it returns false. `HistoryPointSource.points` aggregates them, as the
    /// store's: what this model checks is what the store keeps.
    func forEachPoint(from: Int64, to: Int64, _ body: (Int64, HistoryValues) -> Bool) {
        var second = max(from, lastSecond - Int64(seconds.count) + 1)
        while second <= min(to, lastSecond) {
            defer { second += 1 }
            let slot = Int(second % Int64(seconds.count))
            guard seconds[slot] == UInt32(second) else { continue }
            let base = slot * ReferenceHistoryStore.valuesPerPoint
            var point = HistoryValues(repeating: 0)
            for column in 0..<ReferenceHistoryStore.valuesPerPoint { point[column] = values[base + column] }
            guard body(second, point) else { return }
        }
    }
}

private func saturatingAdd(_ a: UInt64, _ b: UInt64) -> UInt64 {
    let (sum, overflow) = a.addingReportingOverflow(b)
    return overflow ? .max : sum
}
