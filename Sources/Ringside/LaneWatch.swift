/// The write cursors of every lane of many consumers, looked at in one tight loop.
///
/// An idle collector looks at thousands of bots many times a second for records to drain. Going
/// bot by bot costs a chain of dependent loads each (the bot's objects, then its lanes, then
/// the lane's cursor), each a cache miss after the collector's sleep. Here the lanes' cursors
/// sit in one array, by address, and the loads are independent, so their misses overlap.
package final class LaneWatch {
    /// Holds the consumers, so their mappings (which the addresses point into) stay open.
    private var consumers: [RingConsumer] = []
    private var cursors: [MappedRingFile.WatchedCursor] = []
    /// Each lane's write cursor as last seen, and the index of its consumer in `consumers`.
    private var seen: [UInt64] = []
    private var owners: [Int] = []

    package init() {}

    /// Watches the lanes each of `consumers` has mapped now. Call it again when the list changes
    /// or a consumer maps more lanes. A lane with records not yet drained counts as moved.
    package func watch(_ consumers: [RingConsumer]) {
        self.consumers = consumers
        cursors.removeAll(keepingCapacity: true)
        seen.removeAll(keepingCapacity: true)
        owners.removeAll(keepingCapacity: true)
        for (index, consumer) in consumers.enumerated() {
            for lane in 0..<consumer.laneCount {
                cursors.append(consumer.mappedFile.watchedWriteCursor(lane: lane))
                seen.append(consumer.drainedCursor(lane: lane))
                owners.append(index)
            }
        }
    }

    /// Sets `moved[i]` for each consumer `i` (in the order given to `watch`) with a lane whose
    /// write cursor changed since the last look. `moved` has one entry per consumer.
    package func markMoved(_ moved: inout [Bool]) {
        precondition(moved.count == consumers.count, "one flag per watched consumer")
        cursors.withUnsafeBufferPointer { cursors in
            seen.withUnsafeMutableBufferPointer { seen in
                owners.withUnsafeBufferPointer { owners in
                    moved.withUnsafeMutableBufferPointer { moved in
                        for lane in cursors.indices {
                            let write = cursors[lane].hint
                            if write != seen[lane] {
                                seen[lane] = write
                                moved[owners[lane]] = true
                            }
                        }
                    }
                }
            }
        }
    }
}
