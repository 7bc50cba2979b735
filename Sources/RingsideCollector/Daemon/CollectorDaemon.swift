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
package protocol CollectorSidecar: AnyObject {
    func tick(_ snapshot: Snapshot, nowNanos: UInt64)
    func stop()
    func finish()
}

/// The `ringside-collector` process: the collector, its HTTP server, the JSON dumps, a sidecar,
/// and an orderly stop on SIGINT or SIGTERM.
package enum CollectorDaemon {
    /// Starts a sidecar, given the server's address and the log.
    package typealias SidecarStart = (_ address: String, _ log: CollectorLog) throws -> any CollectorSidecar

    /// Runs until SIGINT or SIGTERM, reloading its configuration at SIGHUP (and `POST
    /// /-/reload` with `--web-enable-lifecycle`); returns the process's exit status.
    package static func run(
        _ options: CollectorOptions, log: CollectorLog = .standardError,
        sidecar startSidecar: SidecarStart? = nil
    ) -> Int32 {
        // Signals are taken synchronously by this thread; every thread started later inherits the mask.
        System.pthreadSigmask(SIG_BLOCK, [SIGINT, SIGTERM, SIGHUP])
        System.signal(SIGPIPE, SIG_IGN)
        returnLargeBlocksToTheSystem()
        var daemon: Running
        do throws(StartFailure) { daemon = try start(options, log: log, sidecar: startSidecar) } catch { return error.code }
        let stopRequestedNanos = daemon.serve()
        daemon.stop(requestedNanos: stopRequestedNanos)
        guard daemon.exitStatus == 0 else { return daemon.exitStatus }
        log("stopped")
        return 0
    }

    /// A start that failed, logged: the process's exit status (2: a usage error).
    struct StartFailure: Error {
        let code: Int32
    }

    /// Checks the outputs' directories, then starts the collector, its HTTP listener, the
    /// sidecar and the outputs, in that order.
    static func start(_ options: CollectorOptions, log: CollectorLog, sidecar startSidecar: SidecarStart?) throws(StartFailure) -> Running {
        func fail(_ message: String, _ code: Int32) -> StartFailure {
            log(message, level: .error)
            return StartFailure(code: code)
        }
        // Before anything is served: a directory another user could write is refused here, where
        // the operator sees it at once, not later as counted errors.
        do throws(OutputError) { try Outputs.checkDirectories(options) } catch { throw fail("\(error); not starting", 1) }
        // The listener's TLS and users: a file that does not load (it changed since the command
        // line was read) is the same usage error, exit status 2.
        let security: WebSecurity?
        do throws(OutputError) { security = try Listener.security(options) } catch { throw fail("\(error); not starting", 2) }
        // One collector per ring directory: a second is refused here, before it serves anything.
        let collector: Collector
        do { collector = try Collector(options: options, log: log) } catch { throw fail("\(error); not starting", 1) }
        let reloads = options.reloadEndpoint ? ReloadRequests() : nil
        let endpoints = CollectorEndpoints(collector: collector, reloadRequests: reloads)
        let listener: Listener
        do { listener = try Listener(options: options, security: security, collector: collector, endpoints: endpoints, log: log) } catch {
            throw fail("cannot serve HTTP: \(error)", 1)
        }
        listener.announce(directory: options.directory.path, log: log)

        var sidecar: (any CollectorSidecar)?
        if let startSidecar {
            do { sidecar = try startSidecar(listener.server.boundAddress, log) } catch {
                let status = fail("\(error)", 1)
                listener.server.stop()
                throw status
            }
        }
        collector.start()
        endpoints.startRendering()

        // History, the latency log, the JSON dump and the OTLP exporter follow the published snapshots from here.
        let outputs = Outputs(options: options, collector: collector, endpoints: endpoints, log: log)
        endpoints.figures.update(from: outputs.all)  // the latency log's open at start
        if let path = options.configFile {
            log(
                "configuration from --config \(path) and the command line; SIGHUP\(reloads != nil ? " and POST /-/reload" : "") read it again"
            )
        }
        return Running(
            collector: collector, endpoints: endpoints, reloads: reloads, sidecar: sidecar, log: log, options: options,
            listener: listener, outputs: outputs,
            startCheck: options.sloRules.isEmpty ? nil : SLOStartCheck(nowNanos: rs_clock_precise_ns()))
    }

    /// The daemon's parts while it runs: the collector, what serves and follows it, and the
    /// configuration it runs with (a reload's).
    struct Running {
        let collector: Collector
        let endpoints: CollectorEndpoints
        let reloads: ReloadRequests?
        let sidecar: (any CollectorSidecar)?
        let log: CollectorLog
        var options: CollectorOptions
        var listener: Listener
        var outputs: Outputs
        /// A listener a reload replaced: closed a second later, once it has answered the reload's
        /// request (its render worker waits for the reload; stopping it now would wait for that).
        var retired: (listener: Listener, sinceNanos: UInt64)?
        /// The SLO rules' check against the bots found at the start, until it is done.
        var startCheck: SLOStartCheck?
        /// What the process exits with: 2 when the start's check refused a rule.
        var exitStatus: Int32 = 0

        /// The latest snapshot, with what the subscribers report of themselves.
        func latest() -> Snapshot {
            var snapshot = collector.snapshot
            endpoints.figures.apply(to: &snapshot)
            return snapshot
        }

        /// Turns the main loop until SIGINT or SIGTERM, or a reload's listener that cannot bind
        /// again; returns when the stop was asked for.
        mutating func serve() -> UInt64 {
            while true {
                // The loop turns at least as often as the latency log's and the OTLP exporter's intervals.
                let received = try? System.sigtimedwait([SIGINT, SIGTERM, SIGHUP], timeoutNanos: outputs.turnNanos)
                if received == SIGINT || received == SIGTERM {
                    let stopRequestedNanos = rs_clock_precise_ns()
                    log("received \(received == SIGINT ? "SIGINT" : "SIGTERM"); stopping")
                    return stopRequestedNanos
                }
                if received == SIGHUP, !reload() { return rs_clock_precise_ns() }
                turn()
                if !checkStart() { return rs_clock_precise_ns() }
            }
        }

        /// Asks the start's check of the SLO rules for its verdict, while it is under way; false when it
        /// refused one (said in one line), and the collector stops with status 2.
        mutating func checkStart() -> Bool {
            guard var check = startCheck else { return true }
            switch check.verdict(on: collector, nowNanos: rs_clock_precise_ns()) {
            case .waiting:
                startCheck = check
                return true
            case .passed:
                startCheck = nil
                return true
            case let .refused(problem):
                log("\(problem); not starting", level: .error)
                startCheck = nil
                exitStatus = 2
                return false
            }
        }

        /// Applies a reload (SIGHUP, and `POST /-/reload`, which waits for it); false when the
        /// listener cannot bind again on its address, and the daemon stops.
        mutating func reload() -> Bool {
            startCheck = nil  // the reload checks its rules against the series known now
            let ticket = reloads?.begin() ?? 0
            let previous = listener
            let last = latest()
            let (outcome, rebind) = CollectorDaemon.reload(
                &options, listener: &listener, outputs: &outputs, collector: collector, endpoints: endpoints, last: last, log: log)
            reloads?.finish(upTo: ticket, outcome)
            if listener.server !== previous.server {
                retired?.listener.server.stop()
                retired = (previous, rs_clock_precise_ns())
            }
            guard let rebind else { return true }
            // The same address under another web configuration: the old listener must close
            // first. It answers the reload's request, then goes; the new one binds at once.
            usleep(200_000)
            listener.server.stop()
            do {
                listener = try Listener(options: options, security: rebind.security, collector: collector, endpoints: endpoints, log: log)
            } catch {
                log("cannot listen again on \(options.listen) after the reload: \(error); stopping", level: .error)
                return false
            }
            listener.announce(directory: options.directory.path, log: log)
            return true
        }

        /// One turn of the loop: a retired listener closed after its second, and the latest
        /// snapshot handed to the outputs and the sidecar.
        mutating func turn() {
            let now = rs_clock_precise_ns()
            if let old = retired, now &- old.sinceNanos >= 1_000_000_000 {
                old.listener.server.stop()
                retired = nil
            }
            let snapshot = latest()
            outputs.receive(snapshot, nowNanos: now)
            endpoints.figures.update(from: outputs.all)
            sidecar?.tick(snapshot, nowNanos: now)
        }

        /// Stops in order: the listeners and the sidecar, the collector (its last drain), then
        /// the outputs with the last snapshot, and the sidecar's finish once the rings are let go.
        mutating func stop(requestedNanos: UInt64) {
            // A `POST /-/reload` waiting at the render worker is answered now, not at its 10 s timeout.
            reloads?.finish(upTo: reloads?.begin() ?? 0, ReloadOutcome(succeeded: false, message: "the collector is stopping"))
            listener.server.stop()
            retired?.listener.server.stop()
            endpoints.stopRendering()
            sidecar?.stop()
            collector.stop()
            outputs.finish(latest(), stopRequestedNanos: requestedNanos)
            sidecar?.finish()
        }
    }

    /// Reads the configuration again and applies what changed: the SLOs and quantiles (from the
    /// next snapshot, the windows and counters kept), the listener (a new one bound before the
    /// old one closes), the latency log, the JSON dump and the OTLP exporter (the old one
    /// finished first). Options that shape the reading of the rings wait for the next start,
    /// and say so. A file that does not read, or a listener that cannot bind, changes nothing.
    /// - Returns: the outcome, and the web configuration to listen again with on the same
    ///   address, which the caller does once it has answered the reload's request.
    static func reload(
        _ running: inout CollectorOptions, listener: inout Listener, outputs: inout Outputs, collector: Collector,
        endpoints: CollectorEndpoints, last: Snapshot, log: CollectorLog
    ) -> (ReloadOutcome, rebind: Rebind?) {
        func refuse(_ reason: String) -> (ReloadOutcome, rebind: Rebind?) {
            log("reload refused: \(reason); the running configuration stays", level: .error)
            return (ReloadOutcome(succeeded: false, message: reason), nil)
        }
        guard running.configFile != nil else {
            return refuse("no --config file to read (give the collector one to reload it)")
        }
        let read: CollectorOptions
        do { read = try running.reloaded() } catch { return refuse("\(error)") }
        let next = ReloadPlan.effective(read, running: running)
        if let problem = SLOCheck.reloadProblem(next.sloRules, running: running.sloRules, windows: next.windowNanos, series: last) {
            return refuse(problem)
        }
        do throws(OutputError) { try Outputs.checkDirectories(next) } catch { return refuse("\(error)") }
        var changed: [String] = []
        var rebind: Rebind?
        if next.listen != running.listen {
            do {
                let security = try Listener.security(next)
                // Bound before the old one closes (the caller closes it once it has answered).
                listener = try Listener(options: next, security: security, collector: collector, endpoints: endpoints, log: log)
                listener.announce(directory: next.directory.path, log: log)
                changed.append("--listen")
            } catch {
                return refuse("cannot serve HTTP as configured: \(error)")
            }
        } else if next.webConfigFile != running.webConfigFile {
            do { rebind = Rebind(security: try Listener.security(next)) } catch { return refuse("\(error)") }
            changed.append("--web-config-file")
        }
        if next.sloRules != running.sloRules || next.quantiles != running.quantiles {
            collector.reconfigure(sloRules: next.sloRules, quantiles: next.quantiles)
            if next.sloRules != running.sloRules { changed.append("--slo") }
            if next.quantiles != running.quantiles { changed.append("--quantiles") }
        }
        changed += outputs.reconfigure(from: running, to: next, last: last, collector: collector, endpoints: endpoints, log: log)
        let waiting = ReloadPlan.startOnlyChanges(from: running, to: read)
        running = next
        var message = changed.isEmpty ? "nothing changed" : "applied " + changed.joined(separator: ", ")
        if !waiting.isEmpty { message += "; " + waiting.joined(separator: ", ") + " change at the next start (kept as running)" }
        log("reloaded \(running.configFile ?? ""): \(message)", level: waiting.isEmpty ? .info : .warn)
        return (ReloadOutcome(succeeded: true, message: message), rebind)
    }
}

/// A listener to make again on its address under another web configuration (nil: none), once
/// the old one has answered the reload's request.
struct Rebind {
    let security: WebSecurity?
}

/// The HTTP server and how it is announced.
struct Listener {
    let server: HTTPServer
    private let security: WebSecurity?

    /// The web configuration `options` names, loaded (nil without one).
    static func security(_ options: CollectorOptions) throws(OutputError) -> WebSecurity? {
        guard let path = options.webConfigFile else { return nil }
        do { return try WebSecurity(path: path, openPaths: CollectorEndpoints.openPaths) } catch {
            throw OutputError("--web-config-file \(path): \(error)")
        }
    }

    /// Binds and starts a server for `options`.
    init(options: CollectorOptions, security: WebSecurity?, collector: Collector, endpoints: CollectorEndpoints, log: CollectorLog) throws {
        var limits = CollectorDaemon.httpLimits(descriptorReserve: collector.descriptorReserve)
        if options.reloadEndpoint { limits.postPaths.insert(CollectorEndpoints.reloadPath) }
        // Taken whether captures are on or not: without --capture-dir the route says so.
        limits.postPaths.insert(CollectorEndpoints.capturePath)
        server = try HTTPServer(
            listen: options.listen, limits: limits, log: { log($0, level: $1 ? .warn : .info) }, security: security,
            quick: endpoints.quick, handler: endpoints.render)
        try server.start()
        self.security = security
        if let security { endpoints.figures.setWebSecuritySource { security.counters } }
    }

    func announce(directory: String, log: CollectorLog) {
        log(
            "listening on \(security?.isTLS == true ? "https" : "http")://\(server.boundAddress) (/metrics, /latest, /api/history, "
                + "/health), at most \(server.limits.maxConnections) connections; ring directory \(directory)")
        if let security {
            log(
                "--web-config-file \(security.path): \(security.summary); /health and /-/healthy need no password; "
                    + "re-read when it or its files change")
        }
        if !server.isLoopback && !(security?.protectsEverything ?? false) {
            log(
                "warning: \(server.boundAddress) is not a loopback address: anyone who can reach it can read these metrics "
                    + "(--web-config-file sets TLS and passwords)",
                level: .warn)
        }
    }
}

/// Why an output cannot start: a line for the log.
struct OutputError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The parts that follow the published snapshots from the daemon's loop: the history, the
/// latency log, the JSON dump, the OTLP exporter; each made anew when a reload changes its options.
struct Outputs {
    private var history: HistorySubscriber?
    private var hlog: HistogramLogWriter?
    private var jsonDump: JSONDumpWriter?
    private var otlp: OTLPSubscriber?
    /// How often the daemon's loop turns: at least as often as the latency log's and the OTLP
    /// exporter's intervals.
    private(set) var turnNanos: UInt64 = 250_000_000

    var all: [any SnapshotSubscriber] {
        var all: [any SnapshotSubscriber] = []
        if let history { all.append(history) }
        if let hlog { all.append(hlog) }
        if let jsonDump { all.append(jsonDump) }
        if let otlp { all.append(otlp) }
        return all
    }

    /// Refuses a directory of `--hlog` or `--json-dump` another user could write.
    static func checkDirectories(_ options: CollectorOptions) throws(OutputError) {
        for (flag, path) in [("--hlog", options.hlogPath), ("--json-dump", options.jsonDumpPath)] {
            guard let path else { continue }
            do { _ = try LogDirectory(path: LogDirectory.split(path).directory) } catch {
                throw OutputError("\(flag) \(path): \(error)")
            }
        }
    }

    init(options: CollectorOptions, collector: Collector, endpoints: CollectorEndpoints, log: CollectorLog) {
        if let store = endpoints.history { history = HistorySubscriber(store: store, limit: options.historyMaxSeries) }
        hlog = Self.makeHLog(options, collector: collector, log: log)
        jsonDump = Self.makeJSONDump(options, log: log)
        otlp = Self.makeOTLP(options, collector: collector, log: log)
        turnNanos = Self.turnNanos(options)
    }

    mutating func receive(_ snapshot: Snapshot, nowNanos now: UInt64) {
        history?.receive(snapshot, nowNanos: now)
        hlog?.receive(snapshot, nowNanos: now)
        jsonDump?.receive(snapshot, nowNanos: now)
        otlp?.receive(snapshot, nowNanos: now)
    }

    mutating func finish(_ snapshot: Snapshot, stopRequestedNanos: UInt64) {
        history?.finish(snapshot, stopRequestedNanos: stopRequestedNanos)
        hlog?.finish(snapshot, stopRequestedNanos: stopRequestedNanos)
        jsonDump?.finish(snapshot, stopRequestedNanos: stopRequestedNanos)
        otlp?.finish(snapshot, stopRequestedNanos: stopRequestedNanos)
    }

    /// Makes anew each output whose options changed (the old one finished with `last` first);
    /// returns the flags that changed.
    mutating func reconfigure(
        from old: CollectorOptions, to new: CollectorOptions, last: Snapshot, collector: Collector, endpoints: CollectorEndpoints,
        log: CollectorLog
    ) -> [String] {
        var changed: [String] = []
        let now = rs_clock_precise_ns()
        if old.hlogPath != new.hlogPath || old.hlogIntervalNanos != new.hlogIntervalNanos || old.hlogMaxBytes != new.hlogMaxBytes {
            hlog?.finish(last, stopRequestedNanos: now)
            hlog = Self.makeHLog(new, collector: collector, log: log)
            changed.append("--hlog")
        }
        if old.jsonDumpPath != new.jsonDumpPath || old.dumpIntervalNanos != new.dumpIntervalNanos {
            jsonDump?.finish(last, stopRequestedNanos: now)
            jsonDump = Self.makeJSONDump(new, log: log)
            changed.append("--json-dump")
        }
        if old.otlp != new.otlp {
            otlp?.finish(last, stopRequestedNanos: now)
            otlp = Self.makeOTLP(new, collector: collector, log: log)
            changed.append("--otlp-*")
        }
        turnNanos = Self.turnNanos(new)
        return changed
    }

    private static func turnNanos(_ options: CollectorOptions) -> UInt64 {
        min(250_000_000, options.hlogPath == nil ? .max : options.hlogIntervalNanos, options.otlp?.intervalNanos ?? .max)
    }

    private static func makeHLog(_ options: CollectorOptions, collector: Collector, log: CollectorLog) -> HistogramLogWriter? {
        guard let path = options.hlogPath, let directory = try? LogDirectory(path: LogDirectory.split(path).directory) else { return nil }
        return HistogramLogWriter(
            path: path, directory: directory, intervalNanos: options.hlogIntervalNanos, maxBytes: options.hlogMaxBytes,
            startRealtimeNanos: collector.startedRealtimeNanos, program: CollectorOptions.versionLine, log: log)
    }

    private static func makeJSONDump(_ options: CollectorOptions, log: CollectorLog) -> JSONDumpWriter? {
        guard let path = options.jsonDumpPath, let directory = try? LogDirectory(path: LogDirectory.split(path).directory) else {
            return nil
        }
        return JSONDumpWriter(path: path, directory: directory, intervalNanos: options.dumpIntervalNanos, log: log)
    }

    private static func makeOTLP(_ options: CollectorOptions, collector: Collector, log: CollectorLog) -> OTLPSubscriber? {
        OTLPSubscriber.make(options, collector: collector, log: log)
    }
}

extension CollectorDaemon {
    /// Descriptors of the collector's own, out of its reserve (`Collector.descriptorReserve`):
    /// the standard streams, the listening socket, the HTTP wake-up pipe and spare, inotify,
    /// Dispatch's and the demo's pipes, the latency log, the JSON dump, the OTLP exporter's
    /// socket, `/proc` reads on three threads. About 20 at the most (12 when idle); the rest of the reserve is for HTTP
    /// connections and the files they download (`ResponseFile.maxOpen`), so idle clients meet
    /// the connection cap (where the idlest gives way) before the open-file limit.
    static let ownDescriptors = 32

    /// The HTTP server's bounds: connections within the descriptor reserve (at most 1,024), and
    /// priorities below the drain's.
    static func httpLimits(descriptorReserve: Int) -> HTTPServerLimits {
        var limits = HTTPServerLimits()
        limits.maxConnections = max(1, min(1_024, descriptorReserve - ownDescriptors - ResponseFile.maxOpen))
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
private func returnLargeBlocksToTheSystem() {
    System.mapBlocksOnTheirOwn(atLeast: 1 << 20)
}
