import Ringside
import RingsideSnapshot
import Synchronization

/// The last hour (`--history`) of per-second figures for every series, in bounded memory, for
/// `GET /api/history`. Fed one snapshot at a time; it lives in the collector's memory only, so a
/// restart loses it.
///
/// Each series (by its snapshot `id`; ring, metric, kind, unit and labels kept once) keeps its
/// points in blocks of 64 seconds (`SeriesHistory`, `HistoryBlock`): what changed from one
/// second to the next, so an idle series holds some 24 bytes a minute, and one whose every number
/// changes every second at most `HistoryBlock.maxPointBytes` a second (43 bytes for a histogram,
/// 44 before). The second of each point is that of the snapshot's `generatedRealtimeNanos`; a
/// second without a snapshot is a gap, never a repeated value.
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
package final class HistoryStore: Sendable {
    /// Numbers per point besides its second.
    package static let valuesPerPoint = 5
    /// The most points one answer carries.
    package static let maxPointsPerAnswer = 100_000
    /// Retention bounds (`--history`).
    package static let minRetentionSeconds = 10
    package static let maxRetentionSeconds = 86_400

    package let retentionSeconds: Int
    package let maxSeries: Int
    /// The most memory one series may hold: its record, and points that change every number
    /// every second (those of a histogram, the widest).
    package var maxBytesPerSeries: Int {
        SeriesHistory.maxHeldBytes(retentionSeconds: retentionSeconds, kind: .histogram) + MemoryLayout<SeriesHistory>.stride
            + State.indexBytesPerEntry
    }

    private let state: Mutex<State>

    package init(retentionSeconds: Int, maxSeries: Int) {
        precondition(retentionSeconds > 0 && maxSeries > 0)
        self.retentionSeconds = retentionSeconds
        self.maxSeries = maxSeries
        state = Mutex(State())
    }

    /// Series held, and series of the last snapshot refused for want of a slot.
    package var counts: (series: Int, refused: Int) {
        state.withLock { ($0.slots.count, $0.refused) }
    }

    /// The memory the store holds: each series' points as allocated (see `SeriesHistory.heldBytes`),
    /// its record and its place in the index; not the names, which the snapshots share.
    package var bytes: Int {
        state.withLock {
            $0.pointBytes + $0.slots.capacity * MemoryLayout<SeriesHistory>.stride + $0.index.capacity * State.indexBytesPerEntry
        }
    }

    /// The generation of the last snapshot taken in: answers to a query change only when it moves.
    package var generation: UInt64 {
        state.withLock { $0.lastGeneration }
    }

    /// Takes in a snapshot; returns at once when its generation was already recorded.
    ///
    /// Its cost grows with the series kept, not with those of the snapshot: each kept series is
    /// looked for where the last snapshot had it; when every one is there, the snapshot's other
    /// series are new, and only as many as there are free slots are looked at (none when the store
    /// is full: the rest are counted refused). Only when a kept series moved or left is every
    /// series of the snapshot looked up.
    package func record(_ snapshot: Snapshot) {
        let realSecond = Int64(snapshot.generatedRealtimeNanos / 1_000_000_000)
        guard realSecond > 0, realSecond <= Int64(UInt32.max) else { return }
        let positions = [0.5, 0.99, 0.999].map { q in snapshot.quantiles.firstIndex(where: { abs($0 - q) < 1e-12 }) }
        let retention = retentionSeconds
        let maxSeries = maxSeries
        state.withLock { state in
            guard snapshot.generation != state.lastGeneration else { return }
            state.lastGeneration = snapshot.generation
            let generation = snapshot.generation
            // The clock may step back: a point never goes before the newest one.
            let second = max(realSecond, state.newestSecond)
            state.newestSecond = second
            let all = snapshot.series
            var moved = false
            for slot in state.slots.indices {
                let position = state.slots[slot].position
                if position < all.count, all[position].id == state.slots[slot].id {
                    state.update(slot, with: all[position], second: second, generation: generation, positions: positions)
                } else {
                    moved = true
                }
            }
            // The new series' positions, in the snapshot's order: as many as may take a slot.
            var newSeries: [Int] = []
            var newCount = 0
            if moved {
                for position in all.indices {
                    if let slot = state.index[all[position].id] {
                        guard state.slots[slot].seenGeneration != generation else { continue }
                        state.slots[slot].position = position
                        state.update(slot, with: all[position], second: second, generation: generation, positions: positions)
                    } else {
                        if newSeries.count < maxSeries { newSeries.append(position) }
                        newCount += 1
                    }
                }
            } else {
                // Every kept series is where it was: the others are new, and no kept slot is free.
                newCount = all.count - state.slots.count
                let room = min(maxSeries - state.slots.count, newCount)
                if room > 0 {
                    let kept = state.slots.map(\.position).sorted()
                    var next = 0
                    for position in all.indices {
                        guard newSeries.count < room else { break }
                        if next < kept.count, kept[next] == position {
                            next += 1
                        } else {
                            newSeries.append(position)
                        }
                    }
                }
            }
            var admitted = 0
            if newCount > 0 {
                // Slots to give up, past the cap: series absent from this snapshot, the longest absent first.
                var reusable: [Int] = []
                if state.slots.count + newCount > maxSeries {
                    reusable = state.slots.indices.filter { state.slots[$0].seenGeneration != generation }
                    reusable.sort { state.slots[$0].lastSecond > state.slots[$1].lastSecond }  // popped from the end
                }
                for position in newSeries {
                    let series = all[position]
                    let slot: Int
                    if state.slots.count < maxSeries {
                        slot = state.slots.count
                        state.slots.append(SeriesHistory(series, position: position, retentionSeconds: retention))
                    } else if let free = reusable.popLast() {
                        slot = free
                        state.index[state.slots[slot].id] = nil
                        state.pointBytes -= state.slots[slot].heldBytes
                        state.slots[slot] = SeriesHistory(series, position: position, retentionSeconds: retention)
                    } else {
                        break
                    }
                    state.index[series.id] = slot
                    state.update(slot, with: series, second: second, generation: generation, positions: positions)
                    admitted += 1
                }
            }
            state.refused = newCount - admitted
            // Now and then, let go of the series whose every point aged out.
            if second - state.lastSweepSecond >= 10 {
                state.lastSweepSecond = second
                state.removeSeries { $0.seenGeneration != generation && $0.lastSecond <= second - Int64(retention) }
            }
        }
    }

    /// The points of the series `query` selects, aggregated by its step (at most
    /// `maxPointsPerAnswer` of them), copied out of the store.
    package func query(_ query: HistoryQuery) -> HistoryAnswer {
        let capacity = Int64(retentionSeconds)
        var answer = HistoryAnswer(
            from: query.from, to: query.to, step: query.step, retentionSeconds: retentionSeconds,
            seriesCap: maxSeries)
        var budget = Self.maxPointsPerAnswer
        state.withLock { state in
            answer.seriesTotal = state.slots.count
            answer.seriesRefused = state.refused
            // Only what the blocks still hold.
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
        answer.series.sort {
            ($0.ring, $0.metric.name, $0.metric.encodedLabels, $0.id) < ($1.ring, $1.metric.name, $1.metric.encodedLabels, $1.id)
        }
        return answer
    }

    private struct State {
        /// What a series takes in `index`: a key and a value, in a table kept at most 3/4 full.
        static let indexBytesPerEntry = 24

        var lastGeneration: UInt64 = 0
        var newestSecond: Int64 = 0
        var lastSweepSecond: Int64 = 0
        var slots: [SeriesHistory] = []
        var index: [UInt64: Int] = [:]
        var refused = 0
        /// The sum of the slots' `heldBytes`.
        var pointBytes = 0

        mutating func update(_ slot: Int, with series: SeriesSnapshot, second: Int64, generation: UInt64, positions: [Int?]) {
            let before = slots[slot].heldBytes
            slots[slot].update(series, second: second, generation: generation, positions: positions)
            pointBytes += slots[slot].heldBytes - before
        }

        mutating func removeSeries(where predicate: (SeriesHistory) -> Bool) {
            var slot = 0
            while slot < slots.count {
                if predicate(slots[slot]) {
                    index[slots[slot].id] = nil
                    pointBytes -= slots[slot].heldBytes
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
