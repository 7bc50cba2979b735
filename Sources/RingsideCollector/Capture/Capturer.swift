import RingsideCommandLine
import RingsideExport
import RingsideSnapshot

/// The captures' part of the drain thread: takes the requests the `CaptureDesk` accepted, waits
/// until their seconds after the trigger have been drained, takes the recorder's records of
/// their span (shared chunks, no copy) and gives them to the `CaptureWriter`; keeps the list
/// and counts the snapshot shows.
final class Capturer {
    let desk: CaptureDesk
    let writer: CaptureWriter
    let beforeNanos: UInt64
    let afterNanos: UInt64
    /// How long past a capture's span its records are waited for: a record written just before
    /// the span's end may sit in its lane until the next drains.
    let graceNanos: UInt64
    private let log: CollectorLog
    private var pending: [CaptureDesk.Request] = []
    private var stats = CaptureStats()

    init(desk: CaptureDesk, writer: CaptureWriter, beforeNanos: UInt64, afterNanos: UInt64, pollNanos: UInt64, log: CollectorLog) {
        self.desk = desk
        self.writer = writer
        self.beforeNanos = beforeNanos
        self.afterNanos = afterNanos
        graceNanos = max(100_000_000, 4 * pollNanos)
        self.log = log
        stats.directory = writer.directory.path
    }

    /// Takes new requests, hands the due ones to the writer with their records, and takes what the
    /// writer finished. Returns whether anything shown changed.
    func pass(nowNanos now: UInt64, recorder: Recorder) -> Bool {
        var changed = false
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
        while let index = pending.firstIndex(where: { now >= $0.atNanos &+ afterNanos(of: $0) &+ graceNanos }) {
            let request = pending.remove(at: index)
            let from = request.atNanos > beforeNanos ? request.atNanos - beforeNanos : 0
            let to = request.atNanos &+ afterNanos(of: request)
            let bots = recorder.records(fromNanos: from, toNanos: to).filter { request.bots?.contains($0.bot) ?? true }
            writer.write(
                CaptureWriter.Job(
                    id: request.id, baseName: Self.baseName(request), fromNanos: from, toNanos: to, atNanos: request.atNanos,
                    bots: bots, wallClockOffsetNanos: request.atRealtimeNanos &- request.atNanos))
        }
        for outcome in writer.finished() {
            changed = true
            guard let index = stats.recent.firstIndex(where: { $0.id == outcome.id }) else { continue }
            let kind = stats.recent[index].trigger
            if let failure = outcome.failure {
                stats.failed += 1
                stats.recent[index].status = .failed
                stats.recent[index].reason = failure
                log("capture \(outcome.id) could not be written: \(failure)", level: .error)
                continue
            }
            stats.written[kind, default: 0] += 1
            stats.recent[index].status = .written
            stats.recent[index].files = outcome.files
            stats.recent[index].bytes = outcome.bytes
            stats.recent[index].records = outcome.records
            stats.recent[index].recordsLeftOut = outcome.recordsLeftOut
            log(
                "capture \(outcome.id): \(outcome.records) records written to \(writer.directory.path(of: outcome.files.first ?? ""))"
                    + (outcome.recordsLeftOut > 0
                        ? " (\(outcome.recordsLeftOut) farther from the trigger left out: --capture-max-records)" : ""))
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
