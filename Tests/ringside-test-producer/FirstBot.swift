import Ringside

/// `ringside-test-producer first-bot`: the README's first Swift bot, line for line between the
/// markers (FirstBotTests checks that and what it writes), in `$RINGSIDE_DIR`.
func firstBot() throws {
    let elapsedNanos: UInt64 = 1234
    func sendOrder() throws {}
    // README begin
    let bot = try Telemetry.attach("bot-a")          // /dev/shm/ringside.bot-a; share it with every thread
    let fill = try bot.histogram("order_fill_latency", unit: .nanoseconds, labels: ["symbol": "AAPL"])
    let orders = try bot.counter("orders")
    let exposure = try bot.gauge("gross_exposure")

    fill.record(elapsedNanos)                        // any thread or task: a few ns, never blocks or throws
    try fill.measure { try sendOrder() }             // a span, on the monotonic clock (await works too)
    orders.increment()                               // exact, even when the thread's lane is full
    exposure.set(1.25e6)
    // README end
}
