import CRingside
import RingsideExport
import RingsideSnapshot

/// The OTLP exporter's part in the daemon's loop: every `--otlp-interval` it writes the latest
/// snapshot as an OTLP request (`OTLPExporter`), gzips it and queues it for the pusher's thread.
///
/// A data point's time is when its values were last known to hold: the snapshot's, or the
/// drain's last pass when that came later (a quiet collector publishes a new snapshot only now
/// and then: nothing changed since, so its values hold when the drain last looked). No pass since
/// the last export (a stalled drain): no export, so no point says the values held longer.
///
/// A cumulative data point's start time is when its series began: the collector's start for the
/// series of the first export, and for a series that appears later, the time of the last
/// snapshot exported without it (it began after that one was made). A series that goes (a bot
/// that restarts gets new ones) and comes back starts again.
final class OTLPSubscriber: SnapshotSubscriber {
    let pusher: OTLPPusher
    private let origin: OTLPExporter.Origin
    private let scale: Int
    private let intervalNanos: UInt64
    /// CLOCK_MONOTONIC of the last export (0: none yet); its data points' time, and its
    /// snapshot's (CLOCK_REALTIME): the start of the series that appear after it.
    private var lastExportNanos: UInt64 = 0
    private var lastPointNanos: UInt64 = 0
    private var lastSnapshotRealtimeNanos: UInt64
    /// Each series' start, by id.
    private var starts: [UInt64: UInt64] = [:]

    init(pusher: OTLPPusher, origin: OTLPExporter.Origin, scale: Int, startRealtimeNanos: UInt64) {
        self.pusher = pusher
        self.origin = origin
        self.scale = scale
        intervalNanos = pusher.options.intervalNanos
        lastSnapshotRealtimeNanos = startRealtimeNanos
    }

    func receive(_ snapshot: Snapshot, nowNanos now: UInt64) {
        if lastExportNanos == 0 { lastExportNanos = now }
        guard now &- lastExportNanos >= intervalNanos else { return }
        // On the interval's beat, not the loop's: each export is due an interval after the last was.
        lastExportNanos = now &- (now &- lastExportNanos) % intervalNanos
        export(snapshot)
    }

    func finish(_ snapshot: Snapshot, stopRequestedNanos: UInt64) {
        export(snapshot)
        pusher.stop(requestedAtNanos: stopRequestedNanos)
    }

    func report(into stats: inout CollectorStats) { stats.otlp = pusher.stats }

    /// Queues `snapshot`'s export, unless the drain made no pass since the last one.
    private func export(_ snapshot: Snapshot) {
        let realtime = rs_clock_realtime_ns(), monotonic = rs_clock_precise_ns()
        let lastPass = snapshot.collector.lastPassMonotonicNanos
        let passRealtime = lastPass == 0 || lastPass > monotonic ? 0 : realtime &- (monotonic - lastPass)
        let time = max(snapshot.generatedRealtimeNanos, passRealtime)
        guard time > lastPointNanos else { return }
        lastPointNanos = time
        var current: [UInt64: UInt64] = [:]
        current.reserveCapacity(snapshot.series.count)
        for series in snapshot.series { current[series.id] = starts[series.id] ?? lastSnapshotRealtimeNanos }
        starts = current
        lastSnapshotRealtimeNanos = snapshot.generatedRealtimeNanos
        let request = OTLPExporter.request(snapshot, origin: origin, scale: scale, timeNanos: time) { [starts] in starts[$0.id] ?? 0 }
        guard !request.isEmpty else { return }  // no series with a value yet: nothing to send
        pusher.enqueue(OTLPPusher.Export(body: Zlib.compress(request, .gzip), series: snapshot.series.count))
    }
}
