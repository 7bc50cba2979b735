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
        // Lane order (sequence order) per lane, so that an exemplar's parts follow their value.
        let ordered = records.enumerated().sorted {
            ($0.element.source, $0.element.lane, $0.element.record.sequence, $0.offset)
                < ($1.element.source, $1.element.lane, $1.element.record.sequence, $1.offset)
        }.map(\.element)
        var slices: [TraceModel.Slice] = []
        var samples: [TraceModel.CounterSample] = []
        var lanesUsed: [Set<UInt32>] = Array(repeating: [], count: sources.count)
        var assemblers = Array(repeating: ExemplarAssembler(), count: sources.count)
        var unreadable: UInt64 = 0

        for entry in ordered {
            guard Int(entry.source) < sources.count else {
                unreadable += 1
                continue
            }
            let source = sources[Int(entry.source)], sourceIndex = Int(entry.source), lane = Int(entry.lane)
            let record = entry.record
            if record.isExemplarPart {
                switch assemblers[sourceIndex].take(record, at: record.sequence, lane: lane) {
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
                continue
            }
            if assemblers[sourceIndex].abandon(lane: lane) { unreadable += 1 }  // its parts never came
            guard let metric = source.metric(record.metric), record.kind == metric.kind.rawValue, metric.kind != .counter else {
                unreadable += 1
                continue
            }
            lanesUsed[sourceIndex].insert(entry.lane)
            let time = source.wallNanos(ofMonotonic: record.timestamp_ns)
            let value = metric.value(ofStored: record.value)
            var slot: Int?
            if metric.kind == .histogram, let duration = durationNanos(record.value, metric: metric) {
                var args: [(key: String, value: String)] = [("value", value.text(unit: metric.unit))]
                if record.flags & UInt8(RS_FLAG_SPAN) != 0 { args.append(("span", "true")) }
                if record.weightLog2 > 0 { args.append(("weight", "\(record.bucketWeight)")) }
                slot = slices.count
                slices.append(
                    TraceModel.Slice(
                        source: entry.source, lane: entry.lane, row: 0, name: metric.displayName, startNanos: time &- min(duration, time),
                        durationNanos: min(duration, time), args: args))
            } else {
                samples.append(TraceModel.CounterSample(source: entry.source, name: metric.displayName, timeNanos: time, value: value))
            }
            if record.carriesExemplar,
                !assemblers[sourceIndex].begin(record, at: record.sequence, lane: lane, slot: slot)
            {
                unreadable += 1  // an exemplar length no producer writes
            }
        }
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

        // Times after a whole second at or before the first event (the interval log's seconds).
        let earliest = min(slices.lazy.map(\.startNanos).min() ?? .max, samples.lazy.map(\.timeNanos).min() ?? .max)
        let origin = earliest == .max ? 0 : earliest / 1_000_000_000 * 1_000_000_000
        for index in slices.indices { slices[index].startNanos -= origin }
        for index in samples.indices { samples[index].timeNanos -= origin }
        let rows = placeInRows(&slices)
        let processes = sources.enumerated().map { index, source in
            TraceModel.Process(
                source: UInt32(index), name: source.processName, pid: source.pid,
                threads: lanesUsed[index].sorted().map { lane in
                    TraceModel.Thread(lane: lane, name: source.threadName(lane: lane), rows: rows["\(index)/\(lane)"] ?? 1)
                })
        }
        return TraceModel(
            originRealtimeNanos: origin, processes: processes,
            slices: slices.enumerated().sorted { ($0.element.startNanos, $0.offset) < ($1.element.startNanos, $1.offset) }.map(\.element),
            counters: samples.enumerated().sorted { ($0.element.timeNanos, $0.offset) < ($1.element.timeNanos, $1.offset) }.map(\.element),
            unreadableRecords: unreadable)
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
