import RingsideSystem
import CRingside
import Synchronization

/// Where captures are asked for, from any thread: the drain thread's triggers (SLOs, bounds, bots
/// that die or stop) and the HTTP server's `POST /api/capture`. It applies the rate limit at
/// once, so a request is answered accepted or suppressed when it is made, and hands what it
/// accepted to the drain thread's `Capturer`, which alone reads the recorder.
package final class CaptureDesk: Sendable {
    /// A capture accepted, for the `Capturer` to take.
    struct Request: Sendable {
        let id: UInt64
        let trigger: CaptureTrigger
        /// The bots it holds; nil: every bot.
        let bots: Set<String>?
        /// When it was asked for, on CLOCK_MONOTONIC and the wall clock.
        let atNanos: UInt64
        let atRealtimeNanos: UInt64
    }

    /// What a request is answered.
    package enum Answer: Sendable, Equatable {
        /// Accepted: its id, written once its `after` seconds have passed.
        case accepted(id: UInt64)
        /// Its trigger made a capture less than `--capture-min-interval` ago: counted, not made.
        case suppressed(retryAfterNanos: UInt64)
        /// `maxInFlight` captures are being made: counted as suppressed, not made.
        case busy
    }

    /// Captures accepted and not yet written, at most: each holds its span's records (chunks the
    /// recorder may have let go of, which stay in memory while a capture holds them).
    static let maxInFlight = 4

    let minIntervalNanos: UInt64
    private struct State {
        var nextID: UInt64 = 1
        var lastAccepted: [String: UInt64] = [:]
        var accepted: [Request] = []
        var suppressed: [String: UInt64] = [:]
        var inFlight = 0
    }
    private let state = Locked(State())

    init(minIntervalNanos: UInt64) {
        self.minIntervalNanos = minIntervalNanos
    }

    /// Asks for a capture of `bots` (nil: all) by `trigger` at `now` (CLOCK_MONOTONIC).
    func submit(_ trigger: CaptureTrigger, bots: Set<String>? = nil, nowNanos now: UInt64) -> Answer {
        let realtimeNanos = rs_clock_realtime_ns()
        return state.withLock { state in
            if let last = state.lastAccepted[trigger.key], now &- last < minIntervalNanos {
                state.suppressed[trigger.kind, default: 0] += 1
                return .suppressed(retryAfterNanos: minIntervalNanos - (now &- last))
            }
            guard state.inFlight < Self.maxInFlight else {
                state.suppressed[trigger.kind, default: 0] += 1
                return .busy
            }
            state.inFlight += 1
            state.lastAccepted[trigger.key] = now
            let id = state.nextID
            state.nextID += 1
            state.accepted.append(Request(id: id, trigger: trigger, bots: bots, atNanos: now, atRealtimeNanos: realtimeNanos))
            return .accepted(id: id)
        }
    }

    /// Says that `count` captures accepted were written, or failed: room for as many more.
    func finished(_ count: Int) {
        state.withLock { $0.inFlight -= count }
    }

    /// The requests accepted since the last call, and the suppressed counts by trigger kind.
    func take() -> (requests: [Request], suppressed: [String: UInt64]) {
        state.withLock { state in
            defer { state.accepted.removeAll() }
            return (state.accepted, state.suppressed)
        }
    }
}
