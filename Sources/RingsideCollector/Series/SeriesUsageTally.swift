/// Every bot's series and the memory they take, summed, for the series caps: before a ring's
/// metrics are admitted the tracker asks what the other bots hold, and summing them at each ask
/// was quadratic (3,000 short-lived bots adopted in a few passes: half the drain thread).
///
/// Summed at the first ask of a pass (what a bot holds grows between passes as its histograms
/// fill), then kept up to date: a bot admits what it will between its ask and the next one, so
/// at each ask the bot that asked before is counted again. The series counts stay exact; the
/// memory of bots that did not ask is as of the pass's first ask.
struct SeriesUsageTally {
    typealias Usage = BotAggregator.Usage

    private var total: Usage?
    /// What `total` holds of each bot.
    private var counted: [ObjectIdentifier: Usage] = [:]
    /// The bot that asked last (counted again at the next ask).
    private var lastAsking: BotSeries?

    /// At a pass's start: the next ask sums every bot again. A pass that asked nothing left
    /// nothing to forget (the drain loop calls this every pass).
    mutating func passBegins() {
        guard total != nil else { return }
        total = nil
        counted.removeAll(keepingCapacity: true)
        lastAsking = nil
    }

    /// What the bots other than `bot` hold, `bot` holding `held`. `bot`'s aggregator is not read
    /// (the caller may be mutating it), nor is any other bot's being mutated: one asks at a time.
    mutating func others(than bot: BotSeries, holding held: Usage, among bots: some Collection<BotSeries>) -> Usage {
        var sum: Usage
        if let total {
            sum = total
            if let last = lastAsking, last !== bot { count(last, holding: last.aggregator.usage, in: &sum) }
        } else {
            sum = Usage()
            for other in bots where other !== bot { count(other, holding: other.aggregator.usage, in: &sum) }
        }
        count(bot, holding: held, in: &sum)
        total = sum
        lastAsking = bot
        return Usage(series: sum.series - held.series, bytes: sum.bytes - held.bytes)
    }

    /// Counts `bot` in `sum` as holding `usage`, in place of what it was counted as.
    private mutating func count(_ bot: BotSeries, holding usage: Usage, in sum: inout Usage) {
        let before = counted.updateValue(usage, forKey: ObjectIdentifier(bot)) ?? Usage()
        sum.series += usage.series - before.series
        sum.bytes += usage.bytes - before.bytes
    }
}
