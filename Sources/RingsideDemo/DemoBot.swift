import Ringside
#if canImport(Glibc)
import Glibc
#endif

/// A synthetic trading bot, written against the public producer API as a user's bot would be:
/// lognormal order-fill latencies per symbol with bursts, order and fill counters, a gauge.
/// `ringside-collector --demo` runs it as a separate process.
public enum DemoBot {
    static let symbols = ["AAPL", "MSFT", "NVDA", "TSLA"]

    /// Runs until the parent process goes away (or a signal ends it).
    /// - Parameters:
    ///   - ring: the ring's name; `directory`: the ring directory (nil: the default).
    ///   - eventsPerSecond: order events a second, spread over the symbols.
    public static func run(ring name: String, directory: String?, eventsPerSecond: Int = 20_000) throws(RingError) {
        let ring = try Ring.attach(name, directory: directory)
        var fills: [Ring.Histogram] = []
        for symbol in symbols {
            fills.append(try ring.histogram("order_fill_latency", unit: .nanoseconds, labels: ["symbol": symbol],
                                            help: "Time from order sent to fill, per symbol"))
        }
        let marketData = try ring.histogram("market_data_latency", unit: .nanoseconds,
                                            help: "Time from exchange timestamp to strategy handling", sampleEvery: 4)
        let buys = try ring.counter("orders", labels: ["side": "buy"], help: "Orders sent")
        let sells = try ring.counter("orders", labels: ["side": "sell"], help: "Orders sent")
        let exposure = try ring.gauge("gross_exposure", help: "Gross exposure in dollars")
        let loop = try ring.histogram("strategy_loop", unit: .nanoseconds, help: "One strategy iteration, timed as a span")

        var random = SplitMix(seed: UInt64(getpid()))
        let parent = getppid()
        let batch = max(1, eventsPerSecond / 1000) // events per millisecond
        var tick: UInt64 = 0
        var grossExposure = 1.0e6
        while getppid() == parent {
            // Every 7 s, 600 ms of trouble: fills slow down five-fold.
            let burst = tick % 7000 < 600 ? 5.0 : 1.0
            loop.measure {
                for event in 0..<batch {
                    let symbol = event % symbols.count
                    // Lognormal around 40 us (NVDA and TSLA slower), with a heavy tail.
                    let median = [40_000.0, 35_000.0, 60_000.0, 80_000.0][symbol] * burst
                    fills[symbol].record(UInt64(median * random.lognormal(sigma: 0.6)))
                    marketData.record(UInt64(3_000 * random.lognormal(sigma: 0.4)))
                    if random.next() % 2 == 0 { buys.increment() } else { sells.increment() }
                }
                grossExposure = max(0, grossExposure + (Double(random.next() % 20_001) - 10_000))
                exposure.set(grossExposure)
            }
            tick += 1
            usleep(1000)
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
