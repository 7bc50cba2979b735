import RingsideCommandLine
import RingsideText
import RingsideSnapshot

/// The captures' part of the drain thread: takes the requests the `CaptureDesk` accepted, waits
/// until their seconds after the trigger have been drained, takes the recorder's records of
/// their span (shared chunks, no copy) and gives them to the `CaptureWriter`; keeps the list
/// and counts the snapshot shows.
final class Capturer {
    let desk: CaptureDesk
    let writer: CaptureWriter
    let beforeNanos, afterNanos: UInt64
    /// How long past a capture's span its records are waited for: a record written just before
    /// the span's end may sit in its lane until the next drains.
    let graceNanos: UInt64
    private let log: CollectorLog
    private var pending: [CaptureDesk.Request] = []
    private var stats = CaptureStats()
    /// The thread sampler's rounds of the last `beforeNanos` and more (each shared, not copied):
    /// a capture's threads' figures as counter tracks.
    private let threadSample: () -> ThreadHealthSample?
    private var threadSamples: [ThreadHealthSample] = []
    private var lastThreadSampleReadNanos: UInt64 = 0

    init(
        desk: CaptureDesk, writer: CaptureWriter, beforeNanos: UInt64, afterNanos: UInt64, pollNanos: UInt64, log: CollectorLog,
        threadSample: @escaping () -> ThreadHealthSample?
    ) {
        self.desk = desk
        self.writer = writer
        self.beforeNanos = beforeNanos
        self.afterNanos = afterNanos
        graceNanos = max(100_000_000, 4 * pollNanos)
        self.log = log
        self.threadSample = threadSample
        stats.directory = writer.directory.path
    }

    /// Keeps the sampler's new round, if there is one (read every 100 ms), and lets go of
    /// those older than any capture may need.
    private func keepThreadSample(nowNanos now: UInt64) {
        guard now &- lastThreadSampleReadNanos >= 100_000_000 else { return }
        lastThreadSampleReadNanos = now
        guard let sample = threadSample(), sample.sequence != threadSamples.last?.sequence else { return }
        threadSamples.append(sample)
        let keptNanos = beforeNanos + afterNanos + 2 * sample.intervalNanos + 60_000_000_000  // and what waits to be written
        let oldest = sample.realtimeNanos > keptNanos ? sample.realtimeNanos - keptNanos : 0
        threadSamples.removeAll { $0.realtimeNanos < oldest }
    }

    /// Takes new requests, hands the due ones to the writer with their records (every one when
    /// `flushing`, at the collector's stop: its span ends now), and takes what the writer
    /// finished. Returns whether anything shown changed.
    func pass(nowNanos now: UInt64, recorder: Recorder, flushing: Bool = false) -> Bool {
        var changed = false
        keepThreadSample(nowNanos: now)
        let (requests, suppressed) = desk.take()
        if suppressed != stats.suppressed {
            stats.suppressed = suppressed
            changed = true
        }
        for request in requests {
            pending.append(request)
            stats.recent.append(
                CaptureSnapshot(
                    id: request.id, trigger: request.trigger.kind, detail: request.trigger.detail, bots: (request.bots ?? []).sorted(),
                    atRealtimeNanos: request.atRealtimeNanos, beforeSeconds: Double(beforeNanos) / 1e9,
                    afterSeconds: Double(afterNanos(of: request)) / 1e9))
            if stats.recent.count > CaptureStats.listed { stats.recent.removeFirst(stats.recent.count - CaptureStats.listed) }
            log(
                "capture \(request.id): asked for by \(request.trigger.kind)"
                    + (request.trigger.detail.isEmpty ? "" : " (\(request.trigger.detail))")
                    + ", written once its \(formatDuration(afterNanos(of: request))) after have been drained")
            changed = true
        }
        while let index = pending.firstIndex(where: { flushing || now >= $0.atNanos &+ afterNanos(of: $0) &+ graceNanos }) {
            let request = pending.remove(at: index)
            let from = request.atNanos > beforeNanos ? request.atNanos - beforeNanos : 0
            let to = min(request.atNanos &+ afterNanos(of: request), max(now, request.atNanos))
            let bots = recorder.records(fromNanos: from, toNanos: to).filter { request.bots?.contains($0.bot) ?? true }
            let offset = request.atRealtimeNanos &- request.atNanos
            // The rounds that end within the span, and the one after it (it covers the span's end).
            let (wallFrom, wallTo) = (from &+ offset, to &+ offset)
            let samples = threadSamples.filter { $0.realtimeNanos >= wallFrom && $0.realtimeNanos <= wallTo &+ $0.intervalNanos }
            writer.write(
                CaptureWriter.Job(
                    id: request.id, kind: request.trigger.kind, baseName: Self.baseName(request), fromNanos: from, toNanos: to,
                    atNanos: request.atNanos,
                    bots: bots, wallClockOffsetNanos: offset, threadSamples: samples))
        }
        let outcomes = writer.finished()
        desk.finished(outcomes.count)
        for outcome in outcomes {
            changed = true
            if let failure = outcome.failure {
                stats.failed += 1
                log("capture \(outcome.id) could not be written: \(failure)", level: .error)
            } else {
                stats.written[outcome.kind, default: 0] += 1
                log(
                    "capture \(outcome.id): \(outcome.records) records written to \(writer.directory.path(of: outcome.files.first ?? ""))"
                        + (outcome.recordsLeftOut > 0
                            ? " (\(outcome.recordsLeftOut) farther from the trigger left out: --capture-max-records)" : ""))
            }
            // Listed while among the latest (a burst of requests may have pushed it out).
            guard let index = stats.recent.firstIndex(where: { $0.id == outcome.id }) else { continue }
            if let failure = outcome.failure {
                stats.recent[index].status = .failed
                stats.recent[index].reason = failure
                continue
            }
            stats.recent[index].status = .written
            stats.recent[index].files = outcome.files
            stats.recent[index].bytes = outcome.bytes
            stats.recent[index].records = outcome.records
            stats.recent[index].recordsLeftOut = outcome.recordsLeftOut
        }
        return changed
    }

    /// A dead bot's capture ends at its death: nothing comes after.
    private func afterNanos(of request: CaptureDesk.Request) -> UInt64 {
        if case .botDied = request.trigger { return 0 }
        return afterNanos
    }

    /// How soon a pass must come for the next pending capture.
    func sleepNanos(nowNanos now: UInt64) -> UInt64 {
        pending.map { request in
            let due = request.atNanos &+ afterNanos(of: request) &+ graceNanos
            return due > now ? due - now : 0
        }.min() ?? .max
    }

    /// What the snapshot shows.
    var figures: CaptureStats { stats }

    /// `capture-20261125T140307.123Z-7-slo`: sorted by time, unique in a run by its id.
    static func baseName(_ request: CaptureDesk.Request) -> String {
        let stamp = utcTimestamp(realtimeNanos: request.atRealtimeNanos).filter { $0 != "-" && $0 != ":" }
        return "capture-\(stamp)-\(request.id)-\(request.trigger.kind)"
    }
}
