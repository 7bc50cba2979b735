import CRingside
import RingsideSnapshot
import Ringside
import RingsideAggregation

extension BotAggregator {
    // MARK: - Draining

    /// Drains `consumer`'s lanes (source `source`, at most `limitPerLane` records each) into the
    /// series; a record naming a metric registered since the last look has the registry read again.
    ///
    /// Calls its lanes gathered (SAMPLING in ringside.h) are taken first: each is counted, its sum
    /// and the largest exactly; a record that stands for gathered calls (k > 0) places up to
    /// 2^k - 1 of them in its value's bucket, and those left (the lane stopped sampling, or its
    /// thread went idle) are placed at their cell's latest value, so the counts and the buckets
    /// agree at every drain.
    /// - Parameters:
    ///   - allowance: how many more series may be added, given the series held (the caps).
    ///   - counted: told the records taken from each lane, for the fill rate.
    ///   - recorder: the flight recorder's feed for this file, which keeps the records raw,
    ///     from the lane's own buffers (nil: it is off).
    /// - Returns: the records drained.
    /// - Throws: the consumer's error when the ring's cursors turn out corrupt.
    mutating func drain(
        _ consumer: RingConsumer, source: Int, limitPerLane: Int, nowNanos now: UInt64,
        admitting allowance: (_ held: Usage) -> Usage,
        counted: (_ records: Int, _ lane: Int) -> Void,
        recorder: Recorder.Feed? = nil
    ) throws(RingError) -> Int {
        // The calls gathered are taken after the records, even when the drain fails: then every
        // record drained finds the calls it stands for (see `GatherPlacement`).
        defer { takeGathered(of: consumer, source: source, nowNanos: now) }
        return try consumer.drain(limitPerLane: limitPerLane) { records, first, lane in
            counted(records.count, lane)
            var offset = 0
            while offset < records.count {
                let rest = UnsafeBufferPointer(rebasing: records[offset...])
                offset += consume(rest, source: source, lane: lane, of: consumer, firstCursor: first + UInt64(offset), nowNanos: now)
                guard offset < records.count else { break }
                // A metric registered after the last look: read the registry again.
                if refreshMetrics(of: consumer, source: source, admitting: allowance) == 0 {
                    sources[source].rejected += 1  // the registry has no such metric
                    offset += 1
                }
            }
            // After the batch: the registry it looks at then names every metric the records do.
            recorder?.take(records, lane: lane, of: consumer, nowNanos: now)
        }
    }

    /// Takes the calls `consumer`'s lanes gathered since the last look (SAMPLING in ringside.h):
    /// their sum and largest into their series at `now`, exactly; their count as they are placed
    /// (`Source.gathered`): over the values of the records that stand for them and their
    /// neighbours, or, once a lane is drained and none can, over those and their cell's latest, now.
    private mutating func takeGathered(of consumer: RingConsumer, source: Int, nowNanos now: UInt64) {
        let addresses = sources[source].addresses
        var gathered = GatherPlacement()
        swap(&gathered, &sources[source].gathered)  // moved out, not copied: the tables.histograms change meanwhile
        defer { swap(&gathered, &sources[source].gathered) }
        consumer.takeGathered { metric, lane, calls in
            guard metric < addresses.count, addresses[metric].kind == MetricKind.histogram.rawValue, addresses[metric].slot >= 0
            else { return }
            let address = addresses[metric]
            // Saturating, as every total: hostile weights and cells must not wrap one back.
            let weighted = calls.calls.saturatingMultiply(address.weight)
            sources[source].sampled = sources[source].sampled.saturatingAdd(weighted)
            if address.isSigned {
                let sum = OffsetBinary.sum(calls.sum, count: calls.calls).saturatingMultiply(address.weight)
                tables.signedHistograms[address.slot].windows.addSum(sum, raisingMaxTo: OffsetBinary.maximum(calls.max), atNanos: now)
                tables.signedHistograms[address.slot].sampled = tables.signedHistograms[address.slot].sampled.saturatingAdd(weighted)
                tables.signedHistograms[address.slot].touched = true
            } else {
                tables.histograms[address.slot].windows.addSum(
                    calls.sum.saturatingMultiply(address.weight), raisingMaxTo: calls.max, atNanos: now)
                tables.histograms[address.slot].sampled = tables.histograms[address.slot].sampled.saturatingAdd(weighted)
                tables.histograms[address.slot].touched = true
            }
            gathered.take(calls, metric: metric, lane: lane) { value, time, placed in
                place(value, count: placed, address: address, atNanos: time)
            }
        }
        guard !gathered.isEmpty else { return }
        gathered.placeUnclaimed(isDrained: consumer.isDrained(lane:)) { metric, value, calls in
            place(value, count: calls, address: addresses[metric], atNanos: now)
        }
    }

    /// Places `count` gathered calls (weighted by the address) at `stored`, a value as its file stores it.
    private mutating func place(_ stored: UInt64, count: UInt64, address: SeriesAddress, atNanos time: UInt64) {
        let weighted = count.saturatingMultiply(address.weight)
        if address.isSigned {
            tables.signedHistograms[address.slot].windows.place(OffsetBinary.value(stored), count: weighted, atNanos: time)
            tables.signedHistograms[address.slot].touched = true
        } else {
            tables.histograms[address.slot].windows.place(stored, count: weighted, atNanos: time)
            tables.histograms[address.slot].touched = true
        }
    }

    /// Aggregates records of `source` read at cursors `firstCursor...` of lane `lane`; stops
    /// before a record that names a metric not known yet and returns how many it took, so `drain`
    /// can read the registry again. A value's exemplar is put back together from the exemplar
    /// records after it (see `ExemplarAssembler`), and kept by its series.
    ///
    /// The loop holds the common record (a valid value of a series kept, no exemplar, no gathered
    /// calls beside it); the rest goes to functions of their own, so the loop's few values stay in
    /// registers (inlined, the rare paths' made it spill them on every record).
    private mutating func consume(
        _ records: UnsafeBufferPointer<RingRecord>, source: Int, lane: Int, of consumer: RingConsumer, firstCursor: UInt64,
        nowNanos now: UInt64
    ) -> Int {
        // A timestamp from the future would hold the windows hostage: clamp it to now.
        let latest = now
        if let first = records.first { oldestInLastBatchNanos = min(first.timestamp_ns, now) }
        let addresses = sources[source].addresses
        var tally = Tally()
        defer {
            sources[source].rejected &+= tally.rejected
            sources[source].refusedRecords &+= tally.refused
        }
        var assembling = sources[source].exemplars.isPending(lane: lane)
        for index in records.indices {
            let record = records[index]
            let cursor = firstCursor &+ UInt64(index)
            if record.kind == ExemplarAssembler.exemplarKind {
                assembling = takeExemplarPart(
                    record, at: cursor, source: source, lane: lane, of: consumer, latestNanos: latest, tally: &tally)
                continue
            }
            if assembling {
                // The rest of an exemplar never came: a producer writes them together.
                if sources[source].exemplars.abandon(lane: lane) { tally.rejected += 1 }
                assembling = false
            }
            let metric = Int(record.metric)
            guard metric < addresses.count else { return index }
            let address = addresses[metric]
            // The format's one verdict (`RingRecord.fault`, as ringside-dump check's): a record no
            // producer writes (a counter's, another kind than its metric's, unknown flags) is invalid.
            guard record.fault(at: cursor, registeredAs: MetricKind(rawValue: address.kind)) == nil else {
                tally.rejected += 1
                continue
            }
            if address.slot < 0 {
                tally.refused += 1  // a valid record of a series refused at the cap, or retired (RETIRING A SERIES)
                if record.carriesExemplar { assembling = beginExemplar(record, at: cursor, source: source, lane: lane, slot: nil) }
                continue
            }
            let time = min(record.timestamp_ns, latest)
            guard address.kind == MetricKind.histogram.rawValue else {
                tables.gauges[address.slot].set(Double(bitPattern: record.value), from: source, atNanos: time)
                continue
            }
            if address.isSigned {
                tables.signedHistograms[address.slot].record(OffsetBinary.value(record.value), count: address.weight, atNanos: time)
            } else {
                tables.histograms[address.slot].record(record.value, count: address.weight, atNanos: time)
            }
            // A record written while its lane filled stands, in its bucket, for the 2^k - 1
            // calls gathered before it, counted already (SAMPLING in ringside.h).
            if record.weightLog2 > 0 {
                placeGathered(
                    beside: index, of: records, firstCursor: firstCursor, lane: lane, timeNanos: time, address: address, source: source)
            }
            // No producer writes an exemplar with a signed value: its records are rejected, one by one.
            if record.carriesExemplar, !address.isSigned {
                assembling = beginExemplar(record, at: cursor, source: source, lane: lane, slot: address.slot)
            }
        }
        return records.count
    }

    /// What `consume` counts of a batch's records, added to its source's figures once.
    private struct Tally {
        var rejected: UInt64 = 0
        var refused: UInt64 = 0
    }

    /// Takes an exemplar's record (a part of the exemplar after its value); returns whether more
    /// parts are to come. A complete exemplar is kept by its series.
    @inline(never)
    private mutating func takeExemplarPart(
        _ record: RingRecord, at cursor: UInt64, source: Int, lane: Int, of consumer: RingConsumer, latestNanos latest: UInt64,
        tally: inout Tally
    ) -> Bool {
        let outcome = sources[source].exemplars.take(record, at: cursor, lane: lane)
        switch outcome {
        case .part: break
        case .complete(let slot, let value, let time, let labels):
            keepExemplar(slot: slot, value: value, timeNanos: min(time, latest), labels: labels, source: source, lane: lane, of: consumer)
        case .unwanted: tally.refused += 1
        case .stray: tally.rejected += 1
        case .malformed(let parts): tally.rejected += UInt64(parts)
        }
        return outcome == .part
    }

    /// Begins the exemplar whose value `record` carries (`slot`: its series; nil: not wanted);
    /// returns whether its parts are to come.
    @inline(never)
    private mutating func beginExemplar(_ record: RingRecord, at cursor: UInt64, source: Int, lane: Int, slot: Int?) -> Bool {
        sources[source].exemplars.begin(record, at: cursor, lane: lane, slot: slot)
    }

    /// Places the calls gathered before record `index` of `records` (its weight, SAMPLING in
    /// ringside.h) in its series, beside it and its neighbours (the batch's records before it among
    /// them, the first at `firstCursor`).
    @inline(never)
    private mutating func placeGathered(
        beside index: Int, of records: UnsafeBufferPointer<RingRecord>, firstCursor: UInt64, lane: Int, timeNanos time: UInt64,
        address: SeriesAddress, source: Int
    ) {
        var gathered = GatherPlacement()
        swap(&gathered, &sources[source].gathered)  // moved out, not copied: the tables change meanwhile
        let earlier = UnsafeBufferPointer(rebasing: records[..<index])
        gathered.placeBeside(records[index], after: earlier, firstCursor: firstCursor, lane: lane, timeNanos: time) { value, calls in
            place(value, count: calls, address: address, atNanos: time)
        }
        swap(&gathered, &sources[source].gathered)
    }

    /// Keeps an exemplar put back together from lane `lane` of `source` in histogram `slot`'s
    /// exemplars, in the bucket its value falls in, if it is among the largest or its bucket's latest.
    private mutating func keepExemplar(
        slot: Int, value: UInt64, timeNanos: UInt64, labels: String, source: Int, lane: Int, of consumer: RingConsumer
    ) {
        let bucket = NativeBuckets.index(of: value, metric: tables.histograms[slot].metric, schema: exemplarSchema)
        let thread = consumer.thread(lane: lane)
        // The record's monotonic time on the wall, by the clocks' offset now: the monotonic clock
        // read first, so that the offset errs late, never early (an exemplar never precedes its call).
        let monotonic = rs_clock_precise_ns()
        let wall = rs_clock_realtime_ns() &- monotonic &+ timeNanos
        let exemplar = KeptExemplar(
            value: value, timeNanos: timeNanos, wallTimeNanos: wall, labels: labels, pid: sources[source].pid,
            threadID: thread.id, threadName: thread.name)
        if tables.histograms[slot].exemplars == nil { tables.histograms[slot].exemplars = Indirect(WindowedExemplars(layout: layout)) }
        tables.histograms[slot].exemplars?.value.record(exemplar, bucket: bucket)
    }

    /// Takes in source `source`'s cells. A counter's growth since the source's last sample is
    /// added to its windows at `now` (its rate's resolution is the sampling interval); with
    /// `isBaseline`, a source's first sample counts in totals but not in the windows (counters
    /// made before this collector started would show as a burst).
    /// - Returns: whether any merged cell changed.
    @discardableResult
    mutating func sampleCells(of consumer: RingConsumer, source: Int, nowNanos now: UInt64, isBaseline: Bool = false) -> Bool {
        var changed = false
        for (index, address) in sources[source].addresses.enumerated() where address.slot >= 0 {
            let cells = consumer.cells(ofMetric: index)
            switch address.kind {
            case MetricKind.counter.rawValue:
                let first =
                    tables.counters[address.slot].sourceCells.count <= source || tables.counters[address.slot].sourceCells[source] == nil
                let (growth, merged) = tables.counters[address.slot].takeCells(cells, from: source, nowNanos: now)
                if growth > 0, !(isBaseline && first) { tables.counters[address.slot].windows.add(growth, atNanos: now) }
                changed = changed || merged
            case MetricKind.histogram.rawValue where address.isSigned:
                changed = tables.signedHistograms[address.slot].takeCells(cells, from: source, nowNanos: now).changed || changed
            case MetricKind.histogram.rawValue:
                changed = tables.histograms[address.slot].takeCells(cells, from: source, nowNanos: now).changed || changed
            default:
                changed = tables.gauges[address.slot].takeCells(cells, from: source, nowNanos: now).changed || changed
            }
        }
        return changed
    }
}
