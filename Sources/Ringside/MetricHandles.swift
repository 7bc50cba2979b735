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

        /// Adds `amount`, clamped to `0...UInt64.max`: a negative amount adds nothing.
        @inlinable
        public func increment<Amount: BinaryInteger>(by amount: Amount) {
            increment(by: UInt64(clamping: amount))
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

        /// Sets the gauge to an integer (as the nearest `Double`).
        @inlinable
        public func set<Value: BinaryInteger>(_ value: Value) {
            set(Double(value))
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

        /// Records an integer observation, clamped to `0...UInt64.max`: never traps.
        @inlinable
        public func record<Value: BinaryInteger>(_ value: Value) {
            record(UInt64(clamping: value))
        }

        /// Records a duration in the histogram's unit (nanoseconds for units that are not
        /// times), rounded down; a negative duration records 0, one too long records `UInt64.max`.
        @inlinable
        public func record(_ duration: Duration) {
            record(duration.units(ofNanoseconds: nanosecondsPerUnit))
        }

        /// Starts timing a span: reads the precise clock (CLOCK_MONOTONIC). `stop()` records it.
        @inlinable
        public func startTiming() -> Timing {
            Timing(histogram: self, start: rs_clock_precise_ns())
        }

        /// Runs `body` as a span and returns its result; the span is recorded even if it throws.
        @inlinable
        public func measure<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
            let timing = startTiming()
            defer { timing.stop() }
            return try body()
        }

        /// A span being timed: from `startTiming()` to `stop()`, on the precise clock.
        public struct Timing {
            @usableFromInline let histogram: Histogram
            @usableFromInline let start: UInt64

            @inlinable
            init(histogram: Histogram, start: UInt64) {
                self.histogram = histogram
                self.start = start
            }

            /// Records the span's duration in the histogram's unit, flagged as a span.
            @inlinable
            public func stop() {
                _ = rs_producer_record_span(histogram.ring.producer, histogram.index, histogram.isSampled ? 1 : 0,
                                            histogram.nanosecondsPerUnit, start)
            }
        }
    }
}

extension Duration {
    /// This duration in units of `nanosecondsPerUnit` nanoseconds, rounded down and clamped to
    /// `0...UInt64.max`: what a histogram records for it, never a trap.
    @inlinable
    func units(ofNanoseconds nanosecondsPerUnit: UInt64) -> UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0, attoseconds >= 0 else { return 0 } // negative: both parts are <= 0
        let perUnit = max(1, nanosecondsPerUnit) // time units divide a second: 1, 1e3, 1e6, 1e9
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000 / perUnit)
        let (total, carried) = whole.addingReportingOverflow(UInt64(attoseconds) / 1_000_000_000 / perUnit)
        return overflow || carried ? .max : total
    }
}

@available(*, unavailable, message: "a ring has one producer: keep its handles on its thread")
extension Ring.Counter: Sendable {}
@available(*, unavailable, message: "a ring has one producer: keep its handles on its thread")
extension Ring.Gauge: Sendable {}
@available(*, unavailable, message: "a ring has one producer: keep its handles on its thread")
extension Ring.Histogram: Sendable {}
