import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

/// An actor a test holds for a while with a synchronous sleep, as a job that never suspends would.
private actor Desk {
    func hold(milliseconds: UInt32) { usleep(milliseconds * 1000) }
}

/// The lags recorded in ring `name` so far (its only histogram is the probe's), appended to `lags`.
private func drainLags(_ consumer: RingConsumer, into lags: inout [UInt64]) throws {
    lags += try drainAll(consumer).map(\.record).filter { $0.kind == UInt8(RS_KIND_HISTOGRAM.rawValue) }.map(\.value)
}

/// Drains ring `consumer` into `lags` every 10 ms, for up to 10 s, until `done` says so; never
/// blocks a thread of the pool the probe runs on.
private func drainLags(_ consumer: RingConsumer, into lags: inout [UInt64], until done: ([UInt64]) -> Bool) async throws -> Bool {
    for _ in 0..<1000 {
        try drainLags(consumer, into: &lags)
        if done(lags) { return true }
        try await Task.sleep(for: .milliseconds(10))
    }
    return false
}

@Suite("The executor lag probe: how late Swift concurrency runs what is due")
struct ExecutorLagTests {
    @Test("an actor held for 60 ms shows the probe due meanwhile at least 50 ms late")
    func anActorHeld() async throws {
        try await withRingDirectory { directory in
            let bot = try Bot.attach("lag", directory: directory.path)
            let desk = Desk()
            let probe = try bot.instrumentExecutorLag(every: .milliseconds(10), name: "desk", on: desk)
            defer { probe.stop() }
            let consumer = try RingConsumer("lag", directory: directory)
            var lags: [UInt64] = []
            // The probe has run: from now on, its next due time is at most 10 ms after its last run.
            #expect(try await drainLags(consumer, into: &lags) { !$0.isEmpty })
            // Held for 60 ms from B: the probe ran last at or before B, so it was due by B + 10 ms
            // and runs at B + 60 ms or later.
            await desk.hold(milliseconds: 60)
            let before = lags.count
            #expect(try await drainLags(consumer, into: &lags) { $0.count > before })
            #expect((lags.max() ?? 0) >= 50_000_000, "largest lag \(lags.max() ?? 0) ns")
        }
    }

    @Test("on the global executor it records into swift_executor_lag{executor=...}, and stop() ends it")
    func globalExecutorAndStop() async throws {
        try await withRingDirectory { directory in
            let bot = try Bot.attach("lag", directory: directory.path)
            let probe = try bot.instrumentExecutorLag(every: .milliseconds(5), name: "pool")
            let consumer = try RingConsumer("lag", directory: directory)
            var lags: [UInt64] = []
            #expect(try await drainLags(consumer, into: &lags) { $0.count >= 3 })
            let metric = try #require(RingInspector("lag", directory: directory).metrics().first)
            #expect(metric.name == Bot.executorLagMetric && metric.kind == .histogram && metric.unit == .nanoseconds)
            #expect(metric.labels.map { "\($0.key)=\($0.value)" } == ["executor=pool"])

            probe.stop()
            await probe.waitUntilStopped()
            try drainLags(consumer, into: &lags)
            let stopped = lags.count
            try await Task.sleep(for: .milliseconds(30))  // six intervals: a running probe would record
            try drainLags(consumer, into: &lags)
            #expect(lags.count == stopped)
        }
    }

    @Test("an interval under 1 ms is refused with a clear error")
    func shortInterval() throws {
        try withBot("lag") { directory, bot in
            #expect {
                _ = try bot.instrumentExecutorLag(every: .microseconds(500))
            } throws: { error in
                "\(error)".contains("at least 1 ms")
            }
        }
    }
}
