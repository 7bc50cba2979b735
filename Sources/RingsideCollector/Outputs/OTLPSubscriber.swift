import CRingside
import RingsideExport
import RingsideSnapshot
import RingsideSystem
import RingsideHTTP
import RingsideCommandLine

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
///
/// Delta temporality (`--otlp-temporality delta`): counters' and histograms' points are the change
/// since the last export the receiver took (`OTLPBaseline`), from that export's time. One delta
/// export is queued at a time: while it is queued or retried, the beats that come are skipped
/// (the next export covers their time); once it is taken, it is the new baseline; once it failed
/// for good or was dropped, the baseline stays, and the next export covers its time too. So each
/// change is in exactly one export the receiver took: none lost, none counted twice (but for an
/// export the receiver took without the collector learning it, a timeout: then retried, as
/// OTLP's retries are).
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
    /// With delta temporality: the totals of the last export taken, and the export queued with the
    /// totals it sends (its baseline once taken). Nil baseline: cumulative.
    private var baseline: OTLPBaseline?
    private var pending: (id: UInt64, totals: OTLPBaseline)?

    init(pusher: OTLPPusher, origin: OTLPExporter.Origin, scale: Int, startRealtimeNanos: UInt64) {
        self.pusher = pusher
        self.origin = origin
        self.scale = scale
        intervalNanos = pusher.options.intervalNanos
        lastSnapshotRealtimeNanos = startRealtimeNanos
        if pusher.options.temporality == .delta { baseline = OTLPBaseline.none }
    }

    func receive(_ snapshot: Snapshot, nowNanos now: UInt64) {
        if lastExportNanos == 0 { lastExportNanos = now }
        guard now &- lastExportNanos >= intervalNanos else { return }
        // On the interval's beat, not the loop's: each export is due an interval after the last was.
        lastExportNanos = now &- (now &- lastExportNanos) % intervalNanos
        export(snapshot)
    }

    func finish(_ snapshot: Snapshot, stopRequestedNanos: UInt64) {
        export(snapshot, last: true)
        pusher.stop(requestedAtNanos: stopRequestedNanos)
    }

    func report(into stats: inout CollectorStats) { stats.otlp = pusher.stats }

    /// Queues `snapshot`'s export, unless the drain made no pass since the last one (or, in
    /// delta, the last export is not settled yet; the `last`, at the stop, goes after it, from its
    /// totals).
    private func export(_ snapshot: Snapshot, last: Bool = false) {
        if let queued = pending {
            switch pusher.settlement(of: queued.id) {
            case true?: baseline = queued.totals
            case false?: break  // the baseline stays: the next export covers the failed one's time
            case nil:
                guard last else { return }
                baseline = queued.totals
            }
            pending = nil
        }
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
        let request = OTLPExporter.request(snapshot, origin: origin, scale: scale, timeNanos: time, baseline: baseline) { [starts] in
            starts[$0.id] ?? 0
        }
        guard !request.isEmpty else { return }  // no series with a value yet: nothing to send
        let id = pusher.enqueue(OTLPPusher.Export(body: Zlib.compress(request, .gzip), series: snapshot.series.count))
        if baseline != nil { pending = (id, OTLPBaseline(snapshot, scale: scale, timeNanos: time)) }
    }
}

extension OTLPSubscriber {
    /// The exporter `options` ask for (nil: none, or its TLS files no longer load: logged), its thread started.
    static func make(_ options: CollectorOptions, collector: Collector, log: CollectorLog) -> OTLPSubscriber? {
        guard let otlp = options.otlp else { return nil }
        let hostName: String
        do { hostName = try System.gethostname() } catch {
            log("--otlp-endpoint: cannot read this host's name (\(error)); host.name is \"localhost\"", level: .warn)
            hostName = "localhost"
        }
        var tls: TLSClientContext?
        if otlp.endpoint.secure {
            // Checked when the options were read: only a file changed since fails here.
            do { tls = try TLSClientContext(otlp.tlsFiles) } catch {
                log("--otlp-endpoint \(otlp.endpoint): no push: \(error.reason)", level: .error)
                return nil
            }
        }
        let pusher = OTLPPusher(options: otlp, tls: tls, log: log)
        let scale = options.nativeHistogramSchema ?? OTLPExporter.defaultScale
        let subscriber = OTLPSubscriber(
            pusher: pusher, origin: OTLPExporter.Origin(hostName: hostName, attributes: otlp.resourceAttributes.map { ($0.key, $0.value) }),
            scale: scale,
            startRealtimeNanos: collector.startedRealtimeNanos)
        pusher.start()
        log(
            "pushing OTLP to \(pusher.shownEndpoint) every \(formatDuration(otlp.intervalNanos)) (\(otlp.temporality.rawValue); "
                + "exponential histograms of scale \(scale); a queue of \(pusher.capacity) exports; --otlp-timeout "
                + "\(formatDuration(otlp.timeoutNanos)))")
        return subscriber
    }
}
