import CRingside

/// A bot's telemetry, for every thread and task of the process: attach it once, register
/// metrics, then record from anywhere.
///
/// ```swift
/// let bot = try Telemetry.attach("bot-a")             // /dev/shm/ringside.bot-a
/// let fill = try bot.histogram("order_fill_latency", unit: .nanoseconds, labels: ["symbol": "AAPL"])
/// fill.record(elapsedNanos)                           // any thread or task: no lock, allocation or syscall
/// try await fill.measure { try await sendOrder() }    // an async span
/// orders.increment()                                  // exact, even when the thread's lane is full
/// ```
///
/// Each thread that records writes a lane of its own (a single-producer ring in the bot's file),
/// claimed on its first record and found by a thread-local read afterwards; a thread's exit
/// retires its lane for the next thread. With `maxThreads` lanes all held by live threads, a
/// further thread's histogram records are counted as dropped (its counter increments and gauge
/// values are still exact). Swift's cooperative pool, Dispatch queues and plain threads all work.
///
/// The bot and its handles are `Sendable`: store them in a `let` anywhere, module level included.
/// The collector shows the bot as one: one series per metric and label set, its lanes merged.
///
/// After `fork()`, the child writes nothing to its parent's bot (it says so once on stderr):
/// attach a bot of its own in the child, under another name.
public final class Telemetry: Sendable {
    /// How to attach.
    public struct Options: Sendable {
        /// Records each thread's lane holds (a power of two, 16 to 2^28). Default 65,536: 2 MiB a thread.
        public var laneCapacity: Int
        /// Metrics the registry holds (1 to 4,096). Default 256.
        public var maxMetrics: Int
        /// Threads that may hold a lane at once (1 to 1,024). Default 64. Lanes are added to the
        /// file as threads first record, so memory follows the threads that actually record.
        public var maxThreads: Int
        /// The file's permission bits when created. Default 0600: the bot's user only.
        public var fileMode: UInt32
        /// What to do when an existing file's layout differs or the file is corrupt.
        public var onIncompatible: Ring.IncompatiblePolicy

        public init(laneCapacity: Int = 1 << Int(RS_DEFAULT_LANE_CAPACITY_LOG2),
                    maxMetrics: Int = Int(RS_DEFAULT_REGISTRY_CAPACITY),
                    maxThreads: Int = Int(RS_DEFAULT_MAX_LANES),
                    fileMode: UInt32 = 0o600, onIncompatible: Ring.IncompatiblePolicy = .fail) {
            self.laneCapacity = laneCapacity
            self.maxMetrics = maxMetrics
            self.maxThreads = maxThreads
            self.fileMode = fileMode
            self.onIncompatible = onIncompatible
        }
    }

    /// The bot's name.
    public let name: String
    let attachment: BotAttachment
    /// The C bot the hot path reads (its slot and generation); it lives as long as `attachment`.
    @usableFromInline nonisolated(unsafe) let bot: UnsafeMutablePointer<rs_bot>

    private init(attachment: BotAttachment) {
        self.attachment = attachment
        bot = attachment.pointer
        name = attachment.name
    }

    /// Attaches the bot `name` for this process, creating its file if it does not exist.
    ///
    /// - Parameters:
    ///   - name: 1 to 200 of `[A-Za-z0-9._-]`; the file is `<directory>/ringside.<name>`.
    ///   - directory: the ring directory; default `RINGSIDE_DIR`, else `/dev/shm`.
    ///   - options: lane capacity, registry size, threads, file mode, and what to do with an
    ///     incompatible file.
    /// - Throws: `RingError`: a bad name or options, another live process attached to it, a full
    ///   directory (`.noSpace`, never a SIGBUS later), a file owned by another user, a symbolic
    ///   link, an incompatible layout, a corrupt file, or too many bots in this process (64).
    /// Returns a disabled bot when `RINGSIDE_DISABLED=1`.
    public static func attach(_ name: String, directory: String? = nil, options: Options = Options()) throws(RingError) -> Telemetry {
        try RingDirectory.validate(name: name)
        do {
            _ = try RingLayout(capacity: options.laneCapacity, registryCapacity: options.maxMetrics, maxLanes: options.maxThreads)
        } catch {
            throw .invalidOptions(ring: name, reason: error.reason)
        }
        let request = BotAttachment.Request(laneCapacity: options.laneCapacity, maxMetrics: options.maxMetrics,
                                            maxLanes: options.maxThreads, fileMode: options.fileMode,
                                            onIncompatible: options.onIncompatible)
        return Telemetry(attachment: try BotAttachment.attach(name, directory: directory, request: request))
    }

    /// A bot with telemetry switched off: registration checks its arguments as usual, and the
    /// handles' calls return at once without writing anything.
    /// - Throws: `.unavailable` only when the process already holds 64 bots.
    public static func disabled(_ name: String = "disabled", maxMetrics: Int = Int(RS_DEFAULT_REGISTRY_CAPACITY)) throws(RingError) -> Telemetry {
        let request = BotAttachment.Request(laneCapacity: 0, maxMetrics: max(1, min(maxMetrics, Int(RS_MAX_REGISTRY_CAPACITY))),
                                            maxLanes: 0, fileMode: 0o600, onIncompatible: .fail, disabled: true)
        return Telemetry(attachment: try BotAttachment.attach(name, directory: nil, request: request))
    }

    /// The bot's file, or nil when disabled.
    public var path: String? { attachment.path }
    /// False for a disabled bot, whose handles do nothing.
    public var isEnabled: Bool { attachment.isEnabled }
    /// The metrics in the registry, by this process and earlier ones.
    public var registeredMetrics: [MetricDescriptor] { attachment.metrics }
    /// Lanes in the file: the most threads that have recorded at once (lanes are reused).
    public var lanesAllocated: Int { Int(rs_bot_lanes_allocated(bot)) }

    /// Retires the calling thread's lane now, as the thread's exit would: for a thread that stops
    /// recording but lives on. Its next record claims a lane again.
    public func releaseCurrentThreadLane() { rs_bot_release_thread_lane(bot) }

    // MARK: - Registration

    /// Registers (or finds again) a counter: increments that add up to an exact total.
    public func counter(_ name: String, labels: [String: String] = [:], help: String = "") throws(RingError) -> Counter {
        Counter(telemetry: self, metric: try attachment.register(name, kind: .counter, unit: .none, labels: labels,
                                                                 help: help, sampleEvery: 1))
    }

    /// Registers (or finds again) a gauge: a value set now and then, read as the last one set.
    public func gauge(_ name: String, unit: MetricUnit = .none, labels: [String: String] = [:],
                      help: String = "") throws(RingError) -> Gauge {
        Gauge(telemetry: self, metric: try attachment.register(name, kind: .gauge, unit: unit, labels: labels,
                                                               help: help, sampleEvery: 1))
    }

    /// Registers (or finds again) a histogram: observations whose distribution the collector
    /// reports as windowed percentiles.
    /// - Parameters:
    ///   - unit: the unit of recorded values; spans are converted to it (nanoseconds for
    ///     units that are not times).
    ///   - sampleEvery: write 1 in N calls (counted per thread); the collector multiplies counts by N.
    public func histogram(_ name: String, unit: MetricUnit = .none, labels: [String: String] = [:],
                          help: String = "", sampleEvery: UInt32 = 1) throws(RingError) -> Histogram {
        Histogram(telemetry: self, metric: try attachment.register(name, kind: .histogram, unit: unit, labels: labels,
                                                                   help: help, sampleEvery: sampleEvery))
    }

    // MARK: - Handles: any thread, any task; each call the hot path

    /// A counter's handle.
    public struct Counter: Sendable {
        @usableFromInline let telemetry: Telemetry
        @usableFromInline let metric: rs_metric

        init(telemetry: Telemetry, metric: rs_metric) {
            self.telemetry = telemetry
            self.metric = metric
        }

        /// Adds `amount` (default 1): exact, whatever the thread's lane holds.
        @inlinable
        public func increment(by amount: UInt64 = 1) {
            rs_bot_count(telemetry.bot, metric, amount)
        }

        /// Adds `amount`, clamped to `0...UInt64.max`: a negative amount adds nothing.
        @inlinable
        public func increment<Amount: BinaryInteger>(by amount: Amount) {
            increment(by: UInt64(clamping: amount))
        }
    }

    /// A gauge's handle: the collector reports the last value set, by any thread (exact), and
    /// each window's min and max (from records, which a full lane may drop).
    public struct Gauge: Sendable {
        @usableFromInline let telemetry: Telemetry
        @usableFromInline let metric: rs_metric

        init(telemetry: Telemetry, metric: rs_metric) {
            self.telemetry = telemetry
            self.metric = metric
        }

        /// Sets the gauge.
        @inlinable
        public func set(_ value: Double) {
            _ = rs_bot_set(telemetry.bot, metric, value)
        }

        /// Sets the gauge to an integer (as the nearest `Double`).
        @inlinable
        public func set<Value: BinaryInteger>(_ value: Value) {
            set(Double(value))
        }
    }

    /// A histogram's handle: observations, or spans timed with the precise clock.
    public struct Histogram: Sendable {
        @usableFromInline let telemetry: Telemetry
        @usableFromInline let metric: rs_metric

        init(telemetry: Telemetry, metric: rs_metric) {
            self.telemetry = telemetry
            self.metric = metric
        }

        /// Records one observation, in the histogram's unit.
        @inlinable
        public func record(_ value: UInt64) {
            _ = rs_bot_record(telemetry.bot, metric, value)
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
            record(duration.units(ofNanoseconds: UInt64(metric.ns_per_unit)))
        }

        /// Starts timing a span: reads the precise clock (CLOCK_MONOTONIC). `stop()` records it.
        @inlinable
        public func startTiming() -> Timing {
            Timing(histogram: self, start: rs_clock_precise_ns())
        }

        /// A span being timed: from `startTiming()` to `stop()`, on the precise clock. It may
        /// end on another thread or task than it started on.
        public struct Timing: Sendable {
            @usableFromInline let histogram: Histogram
            @usableFromInline let start: UInt64

            @inlinable
            init(histogram: Histogram, start: UInt64) {
                self.histogram = histogram
                self.start = start
            }

            /// Records the span's duration in the histogram's unit, flagged as a span, on the
            /// calling thread's lane.
            @inlinable
            public func stop() {
                _ = rs_bot_record_span(histogram.telemetry.bot, histogram.metric, start)
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
