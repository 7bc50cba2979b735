import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The demo's test switch, an incident on demand: `kill -USR1 PID` (the demo bot's pid, which
/// the demo shows) slows its fills for `seconds` from then; `kill -USR2 PID` ends it at once.
/// While slowed, each fill takes exactly `factor` times its symbol's median, no randomness, so
/// that the slow records are known: in a capture they are the slices of those durations.
enum SlowFills {
    static let seconds: UInt64 = 5
    static let factor = 100.0

    /// Until when (CLOCK_MONOTONIC) the fills are slow; 0: not slowed. The signal handlers' only
    /// work is a store here (lock-free, so safe in a handler).
    private static let untilNanos = Atomic<UInt64>(0)

    /// Installs the handlers. First, before any thread is started: a static's first use runs its
    /// initializer, which a handler must not be the one to run.
    static func install() {
        untilNanos.store(0, ordering: .relaxed)
        signal(SIGUSR1) { _ in SlowFills.untilNanos.store(SlowFills.nowNanos() + SlowFills.seconds * 1_000_000_000, ordering: .relaxed) }
        signal(SIGUSR2) { _ in SlowFills.untilNanos.store(0, ordering: .relaxed) }
    }

    /// Whether a fill now is slowed.
    static var isOn: Bool { nowNanos() < untilNanos.load(ordering: .relaxed) }

    /// CLOCK_MONOTONIC in nanoseconds (`clock_gettime` may be called in a handler).
    private static func nowNanos() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
