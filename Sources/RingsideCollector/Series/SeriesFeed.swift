import RingsideSnapshot

/// What the publisher reads of the rings that feed the bots' series: the rings one at a time
/// (each shown with its figures, its cells and registry read when due), the bots to show and to
/// judge, and what the series cost. Declared here, on the series' side of the road, so that the
/// publisher names nothing of the drain; the drain's `RingTracker` offers it, and reading rings'
/// cells stays the drain's business.
protocol SeriesFeed: AnyObject {
    /// A ring feeding a bot's series, as the feed knows it.
    associatedtype Ring: AnyObject

    /// The rings drained and those released, in name order.
    var everyRing: [Ring] { get }

    /// Whether `ring` still feeds its bot (it was not let go of since it was listed).
    func holds(_ ring: Ring) -> Bool

    /// The bots `rings` feed, in name order, each once; not one whose files found at the start
    /// are not all taken up yet (its totals would read low).
    func botsToShow(of rings: [Ring]) -> [BotSeries]

    /// Every bot to judge SLOs on (the same rule), in name order, and whether every file found at
    /// the start is taken up.
    func botsToJudge() -> (bots: [BotSeries], startSettled: Bool)

    /// The files discovery refused, as it last showed them.
    var refusedFiles: [RingSnapshot] { get }

    /// How long a ring's cells may go unseen when nothing says they moved.
    func cellSampleIntervalNanos() -> UInt64

    /// `ring` as a snapshot shows it: its figures read again if records moved, its cells and
    /// registry read when due (see `RingShowing`); marks its records drained as published.
    func show(_ ring: Ring, nowNanos now: UInt64, _ showing: RingShowing) -> ShownRing

    /// The memory every bot's series take, and the series that reached a ceiling.
    func seriesFigures() -> (bytes: Int, saturated: Int)
}

/// What a snapshot asks when it shows a ring.
struct RingShowing {
    /// Read its cells now, quiet or not (a stop, a test stepping time).
    var forced = false
    /// How long its cells may go unseen when nothing says they moved (taken once a snapshot).
    var cellSampleNanos: UInt64 = 0
    /// Admit the metrics new in its registry (not once the snapshot spent its time admitting).
    var admitting = true
}

/// A ring as a snapshot shows it: its row, whether it is quiet (nothing drained since the last
/// publish, every window of its bot empty, no cell changed) and the metrics it admitted.
struct ShownRing {
    let snapshot: RingSnapshot
    let quiet: Bool
    let added: Int
}
