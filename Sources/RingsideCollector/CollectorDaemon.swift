import RingsideExport
import CRingside
import Foundation
import Ringside
import RingsideHTTP

/// What runs beside the collector in its process (RingsideDemo's `--demo`): started once the HTTP
/// server listens, given the snapshot at each turn of the main loop, stopped before the
/// collector's last drain, and finished once the collector let go of the rings.
public protocol CollectorSidecar: AnyObject {
    func tick(_ snapshot: Snapshot, nowNanos: UInt64)
    func stop()
    func finish()
}

/// The `ringside-collector` process: the collector, its HTTP server, the JSON dumps, a sidecar,
/// and an orderly stop on SIGINT or SIGTERM.
public enum CollectorDaemon {
    /// Starts a sidecar, given the server's address and the log.
    public typealias SidecarStart = (_ address: String, _ log: CollectorLog) throws -> any CollectorSidecar

    /// Runs until SIGINT or SIGTERM; returns the process's exit status.
    public static func run(_ options: CollectorOptions, log: CollectorLog = .standardError,
                           sidecar startSidecar: SidecarStart? = nil) -> Int32 {
        // Signals are taken synchronously by this thread; every thread started later inherits the mask.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        signal(SIGPIPE, SIG_IGN)

        // Before anything is served: a directory another user could write is refused here, where
        // the operator sees it at once, not later as counted errors.
        var directories: [String: LogDirectory] = [:]
        for (flag, path) in [("--hlog", options.hlogPath), ("--json-dump", options.jsonDumpPath)] {
            guard let path else { continue }
            do { directories[flag] = try LogDirectory(path: LogDirectory.split(path).directory) } catch {
                log("\(flag) \(path): \(error); not starting", level: .error)
                return 1
            }
        }

        let collector = Collector(options: options, log: log)
        let endpoints = CollectorEndpoints(collector: collector)
        let server: HTTPServer
        do {
            var limits = HTTPServerLimits()
            // The drain comes first: a scrape flood waits, the rings do not.
            limits.threadNiceIncrement = 10
            limits.maxRequestsPerSecond = 2_000 // hundreds of scrapers; a flood queues
            server = try HTTPServer(listen: options.listen, limits: limits) { endpoints.handle($0) }
            try server.start()
        } catch {
            log("cannot serve HTTP: \(error)", level: .error)
            return 1
        }
        log("listening on http://\(server.boundAddress) (/metrics, /latest, /api/history, /health); ring directory \(options.directory.path)")
        if !server.isLoopback {
            log("warning: \(server.boundAddress) is not a loopback address: anyone who can reach it can read these metrics",
                level: .warn)
        }

        var sidecar: (any CollectorSidecar)?
        if let startSidecar {
            do { sidecar = try startSidecar(server.boundAddress, log) } catch {
                log("\(error)", level: .error)
                server.stop()
                return 1
            }
        }
        collector.start()

        var dumper = options.jsonDumpPath.flatMap { path in
            directories["--json-dump"].map { JSONDumpWriter(path: path, directory: $0, intervalNanos: options.dumpIntervalNanos) }
        }
        let hlog = options.hlogPath.flatMap { path in
            directories["--hlog"].map {
                HistogramLogWriter(path: path, directory: $0, maxBytes: options.hlogMaxBytes,
                                   startRealtimeNanos: collector.startedRealtimeNanos, program: CollectorOptions.versionLine, log: log)
            }
        }
        /// --hlog: the interval the drain thread captured last, written here, off the drain thread.
        func writeLatencyLog() {
            guard let hlog, let capture = collector.histogramCaptures?.take() else { return }
            hlog.write(capture, liveSeries: Set(collector.snapshot.series.lazy.map(\.id)))
            collector.hlogErrorCount.store(hlog.errors, ordering: .relaxed)
        }
        if let hlog { collector.hlogErrorCount.store(hlog.errors, ordering: .relaxed) } // the open at start
        var timeout = timespec(tv_sec: 0, tv_nsec: 250_000_000)
        while true {
            let received = sigtimedwait(&signals, nil, &timeout)
            if received == SIGINT || received == SIGTERM {
                log("received \(received == SIGINT ? "SIGINT" : "SIGTERM"); stopping")
                break
            }
            let now = rs_clock_precise_ns()
            // Returns at once when the snapshot's generation was already recorded.
            if let history = endpoints.history {
                history.record(collector.snapshot)
                let counts = history.counts
                collector.historySeriesCount.store(counts.series, ordering: .relaxed)
                collector.historyRefusedCount.store(counts.refused, ordering: .relaxed)
            }
            dumper?.writeIfDue(collector.snapshot, nowNanos: now, log: log)
            writeLatencyLog()
            sidecar?.tick(collector.snapshot, nowNanos: now)
        }

        server.stop()
        sidecar?.stop()
        collector.stop()
        dumper?.write(collector.snapshot, log: log)
        writeLatencyLog()
        hlog?.close()
        sidecar?.finish()
        log("stopped")
        return 0
    }
}
