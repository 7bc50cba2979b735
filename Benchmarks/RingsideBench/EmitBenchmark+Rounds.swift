import CRingside
import CRingsideBench
import Foundation
import Ringside
import RingsideAggregation
import RingsideCollector
import RingsideExport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
import RingsideJSON
import RingsideSystem

/// How `ringside-bench emit` times one round of a row: on which clock, by C loops or Swift ones, on
/// one thread or several.
extension EmitBenchmark {
    /// `body` with spans started on CLOCK_MONOTONIC, then the clock they started on before.
    static func onMonotonicSpans(_ body: () -> RoundSample) -> RoundSample {
        let clock = rs_span_clock()
        _ = rs_span_clock_select(RS_SPAN_CLOCK_MONOTONIC)
        defer { _ = rs_span_clock_select(clock) }
        return body()
    }

    /// One round of `c.span`: C's span (rs_bot_begin_span, rs_bot_end_span) timed by loops in C, as
    /// the floor's.
    static func cSpanRound(
        _ floor: inout rsb_floor, _ buffer: UnsafeMutableBufferPointer<UInt32>, _ timing: RoundTiming
    )
        -> RoundSample
    {
        _ = rsb_span_run(&floor, rs_clock_precise_ns() + timing.warmNanos)
        let droppedBefore = rsb_span_dropped(&floor)
        let count = rsb_span_sample(
            &floor, UInt32(timing.batch), buffer.baseAddress, buffer.count, rs_clock_precise_ns() + timing.sampleNanos)
        let start = rs_clock_precise_ns()
        let calls = rsb_span_run(&floor, start + timing.runNanos)
        return RoundSample(
            batchNanos: Array(buffer[..<count]), calls: calls, elapsedNanos: rs_clock_precise_ns() &- start,
            dropped: rsb_span_dropped(&floor) &- droppedBefore)
    }

    /// One round of a row on this thread: warms up, samples batches, then runs untimed for calls/s.
    /// Inlined with its closure, so each row's call sits in its own loop, as in a bot.
    @inline(__always)
    static func timedRound(
        _ buffer: UnsafeMutableBufferPointer<UInt32>, _ timing: RoundTiming, drops: () -> UInt64,
        _ call: () -> Void
    ) -> RoundSample {
        _ = run(until: rs_clock_precise_ns() + timing.warmNanos, call)
        let droppedBefore = drops()
        let count = sample(buffer, batch: timing.batch, until: rs_clock_precise_ns() + timing.sampleNanos, call)
        let start = rs_clock_precise_ns()
        let calls = run(until: start + timing.runNanos, call)
        let elapsed = rs_clock_precise_ns() &- start
        return RoundSample(
            batchNanos: Array(buffer[..<count]), calls: calls, elapsedNanos: elapsed,
            dropped: drops() &- droppedBefore)
    }

    /// `timedRound` of a call given the index of its value: `first`, then one more each call (the
    /// call masks it into its values). Inlined with its closure, as `timedRound`.
    @inline(__always)
    static func timedRound(
        _ buffer: UnsafeMutableBufferPointer<UInt32>, _ timing: RoundTiming, from first: Int = 0, drops: () -> UInt64,
        eachValue call: (Int) -> Void
    ) -> RoundSample {
        var v = first
        return timedRound(buffer, timing, drops: drops) {
            call(v)
            v &+= 1
        }
    }

    /// One round of a row on `threads` threads at once: this one and `threads - 1` started for the
    /// round, each timing itself with `round` (given its index and a buffer of its own).
    static func concurrentRound(
        threads: Int, _ buffer: UnsafeMutableBufferPointer<UInt32>, _ timing: RoundTiming,
        drops: () -> UInt64,
        _ round: @escaping @Sendable (Int, UnsafeMutableBufferPointer<UInt32>) -> RoundSample
    ) -> RoundSample {
        let results = ThreadResults()
        let finished = DispatchSemaphore(value: 0)
        let droppedBefore = drops()
        let capacity = buffer.count
        for thread in 1..<threads {
            let worker = Thread {
                let own = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: capacity)
                own.initialize(repeating: 0)
                defer { own.deallocate() }
                let sample = round(thread, own)
                results.samples.withLock { $0.append(sample) }
                finished.signal()
            }
            worker.name = "bench-bot-\(thread)"
            worker.start()
        }
        let mine = round(0, buffer)
        for _ in 1..<threads { finished.wait() }
        var all = results.samples.withLock { $0 }
        all.append(mine)
        var sample = RoundSample.concurrent(all)
        sample.dropped = drops() &- droppedBefore
        return sample
    }

    /// Times batches of `batch` calls into `buffer` until `deadline` (or the buffer is full).
    @inline(__always)
    static func sample(
        _ buffer: UnsafeMutableBufferPointer<UInt32>, batch: Int, until deadline: UInt64,
        _ call: () -> Void
    ) -> Int {
        let base = buffer.baseAddress!
        let capacity = buffer.count
        var count = 0
        while count < capacity {
            let t0 = rs_clock_precise_ns()
            var index = 0
            while index < batch {
                call()
                index &+= 1
            }
            let t1 = rs_clock_precise_ns()
            base[count] = UInt32(truncatingIfNeeded: min(t1 &- t0, UInt64(UInt32.max)))
            count &+= 1
            if count & 255 == 0 && t1 >= deadline { break }
        }
        return count
    }

    /// Calls until `deadline`, looking at the clock every 4096 calls; returns the number of calls.
    @inline(__always)
    static func run(until deadline: UInt64, _ call: () -> Void) -> UInt64 {
        var calls: UInt64 = 0
        repeat {
            for _ in 0..<4096 { call() }
            calls &+= 4096
        } while rs_clock_precise_ns() < deadline
        return calls
    }
}
