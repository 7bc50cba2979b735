/// The state's bound (`--state-max-bytes`) as the drain thread keeps it: what the bots' figures
/// take in a snapshot, which no fold may push past the bound. A snapshot then always holds every
/// bot's figures within what a collector reads back; the all-time histograms take the room left
/// (`StateSnapshotWriter`). A fold that would not fit is refused: its worker's file is kept, its
/// totals in it, and it is tried again as other refused folds are (see `RingTracker.retire`).
struct StateRoom {
    /// The most bytes of one state file a collector reads.
    let limit: Int
    /// What the bots' figures take in a snapshot, its frame included (`StateSnapshotWriter`).
    private(set) var bytes = StateSnapshotWriter.frameBytes
    /// Folds refused for room, since the start (a worker's fold tried again counts again).
    private(set) var refused: UInt64 = 0
    /// A refusal was logged, and no fold that grew the figures was taken since.
    private(set) var loggedFull = false

    init(limit: Int) { self.limit = limit }

    /// Measures what `content`'s figures take.
    mutating func measure(_ content: StateContent) { bytes = StateSnapshotWriter.frameBytes + content.totalsBytes }

    /// Whether the figures would still fit, grown by `growth` bytes.
    func fits(growth: Int) -> Bool { growth <= 0 || bytes + growth <= limit }

    /// Whether the figures take more than the bound (read from files of a larger one).
    var isOver: Bool { bytes > limit }

    /// The figures grew by `growth` bytes (shrank, when negative). Returns whether the refusals
    /// logged end now (a fold that grew them was taken).
    mutating func grew(by growth: Int) -> Bool {
        bytes += growth
        guard loggedFull, growth > 0 else { return false }
        loggedFull = false
        return true
    }

    /// A fold was refused for room; returns whether to log it (the first since folds fit).
    mutating func refuse() -> Bool {
        refused += 1
        defer { loggedFull = true }
        return !loggedFull
    }
}
