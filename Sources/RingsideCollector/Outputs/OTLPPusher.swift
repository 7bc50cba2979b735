#if canImport(Glibc)
import Glibc
#endif
import CRingside
import Dispatch
import Foundation
import RingsideCommandLine
import RingsideExport
import RingsideHTTP
import RingsideSnapshot
import RingsideSystem
import Synchronization
import RingsideHTTPClient

/// Sends the OTLP exports (`OTLPSubscriber` makes them) to the receiver, on a thread of its own:
/// a receiver that is down, slow or hung holds this thread only, never the drain, the daemon's
/// loop or the HTTP server.
///
/// - A bounded queue (`capacity` exports, 30 by default: 5 minutes at 10 s): full, it drops the
///   oldest export for the new one, and counts it. Exports go oldest first, each data point's time
///   after the last one's, as receivers want them.
/// - An attempt that fails for a cause that may pass (429, 502, 503 or 504; no connection; no
///   answer within `--otlp-timeout`) is made again after `Retry-After` (seconds, up to 5 minutes)
///   when the answer has one, else after a backoff that doubles from 1 s to 30 s, each wait drawn
///   between half and all of it (jitter, so collectors that failed together do not retry together).
///   Meanwhile the export stays at the head of the queue, the first dropped if it fills.
/// - Any other answer but a 2xx is final: the export is counted as failed, and the next one sent.
/// - The log says when exports start failing (with the reason) and when they are sent again, not
///   each attempt; the counts and the last error are in `/metrics` and `/latest`.
/// - A response past the client's bounds (more than 10 interim responses, more than 64 KiB of
///   heads and trailers; `HTTPResponseParser`) fails its attempt like any malformed one: retried.
/// - `stop` ends the thread by a deadline whatever the receiver does: an attempt still under way
///   then is cut short (its socket shut down through `cancellation`) and its export counted unsent.
///
/// Safe to use from any thread.
package final class OTLPPusher: Sendable {
    struct Export: Sendable {
        var body: [UInt8]
        var series: Int
        /// Given by `enqueue`: what `settlement(of:)` takes.
        var id: UInt64 = 0
    }

    let options: OTLPOptions
    /// For an `https://` endpoint.
    let tls: TLSClientContext?
    let capacity: Int
    private let log: CollectorLog
    private let userAgent: String
    private let state: Locked<State>
    private let wakeup = DispatchSemaphore(value: 0)
    private let thread = PartThread(name: "ringside-otlp")
    /// Cancelled by `stop` once its deadline passed: ends the attempt under way.
    private let cancellation = HTTPClientCancellation()

    private struct State {
        var queue: [Export] = []
        /// The export being sent (taken off the queue), if any.
        var inFlight = false
        var stats = OTLPStats()
        /// Failed attempts in a row, and when the next may be made (CLOCK_MONOTONIC).
        var attempts = 0
        var nextAttemptNanos: UInt64 = 0
        /// Set by `stop`: send what is queued, once each, until this time.
        var stopDeadlineNanos: UInt64?
        var everSent = false
        /// The ids exports are given, and the last export settled: taken, or not (failed, dropped).
        var lastID: UInt64 = 0
        var lastSettled: (id: UInt64, taken: Bool) = (0, false)
        /// Set by `stop` when the thread did not end in time: nothing it does after is counted.
        var abandoned = false
        /// Why the last attempt since the stop began failed, for the line `stop` writes.
        var lastFailure: String?
        /// What the failures since the last success were, for the line that ends them.
        var failuresSinceSuccess = (attempts: 0, dropped: UInt64(0), failed: UInt64(0))

        /// Counts an export dropped; true for the first since the last success (the log says so once).
        mutating func countDrop() -> Bool {
            stats.dropped += 1
            failuresSinceSuccess.dropped += 1
            return failuresSinceSuccess.dropped == 1
        }
    }

    static let defaultCapacity = 30
    static let firstBackoffNanos: UInt64 = 1_000_000_000
    static let maxBackoffNanos: UInt64 = 30_000_000_000
    static let maxRetryAfterSeconds: UInt64 = 300
    /// At the stop: how long after SIGTERM queued exports may still be sent, and how long an
    /// attempt cut short then has to end. The thread is done within their sum of SIGTERM (1 s).
    static let stopFlushNanos: UInt64 = 800_000_000, stopGraceNanos: UInt64 = 200_000_000

    init(options: OTLPOptions, tls: TLSClientContext? = nil, capacity: Int = defaultCapacity, log: CollectorLog) {
        self.options = options
        self.tls = tls
        self.capacity = capacity
        self.log = log
        userAgent = "ringside-collector/\(RingsideVersion.version)"
        var initial = State()
        initial.stats.queueCapacity = capacity
        state = Locked(initial)
    }

    /// The endpoint as the log shows it: without its query, which may hold a key.
    var shownEndpoint: String { String(options.endpoint.description.prefix { $0 != "?" }) }

    /// What it did so far.
    var stats: OTLPStats { state.withLock { $0.stats } }

    /// Queues `export`, dropping the oldest when the queue is full: `capacity` exports held in
    /// all, the one being sent among them (`queued` says so). Returns the id it gave the export.
    @discardableResult
    func enqueue(_ export: Export) -> UInt64 {
        let (id, droppedFirst) = state.withLock { state -> (UInt64, Bool) in
            var droppedFirst = false
            if !state.queue.isEmpty, state.queue.count + (state.inFlight ? 1 : 0) >= capacity {
                state.lastSettled = (state.queue.removeFirst().id, false)
                droppedFirst = state.countDrop()
            }
            state.lastID += 1
            var export = export
            export.id = state.lastID
            state.queue.append(export)
            state.stats.queued = state.queue.count + (state.inFlight ? 1 : 0)
            return (state.lastID, droppedFirst)
        }
        if droppedFirst { logQueueFull() }
        wakeup.signal()
        return id
    }

    /// Whether the receiver took the export `id` (true), or it was failed or dropped (false); nil
    /// while it is queued or being sent. For the last export settled only: delta exports are sent
    /// one at a time (`OTLPSubscriber`).
    func settlement(of id: UInt64) -> Bool? {
        state.withLock { state in state.lastSettled.id == id ? state.lastSettled.taken : nil }
    }

    private func logQueueFull() {
        log(
            "--otlp-endpoint \(shownEndpoint): the queue of \(capacity) exports is full; the oldest are dropped "
                + "(counted in ringside_otlp_exports_total{result=\"dropped\"})", level: .warn)
    }

    // MARK: - Its thread

    func start() {
        // Below the drain thread, as the HTTP threads are.
        thread.startOrExit(niceIncrement: 10) { [self] in
            while let wait = turn(nowNanos: rs_clock_precise_ns()) {
                if wait > 0 { _ = wakeup.wait(timeout: wait == .max ? .distantFuture : .now() + .nanoseconds(Int(clamping: wait))) }
            }
        }
    }

    /// Sends what is queued, each export once, until `stopRequestedNanos` + `stopFlushNanos`
    /// (CLOCK_MONOTONIC), then stops the thread; an attempt still under way then is cancelled, and
    /// the thread given `stopGraceNanos` more to end (else it is left behind: only name resolution
    /// can hold it so). What is left unsent is counted as dropped.
    func stop(requestedAtNanos stopRequestedNanos: UInt64) {
        let deadline = stopRequestedNanos &+ Self.stopFlushNanos
        let before = state.withLock { state in
            state.stopDeadlineNanos = deadline
            state.lastFailure = nil
            return state.stats
        }
        wakeup.signal()
        var ended = thread.awaitEnd(untilNanos: deadline)
        let cutShort = !ended && state.withLock { $0.inFlight }
        if !ended { cancellation.cancel() }
        ended = thread.stop(waking: { _ = wakeup.signal() }, deadlineNanos: rs_clock_precise_ns() &+ Self.stopGraceNanos)
        let (after, lastFailure) = state.withLock { state in
            if !ended {
                state.abandoned = true
                if state.inFlight { state.stats.dropped += 1 }
            }
            state.stats.dropped += UInt64(state.queue.count)
            state.queue = []
            state.stats.queued = 0
            return (state.stats, state.lastFailure)
        }
        if !ended {
            log(
                "--otlp-endpoint \(shownEndpoint): the attempt under way did not end when cancelled (resolving \(options.endpoint.host)?); "
                    + "its thread is left behind", level: .warn)
        }
        let unsent = after.dropped - before.dropped + after.failed - before.failed
        if unsent > 0 {
            let why = cutShort ? "; the attempt under way was cut short" : lastFailure.map { "; the last attempt: \($0)" } ?? ""
            log(
                "--otlp-endpoint \(shownEndpoint): \(unsent) exports unsent at the stop (\(after.sent - before.sent) sent in the "
                    + "\(formatDuration(Self.stopFlushNanos)) given\(why))", level: .warn)
        }
    }

    /// One turn: sends the head of the queue if it is due. How long to wait before the next turn
    /// (`.max`: until woken; 0: at once), or nil once stopped.
    private func turn(nowNanos now: UInt64) -> UInt64? {
        let due = state.withLock { state -> (export: Export?, wait: UInt64, deadline: UInt64?)? in
            if let deadline = state.stopDeadlineNanos {
                guard now < deadline, !state.queue.isEmpty else { return nil }
                return (take(&state), 0, deadline)
            }
            guard !state.queue.isEmpty else { return (nil, .max, nil) }
            guard now >= state.nextAttemptNanos else { return (nil, state.nextAttemptNanos - now, nil) }
            return (take(&state), 0, nil)
        }
        guard let due else { return nil }
        guard let export = due.export else { return due.wait }
        let timeout = due.deadline.map { min(options.timeoutNanos, $0 &- now) } ?? options.timeoutNanos
        let outcome = Self.outcome(of: attempt(export, timeoutNanos: timeout))
        settle(export, outcome)
        return 0
    }

    private func take(_ state: inout State) -> Export {
        state.inFlight = true
        return state.queue.removeFirst()
    }

    private func attempt(_ export: Export, timeoutNanos: UInt64) -> Result<HTTPClientResponse, HTTPClientError> {
        var headers = [
            HTTPHeader("Content-Type", OTLPExporter.contentType), HTTPHeader("Content-Encoding", "gzip"),
            HTTPHeader("User-Agent", userAgent),
        ]
        headers += options.headers
        let request = HTTPClientRequest(method: "POST", url: options.endpoint, headers: headers, body: export.body)
        return Result { () throws(HTTPClientError) in
            try HTTPClient.send(request, timeoutNanos: timeoutNanos, cancellation: cancellation, tls: tls)
        }
    }

    // MARK: - Outcomes

    package enum Outcome: Equatable {
        /// Taken; the number of data points the receiver said it rejected, and why.
        case sent(rejectedPoints: UInt64, message: String)
        /// Worth another attempt: after `retryAfterNanos` when the receiver said, else the backoff's.
        case retry(reason: String, retryAfterNanos: UInt64?, timedOut: Bool)
        /// Final.
        case failed(reason: String)
    }

    /// What an attempt's result means (OTLP/HTTP's rules: 429, 502, 503 and 504 are worth
    /// another try, as are failures to connect or to get an answer; the other statuses are final;
    /// and so is a TLS failure: a certificate refused, a peer that does not speak TLS).
    package static func outcome(of result: Result<HTTPClientResponse, HTTPClientError>) -> Outcome {
        switch result {
        case .failure(let error):
            if case .tls = error { return .failed(reason: "\(error)") }
            if case .timedOut = error { return .retry(reason: "\(error)", retryAfterNanos: nil, timedOut: true) }
            return .retry(reason: "\(error)", retryAfterNanos: nil, timedOut: false)
        case .success(let response):
            let status = "HTTP \(response.status)" + (response.reason.isEmpty ? "" : " \(response.reason)")
            let said = response.firstLineOfBody
            let reason = said.isEmpty ? status : "\(status): \(said)"
            switch response.status {
            case 200..<300:
                let partial = OTLPPartialSuccess(response.body)
                return .sent(rejectedPoints: partial?.rejectedDataPoints ?? 0, message: partial?.errorMessage ?? "")
            case 429, 502, 503, 504:
                return .retry(reason: reason, retryAfterNanos: response.header("Retry-After").flatMap(retryAfterNanos), timedOut: false)
            default:
                return .failed(reason: reason)
            }
        }
    }

    /// `Retry-After`'s delay in seconds (up to 5 minutes); nil for an HTTP date or anything else.
    static func retryAfterNanos(_ text: String) -> UInt64? {
        guard !text.isEmpty, text.count <= 12, text.allSatisfy({ $0.isASCII && $0.isNumber }), let seconds = UInt64(text) else {
            return nil
        }
        return min(seconds, maxRetryAfterSeconds) * 1_000_000_000
    }

    /// The backoff after `attempts` failed attempts in a row: doubling from 1 s to 30 s, a wait
    /// drawn between half and all of it.
    static func backoffNanos(attempts: Int) -> UInt64 {
        let full = min(maxBackoffNanos, firstBackoffNanos << UInt64(min(max(attempts - 1, 0), 30)))
        return UInt64(Double(full) * Double.random(in: 0.5...1))
    }

    /// Counts the outcome, logs a change of state, and puts an export to be tried again back at
    /// the head of the queue (or drops it, when the queue filled meanwhile or the pusher is
    /// stopping, whenever the attempt began).
    private func settle(_ export: Export, _ outcome: Outcome) {
        let now = rs_clock_precise_ns()
        var droppedFirst = false
        let line = state.withLock { state -> (String, LogLevel)? in
            guard !state.abandoned else { return nil }  // `stop` counted it
            state.inFlight = false
            let stopping = state.stopDeadlineNanos != nil
            defer { state.stats.queued = state.queue.count }
            let wasFailing = state.stats.failing
            switch outcome {
            case let .sent(rejected, message):
                state.lastSettled = (export.id, true)
                state.stats.sent += 1
                state.stats.sentBytes += UInt64(export.body.count)
                state.stats.lastSuccessRealtimeNanos = rs_clock_realtime_ns()
                state.stats.rejectedPoints += rejected
                state.stats.failing = false
                state.attempts = 0
                state.nextAttemptNanos = 0
                let first = !state.everSent
                state.everSent = true
                let failures = state.failuresSinceSuccess
                state.failuresSinceSuccess = (0, 0, 0)
                if rejected > 0 { state.stats.lastError = "the receiver rejected \(rejected) data points: \(message)" }
                if wasFailing {
                    return (
                        "--otlp-endpoint \(shownEndpoint): exports are sent again, after \(failures.attempts) failed attempts "
                            + "(\(failures.failed) exports failed, \(failures.dropped) dropped meanwhile)", .info
                    )
                }
                if first { return ("--otlp-endpoint \(shownEndpoint): the first export was sent (\(export.series) series)", .info) }
                return nil
            case let .retry(reason, retryAfter, timedOut):
                state.lastFailure = reason
                state.stats.retries += 1
                if timedOut { state.stats.timeouts += 1 }
                state.stats.failing = true
                state.stats.lastError = reason
                state.attempts += 1
                state.failuresSinceSuccess.attempts += 1
                state.nextAttemptNanos = now &+ (retryAfter ?? Self.backoffNanos(attempts: state.attempts))
                if !stopping, state.queue.count < capacity {
                    state.queue.insert(export, at: 0)
                } else {
                    state.lastSettled = (export.id, false)
                    droppedFirst = state.countDrop() && !stopping
                }
                if wasFailing || stopping { return nil }  // at the stop, `stop`'s line says it
                return ("--otlp-endpoint \(shownEndpoint): exports fail: \(reason); trying again with backoff", .warn)
            case let .failed(reason):
                state.lastSettled = (export.id, false)
                state.lastFailure = reason
                state.stats.failed += 1
                state.stats.failing = true
                state.stats.lastError = reason
                state.attempts = 0
                state.failuresSinceSuccess.attempts += 1
                state.failuresSinceSuccess.failed += 1
                if wasFailing { return nil }
                let what = reason.hasPrefix("TLS") ? "an export failed" : "the receiver refused an export"
                return ("--otlp-endpoint \(shownEndpoint): \(what): \(reason); it is not sent again", .error)
            }
        }
        if let (text, level) = line { log(text, level: level) }
        if droppedFirst { logQueueFull() }
    }
}
