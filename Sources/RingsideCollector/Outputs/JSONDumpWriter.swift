import RingsideExport
import RingsideSnapshot
import RingsideSystem

/// Writes `--json-dump`: the `/latest` document to a file every interval, atomically, from the
/// daemon loop.
///
/// Each document goes whole into a new file of an unguessable name beside `PATH`, created
/// `O_EXCL` (see ``LogDirectory/createTemporary(for:)``), which is then renamed over `PATH`:
/// a reader sees the old document or the new one, never part of one. `PATH` is replaced only
/// when it holds nothing or a regular file of the collector's; a link, FIFO, directory or another
/// user's file there is refused and left alone, and the temporary file removed.
///
/// Errors: logged when they start, change and end, never fatal; the next interval tries again.
struct JSONDumpWriter {
    let path: String
    let intervalNanos: UInt64
    private let directory: LogDirectory
    /// The file's name in `directory`.
    private let name: String
    private let log: CollectorLog
    private var lastNanos: UInt64 = 0
    private var lastError: String?

    /// - Parameters:
    ///   - path: the dump's path, as the operator gave it (for messages).
    ///   - directory: `path`'s directory, opened (see ``LogDirectory/split(_:)``).
    init(path: String, directory: LogDirectory, intervalNanos: UInt64, log: CollectorLog) {
        self.path = path
        self.log = log
        self.directory = directory
        name = LogDirectory.split(path).name
        self.intervalNanos = intervalNanos
    }

    mutating func writeIfDue(_ snapshot: Snapshot, nowNanos now: UInt64) {
        if lastNanos == 0 { lastNanos = now }
        guard now &- lastNanos >= intervalNanos else { return }
        lastNanos = now
        write(snapshot)
    }

    mutating func write(_ snapshot: Snapshot) {
        let failure = directory.writeFile(name, JSONExporter.latest(snapshot), flushing: false)
        if let failure, failure != lastError { log("cannot write the JSON dump: \(failure)", level: .error) }
        if failure == nil, lastError != nil { log("the JSON dump \(path) is written again") }
        lastError = failure
    }
}
