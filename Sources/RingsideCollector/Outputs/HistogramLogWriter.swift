#if canImport(Glibc)
import Glibc
#endif
import RingsideAggregation
import RingsideExport
import RingsideSnapshot
import RingsideSystem

/// Writes `--hlog`: every histogram series' per-interval histograms in HdrHistogram's interval
/// log format (see ``HistogramLog``), from the daemon loop, never from the drain thread.
///
/// An interval runs from one capture to the next (`--hlog-interval`, 1 s by default): a series'
/// histogram for it is its all-time histogram at the capture less the one at the previous
/// capture, so it holds exactly the records drained between the two. Series with no records in
/// an interval get no line.
///
/// Size: before a batch of lines would take the file past `maxBytes`, the file is renamed
/// `PATH.1` (replacing the one before) and a new one begun with fresh headers, so the log takes
/// at most about twice `maxBytes` on disk (more only when one interval's lines alone exceed it).
/// A file already at `PATH` when the collector starts is renamed `PATH.1` likewise.
///
/// Files: through a ``LogDirectory``, so only a regular file of the collector's is ever moved
/// aside, and each new file is created new, never opened where something already is: a link,
/// FIFO or foreign file at `PATH` is refused and left alone.
///
/// Errors (a refused or planted `PATH`, a full disk): logged when they start, change and end,
/// counted in ``errors``, never fatal. The records of an interval that could not be written go in
/// the next one written (its interval is then longer), in a new file.
final class HistogramLogWriter {
    let maxBytes: UInt64
    /// `--hlog-interval`, and when the last interval was written (CLOCK_MONOTONIC; 0: never).
    let intervalNanos: UInt64
    private var lastWriteNanos: UInt64 = 0
    /// The file being written.
    private let file: HistogramLogFile
    /// CLOCK_REALTIME at the start of the next interval.
    private var intervalStartNanos: UInt64
    /// Each series' all-time histogram as last written, and its tag, by series id.
    private var previous: [UInt64: Histogram] = [:]
    private var tags: [UInt64: String] = [:]
    /// Captured series not yet written (their write failed).
    private var unwritten: [UInt64: HistogramCapture.Series] = [:]
    /// Files begun because the bound was reached.
    private(set) var rotations: UInt64 = 0

    var path: String { file.path }
    /// The file's size.
    var size: UInt64 { file.size }
    /// Failed opens, writes and renames.
    var errors: UInt64 { file.errors }

    /// - Parameters:
    ///   - path: the log's path, as the operator gave it (for messages).
    ///   - directory: `path`'s directory, opened (see ``LogDirectory/split(_:)``).
    init(
        path: String, directory: LogDirectory, intervalNanos: UInt64 = 1_000_000_000, maxBytes: UInt64, startRealtimeNanos: UInt64,
        program: String, log: CollectorLog
    ) {
        self.intervalNanos = intervalNanos
        self.maxBytes = maxBytes
        file = HistogramLogFile(path: path, directory: directory, program: program, log: log)
        intervalStartNanos = startRealtimeNanos
        _ = file.openNew(startNanos: intervalStartNanos)
    }

    func close() { file.close() }

    /// Writes the interval that ends at `snapshot` once `intervalNanos` have passed since the last.
    func writeIfDue(_ snapshot: Snapshot, nowNanos now: UInt64) {
        if lastWriteNanos == 0 { lastWriteNanos = now }
        guard now &- lastWriteNanos >= intervalNanos else { return }
        lastWriteNanos = now
        write(snapshot)
    }

    /// Writes the interval that ends at `snapshot`: the histogram series whose all-time count
    /// moved since they were last written (the snapshot's series carry their all-time histograms).
    func write(_ snapshot: Snapshot) {
        var capture = HistogramCapture(realtimeNanos: snapshot.generatedRealtimeNanos)
        for series in snapshot.series {
            guard let cumulative = series.cumulative, cumulative.count != previous[series.id]?.count ?? 0 else { continue }
            capture.series[series.id] = HistogramCapture.Series(ring: series.ring, metric: series.metric, cumulative: cumulative)
        }
        write(capture, liveSeries: Set(snapshot.series.lazy.map(\.id)))
    }

    /// Writes the interval that ends at `capture`'s time. `liveSeries`: the ids of every series
    /// the collector still has (those it let go of are forgotten), or nil.
    func write(_ capture: HistogramCapture, liveSeries: Set<UInt64>? = nil) {
        var series = unwritten
        for (id, entry) in capture.series { series[id] = entry }
        let end = max(capture.realtimeNanos, intervalStartNanos)
        // The histograms first (the costly part), then the file they go in, then the lines.
        var intervals: [(tag: String, histogram: Histogram, encoded: String)] = []
        for (id, entry) in series {
            let tag = tags[id] ?? HistogramLog.tag(ring: entry.ring, metric: entry.metric)
            tags[id] = tag
            let interval = previous[id].map { entry.cumulative.subtracting($0) } ?? entry.cumulative
            guard interval.count != 0 else { continue }
            intervals.append((tag, interval, HdrHistogramEncoding.base64(interval)))
        }
        intervals.sort { $0.tag < $1.tag }
        let estimate = intervals.reduce(0) { $0 + $1.tag.utf8.count + $1.encoded.utf8.count + 60 }
        var written = false
        if !intervals.isEmpty, file.isOpen || file.openNew(startNanos: intervalStartNanos) {
            if file.hasLines, file.size + UInt64(estimate) > maxBytes {
                file.close()
                rotations += 1
            }
            if file.isOpen || file.openNew(startNanos: intervalStartNanos) {
                let startOffset = intervalStartNanos - file.startNanos
                var text = ""
                text.reserveCapacity(estimate)
                for interval in intervals {
                    text += HistogramLog.line(
                        tag: interval.tag, startNanos: startOffset, lengthNanos: end - intervalStartNanos,
                        max: interval.histogram.max, encoded: interval.encoded)
                }
                written = file.append(text)
            }
        }
        guard written || intervals.isEmpty else {
            unwritten = series
            return
        }
        for (id, entry) in series { previous[id] = entry.cumulative }
        unwritten = [:]
        intervalStartNanos = end
        if let liveSeries, tags.keys.contains(where: { !liveSeries.contains($0) }) {
            previous = previous.filter { liveSeries.contains($0.key) }
            tags = tags.filter { liveSeries.contains($0.key) }
        }
    }
}
