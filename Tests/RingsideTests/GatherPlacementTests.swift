import CRingside
import Ringside
import Testing

/// A histogram record of `metric` at `sequence`, weighted 2^`weightLog2` (SAMPLING in ringside.h).
private func record(_ value: UInt64, at sequence: UInt64, metric: UInt32 = 0, weightLog2: UInt8 = 0) -> RingRecord {
    RingRecord(
        timestamp_ns: 1_000 + sequence, value: value, sequence: sequence, metric: metric, kind: MetricKind.histogram.rawValue,
        flags: weightLog2 << UInt8(RS_FLAG_WEIGHT_SHIFT), exemplar_length: 0)
}

/// Drains `batch` (lane 0, its first record at cursor `first`) as a drain does, then takes
/// `calls` gathered calls of metric 0; returns where they were placed, by value.
private func placed(_ batch: [RingRecord], first: UInt64 = 0, calls: UInt64) -> [UInt64: UInt64] {
    var placement = GatherPlacement()
    var where_: [UInt64: UInt64] = [:]
    batch.withUnsafeBufferPointer { records in
        for index in records.indices {
            let earlier = UnsafeBufferPointer(rebasing: records[..<index])
            placement.placeBeside(records[index], after: earlier, firstCursor: first, lane: 0, timeNanos: 0) { value, calls in
                where_[value, default: 0] += calls
            }
        }
    }
    let gathered = GatheredCalls(calls: calls, sum: 0, max: 0, latest: 0)
    placement.take(gathered, metric: 0, lane: 0) { value, _, calls in where_[value, default: 0] += calls }
    return where_
}

@Suite("Gathered calls placed beside the records that stand for them (SAMPLING in ringside.h)")
struct GatherPlacementTests {
    @Test("a weighted record's calls are spread over it and the records of its metric written before it, weighted or not")
    func unweightedNeighboursCount() {
        let batch = [record(100, at: 0), record(200, at: 1), record(300, at: 2, weightLog2: 2)]
        #expect(placed(batch, calls: 3) == [100: 1, 200: 1, 300: 1])
    }

    @Test("another metric's records, and records out of sequence, are no neighbours")
    func foreignAndInvalidRecordsAreNot() {
        let batch = [
            record(100, at: 0, metric: 1), record(200, at: 7), record(250, at: 2), record(300, at: 3, weightLog2: 2),
        ]
        // 3 calls over 2 values: what the division leaves goes to the newest.
        #expect(placed(batch, calls: 3) == [250: 1, 300: 2])
    }

    @Test("each record is a neighbour once, however many weighted records follow it in the batch")
    func eachNeighbourOnce() {
        // The first weighted record owes 1 call, the second 7, placed over the four values (a
        // record counted twice would make five).
        let batch = [
            record(100, at: 10), record(200, at: 11, weightLog2: 1), record(300, at: 12), record(400, at: 13, weightLog2: 3),
        ]
        #expect(placed(batch, first: 10, calls: 8) == [100: 1, 200: 2, 300: 2, 400: 3])
    }

    @Test("a weighted record looks for neighbours among the last GatherPlacement.lookBack records of its batch alone")
    func lookBackIsBounded() {
        // Metric 0's first records lie further back than the look: the weighted one has none.
        var batch = (0..<40).map { record(UInt64($0), at: UInt64($0)) }
        batch += (40..<40 + GatherPlacement.lookBack).map { record(1_000, at: UInt64($0), metric: 1) }
        batch.append(record(500, at: UInt64(batch.count), weightLog2: 2))
        #expect(placed(batch, calls: 3) == [500: 3])
    }
}
