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
    let path: String
    let maxBytes: UInt64
    /// `--hlog-interval`, and when the last interval was written (CLOCK_MONOTONIC; 0: never).
    let intervalNanos: UInt64
    private var lastWriteNanos: UInt64 = 0
    private let directory: LogDirectory
    /// The file's name in `directory`.
    private let name: String
    private let program: String
    private let log: CollectorLog
    /// The file being written.
    private var file = OpenFile()
    /// CLOCK_REALTIME at the start of the next interval.
    private var intervalStartNanos: UInt64
    /// Each series' all-time histogram as last written, and its tag, by series id.
    private var previous: [UInt64: Histogram] = [:]
    private var tags: [UInt64: String] = [:]
    /// Captured series not yet written (their write failed).
    private var unwritten: [UInt64: HistogramCapture.Series] = [:]
    /// What went wrong, and the files begun.
    private var figures = Figures()

    /// The file's size.
    var size: UInt64 { file.size }
    /// Failed opens, writes and renames.
    var errors: UInt64 { figures.errors }
    /// Files begun because the bound was reached.
    var rotations: UInt64 { figures.rotations }

    /// The file being written: its descriptor (-1: none), size, header's size, and start.
    private struct OpenFile {
        var descriptor: Int32 = -1
        var size: UInt64 = 0
        var headerSize: UInt64 = 0
        var startNanos: UInt64 = 0
    }

    /// Failed opens, writes and renames, and the last one's message (logged when it changes);
    /// files begun because the bound was reached.
    private struct Figures {
        var errors: UInt64 = 0
        var rotations: UInt64 = 0
        var lastError: String?
    }

    /// - Parameters:
    ///   - path: the log's path, as the operator gave it (for messages).
    ///   - directory: `path`'s directory, opened (see ``LogDirectory/split(_:)``).
    init(
        path: String, directory: LogDirectory, intervalNanos: UInt64 = 1_000_000_000, maxBytes: UInt64, startRealtimeNanos: UInt64,
        program: String, log: CollectorLog
    ) {
        self.path = path
        self.intervalNanos = intervalNanos
        self.directory = directory
        name = LogDirectory.split(path).name
        self.maxBytes = maxBytes
        self.program = program
        self.log = log
        intervalStartNanos = startRealtimeNanos
        _ = openNewFile()
    }

    deinit { close() }

    func close() {
        if file.descriptor >= 0 { System.close(file.descriptor) }
        file.descriptor = -1
    }

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
        if !intervals.isEmpty, file.descriptor >= 0 || openNewFile() {
            if file.size > file.headerSize, file.size + UInt64(estimate) > maxBytes {
                close()
                figures.rotations += 1
            }
            if file.descriptor >= 0 || openNewFile() {
                let startOffset = intervalStartNanos - file.startNanos
                var text = ""
                text.reserveCapacity(estimate)
                for interval in intervals {
                    text += HistogramLog.line(
                        tag: interval.tag, startNanos: startOffset, lengthNanos: end - intervalStartNanos,
                        max: interval.histogram.max, encoded: interval.encoded)
                }
                written = append(text)
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

    /// Moves the file at `path` aside to `PATH.1` and creates a new one there with its header, its
    /// StartTime the start of the next interval. False (logged and counted) if it cannot: then
    /// nothing was opened, and whatever is at `path` (not a file of ours) is where it was.
    private func openNewFile() -> Bool {
        close()
        do {
            try directory.moveAside(name, to: name + ".1")
            // Something planted at `path` since the move makes this create fail: it is never opened.
            file.descriptor = try directory.create(name)
        } catch {
            return fail("\(error)")
        }
        file.size = 0
        file.startNanos = intervalStartNanos
        let header = HistogramLog.header(startRealtimeNanos: file.startNanos, program: program)
        guard append(header) else { return false }
        file.headerSize = file.size
        return true
    }

    /// Writes `text` whole; false (logged and counted, the file closed) if it cannot.
    private func append(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        do { try System.writeAll(file.descriptor, bytes) } catch {
            close()
            return fail("cannot write \(path): \(error)")
        }
        file.size += UInt64(bytes.count)
        if figures.lastError != nil {
            log("the latency log \(path) is written again")
            figures.lastError = nil
        }
        return true
    }

    private func fail(_ message: String) -> Bool {
        figures.errors += 1
        if message != figures.lastError {
            log("--hlog: \(message); the collector goes on, and tries again next interval", level: .error)
        }
        figures.lastError = message
        return false
    }
}
