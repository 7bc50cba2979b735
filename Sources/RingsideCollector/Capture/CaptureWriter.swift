import CRingside
import Dispatch
import Foundation
import Ringside
import RingsideExport
import RingsideSnapshot
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
        /// Its trigger's kind, which its count goes under.
        let kind: String
        let baseName: String
        let fromNanos, toNanos: UInt64
        /// The trigger's time, on CLOCK_MONOTONIC: past `maxRecords`, the farthest records go.
        let atNanos: UInt64
        let bots: [RecordedBot]
        /// CLOCK_REALTIME less CLOCK_MONOTONIC when it was taken.
        let wallClockOffsetNanos: UInt64
        /// The thread sampler's rounds over the span, oldest first.
        let threadSamples: [ThreadHealthSample]
    }

    /// What came of a job.
    struct Outcome: Sendable {
        let id: UInt64
        let kind: String
        var files: [String] = []
        var bytes = 0
        var records = 0
        var recordsLeftOut = 0
        var failure: String?
    }

    let directory: LogDirectory
    let maxRecords: Int
    let program: String
    private let done = Locked<[Outcome]>([])
    /// Its thread, started at the first job, at a low priority: a capture waits, the drain does not.
    private let thread = PartThread(name: "ringside-traces")
    private let tasks = Locked(Tasks())

    /// The jobs given and not yet taken, each with the waits for it (`drain`).
    private struct Tasks {
        var queue: [Task] = []
        var started = false
        var finished = false
    }

    private enum Task {
        case write(Job)
        /// Signalled once every job before it is written.
        case mark(DispatchSemaphore)
    }

    init(directory: LogDirectory, maxRecords: Int, program: String) {
        self.directory = directory
        self.maxRecords = maxRecords
        self.program = program
    }

    /// Writes `job` in the background (after `finish`, at once, on the caller's thread).
    func write(_ job: Job) {
        guard enqueue(.write(job)) else { return take(job) }
    }

    /// The outcomes since the last call.
    func finished() -> [Outcome] {
        done.withLock { outcomes in
            defer { outcomes.removeAll() }
            return outcomes
        }
    }

    /// Waits for the jobs given so far (a test's, or the collector's at stop).
    func drain() {
        let written = DispatchSemaphore(value: 0)
        if enqueue(.mark(written)) { written.wait() }
    }

    /// Writes the jobs given so far, then stops its thread (the collector's stop).
    func finish() {
        drain()
        tasks.withLock { $0.finished = true }
        thread.stop()
    }

    /// Queues `task` for the thread, starting it at the first; false once finished.
    private func enqueue(_ task: Task) -> Bool {
        let start = tasks.withLock { tasks -> Bool? in
            guard !tasks.finished else { return nil }
            tasks.queue.append(task)
            defer { tasks.started = true }
            return !tasks.started
        }
        guard let start else { return false }
        if start { thread.startOrExit(niceIncrement: 5) { [self] in run() } }
        thread.wake()
        return true
    }

    private func run() {
        while !thread.isStopping {
            let next = tasks.withLock { $0.queue.isEmpty ? nil : $0.queue.removeFirst() }
            switch next {
            case nil: thread.pause(nanos: .max)
            case .write(let job): take(job)
            case .mark(let written): written.signal()
            }
        }
    }

    private func take(_ job: Job) {
        let outcome = Self.write(job, into: directory, maxRecords: maxRecords, program: program)
        done.withLock { $0.append(outcome) }
    }

    static func write(_ job: Job, into directory: LogDirectory, maxRecords: Int, program: String) -> Outcome {
        var outcome = Outcome(id: job.id, kind: job.kind)
        let (sources, records, leftOut) = traceInput(of: job, maxRecords: maxRecords)
        outcome.records = records.count
        outcome.recordsLeftOut = leftOut
        let trace = TraceFiles(sources: sources, records: records, program: program)
        for file in trace.files {
            let name = job.baseName + file.suffix
            if let failure = directory.writeFile(name, file.bytes, flushing: true) {
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
    /// span, at most `maxRecords` of them: the nearest the trigger, in time (those as near as the
    /// farthest kept are kept or left out together).
    ///
    /// Past `maxRecords` the span is read twice, so that what it costs beyond the records kept is
    /// 8 bytes a value in the span, not a copy of every record (the recorder may hold millions).
    static func traceInput(of job: Job, maxRecords: Int) -> (sources: [TraceSource], records: [TraceRecord], leftOut: Int) {
        var sources: [TraceSource] = []
        var index: [[UInt32: UInt32]] = []  // by bot: the trace source of each file the recorder names
        for bot in job.bots {
            var files: [UInt32: UInt32] = [:]
            for (id, source) in bot.sources.sorted(by: { $0.key < $1.key }) {
                files[id] = UInt32(sources.count)
                let worker = WorkerRing(source.ring)
                var traceSource = TraceSource(
                    ringName: source.ring, bot: worker?.bot ?? bot.bot, pid: source.pid, isWorker: source.isWorker,
                    metrics: source.metrics.map { $0 }, threadNames: source.threads.map(\.name),
                    wallClockOffsetNanos: job.wallClockOffsetNanos)
                traceSource.sampledCounters = threadCounters(of: source, in: job.threadSamples)
                sources.append(traceSource)
            }
            index.append(files)
        }
        let distance = { (time: UInt64) in time >= job.atNanos ? time - job.atNanos : job.atNanos - time }
        // Each value's distance from the trigger and the records it takes with its exemplar's (at
        // most 5): distance << 3 | records. A span is minutes at most: the distance fits.
        var total = 0
        var values: [UInt64] = []
        forEachRecord(of: job, index: index) { _, time, records in
            total += 1
            if let records { values.append(distance(time) << 3 | UInt64(records)) }
        }
        var records: [TraceRecord] = []
        guard total > maxRecords else {
            records.reserveCapacity(total)
            forEachRecord(of: job, index: index) { record, _, _ in records.append(record) }
            return (sources, records, 0)
        }
        // The farthest distance whose values, with all those nearer, fit.
        values.sort()
        var cutoff: UInt64?
        var fitted = 0
        var next = values.startIndex
        while next < values.endIndex {
            let reach = values[next] >> 3
            var records = 0
            while next < values.endIndex, values[next] >> 3 == reach {
                records += Int(values[next] & 7)
                next += 1
            }
            guard fitted + records <= maxRecords else { break }
            fitted += records
            cutoff = reach
        }
        values = []
        if let cutoff {
            records.reserveCapacity(fitted)
            forEachRecord(of: job, index: index) { record, time, _ in if distance(time) <= cutoff { records.append(record) } }
        }
        return (sources, records, total - records.count)
    }

    /// Calls `body` with each record of the job's span, in drain order: as a trace record (its
    /// file numbered by `index`), its time, and for a value the records it takes with its
    /// exemplar's (nil for an exemplar record).
    ///
    /// An exemplar record's time field holds the exemplar's bytes (EXEMPLARS in ringside.h): it
    /// goes with the value before it in its lane, in the span when that value is, at its time.
    private static func forEachRecord(
        of job: Job, index: [[UInt32: UInt32]], _ body: (_ record: TraceRecord, _ time: UInt64, _ records: Int?) -> Void
    ) {
        for (bot, files) in zip(job.bots, index) {
            // A value's exemplar records still to come (parts left, its time), by file and lane:
            // they may be drained later (a drain's batch may end between them), so in a chunk
            // past the span.
            var awaited: [UInt64: (parts: Int, time: UInt64)] = [:]
            for chunk in bot.chunks where !awaited.isEmpty || chunk.overlaps(fromNanos: job.fromNanos, toNanos: job.toNanos) {
                for entry in chunk.records {
                    guard let source = files[entry.source] else { continue }  // a file the recorder forgot: none
                    let lane = UInt64(entry.source) << 32 | UInt64(entry.lane)
                    let record = TraceRecord(source: source, lane: entry.lane, record: entry.record)
                    if entry.record.kind == ExemplarAssembler.exemplarKind {
                        guard let value = awaited[lane] else { continue }  // its value's outside the span
                        awaited[lane] = value.parts > 1 ? (parts: value.parts - 1, time: value.time) : nil
                        body(record, value.time, nil)
                        continue
                    }
                    awaited[lane] = nil  // parts that never came: the trace counts the value's exemplar unreadable
                    let time = entry.record.timestamp_ns
                    guard time >= job.fromNanos && time <= job.toNanos else { continue }
                    var parts = 0
                    if entry.record.flags & ExemplarAssembler.exemplarFlag != 0, entry.record.exemplar_length > 0 {
                        parts = Int(rs_exemplar_records(UInt32(entry.record.exemplar_length)))
                        awaited[lane] = (parts: parts, time: time)
                    }
                    body(record, time, 1 + parts)
                }
            }
        }
    }

    /// Makes a temporary file in `directory` and removes it: a directory the collector cannot
    /// write in is said at start, not at the first incident.
    static func checkWritable(_ directory: LogDirectory) throws(LogDirectoryError) {
        let probe = try directory.createTemporary(for: "capture")
        System.close(probe.descriptor)
        directory.remove(probe.name)
    }

    /// The thread-health figures of `source`'s lane threads in each round, as counter samples:
    /// `THREAD cpu` and `THREAD run-queue wait` (fractions of the round, 0 to 1) and `THREAD
    /// involuntary switches/s` (preemptions), THREAD the lane's thread name (or `lane N`; with
    /// `(lane N)` after a name other lanes' threads have too).
    static func threadCounters(
        of source: RecordedSource, in samples: [ThreadHealthSample]
    ) -> [(name: String, realtimeNanos: UInt64, value: Double)] {
        var counters: [(name: String, realtimeNanos: UInt64, value: Double)] = []
        // A name two lanes' threads share (a pool's) gets its lane: a track per thread.
        let names = source.threads.map(\.name)
        for sample in samples {
            for (lane, thread) in source.threads.enumerated() where thread.id > 0 {
                guard let health = sample.threads[ThreadKey(pid: source.pid, tid: thread.id)] else { continue }
                let shared = names.filter { $0 == thread.name }.count > 1
                let name = thread.name.isEmpty ? "lane \(lane)" : shared ? "\(thread.name) (lane \(lane))" : thread.name
                let figures: [(String, Double?)] = [
                    ("cpu", health.cpuRatio), ("run-queue wait", health.runQueueWaitRatio),
                    ("involuntary switches/s", health.involuntarySwitchesPerSecond),
                ]
                for case let (figure, value?) in figures {
                    counters.append((name: "\(name) \(figure)", realtimeNanos: sample.realtimeNanos, value: value))
                }
            }
        }
        return counters
    }
}
