import RingsideSystem
import Ringside
import RingsideSnapshot
import Synchronization

/// The last hour (`--history`) of per-second figures for every series, in bounded memory, for
/// `GET /api/history`. Fed one snapshot at a time; it lives in the collector's memory only, so a
/// restart loses it.
///
/// Each series (by its snapshot `id`; ring, metric, kind, unit and labels kept once) keeps its
/// points in blocks of 64 seconds (`SeriesHistory`, `HistoryBlock`): what changed from one
/// second to the next, so an idle series holds some 30 bytes a minute, and one whose every number
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

    private let state: Locked<State>

    package init(retentionSeconds: Int, maxSeries: Int) {
        precondition(retentionSeconds > 0 && maxSeries > 0)
        self.retentionSeconds = retentionSeconds
        self.maxSeries = maxSeries
        state = Locked(State())
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
        state.withLock { $0.clock.lastGeneration }
    }

    /// Takes in a snapshot; returns at once when its generation was already recorded.
    ///
    /// Its cost grows with the series kept, not with those of the snapshot: each kept series is
    /// looked for where the last snapshot had it; when every one is there, the snapshot's other
    /// series are new, and only as many as there are free slots are looked at (none when the store
    /// is full: the rest are counted refused). Only when a kept series moved or left is every
    /// series of the snapshot looked up. A series' id is unique in a snapshot, as the publisher
    /// makes them.
    package func record(_ snapshot: Snapshot) {
        let retention = retentionSeconds
        let maxSeries = maxSeries
        state.withLock { state in
            guard let (second, positions) = state.clock.take(snapshot) else { return }
            let moment = Moment(second: second, generation: snapshot.generation, positions: positions)
            let all = snapshot.series
            let new =
                state.updateInPlace(all, at: moment)
                ? state.newInPlace(all, room: maxSeries - state.slots.count)
                : state.updateLookingUp(all, at: moment, most: maxSeries)
            state.refused = new.count - state.admit(new, of: all, at: moment, cap: maxSeries, retention: retention)
            // Now and then, let go of the series whose every point aged out.
            if second - state.lastSweepSecond >= 10 {
                state.lastSweepSecond = second
                state.removeSeries { $0.seenGeneration != moment.generation && $0.lastSecond <= second - Int64(retention) }
            }
        }
    }

    /// The points of the series `query` selects, aggregated by its step (at most
    /// `maxPointsPerAnswer` of them), copied out of the store.
    package func query(_ query: HistoryQuery) -> HistoryAnswer {
        var answer = HistoryAnswer(
            from: query.from, to: query.to, step: query.step, retentionSeconds: retentionSeconds,
            seriesCap: maxSeries)
        state.withLock { answer.collect($0.slots, refused: $0.refused, newestSecond: $0.clock.newestSecond, where: query.matches) }
        answer.sortSeries()
        return answer
    }

    /// What a snapshot brings to every series it updates.
    private struct Moment {
        let second: Int64
        let generation: UInt64
        /// Where p50, p99 and p999 are in its quantiles, if they are.
        let positions: [Int?]
    }

    /// A snapshot's new series: the positions of those that may take a slot, in the snapshot's
    /// order, and how many there are in all.
    private struct NewSeries {
        var positions: [Int]
        var count: Int
    }

    private struct State {
        /// What a series takes in `index`: a key and a value, in a table kept at most 3/4 full.
        static let indexBytesPerEntry = 24

        var clock = HistoryClock()
        var lastSweepSecond: Int64 = 0
        var slots: [SeriesHistory] = []
        var index: [UInt64: Int] = [:]
        var refused = 0
        /// The sum of the slots' `heldBytes`.
        var pointBytes = 0

        mutating func update(_ slot: Int, with series: SeriesSnapshot, at moment: Moment) {
            let before = slots[slot].heldBytes
            slots[slot].update(series, second: moment.second, generation: moment.generation, positions: moment.positions)
            pointBytes += slots[slot].heldBytes - before
        }

        /// Updates each kept series found where the last snapshot had it; returns whether every one was.
        mutating func updateInPlace(_ all: SeriesList, at moment: Moment) -> Bool {
            var everyOne = true
            for slot in slots.indices {
                let position = slots[slot].position
                if position < all.count, all[position].id == slots[slot].id {
                    update(slot, with: all[position], at: moment)
                } else {
                    everyOne = false
                }
            }
            return everyOne
        }

        /// The new series when every kept one is in place: all the others, no kept slot free, so
        /// only the first `room` are looked at (none in a full store).
        func newInPlace(_ all: SeriesList, room: Int) -> NewSeries {
            var new = NewSeries(positions: [], count: all.count - slots.count)
            guard min(room, new.count) > 0 else { return new }
            let kept = slots.map(\.position).sorted()
            var next = 0, position = 0
            while new.positions.count < min(room, new.count) {
                if next < kept.count, kept[next] == position {
                    next += 1
                } else {
                    new.positions.append(position)
                }
                position += 1
            }
            return new
        }

        /// The new series when a kept one moved or left: every series looked up, the kept ones
        /// updated (and found where they are now), the new ones listed up to `most`.
        mutating func updateLookingUp(_ all: SeriesList, at moment: Moment, most: Int) -> NewSeries {
            var new = NewSeries(positions: [], count: 0)
            for position in all.indices {
                if let slot = index[all[position].id] {
                    guard slots[slot].seenGeneration != moment.generation else { continue }  // updated in place
                    slots[slot].position = position
                    update(slot, with: all[position], at: moment)
                } else {
                    if new.positions.count < most { new.positions.append(position) }
                    new.count += 1
                }
            }
            return new
        }

        /// Gives new series slots, in the snapshot's order: free ones, then, past the cap, those of
        /// series absent from this snapshot, the longest absent first. Returns how many it took.
        mutating func admit(_ new: NewSeries, of all: SeriesList, at moment: Moment, cap: Int, retention: Int) -> Int {
            var reusable: [Int] = []
            if slots.count + new.count > cap {
                reusable = slots.indices.filter { slots[$0].seenGeneration != moment.generation }
                reusable.sort { slots[$0].lastSecond > slots[$1].lastSecond }  // popped from the end
            }
            var admitted = 0
            for position in new.positions {
                let series = all[position]
                let slot: Int
                if slots.count < cap {
                    slot = slots.count
                    slots.append(SeriesHistory(series, position: position, retentionSeconds: retention))
                } else if let free = reusable.popLast() {
                    slot = free
                    index[slots[slot].id] = nil
                    pointBytes -= slots[slot].heldBytes
                    slots[slot] = SeriesHistory(series, position: position, retentionSeconds: retention)
                } else {
                    break
                }
                index[series.id] = slot
                update(slot, with: series, at: moment)
                admitted += 1
            }
            return admitted
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

/// Which snapshots a history takes in, and at which second: each generation once, at the second
/// it was made, never before the newest point (the realtime clock may step back).
struct HistoryClock {
    private(set) var lastGeneration: UInt64 = 0
    private(set) var newestSecond: Int64 = 0

    /// The second `snapshot`'s points go at, and where p50, p99 and p999 are in its quantiles (nil
    /// where it has not that quantile); nil when its generation was taken in already, or its time
    /// is not one a point's 32-bit second holds.
    mutating func take(_ snapshot: Snapshot) -> (second: Int64, positions: [Int?])? {
        let realSecond = Int64(snapshot.generatedRealtimeNanos / 1_000_000_000)
        guard realSecond > 0, realSecond <= Int64(UInt32.max), snapshot.generation != lastGeneration else { return nil }
        lastGeneration = snapshot.generation
        newestSecond = max(realSecond, newestSecond)
        return (newestSecond, [0.5, 0.99, 0.999].map { q in snapshot.quantiles.firstIndex(where: { abs($0 - q) < 1e-12 }) })
    }
}
