import Testing

@testable import RingsideCollector

@Suite("The pace of looks at idle rings' cells: once a second, spaced to a tenth of the drain thread beyond")
struct CellSamplingPaceTests {
    @Test("once a second while a look at every ring is cheap, and ten times what it costs beyond")
    func intervalFollowsCost() {
        var pace = CellSamplingPace()
        #expect(pace.intervalNanos(metrics: 1_000_000) == DrainTiming.livenessIntervalNanos, "nothing measured yet")
        pace.note(nanos: 4_000_000, metrics: 4_000)  // a microsecond a metric
        #expect(pace.nanosPerMetric == 1_000)
        #expect(pace.intervalNanos(metrics: 10_000) == DrainTiming.livenessIntervalNanos, "10 ms a round: once a second")
        #expect(pace.intervalNanos(metrics: 1_000_000) == 10_000_000_000, "a second a round: every 10 s")
        #expect(pace.intervalNanos(metrics: .max) == 3_600_000_000_000, "at most an hour, never an overflow")
    }

    @Test("a look's cost is smoothed: one slow look moves it a fifth of the way; a ring of no metrics is not counted")
    func costSmoothed() {
        var pace = CellSamplingPace()
        pace.note(nanos: 1_000, metrics: 1)
        pace.note(nanos: 6_000, metrics: 1)
        #expect(pace.nanosPerMetric == 2_000)
        pace.note(nanos: 5_000_000, metrics: 0)
        #expect(pace.nanosPerMetric == 2_000)
    }
}
