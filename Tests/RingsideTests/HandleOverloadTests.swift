import CRingside
@testable import Ringside
import RingsideTestSupport
import Testing

@Suite("Handles: Duration and BinaryInteger overloads, clamped, read back from the ring")
struct HandleOverloadTests {
    @Test("durations in microseconds and plain units, integers of every width: converted and clamped")
    func microsecondsAndIntegers() throws {
        try withBot("overloads", options: .init(laneCapacity: 64)) { directory, bot in
            let micros = try bot.histogram("micros", unit: .microseconds)
            let plain = try bot.histogram("plain")
            let orders = try bot.counter("orders")
            let level = try bot.gauge("level")
            micros.record(Duration.milliseconds(3))  // 3,000 us
            micros.record(Duration.nanoseconds(2_999))  // rounded down: 2 us
            micros.record(Duration.seconds(-1))  // negative: 0
            micros.record(Duration.seconds(Int64.max))  // too long for UInt64 us: max
            plain.record(Duration.microseconds(5))  // not a time unit: nanoseconds
            plain.record(-7)  // Int, negative: 0
            plain.record(Int8(42))
            plain.record(UInt64.max)
            plain.record(Int64.max)
            orders.increment(by: 5)  // Int
            orders.increment(by: Int16(-3))  // negative: adds nothing
            orders.increment(by: UInt8(2))
            level.set(-12)  // Int: a gauge holds any Double
            let consumer = try RingConsumer("overloads", directory: directory)
            let values = try drainAll(consumer).map(\.record).filter { $0.kind == MetricKind.histogram.rawValue }.map(\.value)
            #expect(values == [3_000, 2, 0, .max, 5_000, 0, 42, .max, UInt64(Int64.max)])
            #expect(consumer.cells(of: consumer.metrics[2]).total == 7)
            #expect(consumer.cells(of: consumer.metrics[3]).lastValue == -12)
        }
    }

    @Test("durations in milliseconds and seconds, a span, extreme integers: converted and clamped")
    func millisecondsSecondsAndSpans() throws {
        try withBot("overloads", options: .init(laneCapacity: 64)) { directory, bot in
            let millis = try bot.histogram("millis", unit: .milliseconds)
            let seconds = try bot.histogram("seconds", unit: .seconds)
            let orders = try bot.counter("orders")
            let level = try bot.gauge("level")
            millis.record(Duration.seconds(2) + .microseconds(1_500))  // 2,001.5 ms: 2,001
            millis.record(Duration.nanoseconds(-1))  // negative: 0
            seconds.record(Duration.milliseconds(2_500))  // 2 s
            seconds.record(Duration.seconds(Int64.max))  // fits in seconds
            millis.record(-1)
            orders.increment(by: Int.min)  // negative: adds nothing
            orders.increment(by: 40)
            level.set(UInt64.max)
            let timing = millis.startTiming()
            timing.stop()  // well under a millisecond: 0
            bot.releaseCurrentThreadLane()
            let consumer = try RingConsumer("overloads", directory: directory)
            let records = try drainAll(consumer).map(\.record).filter { $0.kind == MetricKind.histogram.rawValue }
            #expect(records.map(\.value) == [2_001, 0, 2, UInt64(Int64.max), 0, 0])
            #expect(records.last?.flags == UInt8(RS_FLAG_SPAN))
            #expect(consumer.cells(of: consumer.metrics[2]).total == 40)
            #expect(consumer.cells(of: consumer.metrics[3]).lastValue == Double(UInt64.max))
        }
    }
}
