import CRingside
import Ringside

/// The bots the rings write, by name: a bot's own ring and its workers' feed one series, made
/// when the bot's first ring comes (seeded with what the directory's state kept of its gone
/// workers) and gone with its last. It knows what the series cost, the room the series caps
/// leave a bot, and how often idle rings' cells may be sampled.
///
/// Touched by the drain thread only.
final class BotRoster {
    private(set) var bots: [String: BotSeries] = [:]
    /// CLOCK_REALTIME when the collector was made: counters of bots made before count in totals only.
    let startedRealtimeNanos = rs_clock_realtime_ns()
    /// Makes a bot's aggregator (its windows, quantiles and page estimate, as the daemon set them).
    private let makeAggregator: (_ bot: String) -> BotAggregator
    /// What the directory's state keeps of each bot (its gone workers' totals, its histograms).
    private let state: CollectorState
    /// The series caps: `--max-series-per-ring`, `--max-series`, `--max-series-bytes`.
    private let caps: (perBot: Int, series: Int, bytes: Int)
    /// Every bot's series and their memory, for the caps.
    private var tally = SeriesUsageTally()
    /// What sampling rings' cells costs, to space the samples of those with no sign of change.
    var cellSamplingPace = CellSamplingPace()

    init(options: CollectorOptions, state: CollectorState, makeAggregator: @escaping (_ bot: String) -> BotAggregator) {
        self.makeAggregator = makeAggregator
        self.state = state
        caps = (options.maxSeriesPerRing, options.maxSeries, options.maxSeriesBytes)
    }

    /// A pass begins: the series' memory is counted afresh when first asked.
    func passBegins() { tally.passBegins() }

    /// The series of the bot ring `name` writes, made when its first ring comes.
    func series(writtenBy name: String) -> BotSeries {
        let bot = WorkerRing.botName(ofRing: name)
        if let series = bots[bot] {
            if WorkerRing(name) != nil { series.keepsHistograms = true }
            return series
        }
        let series = BotSeries(name: bot, aggregator: makeAggregator(bot))
        state.botCame(bot)
        series.aggregator.seed(state.foldedTotals(for: bot))
        let kept = state.histograms(for: bot)
        series.aggregator.seedHistograms(kept)
        series.keepsHistograms = WorkerRing(name) != nil || !kept.isEmpty
        bots[bot] = series
        return series
    }

    /// `bot` lost its last ring: its series go. A bot with workers keeps its all-time histograms
    /// in the state, for its series when a file of it comes again.
    func letGo(_ bot: BotSeries) {
        guard bot.rings == 0, bots[bot.name] === bot else { return }
        if bot.keepsHistograms { state.keepHistograms(bot.aggregator.allTimeHistograms, for: bot.name) }
        bots[bot.name] = nil
        state.botWent(bot.name)
    }

    /// The all-time histograms of the bots with workers, kept in the state when the collector stops.
    var keptHistograms: [String: [CollectorState.HistogramEntry]] {
        bots.filter { $0.value.keepsHistograms }.mapValues(\.aggregator.allTimeHistograms)
    }

    /// The room the caps leave `bot`, holding `held`: `--max-series-per-ring` for the bot
    /// (its rings and workers together), `--max-series` and `--max-series-bytes` for the
    /// collector. Metrics past it are refused, counted and exported. Series are admitted up to
    /// 3/4 of the memory budget: the rest is kept for what grows after admission (histograms'
    /// counts, refused metrics' descriptors) and for the allocator's slack and pages written at once
    /// on two threads (admitted up to 7/8, the peak passed the budget by 5 % on a loaded CI
    /// machine).
    func allowance(for bot: BotSeries, holding held: BotAggregator.Usage) -> BotAggregator.Usage {
        let others = tally.others(than: bot, holding: held, among: bots.values)
        return BotAggregator.Usage(
            series: max(0, min(caps.perBot - held.series, caps.series - others.series - held.series)),
            bytes: max(0, caps.bytes / 4 * 3 - others.bytes - held.bytes))
    }

    /// The series of every bot, and the memory they take.
    func usage() -> BotAggregator.Usage {
        var total = BotAggregator.Usage()
        for bot in bots.values {
            let usage = bot.aggregator.usage
            total.series += usage.series
            total.bytes += usage.bytes
        }
        return total
    }
}
