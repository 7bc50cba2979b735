#if canImport(Glibc)
import Glibc
#endif

/// One ring's drain over time: what draining it cost the drain thread lately, and how many of
/// its records were invalid. The drain loop serves rings by it (see `DrainScheduler.serviceOrder`):
/// rings that cost little come first in every pass, rings that wrote invalid records lately come
/// after every clean one, and a ring whose records are mostly invalid over a span is quarantined.
///
/// Judged over time, not per pass, so that no way of slicing the garbage (a little in each pass,
/// a valid record among a few invalid ones) escapes it; a sound producer never writes an invalid
/// record (a record naming a metric registered since the last look is looked up again, not
/// rejected), so the thresholds cost an honest bot nothing.
struct DrainAccount {
    /// What a span (`DrainTiming.invalidSpanNanos`) must hold to quarantine its ring: this many
    /// invalid records, and this share of its records.
    static let quarantineMinimumInvalid = 128
    static let quarantineInvalidShare = 0.1

    /// Nanoseconds of draining, decayed with `DrainTiming.costHalfLifeNanos`, as of `costNanosAt`.
    private var cost: Double = 0, costNanosAt: UInt64 = 0
    /// A span of draining: when it began, its records, and the invalid ones among them.
    private struct Span {
        var start: UInt64 = 0
        var records = 0
        var invalid = 0
    }
    private var span = Span()
    private var suspectUntilNanos: UInt64 = 0
    /// Quarantines since the last clean span.
    private var strikes = 0
    /// Valid records drained, ever.
    private var validRecords: UInt64 = 0

    /// The drain time it cost lately (decayed nanoseconds): the smaller, the sooner it is served.
    func recentCost(nowNanos now: UInt64) -> Double {
        guard cost > 0 else { return 0 }
        return cost * Self.decay(over: now &- costNanosAt)
    }

    /// Whether it has proven itself a producer of valid records: `provenRecords` of them drained.
    /// Until then its drains are small and it is served after the proven rings (see
    /// `DrainScheduler.serviceOrder`): a ring that wrote one valid record and then floods must not go
    /// first because its history is cheap.
    var isProven: Bool { validRecords >= Self.provenRecords }
    static let provenRecords: UInt64 = 4_096

    /// Whether it wrote an invalid record in the last `suspectNanos`.
    func isSuspect(nowNanos now: UInt64) -> Bool { now < suspectUntilNanos }

    /// Counts one drain: its time, its records and the invalid ones. Returns a quarantine (its
    /// length and why) when the span's records are mostly invalid.
    mutating func charge(
        costNanos: UInt64, records: Int, invalid: Int, nowNanos now: UInt64
    )
        -> (nanos: UInt64, reason: String)?
    {
        cost = recentCost(nowNanos: now) + Double(costNanos)
        costNanosAt = now
        if now &- span.start >= DrainTiming.invalidSpanNanos {
            if span.records > 0, span.invalid == 0 { strikes = 0 }  // a clean span forgives
            span = Span(start: now)
        }
        validRecords &+= UInt64(max(0, records - invalid))
        span.records += records
        span.invalid += invalid
        if invalid > 0 { suspectUntilNanos = now &+ DrainTiming.suspectNanos }
        guard span.invalid >= Self.quarantineMinimumInvalid,
            Double(span.invalid) >= Self.quarantineInvalidShare * Double(span.records)
        else { return nil }
        let nanos = min(DrainTiming.quarantineNanos << UInt64(min(strikes, 8)), DrainTiming.longestQuarantineNanos)
        strikes += 1
        let seconds = Double((now &- span.start) / 1_000_000) / 1e3
        let reason =
            "quarantined for \(nanos / 1_000_000_000) s: \(span.invalid) of the \(span.records) records drained "
            + "in the last \(seconds) s were invalid (unknown metric, kind or sequence)"
        span = Span(start: now)
        return (nanos, reason)
    }

    /// The share of a cost left after `nanos`.
    private static func decay(over nanos: UInt64) -> Double {
        nanos == 0 ? 1 : exp2(-Double(nanos) / DrainTiming.costHalfLifeNanos)
    }
}
