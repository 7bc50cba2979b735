import CRingside
import Ringside
@testable import RingsideCollector
import RingsideTrace
import Testing

private let second: UInt64 = 1_000_000_000

@Suite("captures: the desk's rate limit and bound in flight; bounds and the SLO option")
struct CaptureTests {
    @Test("a trigger makes one capture per interval, each trigger on its own; the rest are counted as suppressed")
    func rateLimitPerTrigger() {
        let desk = CaptureDesk(minIntervalNanos: 60 * second)
        let now = 1_000 * second
        #expect(desk.submit(.request, nowNanos: now) == .accepted(id: 1))
        #expect(desk.submit(.request, nowNanos: now + 10 * second) == .suppressed(retryAfterNanos: 50 * second))
        #expect(desk.submit(.botDied("a"), nowNanos: now + 10 * second) == .accepted(id: 2))
        #expect(desk.submit(.botDied("b"), nowNanos: now + 10 * second) == .accepted(id: 3))
        #expect(desk.submit(.botDied("a"), nowNanos: now + 20 * second) == .suppressed(retryAfterNanos: 50 * second))
        desk.finished(3)
        #expect(desk.submit(.request, nowNanos: now + 60 * second) == .accepted(id: 4))
        let taken = desk.take()
        #expect(taken.requests.map(\.id) == [1, 2, 3, 4])
        #expect(taken.suppressed == ["request": 1, "bot_died": 1])
        #expect(desk.take().requests.isEmpty)
    }

    @Test("at most four captures are made at once: a fifth is answered busy and counted, and room comes back as they finish")
    func inFlightBound() {
        let desk = CaptureDesk(minIntervalNanos: second)
        let now = 1_000 * second
        for bot in 0..<CaptureDesk.maxInFlight {
            guard case .accepted = desk.submit(.botStopped("\(bot)"), nowNanos: now) else {
                Issue.record("capture \(bot) refused")
                return
            }
        }
        #expect(desk.submit(.request, nowNanos: now) == .busy)
        desk.finished(1)
        #expect(desk.submit(.request, nowNanos: now) == .accepted(id: UInt64(CaptureDesk.maxInFlight) + 1))
        #expect(desk.take().suppressed == ["request": 1])
    }

    @Test("bounds and the SLO option parse; what is wrong is said")
    func parsing() throws {
        let bound = try CaptureBound(parsing: "order_fill_latency{symbol=\"AAPL\"}>5ms")
        #expect(bound.selector.metric == "order_fill_latency" && bound.selector.labels == ["symbol": "AAPL"])
        #expect(bound.threshold(in: .microseconds) == 5_000 && bound.threshold(in: .bytes) == nil)
        #expect(try CaptureBound(parsing: "queue_depth>1000").threshold(in: .none) == 1_000)
        #expect(throws: SLORule.ParseError.self) { try CaptureBound(parsing: "order_fill_latency<5ms") }
        #expect(throws: SLORule.ParseError.self) { try CaptureBound(parsing: "order_fill_latency>fast") }
        #expect(try SLORule(parsing: "lat:p99<1ms@1m capture severity=P0").capture)
        #expect(try !SLORule(parsing: "lat:p99<1ms@1m").capture)
    }
}
