import CRingside
import Ringside
import RingsideText

/// Turns raw records into a ``TraceModel``: a process per source, a thread per lane that holds a
/// record, and each record read as its metric says.
///
/// - A histogram record in a time unit (unsigned: a signed value is no duration), span or not,
///   is a slice [t - value, t] on its lane's thread, t the record's time: a span's record is
///   written at its end. Args: its value with its unit, and the exemplar's pairs when it has one
///   (put back together from the exemplar records after it in its lane).
/// - Any other histogram record, and a gauge's, is a sample of its metric's counter track, the
///   value exact (a signed or scaled value in decimal).
/// - A source's final values (counter totals, gauges' last values) are samples at their time, and
///   its sampled counters (the collector's thread-health figures) at theirs.
package enum TraceBuilder {
    package static func build(sources: [TraceSource], records: some Sequence<TraceRecord>) -> TraceModel {
        var reading = Reading(sources: sources)
        for entry in inLaneOrder(records) { reading.read(entry) }
        reading.samples += sourceSamples(sources)
        return model(of: reading)
    }

    /// The records in lane order (sequence order per lane), so that an exemplar's parts follow
    /// their value; ties keep the order they came in.
    private static func inLaneOrder(_ records: some Sequence<TraceRecord>) -> [TraceRecord] {
        records.enumerated().sorted {
            ($0.element.source, $0.element.lane, $0.element.record.sequence, $0.offset)
                < ($1.element.source, $1.element.lane, $1.element.record.sequence, $1.offset)
        }.map(\.element)
    }

    /// The samples the sources hold besides their records: every source's sampled counters (the
    /// collector's thread-health figures), then every source's final values at their time.
    private static func sourceSamples(_ sources: [TraceSource]) -> [TraceModel.CounterSample] {
        var samples: [TraceModel.CounterSample] = []
        for (index, source) in sources.enumerated() {
            for sample in source.sampledCounters {
                samples.append(
                    TraceModel.CounterSample(
                        source: UInt32(index), name: sample.name, timeNanos: sample.realtimeNanos, value: .double(sample.value)))
            }
        }
        for (index, source) in sources.enumerated() where !source.finalValues.isEmpty {
            let time = source.wallNanos(ofMonotonic: source.finalValuesMonotonicNanos)
            for final in source.finalValues {
                samples.append(
                    TraceModel.CounterSample(source: UInt32(index), name: final.metric.displayName, timeNanos: time, value: final.value))
            }
        }
        return samples
    }

    /// The trace of what was read: times after a whole second at or before the first event (the
    /// interval log's seconds), the slices placed in rows, a process per source with a thread per
    /// lane that held a record, and the slices and samples by time (ties in the order read).
    private static func model(of reading: Reading) -> TraceModel {
        var (slices, samples) = (reading.slices, reading.samples)
        let earliest = min(slices.lazy.map(\.startNanos).min() ?? .max, samples.lazy.map(\.timeNanos).min() ?? .max)
        let origin = earliest == .max ? 0 : earliest / 1_000_000_000 * 1_000_000_000
        for index in slices.indices { slices[index].startNanos -= origin }
        for index in samples.indices { samples[index].timeNanos -= origin }
        let rows = placeInRows(&slices)
        let processes = reading.sources.enumerated().map { index, source in
            TraceModel.Process(
                source: UInt32(index), name: source.processName, pid: source.pid,
                threads: reading.lanesUsed[index].sorted().map { lane in
                    TraceModel.Thread(lane: lane, name: source.threadName(lane: lane), rows: rows["\(index)/\(lane)"] ?? 1)
                })
        }
        return TraceModel(
            originRealtimeNanos: origin, processes: processes,
            slices: slices.enumerated().sorted { ($0.element.startNanos, $0.offset) < ($1.element.startNanos, $1.offset) }.map(\.element),
            counters: samples.enumerated().sorted { ($0.element.timeNanos, $0.offset) < ($1.element.timeNanos, $1.offset) }.map(\.element),
            unreadableRecords: reading.unreadable)
    }

    /// The records read so far, in lane order: the slices and counter samples they made, the lanes
    /// that held one, each source's exemplars half put back together, and the records that could
    /// not be read.
    private struct Reading {
        let sources: [TraceSource]
        var slices: [TraceModel.Slice] = []
        var samples: [TraceModel.CounterSample] = []
        var lanesUsed: [Set<UInt32>]
        var assemblers: [ExemplarAssembler]
        var unreadable: UInt64 = 0

        init(sources: [TraceSource]) {
            self.sources = sources
            lanesUsed = Array(repeating: [], count: sources.count)
            assemblers = Array(repeating: ExemplarAssembler(), count: sources.count)
        }

        /// Reads one record: an exemplar's part goes to its value's exemplar; a histogram's or a
        /// gauge's record becomes a slice or a sample; anything else is counted unreadable.
        mutating func read(_ entry: TraceRecord) {
            guard Int(entry.source) < sources.count else {
                unreadable += 1
                return
            }
            let source = sources[Int(entry.source)], sourceIndex = Int(entry.source), lane = Int(entry.lane)
            let record = entry.record
            if record.isExemplarPart {
                takeExemplarPart(record, source: sourceIndex, lane: lane)
                return
            }
            if assemblers[sourceIndex].abandon(lane: lane) { unreadable += 1 }  // its parts never came
            guard let metric = source.metric(record.metric), record.kind == metric.kind.rawValue, metric.kind != .counter else {
                unreadable += 1
                return
            }
            lanesUsed[sourceIndex].insert(entry.lane)
            let slot = add(entry, metric: metric, atNanos: source.wallNanos(ofMonotonic: record.timestamp_ns))
            if record.carriesExemplar,
                !assemblers[sourceIndex].begin(record, at: record.sequence, lane: lane, slot: slot)
            {
                unreadable += 1  // an exemplar length no producer writes
            }
        }

        /// Takes an exemplar's part; once its exemplar is whole, its labels join its value's slice
        /// as `exemplar.KEY` args. A stray or malformed part is counted unreadable.
        private mutating func takeExemplarPart(_ record: RingRecord, source: Int, lane: Int) {
            switch assemblers[source].take(record, at: record.sequence, lane: lane) {
            case .part, .unwanted: break
            case let .complete(slot, _, _, labels):
                for pair in labels.split(separator: "\n") {
                    let equals = pair.firstIndex(of: "=") ?? pair.endIndex
                    let value = equals < pair.endIndex ? String(pair[pair.index(after: equals)...]) : ""
                    slices[slot].args.append(("exemplar." + pair[..<equals], value))
                }
            case .stray: unreadable += 1
            case let .malformed(parts): unreadable += UInt64(parts)
            }
        }

        /// Adds a record at `time` (the wall clock): a duration (an unsigned histogram in a time
        /// unit) as a slice ending then, anything else as a sample of its metric's counter track.
        /// Returns the slice's index, when it made one (where its exemplar's labels go).
        private mutating func add(_ entry: TraceRecord, metric: MetricDescriptor, atNanos time: UInt64) -> Int? {
            let record = entry.record
            let value = metric.value(ofStored: record.value)
            guard metric.kind == .histogram, let duration = TraceBuilder.durationNanos(record.value, metric: metric) else {
                samples.append(TraceModel.CounterSample(source: entry.source, name: metric.displayName, timeNanos: time, value: value))
                return nil
            }
            var args: [(key: String, value: String)] = [("value", value.text(unit: metric.unit))]
            if record.flags & UInt8(RS_FLAG_SPAN) != 0 { args.append(("span", "true")) }
            if record.weightLog2 > 0 { args.append(("weight", "\(record.bucketWeight)")) }
            slices.append(
                TraceModel.Slice(
                    source: entry.source, lane: entry.lane, row: 0, name: metric.displayName, startNanos: time &- min(duration, time),
                    durationNanos: min(duration, time), args: args))
            return slices.count - 1
        }
    }

    /// Gives each slice the first row of its thread where it nests in, or follows, the slices
    /// there (by start, the longer first); returns the rows each thread needed, by "source/lane".
    static func placeInRows(_ slices: inout [TraceModel.Slice]) -> [String: Int] {
        let order = slices.indices.sorted {
            let a = slices[$0], b = slices[$1]
            return (a.source, a.lane, a.startNanos, UInt64.max - a.durationNanos, $0)
                < (b.source, b.lane, b.startNanos, UInt64.max - b.durationNanos, $1)
        }
        var counts: [String: Int] = [:]
        var thread: (source: UInt32, lane: UInt32)?
        var openEnds: [[UInt64]] = []  // by row: the ends of the slices open there, innermost last
        for index in order {
            let slice = slices[index]
            if thread == nil || thread! != (slice.source, slice.lane) {
                thread = (slice.source, slice.lane)
                openEnds = []
            }
            let end = slice.startNanos + slice.durationNanos
            var row = 0
            while true {
                if row == openEnds.count { openEnds.append([]) }
                while let last = openEnds[row].last, last <= slice.startNanos { openEnds[row].removeLast() }
                if openEnds[row].last.map({ end <= $0 }) ?? true { break }
                row += 1
            }
            openEnds[row].append(end)
            slices[index].row = row
            counts["\(slice.source)/\(slice.lane)"] = max(counts["\(slice.source)/\(slice.lane)"] ?? 1, row + 1)
        }
        return counts
    }

    /// A histogram value in nanoseconds when its metric measures time and is unsigned; nil
    /// otherwise. A scaled value's fraction of a nanosecond is dropped; an overflow saturates.
    static func durationNanos(_ bits: UInt64, metric: MetricDescriptor) -> UInt64? {
        guard let perUnit = metric.unit.nanoseconds, !metric.isSigned else { return nil }
        var nanos = bits.multipliedReportingOverflow(by: perUnit)
        if nanos.overflow { return .max }
        for _ in 0..<abs(Int(metric.scale)) {
            if metric.scale < 0 {
                nanos.partialValue /= 10
            } else {
                nanos = nanos.partialValue.multipliedReportingOverflow(by: 10)
                if nanos.overflow { return .max }
            }
        }
        return nanos.partialValue
    }
}
