import CRingside
import Glibc
import RingsideCommandLine
import Synchronization

/// `POST /-/reload`'s requests (with `--web-enable-lifecycle`), answered by the daemon's loop,
/// which reloads as it does at SIGHUP: a request raises SIGHUP and waits for the reload that
/// began after it, then answers with its outcome. Safe from any thread.
package final class ReloadRequests: Sendable {
    private struct State {
        /// Requests made, and those a finished reload answered (it began after them).
        var asked: UInt64 = 0
        var answered: UInt64 = 0
        var outcome = ReloadOutcome(succeeded: true, message: "")
    }

    private let state = Mutex(State())

    package init() {}

    /// Asks for a reload and waits for it, at most `timeoutNanos`; nil when none came in time.
    package func ask(timeoutNanos: UInt64 = 10_000_000_000) -> ReloadOutcome? {
        let ticket = state.withLock { state in
            state.asked += 1
            return state.asked
        }
        _ = kill(getpid(), SIGHUP)  // the daemon's loop waits for it (every thread blocks it)
        let deadline = rs_clock_precise_ns() &+ timeoutNanos
        while rs_clock_precise_ns() < deadline {
            if let outcome = state.withLock({ $0.answered >= ticket ? $0.outcome : nil }) { return outcome }
            usleep(10_000)
        }
        return nil
    }

    /// The requests a reload beginning now answers (the daemon's loop, at SIGHUP).
    func begin() -> UInt64 { state.withLock { $0.asked } }

    /// Answers the requests up to `ticket` with a reload's outcome.
    func finish(upTo ticket: UInt64, _ outcome: ReloadOutcome) {
        state.withLock { state in
            state.answered = max(state.answered, ticket)
            state.outcome = outcome
        }
    }
}

/// What a reload did: applied (with what changed, and what waits for the next start), or refused
/// (why, the running configuration kept).
package struct ReloadOutcome: Sendable, Equatable {
    package var succeeded: Bool
    package var message: String
}

/// What a reload changes while the collector runs, and what only a start can change.
enum ReloadPlan {
    /// The flags whose change only a new start takes: they shape the rings' reading and the
    /// series' windows, which a reload keeps as they are.
    static func startOnlyChanges(from old: CollectorOptions, to new: CollectorOptions) -> [String] {
        var changed: [String] = []
        if old.directory != new.directory { changed.append("--dir") }
        if old.rings != new.rings { changed.append("--ring") }
        if old.windowNanos != new.windowNanos { changed.append("--windows") }
        if old.allowedUIDs != new.allowedUIDs { changed.append("--allow-uid") }
        if old.pollNanos != new.pollNanos { changed.append("--poll") }
        if old.maxSeries != new.maxSeries || old.maxSeriesPerRing != new.maxSeriesPerRing || old.maxSeriesBytes != new.maxSeriesBytes {
            changed.append("--max-series*")
        }
        if old.nativeHistogramSchema != new.nativeHistogramSchema { changed.append("--native-histograms") }
        if old.historySeconds != new.historySeconds || old.historyMaxSeries != new.historyMaxSeries { changed.append("--history*") }
        if old.threadSampleIntervalNanos != new.threadSampleIntervalNanos { changed.append("--thread-sample-interval") }
        if old.recorderNanos != new.recorderNanos || old.recorderMaxBytes != new.recorderMaxBytes { changed.append("--recorder-*") }
        if old.captureDirectory != new.captureDirectory || old.captureAfterNanos != new.captureAfterNanos
            || old.captureMinIntervalNanos != new.captureMinIntervalNanos || old.captureMaxRecords != new.captureMaxRecords
            || old.captureBounds != new.captureBounds
        {
            changed.append("--capture-*")
        }
        if old.logFormat != new.logFormat { changed.append("--log-format") }
        if old.reloadEndpoint != new.reloadEndpoint { changed.append("--web-enable-lifecycle") }
        if old.stateMaxBytes != new.stateMaxBytes || old.stateExpirySeconds != new.stateExpirySeconds { changed.append("--state-*") }
        return changed
    }

    /// `new` with the start-only settings of `running`: what the collector runs with after a
    /// reload (the start-only ones wait for the next start, and a later reload names them again).
    static func effective(_ new: CollectorOptions, running: CollectorOptions) -> CollectorOptions {
        var effective = new
        effective.directory = running.directory
        effective.rings = running.rings
        effective.windowNanos = running.windowNanos
        effective.allowedUIDs = running.allowedUIDs
        effective.pollNanos = running.pollNanos
        effective.maxSeries = running.maxSeries
        effective.maxSeriesPerRing = running.maxSeriesPerRing
        effective.maxSeriesBytes = running.maxSeriesBytes
        effective.nativeHistogramSchema = running.nativeHistogramSchema
        effective.historySeconds = running.historySeconds
        effective.historyMaxSeries = running.historyMaxSeries
        effective.threadSampleIntervalNanos = running.threadSampleIntervalNanos
        effective.recorderNanos = running.recorderNanos
        effective.recorderMaxBytes = running.recorderMaxBytes
        effective.captureDirectory = running.captureDirectory
        effective.captureAfterNanos = running.captureAfterNanos
        effective.captureMinIntervalNanos = running.captureMinIntervalNanos
        effective.captureMaxRecords = running.captureMaxRecords
        effective.captureBounds = running.captureBounds
        effective.logFormat = running.logFormat
        effective.reloadEndpoint = running.reloadEndpoint
        effective.stateMaxBytes = running.stateMaxBytes
        effective.stateExpirySeconds = running.stateExpirySeconds
        return effective
    }
}
