import RingsideSystem
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

    private let state = Locked(State())

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
    /// The settings only a new start changes, each with the flag that sets it (as the option
    /// table declares them): they shape the rings' reading and the series' windows, which a reload
    /// keeps as they are.
    static var startOnly: [StartOnlySetting] { CollectorOption.all.flatMap(\.startOnly) }

    /// The flags of the start-only settings that differ from `old` in `new`, each named once.
    static func startOnlyChanges(from old: CollectorOptions, to new: CollectorOptions) -> [String] {
        var changed: [String] = []
        for setting in startOnly where setting.differs(old, new) && !changed.contains(setting.flag) {
            changed.append(setting.flag)
        }
        return changed
    }

    /// `new` with the start-only settings of `running`: what the collector runs with after a
    /// reload (the start-only ones wait for the next start, and a later reload names them again).
    static func effective(_ new: CollectorOptions, running: CollectorOptions) -> CollectorOptions {
        var effective = new
        for setting in startOnly { setting.keep(&effective, running) }
        return effective
    }
}

/// A setting a reload does not change, and the flag that sets it.
struct StartOnlySetting {
    let flag: String
    /// Whether the setting differs between two configurations.
    let differs: (CollectorOptions, CollectorOptions) -> Bool
    /// Sets the first configuration's setting to the second's.
    let keep: (inout CollectorOptions, CollectorOptions) -> Void

    init<Value: Equatable>(_ flag: String, _ setting: WritableKeyPath<CollectorOptions, Value>) {
        self.flag = flag
        differs = { $0[keyPath: setting] != $1[keyPath: setting] }
        keep = { $0[keyPath: setting] = $1[keyPath: setting] }
    }
}
