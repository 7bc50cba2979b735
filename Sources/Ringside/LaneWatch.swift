import CRingside

/// The write cursors of every lane of many consumers, looked at in one tight loop.
///
/// An idle collector looks at thousands of bots many times a second for records to drain. Going
/// bot by bot costs a chain of dependent loads each (the bot's objects, then its lanes, then
/// the lane's cursor), each a cache miss after the collector's sleep. Here the lanes' cursor
/// addresses sit in one array, and the loads are independent, so their misses overlap.
package final class LaneWatch {
    /// Holds the consumers, so their mappings (which the addresses point into) stay open.
    private var consumers: [RingConsumer] = []
    private var addresses: [UnsafePointer<UInt64>] = []
    /// Each lane's write cursor as last seen, and the index of its consumer in `consumers`.
    private var seen: [UInt64] = []
    private var owners: [Int] = []

    package init() {}

    /// Watches the lanes each of `consumers` has mapped now. Call it again when the list changes
    /// or a consumer maps more lanes. A lane with records not yet drained counts as moved.
    package func watch(_ consumers: [RingConsumer]) {
        self.consumers = consumers
        addresses.removeAll(keepingCapacity: true)
        seen.removeAll(keepingCapacity: true)
        owners.removeAll(keepingCapacity: true)
        for (index, consumer) in consumers.enumerated() {
            for lane in 0..<consumer.laneCount {
                addresses.append(consumer.mappedFile.writeCursorAddress(lane: lane))
                seen.append(consumer.drainedCursor(lane: lane))
                owners.append(index)
            }
        }
    }

    /// Sets `moved[i]` for each consumer `i` (in the order given to `watch`) with a lane whose
    /// write cursor changed since the last look. `moved` has one entry per consumer.
    package func markMoved(_ moved: inout [Bool]) {
        precondition(moved.count == consumers.count, "one flag per watched consumer")
        addresses.withUnsafeBufferPointer { addresses in
            seen.withUnsafeMutableBufferPointer { seen in
                owners.withUnsafeBufferPointer { owners in
                    moved.withUnsafeMutableBufferPointer { moved in
                        for lane in addresses.indices {
                            // Relaxed: only a hint that the consumer has work; its drain loads
                            // the cursor again with acquire before it reads a record.
                            let write = rs_load_relaxed_u64(addresses[lane])
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
