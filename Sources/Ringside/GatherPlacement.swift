/// Where a reader places, in a histogram's buckets, the calls a bot's lanes gathered (SAMPLING in
/// `ringside.h`). Their count, sum and largest come exactly from the gather cells; their values
/// one by one do not, so each is placed at the value of a record that stands for it: a record
/// written with k > 0 stands for the 2^k - 1 calls of its metric gathered on its lane before it,
/// the oldest waiting first. Calls that no record will stand for (the lane stopped sampling, or its
/// thread went idle, exited or was killed) are placed at their cell's latest value once the lane's
/// records are all drained.
///
/// A drain: `placeBeside` for each record drained, then `take` what `RingConsumer.takeGathered`
/// hands over (the calls a record drained before it owed come first), then `placeUnclaimed`.
package struct GatherPlacement {
    /// A lane and a metric (its registry index).
    private struct Key: Hashable {
        let lane: Int
        let metric: Int
    }

    /// A lane's calls of one metric taken and not placed yet, its cell's latest value, and what
    /// records drained before their calls were taken stand for (placed at the next `take`).
    private struct Waiting {
        var calls: UInt64 = 0
        var latest: UInt64 = 0
        var owed: [(value: UInt64, timeNanos: UInt64, calls: UInt64)] = []
    }

    private var waiting: [Key: Waiting] = [:]

    package init() {}

    /// Whether no call waits and none is owed: a drain's records need not ask.
    package var isEmpty: Bool { waiting.isEmpty }

    /// The gathered calls `record` (drained from lane `lane`, stamped `timeNanos`) stands for
    /// besides itself that can be placed now, at its value: of its 2^k - 1, as many as wait. The
    /// rest are owed, placed by the next `take`.
    package mutating func placeBeside(_ record: RingRecord, lane: Int, timeNanos: UInt64) -> UInt64 {
        guard record.weightLog2 > 0 else { return 0 }
        let key = Key(lane: lane, metric: Int(record.metric))
        let waitingCalls = waiting[key]?.calls ?? 0
        let placed = min(waitingCalls, record.gatheredBefore)
        if placed < record.gatheredBefore {
            waiting[key, default: Waiting()].owed.append((record.value, timeNanos, record.gatheredBefore - placed))
        }
        if placed > 0 { waiting[key]?.calls = waitingCalls - placed }
        return placed
    }

    /// Takes `gathered`, lane `lane`'s calls of `metric` since the last look: what drained records
    /// owe is handed to `place` at their values first; the rest wait for records to come. Owed calls
    /// the cell does not hold (no honest producer writes such a record) are forgotten.
    package mutating func take(
        _ gathered: GatheredCalls, metric: Int, lane: Int,
        place: (_ value: UInt64, _ timeNanos: UInt64, _ calls: UInt64) -> Void
    ) {
        let key = Key(lane: lane, metric: metric)
        var entry = waiting[key] ?? Waiting()
        var calls = gathered.calls
        for owed in entry.owed where calls > 0 {
            let placed = min(owed.calls, calls)
            place(owed.value, owed.timeNanos, placed)
            calls -= placed
        }
        entry.owed.removeAll()
        entry.calls &+= calls
        entry.latest = gathered.latest
        waiting[key] = entry
    }

    /// Hands the calls waiting on each lane `isDrained` says has no record left to drain (none
    /// could stand for them) to `place`, at their cell's latest value, and forgets what records
    /// owed and no cell held.
    package mutating func placeUnclaimed(
        isDrained: (_ lane: Int) -> Bool, place: (_ metric: Int, _ value: UInt64, _ calls: UInt64) -> Void
    ) {
        for (key, entry) in waiting {
            guard entry.calls == 0 || isDrained(key.lane) else {
                if !entry.owed.isEmpty { waiting[key]?.owed.removeAll() }
                continue
            }
            if entry.calls > 0 { place(key.metric, entry.latest, entry.calls) }
            waiting[key] = nil
        }
    }
}
