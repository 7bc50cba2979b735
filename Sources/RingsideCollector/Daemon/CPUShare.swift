/// Keeps a thread to `fraction` of a core over time: the CPU time it may spend accrues with wall
/// time, up to `burstNanos`; each round spends what it took, and a thread in debt pauses until the
/// debt is paid. A thread that the scheduler already holds back (a busy host) accrues its share
/// meanwhile, and is not held back twice.
struct CPUShare {
    let fraction: Double
    let burstNanos: Double
    private var credit: Double
    private var lastNanos: UInt64

    init(fraction: Double, burstNanos: UInt64, nowNanos now: UInt64) {
        self.fraction = fraction
        self.burstNanos = Double(burstNanos)
        credit = Double(burstNanos)
        lastNanos = now
    }

    /// Spends `spent` nanoseconds of CPU time at `now`; returns how long to pause (0: none).
    mutating func pause(spent: UInt64, nowNanos now: UInt64) -> UInt64 {
        credit = min(burstNanos, credit + Double(now &- min(now, lastNanos)) * fraction) - Double(spent)
        lastNanos = now
        return credit >= 0 ? 0 : UInt64(-credit / fraction)
    }
}
