import Foundation
import Ringside
#if canImport(Glibc)
import Glibc
#endif

/// A synthetic trading bot, written against the package producer API as a user's bot would be,
/// and shaped like one: a market-data thread, a strategy thread, and order handling as tasks in
/// a `TaskGroup`, all recording into one bot (each thread into its own lane). Lognormal
/// order-fill latencies per symbol with bursts, order and fill counters, a gauge.
/// `ringside-collector --demo` runs it as a separate process. Like a user's bot, it cannot see
/// the package's system-call layer: it sleeps with Foundation's `Thread.sleep`. SIGUSR1 slows
/// its fills for a while (`SlowFills`), an incident to capture.
package enum DemoBot {
    static let symbols = ["AAPL", "MSFT", "NVDA", "TSLA"]

    /// The bot's metrics: `Sendable` handles shared by every thread and task.
    struct Metrics: Sendable {
        let fills: [Bot.Histogram]
        let marketData: Bot.Histogram
        let quotes: Bot.Counter
        let buys: Bot.Counter
        let sells: Bot.Counter
        let filled: Bot.Counter
        let exposure: Bot.Gauge
        let loop: Bot.Histogram
        let roundTrip: Bot.Histogram

        init(_ bot: Bot) throws(RingError) {
            var fills: [Bot.Histogram] = []
            for symbol in DemoBot.symbols {
                fills.append(
                    try bot.histogram(
                        "order_fill_latency", unit: .nanoseconds, labels: ["symbol": symbol],
                        help: "Time from order sent to fill, per symbol"))
            }
            self.fills = fills
            marketData = try bot.histogram(
                "market_data_latency", unit: .nanoseconds,
                help: "Time from exchange timestamp to strategy handling", sampleEvery: 4)
            quotes = try bot.counter("quotes", help: "Market data updates handled")
            buys = try bot.counter("orders", labels: ["side": "buy"], help: "Orders sent")
            sells = try bot.counter("orders", labels: ["side": "sell"], help: "Orders sent")
            filled = try bot.counter("fills", help: "Orders filled")
            exposure = try bot.gauge("gross_exposure", help: "Gross exposure in dollars")
            loop = try bot.histogram("strategy_loop", unit: .nanoseconds, help: "One strategy iteration, timed as a span")
            roundTrip = try bot.histogram(
                "order_task", unit: .nanoseconds,
                help: "One order's handling task, timed as an async span")
        }
    }

    /// Orders the strategy sends in one millisecond, for the order handlers.
    struct OrderBatch: Sendable {
        let tick: UInt64
        let symbols: [Int]
    }

    /// Runs until the parent process goes away (or a signal ends it).
    /// - Parameters:
    ///   - ring: the bot's name; `directory`: the ring directory (nil: the default).
    ///   - eventsPerSecond: order events a second, spread over the symbols.
    package static func run(ring name: String, directory: String?, eventsPerSecond: Int = 20_000) throws(RingError) {
        SlowFills.install()  // before the bot shows: once its series do, the switch works
        let bot = try Bot.attach(name, directory: directory)
        let metrics = try Metrics(bot)
        let parent = getppid()
        let batch = max(1, eventsPerSecond / 1000)  // events per millisecond
        let (orders, sender) = AsyncStream.makeStream(of: OrderBatch.self, bufferingPolicy: .bufferingNewest(1_000))

        let marketData = Thread {
            try? bot.nameThread("market-data")
            var random = SplitMix(seed: UInt64(getpid()) &* 31)
            while getppid() == parent {
                for _ in 0..<(batch * 2) {
                    metrics.marketData.record(UInt64(3_000 * random.lognormal(sigma: 0.4)))
                    metrics.quotes.increment()
                }
                Thread.sleep(forTimeInterval: 0.001)
            }
        }
        marketData.name = "market-data"
        marketData.start()

        let strategy = Thread {
            try? bot.nameThread("strategy")
            var random = SplitMix(seed: UInt64(getpid()))
            var tick: UInt64 = 0
            var grossExposure = 1.0e6
            while getppid() == parent {
                metrics.loop.measure {
                    var symbols: [Int] = []
                    for event in 0..<batch {
                        symbols.append(event % DemoBot.symbols.count)
                        if random.next() % 2 == 0 { metrics.buys.increment() } else { metrics.sells.increment() }
                    }
                    sender.yield(OrderBatch(tick: tick, symbols: symbols))
                    grossExposure = max(0, grossExposure + (Double(random.next() % 20_001) - 10_000))
                    metrics.exposure.set(grossExposure)
                }
                tick += 1
                Thread.sleep(forTimeInterval: 0.001)
            }
            sender.finish()
        }
        strategy.name = "strategy"
        strategy.start()

        // Order handling: a task per batch in a TaskGroup, on Swift's cooperative pool.
        let handling = Task.detached {
            await withTaskGroup(of: Void.self) { group in
                var inFlight = 0
                for await orderBatch in orders {
                    if inFlight >= 8 {
                        await group.next()
                        inFlight -= 1
                    }
                    inFlight += 1
                    group.addTask { await handle(orderBatch, metrics: metrics) }
                }
            }
        }
        while getppid() == parent { Thread.sleep(forTimeInterval: 0.1) }
        handling.cancel()
    }

    /// Handles one batch of orders: their fills, as an exchange would answer them.
    static func handle(_ batch: OrderBatch, metrics: Metrics) async {
        await metrics.roundTrip.measure {
            var random = SplitMix(seed: batch.tick &* 0x9E37_79B9)
            // Every 7 s, 600 ms of trouble: fills slow down five-fold.
            let burst = batch.tick % 7000 < 600 ? 5.0 : 1.0
            let slowed = SlowFills.isOn
            for symbol in batch.symbols {
                // Lognormal around 40 us (NVDA and TSLA slower), with a heavy tail; slowed by the
                // switch, exactly SlowFills.factor times the median.
                let median = [40_000.0, 35_000.0, 60_000.0, 80_000.0][symbol]
                // Each fill names its order: the live page's slowest fills say which they were.
                let order = try? Bot.Exemplar("order_id", "\(batch.tick)-\(DemoBot.symbols[symbol])")
                let fill = UInt64(slowed ? median * SlowFills.factor : median * burst * random.lognormal(sigma: 0.6))
                if let order { metrics.fills[symbol].record(fill, exemplar: order) } else { metrics.fills[symbol].record(fill) }
                metrics.filled.increment()
                await Task.yield()  // the order's task may resume on another thread: its lane then
            }
        }
    }
}

/// A small seeded generator with the lognormal draw the demo needs.
struct SplitMix {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// exp(N(0, sigma)): a lognormal factor with median 1 (Box-Muller).
    mutating func lognormal(sigma: Double) -> Double {
        let u1 = max(Double(next() >> 11) / Double(1 << 53), .leastNonzeroMagnitude)
        let u2 = Double(next() >> 11) / Double(1 << 53)
        let normal = (-2 * log(u1)).squareRoot() * cos(2 * .pi * u2)
        return exp(sigma * normal)
    }
}
