import CRingside

// Retiring a series (RETIRING A SERIES in ringside.h), as prometheus_client's `remove()`: a
// delisted symbol's series leaves the collector's pages, and registering it again brings it back.

extension BotMetric {
    /// Retires the series: the collector drops it from every page at its next look at the bot's
    /// cells (within about a second) and lets go of what it kept of it. Registering the same name
    /// and labels again revives it, the same entry, as a new series (a counter from zero); calls
    /// through this handle meanwhile are dropped by the collector, counted as refused. Takes the
    /// registration lock: not for the hot path.
    func retire() {
        // RS_E_INVALID only for a metric another bot registered: never a handle's own.
        _ = rs_bot_retire(bot, metric, nil)
    }
}

extension Bot.Counter {
    /// Retires the series (see `BotMetric.retire`): `bot.counter(name, labels:)` again revives it.
    public func retire() { target.retire() }
}

extension Bot.Gauge {
    /// Retires the series and forgets its value (see `BotMetric.retire`).
    public func retire() { target.retire() }
}

extension Bot.Histogram {
    /// Retires the series (see `BotMetric.retire`).
    public func retire() { target.retire() }
}
