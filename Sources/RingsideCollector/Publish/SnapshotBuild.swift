import RingsideSnapshot

/// A snapshot being built, some rings each pass: with hundreds of thousands of series a
/// snapshot takes seconds, and the rings must be drained meanwhile. First the rings (their
/// figures, cells and registries), then their bots' series, in name order (a bot's series once,
/// whichever rings feed it).
struct SnapshotBuild<Ring: AnyObject> {
    var snapshot: Snapshot
    /// The rings as they were when it began.
    let rings: [Ring]
    private var nextRingIndex = 0
    private(set) var bots: [BotSeries] = []
    private var nextBotIndex = 0
    /// What each ring is shown with (`SeriesFeed.show`): forced (at stop, or a test stepping
    /// time), the cells' sampling interval taken when it began.
    let showing: RingShowing
    var everyRingQuiet = true
    var costNanos: UInt64 = 0
    /// Series whose windows' slices were let go (idle) while it was built.
    var windowsLetGo = 0
    var newSeries: NewSeriesBudget

    init(snapshot: Snapshot, rings: [Ring], showing: RingShowing) {
        self.snapshot = snapshot
        self.rings = rings
        self.showing = showing
        newSeries = NewSeriesBudget(forced: showing.forced)
    }

    /// Whether every ring is in (its bots' series come next).
    var ringsDone: Bool { nextRingIndex >= rings.count }
    /// Whether every ring and bot is in: it can be published.
    var isComplete: Bool { ringsDone && nextBotIndex >= bots.count }

    /// The next ring to show, if any is left.
    mutating func nextRing() -> Ring? {
        guard nextRingIndex < rings.count else { return nil }
        defer { nextRingIndex += 1 }
        return rings[nextRingIndex]
    }

    /// Takes the bots to show, once every ring is in.
    mutating func showBots(_ bots: [BotSeries]) { self.bots = bots }

    /// The next bot whose series to add, if any is left.
    mutating func nextBot() -> BotSeries? {
        guard ringsDone, nextBotIndex < bots.count else { return nil }
        defer { nextBotIndex += 1 }
        return bots[nextBotIndex]
    }
}

/// A snapshot spends at most `newSeriesNanos` (an option) admitting metrics new in its rings'
/// registries, and at most that making new series' first figures (every window made: many
/// times what a series that only slid costs); past it, new series wait for the next snapshot
/// and registries for their ring's next sample, and a record naming a metric admits it as it is
/// drained. A million series registered at once cost seconds to admit and to show:
/// `awaitingFigures` counts those waiting. Each snapshot admits at least one ring's and shows
/// at least one bot's new series, in order, so each is shown in turn; a forced one (at stop, or
/// a test stepping time) shows all.
struct NewSeriesBudget {
    let forced: Bool
    /// The drain thread's time spent admitting metrics new in the rings' registries, and the
    /// rings that had some.
    private var admittingNanos: UInt64 = 0
    private var ringsAdmitting = 0
    /// Its time making new series' first figures, and the bots that had some.
    private var firstFiguresNanos: UInt64 = 0
    private var botsShowingFirst = 0
    /// The series left out, for the next snapshot.
    private(set) var awaitingFigures = 0
    /// A ring's registry went unread, the time spent: a next snapshot is due, which reads it
    /// if the ring's sample is due then (else at its next, as `CellSamplingPace` allows).
    private(set) var registriesUnread = false

    init(forced: Bool) { self.forced = forced }

    func mayAdmit(within budget: UInt64) -> Bool { forced || ringsAdmitting == 0 || admittingNanos < budget }
    func mayShowFirst(within budget: UInt64) -> Bool { forced || botsShowingFirst == 0 || firstFiguresNanos < budget }

    /// A ring was shown, `admitting` or not, and admitted `added` metrics in `nanos`.
    mutating func shownRing(admitting: Bool, added: Int, nanos: UInt64) {
        registriesUnread = registriesUnread || !admitting
        guard added > 0 else { return }
        admittingNanos &+= nanos
        ringsAdmitting += 1
    }

    /// A bot's series were made, `shownFirst` of them new, in `nanos`; `leftOut` wait.
    mutating func madeSeries(shownFirst: Int, nanos: UInt64, leftOut: Int) {
        if shownFirst > 0 {
            firstFiguresNanos &+= nanos
            botsShowingFirst += 1
        }
        awaitingFigures += leftOut
    }
}
