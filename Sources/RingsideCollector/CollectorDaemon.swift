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

        let collector = Collector(options: options, log: log)
        let endpoints = CollectorEndpoints(collector: collector)
        let server: HTTPServer
        do {
            server = try HTTPServer(listen: options.listen, limits: httpLimits(descriptorReserve: collector.descriptorReserve),
                                    log: { log($0, level: $1 ? .warn : .info) },
                                    quick: endpoints.quick, handler: endpoints.render)
            try server.start()
        } catch {
            log("cannot serve HTTP: \(error)", level: .error)
            return 1
        }
        log("listening on http://\(server.boundAddress) (/metrics, /latest, /api/history, /health), at most "
            + "\(server.limits.maxConnections) connections; ring directory \(options.directory.path)")
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

        var dumper = options.jsonDumpPath.map { JSONDumpWriter(path: $0, intervalNanos: options.dumpIntervalNanos) }
        let hlog = options.hlogPath.map {
            HistogramLogWriter(path: $0, maxBytes: options.hlogMaxBytes, startRealtimeNanos: collector.startedRealtimeNanos,
                               program: CollectorOptions.versionLine, log: log)
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

extension CollectorDaemon {
    /// Descriptors of the collector's own, out of its reserve (`Collector.descriptorReserve`):
    /// the standard streams, the listening socket, the HTTP wake-up pipe and spare, inotify,
    /// Dispatch's and the demo's pipes, the latency log, the JSON dump, `/proc` reads on three
    /// threads. About 20 at the most (12 when idle); the rest of the reserve is for HTTP
    /// connections, so idle clients meet the connection cap (where the idlest gives way) before
    /// the open-file limit.
    static let ownDescriptors = 32

    /// The HTTP server's bounds: connections within the descriptor reserve (at most 1,024), and
    /// priorities below the drain's.
    static func httpLimits(descriptorReserve: Int) -> HTTPServerLimits {
        var limits = HTTPServerLimits()
        limits.maxConnections = max(1, min(1_024, descriptorReserve - ownDescriptors))
        // The drain comes first: a scrape flood waits, the rings do not. The render worker shares
        // the loop's priority: a probe is prompt because the loop no longer renders, not because
        // of nice (measured on 2 busy cores: /-/ready's worst was 20-37 ms with the worker at nice
        // 10, 15 or 19 alike, while at 15 or 19 the busy cores left it 0 to 2 pages in 8 s, 6 to 8 at 10).
        limits.threadNiceIncrement = 10
        limits.workerNiceIncrement = 10
        limits.maxRequestsPerSecond = 2_000 // hundreds of scrapers; a flood queues
        return limits
    }
}

/// Writes the `/latest` document to a file every interval, atomically (write, then rename).
struct JSONDumpWriter {
    let path: String
    let intervalNanos: UInt64
    private var lastNanos: UInt64 = 0
    private var lastError: String?

    init(path: String, intervalNanos: UInt64) {
        self.path = path
        self.intervalNanos = intervalNanos
    }

    mutating func writeIfDue(_ snapshot: Snapshot, nowNanos now: UInt64, log: CollectorLog) {
        if lastNanos == 0 { lastNanos = now }
        guard now &- lastNanos >= intervalNanos else { return }
        lastNanos = now
        write(snapshot, log: log)
    }

    mutating func write(_ snapshot: Snapshot, log: CollectorLog) {
        let temporary = path + ".tmp.\(getpid())"
        let body = JSONExporter.latest(snapshot)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
        var failure: String?
        if fd < 0 {
            failure = "open \(temporary): \(String(cString: strerror(errno)))"
        } else {
            let written = body.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written != body.count { failure = "write \(temporary): \(String(cString: strerror(errno)))" }
            close(fd)
            if failure == nil, rename(temporary, path) != 0 {
                failure = "rename to \(path): \(String(cString: strerror(errno)))"
            }
            if failure != nil { unlink(temporary) }
        }
        if let failure, failure != lastError { log("cannot write the JSON dump: \(failure)", level: .error) }
        lastError = failure
    }
}

