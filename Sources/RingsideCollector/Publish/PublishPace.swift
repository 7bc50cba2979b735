/// When the publisher last began a snapshot, what building it took, and so how long until the
/// next may begin.
struct PublishPace {
    /// How often a snapshot is wanted at most, however many series change: its figures are then
    /// at most a second old.
    static let wantedSpacingNanos: UInt64 = 1_000_000_000

    /// When the last snapshot was begun (CLOCK_MONOTONIC; 0: none yet).
    var begunNanos: UInt64 = 0
    /// The drain thread's time the last one took to build (its slices), and the time from its
    /// beginning to its publishing (the passes between the slices too).
    var costNanos: UInt64 = 0
    var wallNanos: UInt64 = 0

    /// Notes the snapshot begun at `begunNanos` published at `now`, its slices costing `cost`.
    mutating func published(nowNanos now: UInt64, costNanos cost: UInt64) {
        costNanos = cost
        wallNanos = now > begunNanos ? now - begunNanos : 0
    }

    /// The spacing that keeps publishing to a tenth of the drain thread's time while that is
    /// under a second apart (a publish takes a few microseconds for a few series, tens of
    /// milliseconds for 10,000 busy ones: the CPU that scrapes need); past that, the next is begun
    /// so that it is published when the last is a second old (a second less the last one's
    /// building: its figures then never over a second old, where beginning every second left them
    /// up to a second and a build old), and one after the other when a build takes longer (a
    /// million busy series: every change is seen as soon as the drain thread can show it).
    /// Slices of a publish alternate with drain passes, so the rings are drained meanwhile at any
    /// spacing.
    var spacingNanos: UInt64 {
        let beforeASecond = Self.wantedSpacingNanos > wallNanos ? Self.wantedSpacingNanos - wallNanos : 0
        return max(min(10 * costNanos, beforeASecond), costNanos)
    }
}
