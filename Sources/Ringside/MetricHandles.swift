import CRingside

// The handles a single-threaded bot records through. Each call is the hot path: no allocation,
// lock or system call, never blocks, never throws; a full ring counts a drop. A handle keeps its
// ring alive.

extension Ring {
    /// A counter's handle: increments kept in the ring's cell, exact even when the ring is full.
    public struct Counter {
        @usableFromInline let ring: Ring
        @usableFromInline let index: UInt32

        init(ring: Ring, index: UInt32) {
            self.ring = ring
            self.index = index
        }

        /// Adds `amount` (default 1) to the counter.
        @inlinable
        public func increment(by amount: UInt64 = 1) {
            rs_producer_count(ring.producer, index, amount)
        }
    }

    /// A gauge's handle: the collector reports the last value set (exact), and each window's min
    /// and max (from records, which a full ring may drop).
    public struct Gauge {
        @usableFromInline let ring: Ring
        @usableFromInline let index: UInt32

        init(ring: Ring, index: UInt32) {
            self.ring = ring
            self.index = index
        }

        /// Sets the gauge.
        @inlinable
        public func set(_ value: Double) {
            _ = rs_producer_set(ring.producer, index, value)
        }
    }

    /// A histogram's handle: observations, or spans timed with the precise clock.
    public struct Histogram {
        @usableFromInline let ring: Ring
        @usableFromInline let index: UInt32
        @usableFromInline let isSampled: Bool
        @usableFromInline let nanosecondsPerUnit: UInt64

        init(ring: Ring, index: UInt32, isSampled: Bool, nanosecondsPerUnit: UInt64) {
            self.ring = ring
            self.index = index
            self.isSampled = isSampled
            self.nanosecondsPerUnit = nanosecondsPerUnit
        }

        /// Records one observation, in the histogram's unit.
        @inlinable
        public func record(_ value: UInt64) {
            ring.write(index, kind: .histogram, flags: 0, value: value, isSampled: isSampled)
        }

        /// Starts a span: reads the precise clock (CLOCK_MONOTONIC).
        @inlinable
        public func start() -> SpanStart {
            SpanStart(nanoseconds: rs_clock_precise_ns())
        }

        /// Ends a span and records its duration in the histogram's unit.
        @inlinable
        public func stop(_ start: SpanStart) {
            let end = rs_clock_precise_ns()
            let elapsed = end &- start.nanoseconds
            let value = nanosecondsPerUnit == 1 ? elapsed : elapsed / nanosecondsPerUnit
            // The record is stamped with the end just read: no third clock read.
            ring.write(index, kind: .histogram, flags: UInt8(RS_FLAG_SPAN), value: value, isSampled: isSampled, at: end)
        }

        /// Runs `body` as a span and returns its result; the span is recorded even if it throws.
        @inlinable
        public func measure<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
            let span = start()
            defer { stop(span) }
            return try body()
        }
    }

    /// When a span started, on the precise clock.
    public struct SpanStart: Sendable {
        @usableFromInline let nanoseconds: UInt64

        @inlinable
        init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }
    }
}

@available(*, unavailable, message: "a ring has one producer: keep its handles on its thread")
extension Ring.Counter: Sendable {}
@available(*, unavailable, message: "a ring has one producer: keep its handles on its thread")
extension Ring.Gauge: Sendable {}
@available(*, unavailable, message: "a ring has one producer: keep its handles on its thread")
extension Ring.Histogram: Sendable {}
