import Ringside
import RingsideAggregation
import RingsideExport

/// The records' histograms as an HdrHistogram interval log (``HistogramLog``, as `--hlog` writes
/// it): a line per histogram series per whole second of the wall clock that holds records of
/// it, each record counted once. The log's StartTime is the trace's origin, so its seconds are
/// the trace's. Signed histograms are left out, as `--hlog` leaves them: HdrHistogram holds no
/// negative value.
package enum TraceHistogramLog {
    package static func encode(
        sources: [TraceSource], records: [TraceRecord], originRealtimeNanos origin: UInt64, program: String
    ) -> String {
        struct Key: Hashable {
            var source: UInt32
            var metric: UInt32
            var second: UInt64
        }
        var histograms: [Key: Histogram] = [:]
        for entry in records where Int(entry.source) < sources.count {
            let source = sources[Int(entry.source)]
            guard let metric = source.metric(entry.record.metric), metric.kind == .histogram, !metric.isSigned,
                entry.record.kind == metric.kind.rawValue
            else { continue }
            let time = source.wallNanos(ofMonotonic: entry.record.timestamp_ns)
            guard time >= origin else { continue }
            histograms[Key(source: entry.source, metric: metric.index, second: (time - origin) / 1_000_000_000), default: Histogram()]
                .record(entry.record.value)
        }
        let lines = histograms.map { key, histogram in
            let source = sources[Int(key.source)]
            let tag = HistogramLog.tag(ring: source.ringName, metric: source.metric(key.metric)!)
            return (second: key.second, tag: tag, histogram: histogram)
        }.sorted { ($0.second, $0.tag) < ($1.second, $1.tag) }
        var text = HistogramLog.header(startRealtimeNanos: origin, program: program, contents: "the records in the file, by second")
        for line in lines {
            text += HistogramLog.line(
                tag: line.tag, startNanos: line.second * 1_000_000_000, lengthNanos: 1_000_000_000, histogram: line.histogram)
        }
        return text
    }
}
