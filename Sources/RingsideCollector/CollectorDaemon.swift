import RingsideExport
import RingsideSnapshot
import CRingside
import Foundation
import Ringside
import RingsideCommandLine
import RingsideHTTP
import RingsideSystem

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
    public static func run(
        _ options: CollectorOptions, log: CollectorLog = .standardError,
        sidecar startSidecar: SidecarStart? = nil
    ) -> Int32 {
        // Signals are taken synchronously by this thread; every thread started later inherits the mask.
        System.pthreadSigmask(SIG_BLOCK, [SIGINT, SIGTERM])
        System.signal(SIGPIPE, SIG_IGN)
        returnLargeBlocksToTheSystem()

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

        // One collector per ring directory: a second is refused here, before it serves anything.
        let collector: Collector
        do { collector = try Collector(options: options, log: log) } catch {
            log("\(error); not starting", level: .error)
            return 1
        }
        let endpoints = CollectorEndpoints(collector: collector)
        let server: HTTPServer
        do {
            server = try HTTPServer(
                listen: options.listen, limits: httpLimits(descriptorReserve: collector.descriptorReserve),
                log: { log($0, level: $1 ? .warn : .info) },
                quick: endpoints.quick, handler: endpoints.render)
            try server.start()
        } catch {
            log("cannot serve HTTP: \(error)", level: .error)
            return 1
        }
        log(
            "listening on http://\(server.boundAddress) (/metrics, /latest, /api/history, /health), at most "
                + "\(server.limits.maxConnections) connections; ring directory \(options.directory.path)")
        if !server.isLoopback {
            log(
                "warning: \(server.boundAddress) is not a loopback address: anyone who can reach it can read these metrics",
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
        endpoints.startRendering()

        // History, the latency log, the JSON dump and the OTLP exporter follow the published snapshots from here.
        var subscribers: [any SnapshotSubscriber] = []
        if let history = endpoints.history {
            subscribers.append(HistorySubscriber(store: history, limit: options.historyMaxSeries))
        }
        if let path = options.hlogPath, let directory = directories["--hlog"] {
            subscribers.append(
                HistogramLogWriter(
                    path: path, directory: directory, intervalNanos: options.hlogIntervalNanos,
                    maxBytes: options.hlogMaxBytes, startRealtimeNanos: collector.startedRealtimeNanos,
                    program: CollectorOptions.versionLine, log: log))
        }
        if let path = options.jsonDumpPath, let directory = directories["--json-dump"] {
            subscribers.append(JSONDumpWriter(path: path, directory: directory, intervalNanos: options.dumpIntervalNanos, log: log))
        }
        if let otlp = options.otlp {
            let hostName: String
            do { hostName = try System.gethostname() } catch {
                log("--otlp-endpoint: cannot read this host's name (\(error)); host.name is \"localhost\"", level: .warn)
                hostName = "localhost"
            }
            let pusher = OTLPPusher(options: otlp, log: log)
            let scale = options.nativeHistogramSchema ?? OTLPExporter.defaultScale
            subscribers.append(
                OTLPSubscriber(
                    pusher: pusher, origin: OTLPExporter.Origin(hostName: hostName), scale: scale,
                    startRealtimeNanos: collector.startedRealtimeNanos))
            pusher.start()
            log(
                "pushing OTLP to \(pusher.shownEndpoint) every \(formatDuration(otlp.intervalNanos)) (exponential histograms of scale "
                    + "\(scale); a queue of \(pusher.capacity) exports; --otlp-timeout \(formatDuration(otlp.timeoutNanos)))")
        }
        endpoints.figures.update(from: subscribers)  // the latency log's open at start
        /// The latest snapshot, with what the subscribers report of themselves.
        func latest() -> Snapshot {
            var snapshot = collector.snapshot
            endpoints.figures.apply(to: &snapshot)
            return snapshot
        }
        // The loop turns at least as often as the latency log's and the OTLP exporter's intervals.
        let turnNanos = min(250_000_000, options.hlogPath == nil ? .max : options.hlogIntervalNanos, options.otlp?.intervalNanos ?? .max)
        while true {
            let received = try? System.sigtimedwait([SIGINT, SIGTERM], timeoutNanos: turnNanos)
            if received == SIGINT || received == SIGTERM {
                log("received \(received == SIGINT ? "SIGINT" : "SIGTERM"); stopping")
                break
            }
            let now = rs_clock_precise_ns()
            let snapshot = latest()
            for index in subscribers.indices { subscribers[index].receive(snapshot, nowNanos: now) }
            endpoints.figures.update(from: subscribers)
            sidecar?.tick(snapshot, nowNanos: now)
        }

        server.stop()
        endpoints.stopRendering()
        sidecar?.stop()
        collector.stop()
        let last = latest()
        for index in subscribers.indices { subscribers[index].finish(last) }
        sidecar?.finish()
        log("stopped")
        return 0
    }
}

extension CollectorDaemon {
    /// Descriptors of the collector's own, out of its reserve (`Collector.descriptorReserve`):
    /// the standard streams, the listening socket, the HTTP wake-up pipe and spare, inotify,
    /// Dispatch's and the demo's pipes, the latency log, the JSON dump, the OTLP exporter's
    /// socket, `/proc` reads on three threads. About 20 at the most (12 when idle); the rest of the reserve is for HTTP
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
        limits.maxRequestsPerSecond = 2_000  // hundreds of scrapers; a flood queues
        return limits
    }
}

/// Has glibc's malloc map every block of 1 MiB or more on its own, so a page freed is given back
/// to the system at once. Left to itself, malloc raises that threshold to the largest block freed
/// (up to 32 MiB), and a page of some 30 MiB, once freed, stays in its heap: the memory budget
/// (`--max-series-bytes`) counts what the collector holds, not what the allocator keeps.
/// `mallopt` is looked up at run time: Swift's Glibc module does not declare it.
private func returnLargeBlocksToTheSystem() {
    typealias MallOpt = @convention(c) (Int32, Int32) -> Int32
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return }  // not glibc
    let mmapThreshold: Int32 = -3  // M_MMAP_THRESHOLD in <malloc.h>
    _ = unsafeBitCast(symbol, to: MallOpt.self)(mmapThreshold, 1 << 20)
}
