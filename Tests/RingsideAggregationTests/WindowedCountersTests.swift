import Testing
@testable import RingsideAggregation

@Suite("WindowedCounter and WindowedGauge")
struct WindowedCountersTests {
    static let second: UInt64 = 1_000_000_000
    static let millisecond: UInt64 = 1_000_000

    @Test(
        "a steady counter's rate over every window is its rate per second",
        arguments: [
            (increment: 1, endMillis: 120_000), (increment: 7, endMillis: 120_130),
            (increment: 1000, endMillis: 95_999),
        ])
    func steadyCounterRate(increment: UInt64, endMillis: UInt64) {
        var counter = WindowedCounter()
        for millis in 0...endMillis { counter.add(increment, atNanos: millis * Self.millisecond) }
        let now = endMillis * Self.millisecond
        let perSecond = 1000 * Double(increment)
        for window in 0..<3 {
            let covered = Double(counter.windows.coveredNanos(window: window, nowNanos: now)) / 1e9
            // The window holds every increment from its start through now: one more than covered * rate.
            #expect(abs(counter.rate(window: window, nowNanos: now) - perSecond) <= 1.01 * Double(increment) / covered)
        }
        #expect(counter.total == Double(endMillis + 1) * Double(increment))
    }

    @Test("a counter's total and windows are scaled by its sampling factor")
    func samplingFactorScales() {
        var counter = WindowedCounter(samplingFactor: 10)
        for step in 0..<100 { counter.add(3, atNanos: 50 * Self.second + UInt64(step) * Self.millisecond) }
        #expect(counter.total == 3000)
        #expect(counter.sum(window: 0, nowNanos: 50 * Self.second + Self.second / 2) == 3000)
    }

    @Test("a counter's window forgets old increments; its total and longer windows keep them")
    func counterWindowsForget() {
        var counter = WindowedCounter()
        counter.add(5, atNanos: 10 * Self.second)
        counter.add(2, atNanos: 12 * Self.second)
        let now = 12 * Self.second + Self.second / 2
        #expect(counter.sum(window: 0, nowNanos: now) == 2)
        #expect(counter.sum(window: 1, nowNanos: now) == 7)
        #expect(counter.sum(window: 2, nowNanos: now) == 7)
        #expect(counter.sum(window: 2, nowNanos: 200 * Self.second) == 0)
        #expect(counter.total == 7)
    }

    @Test("a new counter's rate does not count time before its first increment")
    func rateStartsAtFirstIncrement() {
        var counter = WindowedCounter()
        counter.add(100, atNanos: 100 * Self.second)
        #expect(counter.rate(window: 2, nowNanos: 100 * Self.second + Self.second / 2) == 200)
        #expect(WindowedCounter().rate(window: 0, nowNanos: 5 * Self.second) == 0)
    }

    @Test("a gauge reports its last value and each window's min and max")
    func gaugeLastMinMax() {
        var gauge = WindowedGauge()
        #expect(gauge.last == nil && gauge.range(window: 0, nowNanos: 0) == nil)
        gauge.set(5, atNanos: 1 * Self.second)
        gauge.set(100, atNanos: 1 * Self.second + 100 * Self.millisecond)
        gauge.set(-3, atNanos: 1 * Self.second + 200 * Self.millisecond)
        gauge.set(7, atNanos: 10 * Self.second)
        let now = 10 * Self.second + 100 * Self.millisecond
        #expect(gauge.last == 7)
        #expect(gauge.range(window: 0, nowNanos: now)! == (7, 7))
        #expect(gauge.range(window: 1, nowNanos: now)! == (7, 7))
        #expect(gauge.range(window: 2, nowNanos: now)! == (-3, 100))
        #expect(gauge.allTimeRange! == (-3, 100))
        #expect(gauge.range(window: 2, nowNanos: 100 * Self.second) == nil)
    }

    @Test("a late gauge value updates its windows but not last, and NaN is ignored")
    func lateGaugeValue() {
        var gauge = WindowedGauge()
        gauge.set(1, atNanos: 20 * Self.second)
        gauge.set(-50, atNanos: 20 * Self.second - 300 * Self.millisecond)
        gauge.set(.nan, atNanos: 21 * Self.second)
        #expect(gauge.last == 1 && gauge.lastNanos == 20 * Self.second)
        #expect(gauge.range(window: 0, nowNanos: 20 * Self.second)! == (-50, 1))
        #expect(gauge.allTimeRange! == (-50, 1))
    }
}
