#if canImport(Glibc)
import Glibc
#endif
import RingsideAggregation
import RingsideExport

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
/// Errors (a bad path, a full disk): logged when they start, change and end, counted in
/// ``errors``, never fatal. The records of an interval that could not be written go in the next
/// one written (its interval is then longer), in a new file.
final class HistogramLogWriter {
    let path: String
    let maxBytes: UInt64
    private let program: String
    private let log: CollectorLog
    private var descriptor: Int32 = -1
    private(set) var size: UInt64 = 0
    private var headerSize: UInt64 = 0
    private var fileStartNanos: UInt64 = 0
    /// CLOCK_REALTIME at the start of the next interval.
    private var intervalStartNanos: UInt64
    /// Each series' all-time histogram as last written, and its tag, by series id.
    private var previous: [UInt64: Histogram] = [:]
    private var tags: [UInt64: String] = [:]
    /// Captured series not yet written (their write failed).
    private var unwritten: [UInt64: HistogramCapture.Series] = [:]
    /// Failed opens, writes and renames; files begun because the bound was reached.
    private(set) var errors: UInt64 = 0
    private(set) var rotations: UInt64 = 0
    private var lastError: String?
    private var isFirstFile = true

    init(path: String, maxBytes: UInt64, startRealtimeNanos: UInt64, program: String, log: CollectorLog) {
        self.path = path
        self.maxBytes = maxBytes
        self.program = program
        self.log = log
        intervalStartNanos = startRealtimeNanos
        _ = openNewFile()
    }

    deinit { close() }

    func close() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
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
        if !intervals.isEmpty, descriptor >= 0 || openNewFile() {
            if size > headerSize, size + UInt64(estimate) > maxBytes {
                close()
                rotations += 1
            }
            if descriptor >= 0 || openNewFile() {
                let startOffset = intervalStartNanos - fileStartNanos
                var text = ""
                text.reserveCapacity(estimate)
                for interval in intervals {
                    text += HistogramLog.line(tag: interval.tag, startNanos: startOffset, lengthNanos: end - intervalStartNanos,
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

    /// Renames what is at `path` to `PATH.1` and begins a new file there with its header, its
    /// StartTime the start of the next interval. False (logged and counted) if it cannot.
    private func openNewFile() -> Bool {
        close()
        var info = stat()
        // Only a regular file is moved aside (never a directory, a device or a pipe given as PATH).
        if stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size > 0 || !isFirstFile {
            if rename(path, path + ".1") != 0 {
                return fail("cannot rename \(path) to \(path).1: \(String(cString: strerror(errno)))")
            }
        }
        isFirstFile = false
        let opened = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0o644)
        guard opened >= 0 else { return fail("cannot open \(path): \(String(cString: strerror(errno)))") }
        descriptor = opened
        size = 0
        fileStartNanos = intervalStartNanos
        let header = HistogramLog.header(startRealtimeNanos: fileStartNanos, program: program)
        guard append(header) else { return false }
        headerSize = size
        return true
    }

    /// Writes `text` whole; false (logged and counted, the file closed) if it cannot.
    private func append(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        let ok = bytes.withUnsafeBytes { buffer -> Bool in
            var offset = 0
            while offset < buffer.count {
                let count = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if count < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += count
            }
            return true
        }
        guard ok else {
            let reason = String(cString: strerror(errno))
            close()
            return fail("cannot write \(path): \(reason)")
        }
        size += UInt64(bytes.count)
        if lastError != nil {
            log("the latency log \(path) is written again")
            lastError = nil
        }
        return true
    }

    private func fail(_ message: String) -> Bool {
        errors += 1
        if message != lastError {
            log("--hlog: \(message); the collector goes on, and tries again next interval", level: .error)
        }
        lastError = message
        return false
    }
}
