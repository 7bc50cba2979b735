/// The drain's timing and pass bounds, in one place: what each bounds, and why it is what it is.
/// The discovery thread's own are `RingDiscovery`'s, the publisher's `SnapshotPublisher`'s and
/// `PublishPace`'s.
enum DrainTiming {
    // MARK: - A pass

    /// The time a pass may spend on the rings before it yields to the next pass, which begins again
    /// with the rings that cost least: however many rings flood the drain, a light one waits at
    /// most about this long (and one ring's drain: `passRecordLimit` records) for its turn.
    static let passBudgetNanos: UInt64 = 2_000_000
    /// Records one pass takes from one ring at most, shared by its lanes: a ring with a huge
    /// backlog (left by an outage, or faked) is caught up over several passes, each of which
    /// visits every other ring first (a pass that drained anything is followed by another at once).
    static let passRecordLimit = 65_536
    /// Records a visit takes from each lane of a ring not proven, or suspect: its records may be
    /// mostly invalid (and slow to refuse), so it is learnt from small visits.
    static let unprovenLaneRecordLimit = 1_024
    /// Unproven rings that a pass serves with the proven ones (see `DrainScheduler.serviceOrder`).
    static let probesPerPass = 4
    /// Rings adopted in one pass at most (each reads its registry and cells), and at most for
    /// `CollectorOptions.adoptionNanos` (at least one): thousands of bots found at once are taken
    /// up over several passes, the rings drained between.
    static let adoptionsPerPass = 64
    /// Passes cut short for this long (the drain is overloaded) publish all the same.
    static let overloadedPublishNanos: UInt64 = 1_000_000_000

    // MARK: - Sleeping between passes

    /// The least sleep between passes, however fast a lane fills: a lane that fills faster
    /// than this drops whatever the collector does, and the loop must not spin.
    static let minimumSleepNanos: UInt64 = 250_000
    /// The drain sets doorbells only once it drained nothing for this long (or for what its
    /// parts ask, if less): a producer that writes all along is drained at its lanes' pace, as
    /// without doorbells. Ringing at each of its bursts (1,000 a second, `ringside-bench collector
    /// --row live`) cost the drain thread 17 % of a core at 1 M records/s against 5 %; a record
    /// after a quiet spell still rings.
    static let doorbellQuietNanos: UInt64 = 5_000_000
    /// Nor while a lane fills so fast that the drain comes back within this anyway (its sleep a
    /// quarter of the soonest fill): 1 M records a second into 65,536-record lanes asks 16 ms.
    static let doorbellBusyPaceNanos: UInt64 = 50_000_000
    /// How often the drain reads again which producers ring (each file's `rings_doorbell`, a load
    /// from its header page): read at every sleep, 2,000 bots that ring none cost a third of the
    /// idle drain thread. A producer that starts or stops ringing is seen within this, or at once
    /// when the rings watched change; until then it is drained at the drain's next wake, as any
    /// ring is (the poll, or `watchedSleepNanos` with every ring watched).
    static let doorbellRingersNanos: UInt64 = 1_000_000_000
    /// The longest sleep while every ring the drain holds is watched by a doorbell (none left to
    /// the poll; `--poll` if longer): a record, an increment or a gauge wakes the drain at once,
    /// so it wakes on its own only for what no producer rings: the liveness round and lanes added
    /// (each second), and its progress, which `/health` calls stalled past twice this
    /// (`stallNanos`). Waking every `--poll` (100 ms) over 2,000 idle bots took 0.5 to 0.8 % of a core.
    static let watchedSleepNanos: UInt64 = 1_000_000_000
    /// How long a doorbell stays settled at most (see `LaneWatch+Doorbells.swift`): then it is
    /// set anew and its lanes looked at, so that a word another writer of the file stored 1 in
    /// after its producer rang hides that file's records for this long at most.
    static let settledLookNanos: UInt64 = 10_000_000_000
    /// The drain loop counts as stalled when its last pass is older than this (`/health`,
    /// `/-/ready`): two of its longest sleeps, or ten polls.
    static func stallNanos(pollNanos: UInt64) -> UInt64 { max(2 * watchedSleepNanos, 10 * pollNanos) }
    /// For this long after a bot is attached, the drain loop sleeps at most `newRingSleepNanos`,
    /// and looks for the bot's new lanes every pass.
    static let newRingNanos: UInt64 = 1_000_000_000
    static let newRingSleepNanos: UInt64 = 5_000_000
    /// A lane's fill rate is taken over a span of at least this that drained any (`FillRate`),
    /// and kept this long after its last records: a producer the scheduler held back for a moment
    /// (a paced one then writes all it owes at once) finds the loop still waking at its pace.
    static let fillRateSpanNanos: UInt64 = 50_000_000
    static let fillRateHoldNanos: UInt64 = 1_000_000_000

    // MARK: - Looks at rings and producers

    /// How often a ring's producer liveness is asked of the kernel (a system call per ring, and a
    /// read of /proc per process: whether it is stopped), by how lately it recorded: see
    /// `TrackedRing.livenessInterval`. A producer that exits closes its file, which inotify
    /// reports at once, so an idle ring is asked only every 30 s (whether its process is
    /// stopped, and in case an event was lost): thousands of idle bots cost little. Also how
    /// often a quiet ring's cells are read.
    static let livenessIntervalNanos: UInt64 = 1_000_000_000
    static let activeLivenessIntervalNanos: UInt64 = 250_000_000
    static let idleLivenessIntervalNanos: UInt64 = 30_000_000_000
    /// A ring that recorded this recently is asked each second (a bot stopped within 10 s of
    /// its last record is seen stopped within a second), however quiet it is now.
    static let recentNanos: UInt64 = 10_000_000_000
    /// A read is due this much early: a ring read late in one round (a pass cut short) is still
    /// due in the next, not one round later.
    static let livenessSlackNanos: UInt64 = 50_000_000
    /// A ring where nothing moved has its status read again this often all the same.
    static let quietStatusNanos: UInt64 = 10_000_000_000
    /// How long one reading of a process's state (stopped or not, `/proc/PID/stat`) serves
    /// every bot of it.
    static let processStateValidNanos: UInt64 = 500_000_000
    /// Without an inotify event, every ring is checked for new lanes this often (discovery
    /// checks their files for removal or replacement as often).
    static let identityCheckNanos: UInt64 = 30_000_000_000
    /// How soon to try again a ring that could not be read.
    static let unreadableRetryNanos: UInt64 = 5_000_000_000
    /// A ring whose file was opened this recently is not released: the opener may be a producer
    /// between its open (the event, already seen) and its lock (none), which would go unnoticed.
    static let releaseGraceNanos: UInt64 = 1_000_000_000

    // MARK: - Rings that write garbage

    /// The half-life of a ring's recent drain cost (`DrainAccount.recentCost`): its share of the
    /// drain thread over about a second.
    static let costHalfLifeNanos: Double = 1e9
    /// The span over which a ring's invalid records are counted (`DrainAccount`).
    static let invalidSpanNanos: UInt64 = 1_000_000_000
    /// How long a ring that wrote an invalid record is served after the clean ones.
    static let suspectNanos: UInt64 = 10_000_000_000
    /// The first quarantine's length; each one that follows the last without a clean span between
    /// them is twice as long, up to `longestQuarantineNanos`.
    static let quarantineNanos: UInt64 = 5_000_000_000
    static let longestQuarantineNanos: UInt64 = 60_000_000_000

    // MARK: - What is shown

    /// The least time between two log lines about drops (or rejections) of one ring.
    static let dropLogIntervalNanos: UInt64 = 10_000_000_000
    /// The drain's gaps are kept over this window (`DrainGaps`), and since the start.
    static let gapWindowNanos: UInt64 = 60_000_000_000
}
