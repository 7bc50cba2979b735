import RingsideSnapshot
import Ringside

/// The series of one bot, shared by the rings that write it (its own file and its workers',
/// `<bot>@<pid>`), each a source of its aggregator; and what the publisher keeps about them.
/// Touched by the drain thread only.
final class BotSeries {
    /// The bot's name: `WorkerRing`'s `bot` for a worker's ring.
    let name: String
    var aggregator: BotAggregator
    /// Rings tracked or released that feed it: when the last is forgotten, so is the bot.
    var rings = 0
    /// Something changed since the last publish (records drained, cells or registry changed).
    var changedSincePublish = true
    /// The series it showed last, while nothing changes: what the next publish shows again.
    var shown: Shown?
    /// A worker's ring fed it this run, or it took what an earlier run kept: its all-time
    /// histograms are kept across restarts (a bot of one process starts them again, as before).
    var keepsHistograms = false
    /// Its store in the flight recorder, once it recorded (the recorder's own, kept here to
    /// spare a look-up per drain).
    var recording: BotRecording?

    init(name: String, aggregator: BotAggregator) {
        self.name = name
        self.aggregator = aggregator
    }

    /// The series a bot showed, and until when they show the same if nothing is recorded (the
    /// earliest time one of their figures moves, `BotAggregator.seriesUnchangedUntilNanos`;
    /// `.max` when every window is empty); and its series that publish left out, their first figures not made
    /// (see `PendingPublish.mayShowFirst`). Quiet: every window empty, none left out.
    struct Shown {
        let series: [SeriesSnapshot]
        let untilNanos: UInt64
        var awaitingFigures = 0
        var isQuiet: Bool { untilNanos == .max && awaitingFigures == 0 }
    }
}
