/// The write cursors of every lane of many consumers, and their counter-increment counts
/// (`cell_writes`: counters write no records), looked at in one tight loop.
///
/// An idle collector looks at thousands of bots many times a second for records to drain. Going
/// bot by bot costs a chain of dependent loads each (the bot's objects, then its lanes, then
/// the lane's cursor), each a cache miss after the collector's sleep. Here the lanes' cursors
/// sit in one array, by address, and the loads are independent, so their misses overlap.
package final class LaneWatch {
    /// Holds the consumers, so their mappings (which the addresses point into) stay open.
    private var consumers: [RingConsumer] = []
    private var cursors: [MappedRingFile.WatchedCursor] = []
    /// Each lane's write cursor and `cell_writes` as last seen, and the index of its consumer in
    /// `consumers`.
    private var seen: [UInt64] = []
    private var seenCellWrites: [UInt32] = []
    private var owners: [Int] = []
    /// Each consumer's header lane count, and the lanes it had mapped when watched (see
    /// `markLanesAdded`): until the watch is rebuilt with the lanes its consumer mapped since.
    private var laneCounts: [MappedRingFile.WatchedHeaderWord] = []
    private var lanesMapped: [UInt32] = []
    /// Each consumer's doorbell (DOORBELL in ringside.h), whether the drain set it (`armed`), and
    /// whether it has stood since a look after the announcement found its lanes unmoved
    /// (`settled`): while its word still holds the 1, no producer wrote since that look (one that
    /// did took the 1 and rang), so looks pass its lanes over. See `LaneWatch+Doorbells.swift`.
    var doorbells: [MappedRingFile.WatchedDoorbell] = []
    var ringsDoorbellWords: [MappedRingFile.WatchedHeaderWord] = []
    var armed: [Bool] = []
    var settled: [Bool] = []

    /// Bumped by each `watch`: whoever keeps some of `watchedConsumers` knows when to drop them.
    package private(set) var generation = 0

    package init() {}

    /// Watches the lanes each of `consumers` has mapped now. Call it again when the list changes
    /// or a consumer maps more lanes. A lane with records not yet drained counts as moved; a
    /// lane watched before keeps the `cell_writes` it was last seen at, so an increment made
    /// between the last look and a rebuild still counts as one; a lane new to the watch, with
    /// any increment made through it, counts as counted.
    ///
    /// A consumer watched before keeps its doorbell as it was; one no longer watched has the
    /// doorbell the drain set cleared.
    package func watch(_ consumers: [RingConsumer]) {
        var known: [ObjectIdentifier: [UInt32]] = [:]
        for (lane, owner) in owners.enumerated() {
            known[ObjectIdentifier(self.consumers[owner]), default: []].append(seenCellWrites[lane])
        }
        let bells = keepDoorbells(of: consumers)
        self.consumers = consumers
        generation &+= 1
        laneCounts = consumers.map { $0.mappedFile.watchedLaneCount() }
        ringsDoorbellWords = consumers.map { $0.mappedFile.watchedRingsDoorbell() }
        lanesMapped = consumers.map { UInt32(clamping: $0.laneCount) }
        cursors.removeAll(keepingCapacity: true)
        seen.removeAll(keepingCapacity: true)
        seenCellWrites.removeAll(keepingCapacity: true)
        owners.removeAll(keepingCapacity: true)
        for (index, consumer) in consumers.enumerated() {
            let before = known[ObjectIdentifier(consumer)] ?? []
            for lane in 0..<consumer.laneCount {
                let cursor = consumer.mappedFile.watchedWriteCursor(lane: lane)
                cursors.append(cursor)
                seen.append(consumer.drainedCursor(lane: lane) &+ consumer.gatheredSeen(lane: lane))
                seenCellWrites.append(lane < before.count ? before[lane] : 0)  // a lane new here: any increment counts
                owners.append(index)
            }
        }
        (doorbells, armed, settled) = bells
    }

    /// Sets `moved[i]` for each consumer `i` (in the order given to `watch`) with a lane whose
    /// write cursor changed since the last look, and `counted[i]` for one with a lane whose
    /// `cell_writes` did (a counter moved: its cells are worth reading). Each has one entry per
    /// consumer. The lanes of a consumer whose doorbell is settled are passed over while its word
    /// holds the 1 (nothing was written to them); once it does not, they are looked at.
    package func markMoved(_ moved: inout [Bool], counted: inout [Bool]) {
        precondition(moved.count == consumers.count && counted.count == consumers.count, "one flag per watched consumer")
        unsettleRung()
        cursors.withUnsafeBufferPointer { cursors in
            seen.withUnsafeMutableBufferPointer { seen in
                seenCellWrites.withUnsafeMutableBufferPointer { seenCellWrites in
                    owners.withUnsafeBufferPointer { owners in
                        moved.withUnsafeMutableBufferPointer { moved in
                            counted.withUnsafeMutableBufferPointer { counted in
                                for lane in cursors.indices where !settled[owners[lane]] {
                                    let write = cursors[lane].hint
                                    if write != seen[lane] {
                                        seen[lane] = write
                                        moved[owners[lane]] = true
                                    }
                                    let cellWrites = cursors[lane].cellWrites
                                    if cellWrites != seenCellWrites[lane] {
                                        seenCellWrites[lane] = cellWrites
                                        counted[owners[lane]] = true
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Sets `moved[i]` for each consumer `i` whose file has lanes it has not mapped (a thread's
    /// first record, long after its bot attached), and has it look for them, so that its next
    /// drain maps them. A load from each file's header page (its own TLB miss): asked less often
    /// than `markMoved`.
    package func markLanesAdded(_ moved: inout [Bool]) {
        precondition(moved.count == consumers.count, "one flag per watched consumer")
        for index in laneCounts.indices where laneCounts[index].hint != lanesMapped[index] {
            consumers[index].lookForNewLanes()
            moved[index] = true
        }
    }

    /// Whether any lane watched moved since the last `markMoved` (its write cursor, or its
    /// `cell_writes`), without marking it: the look after the doorbell's announcement (DOORBELL in
    /// ringside.h), which must find what was written before it. A lane added since is not
    /// looked at: the file's growth wakes the drain (inotify), as it did before doorbells. Nor
    /// are the lanes of a settled doorbell: while it holds, nothing was written to them.
    package func anyMoved() -> Bool {
        for lane in cursors.indices where !settled[owners[lane]] {
            if cursors[lane].hint != seen[lane] || cursors[lane].cellWrites != seenCellWrites[lane] { return true }
        }
        return false
    }

    /// The consumers watched, in the order given to `watch`.
    package var watchedConsumers: [RingConsumer] { consumers }
}
