import Ringside

/// `ringside-test-producer first-bot`: the README's first Swift bot, line for line between the
/// markers (FirstBotTests checks that and what it writes), in `$RINGSIDE_DIR`.
func firstBot() throws {
    let elapsedNanos: UInt64 = 1234
    func sendOrder() throws {}
    // README begin
    struct Metrics {  // every metric registered at start-up: exported
        let fill: Bot.Histogram  // (a counter at 0) before its first use
        let slippage: Bot.Histogram
        let orders: Bot.Counter
        let exposure: Bot.Gauge

        init(_ bot: Bot) throws {
            fill = try bot.histogram("order_fill_latency", unit: .nanoseconds, labels: ["symbol": "AAPL"])
            slippage = try bot.histogram("slippage_bps", resolution: 0.01, signed: true)  // basis points to 0.01
            orders = try bot.counter("orders")
            exposure = try bot.gauge("gross_exposure")
        }
    }
    let metrics = try Metrics(Bot.attach("bot-a"))  // /dev/shm/ringside.bot-a; Sendable: share it with every thread

    metrics.fill.record(elapsedNanos)  // any thread or task: a few ns, never blocks or throws
    try metrics.fill.measure { try sendOrder() }  // a span, on the TSC where it serves (await works too)
    metrics.slippage.record(-3.5)  // a fill 3.5 bps better than the quote: -350 hundredths
    metrics.orders.increment()  // exact, even when the thread's lane is full
    metrics.exposure.set(1.25e6)
    // README end
}
