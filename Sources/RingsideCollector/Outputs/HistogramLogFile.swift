#if canImport(Glibc)
import Glibc
#endif
import RingsideExport
import RingsideSystem

/// The file `--hlog` writes: created new through a ``LogDirectory`` (the one before moved aside
/// to `PATH.1`), begun with its headers, appended to whole or not at all. What goes wrong is
/// logged when it starts, changes and ends, and counted.
///
/// Touched by the daemon loop only.
final class HistogramLogFile {
    let path: String
    private let directory: LogDirectory
    /// The file's name in `directory`.
    private let name: String
    private let program: String
    private let log: CollectorLog
    /// Its descriptor (-1: none), size, header's size, and StartTime (CLOCK_REALTIME).
    private var descriptor: Int32 = -1
    private(set) var size: UInt64 = 0
    private var headerSize: UInt64 = 0
    private(set) var startNanos: UInt64 = 0
    /// Failed opens, writes and renames, and the last one's message (logged when it changes).
    private(set) var errors: UInt64 = 0
    private var lastError: String?

    /// - Parameters:
    ///   - path: the log's path, as the operator gave it (for messages).
    ///   - directory: `path`'s directory, opened (see ``LogDirectory/split(_:)``).
    init(path: String, directory: LogDirectory, program: String, log: CollectorLog) {
        self.path = path
        self.directory = directory
        name = LogDirectory.split(path).name
        self.program = program
        self.log = log
    }

    deinit { close() }

    var isOpen: Bool { descriptor >= 0 }
    /// Whether it holds lines besides its headers.
    var hasLines: Bool { size > headerSize }

    func close() {
        if descriptor >= 0 { System.close(descriptor) }
        descriptor = -1
    }

    /// Moves the file at `path` aside to `PATH.1` and creates a new one there with its header, its
    /// StartTime `startNanos`. False (logged and counted) if it cannot: then nothing was opened,
    /// and whatever is at `path` (not a file of ours) is where it was.
    func openNew(startNanos: UInt64) -> Bool {
        close()
        do {
            try directory.moveAside(name, to: name + ".1")
            // Something planted at `path` since the move makes this create fail: it is never opened.
            descriptor = try directory.create(name)
        } catch {
            return fail("\(error)")
        }
        size = 0
        self.startNanos = startNanos
        guard append(HistogramLog.header(startRealtimeNanos: startNanos, program: program)) else { return false }
        headerSize = size
        return true
    }

    /// Writes `text` whole; false (logged and counted, the file closed) if it cannot.
    func append(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        do { try System.writeAll(descriptor, bytes) } catch {
            close()
            return fail("cannot write \(path): \(error)")
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
