import Dispatch
import Foundation
import Ringside
import RingsideExport
import RingsideSystem
import RingsideTrace
import Synchronization

/// Turns a capture's recorded records into its files, on a thread of its own at utility priority
/// (a trace of a million records takes seconds to build; the drain never waits for it), and
/// hands what it wrote back to the `Capturer`.
final class CaptureWriter: Sendable {
    /// One capture to write: its records as the recorder shared them (chunks, no copy).
    struct Job: Sendable {
        let id: UInt64
        let baseName: String
        let fromNanos: UInt64
        let toNanos: UInt64
        /// The trigger's time, on CLOCK_MONOTONIC: past `maxRecords`, the farthest records go.
        let atNanos: UInt64
        let bots: [RecordedBot]
        /// CLOCK_REALTIME less CLOCK_MONOTONIC when it was taken.
        let wallClockOffsetNanos: UInt64
    }

    /// What came of a job.
    struct Outcome: Sendable {
        let id: UInt64
        var files: [String] = []
        var bytes = 0
        var records = 0
        var recordsLeftOut = 0
        var failure: String?
    }

    let directory: LogDirectory
    let maxRecords: Int
    let program: String
    private let queue = DispatchQueue(label: "ringside-capture", qos: .utility)
    private let done = Mutex<[Outcome]>([])

    init(directory: LogDirectory, maxRecords: Int, program: String) {
        self.directory = directory
        self.maxRecords = maxRecords
        self.program = program
    }

    /// Writes `job` in the background.
    func write(_ job: Job) {
        queue.async { [self] in
            let outcome = Self.write(job, into: directory, maxRecords: maxRecords, program: program)
            done.withLock { $0.append(outcome) }
        }
    }

    /// The outcomes since the last call.
    func finished() -> [Outcome] {
        done.withLock { outcomes in
            defer { outcomes.removeAll() }
            return outcomes
        }
    }

    /// Waits for the jobs given so far (a test's, or the collector's at stop).
    func drain() { queue.sync {} }

    static func write(_ job: Job, into directory: LogDirectory, maxRecords: Int, program: String) -> Outcome {
        var outcome = Outcome(id: job.id)
        let (sources, records, leftOut) = traceInput(of: job, maxRecords: maxRecords)
        outcome.records = records.count
        outcome.recordsLeftOut = leftOut
        let trace = TraceFiles(sources: sources, records: records, program: program)
        for file in trace.files {
            let name = job.baseName + file.suffix
            if let failure = writeFile(name, file.bytes, in: directory) {
                outcome.failure = failure
                for written in outcome.files { directory.removeOwn(written) }  // a capture is whole or absent
                outcome.files = []
                outcome.bytes = 0
                return outcome
            }
            outcome.files.append(name)
            outcome.bytes += file.bytes.count
        }
        return outcome
    }

    /// The job's bots' files as trace sources (numbered across bots) and their records within the
    /// span, at most `maxRecords` of them: the nearest the trigger, in time.
    static func traceInput(of job: Job, maxRecords: Int) -> (sources: [TraceSource], records: [TraceRecord], leftOut: Int) {
        var sources: [TraceSource] = []
        var records: [TraceRecord] = []
        for bot in job.bots {
            var index: [UInt32: UInt32] = [:]
            for (id, source) in bot.sources.sorted(by: { $0.key < $1.key }) {
                index[id] = UInt32(sources.count)
                let worker = WorkerRing(source.ring)
                sources.append(
                    TraceSource(
                        ringName: source.ring, bot: worker?.bot ?? bot.bot, pid: source.pid, isWorker: source.isWorker,
                        metrics: source.metrics.map { $0 }, threadNames: source.threads.map(\.name),
                        wallClockOffsetNanos: job.wallClockOffsetNanos))
            }
            for chunk in bot.chunks where chunk.overlaps(fromNanos: job.fromNanos, toNanos: job.toNanos) {
                for entry in chunk.records where entry.record.timestamp_ns >= job.fromNanos && entry.record.timestamp_ns <= job.toNanos {
                    guard let source = index[entry.source] else { continue }  // a file the recorder forgot: none
                    records.append(TraceRecord(source: source, lane: entry.lane, record: entry.record))
                }
            }
        }
        guard records.count > maxRecords else { return (sources, records, 0) }
        // The nearest the trigger, kept in their order (a lane's exemplar parts stay after their value).
        let distance = { (record: TraceRecord) in
            let time = record.record.timestamp_ns
            return time >= job.atNanos ? time - job.atNanos : job.atNanos - time
        }
        let kept = records.indices.sorted { distance(records[$0]) < distance(records[$1]) }.prefix(maxRecords).sorted()
        return (sources, kept.map { records[$0] }, records.count - maxRecords)
    }

    /// Writes `bytes` to a new temporary file, flushes it to the disk and renames it to `name`;
    /// nil, or what went wrong (the temporary file is then removed).
    static func writeFile(_ name: String, _ bytes: [UInt8], in directory: LogDirectory) -> String? {
        let temporary: (name: String, descriptor: Int32)
        do { temporary = try directory.createTemporary(for: name) } catch { return "\(error)" }
        var failure: String?
        do {
            try System.writeAll(temporary.descriptor, bytes)
            try System.fsync(temporary.descriptor)
        } catch {
            failure = "cannot write \(directory.path(of: temporary.name)): \(error)"
        }
        System.close(temporary.descriptor)
        if failure == nil {
            do { try directory.replace(name, with: temporary.name) } catch { failure = "\(error)" }
        }
        if failure != nil { directory.remove(temporary.name) }
        return failure
    }
}
