import CRingside

// The handles a bot records through, from any thread or task. Each call is the hot path: no
// allocation, lock or system call after a thread's first record, never blocks, never throws; a
// full lane counts a drop. A handle keeps its bot attached, and carries the C bot's address
// itself, so a call reads no object of Swift's.

/// What every handle holds: the C bot and the metric it writes, and the attachment that keeps
/// the C bot alive (which the hot path never reads).
@usableFromInline
struct BotMetric: @unchecked Sendable {  // unchecked: `bot` is a pointer; the C bot is safe from any thread
    @usableFromInline let bot: UnsafeMutablePointer<rs_bot>
    @usableFromInline let metric: rs_metric
    let owner: BotAttachment

    init(_ bot: Bot, _ metric: rs_metric) {
        owner = bot.attachment
        self.bot = bot.attachment.pointer
        self.metric = metric
    }

    /// Whether its values are whole units, unsigned (format 3's only values): an integer is then
    /// recorded as it is; else in steps of its resolution, signed or not.
    @inlinable var hasWholeValues: Bool { metric.scale == 0 && metric.kind != RS_METRIC_SIGNED_HISTOGRAM }
}

extension Bot {
    /// A counter's handle: increments kept in the lane's cell, exact even when the lane is full.
    public struct Counter: Sendable {
        @usableFromInline let target: BotMetric

        init(bot: Bot, metric: rs_metric) { target = BotMetric(bot, metric) }

        /// Adds `amount` (default 1) of its unit: exact, whatever the thread's lane holds.
        @inlinable
        public func increment(by amount: UInt64 = 1) {
            guard target.metric.scale == 0 else { return increment(by: Double(amount)) }
            rs_bot_count(target.bot, target.metric, amount)
        }

        /// Adds `amount`, clamped to `0...UInt64.max`: a negative amount adds nothing (and is
        /// counted as clamped by a counter with a resolution, as `increment(by:)` a `Double`).
        @inlinable
        public func increment<Amount: BinaryInteger>(by amount: Amount) {
            guard target.metric.scale == 0 else { return increment(by: Double(amount)) }
            increment(by: UInt64(clamping: amount))
        }

        /// Adds a whole number of the counter's steps (its resolution), exactly at any size. For tools.
        package func increment(steps: UInt64) {
            rs_bot_count(target.bot, target.metric, steps)
        }

        /// Adds `amount` of its unit, rounded to its resolution (`Bot.counter(resolution:)`):
        /// 0.37 to a counter of micro-dollars adds 370,000 of them, exactly. An amount below 0 (a
        /// counter never goes back), too large or NaN is clamped (0 for a NaN) and counted in
        /// `ringside_metric_clamped_total`.
        @inlinable
        public func increment(by amount: Double) {
            rs_bot_count_value(target.bot, target.metric, amount)
        }
    }

    /// A gauge's handle: the collector reports the last value set, by any thread (exact), and
    /// each window's min and max (from records, which a full lane may drop).
    public struct Gauge: Sendable {
        @usableFromInline let target: BotMetric

        init(bot: Bot, metric: rs_metric) { target = BotMetric(bot, metric) }

        /// Sets the gauge.
        @inlinable
        public func set(_ value: Double) {
            _ = rs_bot_set(target.bot, target.metric, value)
        }

        /// Sets the gauge to an integer (as the nearest `Double`).
        @inlinable
        public func set<Value: BinaryInteger>(_ value: Value) {
            set(Double(value))
        }
    }

    /// A histogram's handle: observations, or spans timed with the span clock (`Bot.spanClock`).
    public struct Histogram: Sendable {
        @usableFromInline let target: BotMetric

        init(bot: Bot, metric: rs_metric) { target = BotMetric(bot, metric) }

        /// Records one observation, in the histogram's unit.
        @inlinable
        public func record(_ value: UInt64) {
            guard target.hasWholeValues else { return record(Double(value)) }
            _ = rs_bot_record(target.bot, target.metric, value)
        }

        /// Records an integer observation, clamped to `0...UInt64.max` for a histogram of unsigned
        /// values: never traps.
        @inlinable
        public func record<Value: BinaryInteger>(_ value: Value) {
            guard target.hasWholeValues else { return record(Double(value)) }
            record(UInt64(clamping: value))
        }

        /// Records a whole number of the histogram's steps (its resolution), exactly at any size:
        /// `steps` an `Int64`'s bits for a signed histogram. For tools that read values exactly.
        package func record(steps: UInt64, signed: Bool) {
            if signed {
                _ = rs_bot_record_signed(target.bot, target.metric, Int64(bitPattern: steps))
            } else {
                _ = rs_bot_record(target.bot, target.metric, steps)
            }
        }

        /// Records one observation in the histogram's unit, rounded to its resolution: slippage
        /// of -3.5 basis points, to a signed histogram of hundredths (`Bot.histogram(resolution:signed:)`).
        /// A value it cannot hold (below 0 for an unsigned one, beyond its range, infinite) is
        /// clamped to the nearest end, and a NaN not recorded; both are counted in
        /// `ringside_metric_clamped_total`.
        @inlinable
        public func record(_ value: Double) {
            _ = rs_bot_record_value(target.bot, target.metric, value)
        }

        /// Records a duration in the histogram's unit (nanoseconds for units that are not
        /// times), or in steps of its resolution, rounded down; a negative duration records 0, one
        /// too long records `UInt64.max`. A signed histogram takes no durations, as no spans.
        @inlinable
        public func record(_ duration: Duration) {
            guard target.metric.scale == 0 else {
                // As a span is (rs_metric_steps_of_ns).
                _ = rs_bot_record(target.bot, target.metric, rs_metric_steps_of_ns(target.metric, duration.units(ofNanoseconds: 1)))
                return
            }
            record(duration.units(ofNanoseconds: UInt64(target.metric.ns_per_unit)))
        }

        /// Starts timing a span: reads the span clock (the TSC where it serves, else
        /// CLOCK_MONOTONIC: `Bot.spanClock`), nothing more. `stop()` records it.
        @inlinable
        public func startTiming() -> Timing {
            Timing(bot: target.bot, metric: target.metric, span: rs_bot_begin_span(target.bot))
        }

        /// A span being timed: from `startTiming()` to `stop()`, on the span clock. It may end
        /// on another thread or task than it started on (the TSC is the machine's, not the core's).
        ///
        /// A timing does not keep its bot attached, so starting and stopping one counts no
        /// reference: a span stopped after its bot has detached (or in a forked child) records
        /// nothing.
        public struct Timing: @unchecked Sendable {  // unchecked: `bot` is a pointer; the C bot is safe from any thread
            @usableFromInline let bot: UnsafeMutablePointer<rs_bot>
            @usableFromInline let metric: rs_metric
            @usableFromInline let span: rs_span

            @inlinable
            init(bot: UnsafeMutablePointer<rs_bot>, metric: rs_metric, span: rs_span) {
                self.bot = bot
                self.metric = metric
                self.span = span
            }

            /// Records the span's duration in the histogram's unit, flagged as a span and stamped
            /// with its end in CLOCK_MONOTONIC nanoseconds, on the calling thread's lane.
            @inlinable
            public func stop() {
                _ = rs_bot_end_span(bot, metric, span)
            }
        }

        /// Runs `body` as a span and returns its result; the span is recorded even if it throws.
        @inlinable
        public func measure<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
            let timing = startTiming()
            defer { timing.stop() }
            return try body()
        }

        /// Runs the async `body` as a span and returns its result; the span is recorded even if
        /// it throws, on the lane of whichever thread the task ends on.
        @inlinable
        public func measure<Result, Failure: Error>(
            isolation: isolated (any Actor)? = #isolation,
            _ body: () async throws(Failure) -> Result
        ) async throws(Failure) -> Result {
            let timing = startTiming()
            defer { timing.stop() }
            return try await body()
        }
    }
}

extension Duration {
    /// This duration in units of `nanosecondsPerUnit` nanoseconds, rounded down and clamped to
    /// `0...UInt64.max`: what a histogram records for it, never a trap.
    @inlinable
    func units(ofNanoseconds nanosecondsPerUnit: UInt64) -> UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }  // negative: both parts are <= 0
        let perUnit = max(1, nanosecondsPerUnit)  // time units divide a second: 1, 1e3, 1e6, 1e9
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000 / perUnit)
        let (total, carried) = whole.addingReportingOverflow(UInt64(attoseconds) / 1_000_000_000 / perUnit)
        return overflow || carried ? .max : total
    }
}
