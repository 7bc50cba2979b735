/// Where a reader places, in a histogram's buckets, the calls a bot's lanes gathered (SAMPLING in
/// `ringside.h`). Their count, sum and largest come exactly from the gather cells; their values
/// one by one do not, so each is placed at the value of a record near it: a record written with
/// k > 0 stands for the 2^k - 1 calls of its metric gathered on its lane before it, the oldest
/// waiting first. Calls that no record will stand for (the lane stopped sampling, or its thread
/// went idle, exited or was killed) are placed once the lane's records are all drained.
///
/// Placed where: spread evenly over the values of the last `neighbours` records of their lane and
/// metric drained since its calls last all found a place (the record that stands for them the
/// last), weighted or not, and, for calls no record stands for, the cell's latest value with them.
/// One value standing for up to 32,767 calls, or the calls left over piled at one latest value,
/// moved the quantiles of a burst whose values drift by several percent (issue 70); spread over the
/// weighted neighbours alone, a lane's last records before its drain stood for most of its calls,
/// and a quantile drew on a third of the records' information; over every neighbour, more of it
/// (`ringside-bench burst`).
///
/// A drain: `placeBeside` for each weighted record drained (with the batch's records before it,
/// which it takes its unweighted neighbours from), then `take` what `RingConsumer.takeGathered`
/// hands over (the calls a record drained before it owed come first), then `placeUnclaimed`.
package struct GatherPlacement {
    /// A lane and a metric (its registry index).
    private struct Key: Hashable {
        let lane: Int
        let metric: Int
    }

    /// A lane's calls of one metric taken and not placed yet, its cell's latest value, what
    /// records drained before their calls were taken stand for (placed at the next `take`), the
    /// values of the last records drained (a ring, `nextRecent` its oldest once full), and the
    /// cursor after the last of them.
    private struct Waiting {
        var calls: UInt64 = 0
        var latest: UInt64 = 0
        var owed: [(timeNanos: UInt64, calls: UInt64)] = []
        var recent: [UInt64] = []
        var nextRecent = 0
        var rememberedUpTo: UInt64 = 0

        mutating func remember(_ value: UInt64) {
            if recent.count < GatherPlacement.neighbours {
                recent.append(value)
            } else {
                recent[nextRecent] = value
                nextRecent = (nextRecent + 1) % recent.count
            }
        }

        /// Remembers, oldest first, the records of `record`'s metric and kind in `earlier` (the
        /// first at cursor `firstCursor`) not remembered yet, of the last `lookBack`: a producer
        /// writes them, weighted or not, close together in time.
        mutating func rememberNeighbours(of record: RingRecord, in earlier: UnsafeBufferPointer<RingRecord>, firstCursor: UInt64) {
            let kind = MetricKind(rawValue: record.kind)
            let start = max(earlier.count - GatherPlacement.lookBack, 0)
            for index in start..<earlier.count {
                let cursor = firstCursor &+ UInt64(index)
                let neighbour = earlier[index]
                guard cursor >= rememberedUpTo, neighbour.metric == record.metric, neighbour.kind == record.kind,
                    neighbour.fault(at: cursor, registeredAs: kind) == nil
                else { continue }
                remember(neighbour.value)
            }
        }

        /// Hands `calls` to `place`, spread evenly over the recent values and `extra` (if any):
        /// the share left over by the division to the newest.
        func spread(_ calls: UInt64, with extra: UInt64? = nil, place: (_ value: UInt64, _ calls: UInt64) -> Void) {
            // Oldest first, without a copy (the drain thread allocates nothing per record).
            let count = recent.count + (extra == nil ? 0 : 1)
            guard count > 0, calls > 0 else { return }
            let (share, left) = calls.quotientAndRemainder(dividingBy: UInt64(count))
            for index in 0..<count {
                let value = index < recent.count ? recent[(nextRecent + index) % recent.count] : extra ?? 0
                let placed = share + (UInt64(count - index) <= left ? 1 : 0)
                if placed > 0 { place(value, placed) }
            }
        }
    }

    /// The records over whose values a lane's gathered calls of one metric are spread. 32 held
    /// p99 of `ringside-bench burst`'s tail block a little closer (0.35 % off on average, against
    /// 0.39) but placed each call twice as often: the drain at 64 rings took 0.5 ns a record more.
    package static let neighbours = 16
    /// The records of a batch looked back over for a weighted record's unweighted neighbours, at
    /// most: a bound on the work a record of one metric among many others costs.
    package static let lookBack = 2 * neighbours

    private var waiting: [Key: Waiting] = [:]

    package init() {}

    /// Whether no call waits and none is owed: a drain's records need not ask.
    package var isEmpty: Bool { waiting.isEmpty }

    /// Hands `place` the gathered calls `record` (drained from lane `lane`, stamped `timeNanos`)
    /// stands for besides itself that can be placed now, spread over its neighbours' values and its
    /// own: of its 2^k - 1, as many as wait. The rest are owed, placed by the next `take`.
    /// `earlier` is the batch's records before it, the first at cursor `firstCursor`: those of
    /// its metric it finds valid (`RingRecord.fault`) are its neighbours too.
    package mutating func placeBeside(
        _ record: RingRecord, after earlier: UnsafeBufferPointer<RingRecord>, firstCursor: UInt64, lane: Int,
        timeNanos: UInt64, place: (_ value: UInt64, _ calls: UInt64) -> Void
    ) {
        guard record.weightLog2 > 0 else { return }
        let key = Key(lane: lane, metric: Int(record.metric))
        var entry = waiting.removeValue(forKey: key) ?? Waiting()  // moved out, not copied
        entry.rememberNeighbours(of: record, in: earlier, firstCursor: firstCursor)
        entry.remember(record.value)
        entry.rememberedUpTo = firstCursor &+ UInt64(earlier.count) &+ 1
        let placed = min(entry.calls, record.gatheredBefore)
        if placed < record.gatheredBefore { entry.owed.append((timeNanos, record.gatheredBefore - placed)) }
        entry.calls -= placed
        entry.spread(placed, place: place)
        waiting[key] = entry
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
            entry.spread(placed) { value, share in place(value, owed.timeNanos, share) }
            calls -= placed
        }
        entry.owed.removeAll()
        entry.calls &+= calls
        entry.latest = gathered.latest
        waiting[key] = entry
    }

    /// Hands the calls waiting on each lane `isDrained` says has no record left to drain (none
    /// could stand for them) to `place`, spread over their neighbours' values and their cell's
    /// latest, and forgets what records owed and no cell held.
    package mutating func placeUnclaimed(
        isDrained: (_ lane: Int) -> Bool, place: (_ metric: Int, _ value: UInt64, _ calls: UInt64) -> Void
    ) {
        for (key, entry) in waiting {
            guard entry.calls == 0 || isDrained(key.lane) else {
                if !entry.owed.isEmpty { waiting[key]?.owed.removeAll() }
                continue
            }
            if entry.calls > 0 {
                entry.spread(entry.calls, with: entry.latest) { value, share in place(key.metric, value, share) }
            }
            waiting[key] = nil
        }
    }
}
