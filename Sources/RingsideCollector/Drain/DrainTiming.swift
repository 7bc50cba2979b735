/// The drain's timing and pass bounds, in one place: what each bounds, and why it is what it is.
/// The discovery thread's own are `RingDiscovery`'s, the publisher's `SnapshotPublisher`'s and
/// `PublishPace`'s.
enum DrainTiming {
    // MARK: - A pass

    /// The time a pass may spend on the rings before it yields to the next pass, which begins again
    /// with the rings that cost least: however many rings flood the drain, a light one waits at
    /// most about this long (and one ring's drain: `passRecordLimit` records) for its turn.
    /// Producers are told it too (`drain_interval_ns`): a lane that would fill before then samples
    /// its histograms. 300 rings writing one valid record in eight made passes of 79 to 143 ms and
    /// cost a paced neighbour 57 to 62 % of its records; with this budget, the order and the
    /// quarantine, it lost none of 120,020 (`QuarantineEvasionTests`).
    static let passBudgetNanos: UInt64 = 2_000_000
    /// Records one pass takes from one ring at most, shared by its lanes: a ring with a huge
    /// backlog (left by an outage, or faked) is caught up over several passes, each of which
    /// visits every other ring first (a pass that drained anything is followed by another at once).
    /// 65,536: a whole default lane.
    static let passRecordLimit = 65_536
    /// Records a visit takes from each lane of a ring not proven, or suspect: its records may be
    /// mostly invalid (and slow to refuse), so it is learnt from small visits. A ring of one lane
    /// is proven (4,096 valid records) in four visits at best.
    static let unprovenLaneRecordLimit = 1_024
    /// Unproven rings that a pass serves with the proven ones (see `DrainScheduler.serviceOrder`),
    /// the newest first: up to four bots new at once are drained at once, however many wait.
    static let probesPerPass = 4
    /// Rings adopted in one pass at most (each reads its registry and cells), and at most for
    /// `CollectorOptions.adoptionNanos` (at least one): thousands of bots found at once are taken
    /// up over several passes, the rings drained between. The count alone is not enough: 64 bots
    /// of 4,000 metrics found at once made a pass of about a second.
    static let adoptionsPerPass = 64
    /// Passes cut short for this long (the drain is overloaded) publish all the same: a snapshot
    /// waits at most a second of passes cut short for one that reaches every ring.
    static let overloadedPublishNanos: UInt64 = 1_000_000_000

    // MARK: - Sleeping between passes

    /// The least sleep between passes, however fast a lane fills: a lane that fills faster
    /// than this drops whatever the collector does, and the loop must not spin. The loop sleeps a
    /// quarter of the soonest fill, at least this: 2 M records a second into 4,096 slots (a lane
    /// that fills in 2 ms) lost 0.04 to 0.17 % of them, against 7.9 to 9 % with sleeps in whole ms.
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
    /// idle drain thread (`idle.2000bots.poll`: the drain 0.82 and 0.87 % of a core; read each
    /// second, 0.58 and 0.65 %). A producer that starts or stops ringing is seen within this, or
    /// at once when the rings watched change; until then it is drained at the drain's next wake,
    /// as any ring is (the poll, or `watchedSleepNanos` with every ring watched).
    static let doorbellRingersNanos: UInt64 = 1_000_000_000
    /// The longest sleep while every ring the drain holds is watched by a doorbell (none left to
    /// the poll; `--poll` if longer): a record, an increment or a gauge wakes the drain at once,
    /// so it wakes on its own only for what no producer rings: the liveness round and lanes added
    /// (each second), and its progress, which `/health` calls stalled past twice this
    /// (`stallNanos`). Over 2,000 idle bots, 127 watched and the rest polled (a wake each `--poll`,
    /// 100 ms), the drain took 0.64 to 0.82 % of a core; all watched, 0.21 to 0.26 %.
    static let watchedSleepNanos: UInt64 = 1_000_000_000
    /// How long a doorbell stays settled at most (see `LaneWatch+Doorbells.swift`): then it is
    /// set anew and its lanes looked at, so that a word another writer of the file stored 1 in
    /// after its producer rang hides that file's records for this long at most
    /// (`DoorbellTests.wholeLookReachesABusyDrain`).
    static let settledLookNanos: UInt64 = 10_000_000_000
    /// The drain loop counts as stalled when its last pass is older than this (`/health`,
    /// `/-/ready`): two of its longest sleeps, or ten polls.
    static func stallNanos(pollNanos: UInt64) -> UInt64 { max(2 * watchedSleepNanos, 10 * pollNanos) }
    /// For this long after a bot is attached, the drain loop sleeps at most `newRingSleepNanos`,
    /// and looks for the bot's new lanes every pass: its lanes come with its threads' first
    /// records, and it has no fill rate yet.
    static let newRingNanos: UInt64 = 1_000_000_000
    /// The longest sleep in a new bot's first `newRingNanos`: its first records wait about this
    /// long at most for the drain, not a poll (100 ms by default).
    static let newRingSleepNanos: UInt64 = 5_000_000
    /// A lane's fill rate is taken over a span of at least this that drained any (`FillRate`):
    /// a slower pace is taken within about this long (a faster one at once: the open span counts).
    static let fillRateSpanNanos: UInt64 = 50_000_000
    /// A lane's fill rate is kept this long after its last records: a producer the scheduler held
    /// back for a moment (a paced one then writes all it owes at once) finds the loop still waking
    /// at its pace. A lane quiet for longer is idle: the loop sleeps its poll, or under the doorbells.
    static let fillRateHoldNanos: UInt64 = 1_000_000_000

    // MARK: - Looks at rings and producers

    /// How often a ring's producer liveness is asked of the kernel (a system call per ring, and a
    /// read of /proc per process: whether it is stopped) when it recorded in the last 10 s, is
    /// stopped or dead, or without inotify: see `TrackedRing.livenessInterval`. Also how often
    /// the liveness round runs, a quiet ring's cells are read, and each file's lane count is read:
    /// a lane added unseen is drained within a second, not at its quiet bot's next look (36 bots'
    /// records waited 20 s so in a million-series burst).
    static let livenessIntervalNanos: UInt64 = 1_000_000_000
    /// The same for a ring that recorded in the last second, or whose file was opened or closed
    /// then: four times a second, so a producer that attaches, detaches or dies mid-stream is seen
    /// within a quarter of a second (its lock goes a moment after the close inotify reports).
    static let activeLivenessIntervalNanos: UInt64 = 250_000_000
    /// The same for an idle ring (no record in the last 10 s) while inotify watches: a producer
    /// that exits closes its file, which inotify reports at once (death seen 11 to 12 ms after a
    /// `kill -9`), so an idle ring is asked only whether its process is stopped, and in case an
    /// event was lost; a thirtieth of them each second. With this and a quiet snapshot every 10 s,
    /// 2,000 live idle bots cost 0.63 to 0.77 % of a core, against 1.6 to 4.3 % asked each second.
    static let idleLivenessIntervalNanos: UInt64 = 30_000_000_000
    /// A ring that recorded this recently is asked each second (a bot stopped within 10 s of
    /// its last record is seen stopped within a second), however quiet it is now.
    static let recentNanos: UInt64 = 10_000_000_000
    /// A read is due this much early: a ring read late in one round (a pass cut short) is still
    /// due in the next, not one round later. A twentieth of the round's second.
    static let livenessSlackNanos: UInt64 = 50_000_000
    /// A ring where nothing moved has its status read again this often all the same (and at
    /// once when its file was opened or closed since, or its producer's liveness changed).
    static let quietStatusNanos: UInt64 = 10_000_000_000
    /// How long one reading of a process's state (stopped or not, `/proc/PID/stat`) serves
    /// every bot of it: a process of many bots is read once a round, and afresh each second.
    static let processStateValidNanos: UInt64 = 500_000_000
    /// Without an inotify event, every ring is checked for new lanes this often (discovery
    /// checks their files for removal or replacement as often).
    static let identityCheckNanos: UInt64 = 30_000_000_000
    /// How soon to try again a ring that could not be read.
    static let unreadableRetryNanos: UInt64 = 5_000_000_000
    /// A ring whose file was opened this recently is not released: the opener may be a producer
    /// between its open (the event, already seen) and its lock (none), which would go unnoticed.
    /// Meanwhile its liveness is asked four times a second (`activeLivenessIntervalNanos`).
    static let releaseGraceNanos: UInt64 = 1_000_000_000

    // MARK: - Rings that write garbage

    /// The half-life of a ring's recent drain cost (`DrainAccount.recentCost`): its share of the
    /// drain thread over about a second.
    static let costHalfLifeNanos: Double = 1e9
    /// The span over which a ring's invalid records are counted (`DrainAccount`): judged over a
    /// span, not a pass, so no slicing escapes. 300 rings pushing 4,095 invalid records at a time
    /// (under a pass's minimum of 4,096) were never quarantined; judged over a second (128 and
    /// 10 %), all 300 are (`QuarantineEvasionTests`).
    static let invalidSpanNanos: UInt64 = 1_000_000_000
    /// How long a ring that wrote an invalid record is served after the clean ones: ten spans.
    static let suspectNanos: UInt64 = 10_000_000_000
    /// The first quarantine's length; each one that follows the last without a clean span between
    /// them is twice as long, up to `longestQuarantineNanos`. A lane faked 2^22 records ahead was
    /// quarantined twice in 6 s, and, with `passRecordLimit`, cost an honest neighbour none of
    /// 120,020 records, 580 without either (`HostileProducerTests`).
    static let quarantineNanos: UInt64 = 5_000_000_000
    /// The longest quarantine: 5, 10, 20, 40, then 60 s while a ring goes on writing garbage (a
    /// clean span between forgives).
    static let longestQuarantineNanos: UInt64 = 60_000_000_000

    // MARK: - What is shown

    /// The least time between two log lines about drops (or rejections) of one ring: six of
    /// each a minute at most.
    static let dropLogIntervalNanos: UInt64 = 10_000_000_000
    /// The drain's gaps are kept over this window (`DrainGaps`), and since the start.
    static let gapWindowNanos: UInt64 = 60_000_000_000
}
