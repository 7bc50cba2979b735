import CRingside
#if canImport(Glibc)
import Glibc
#endif

/// A bot: attach it by name once, register metrics, then record from any thread or task of
/// the process.
///
/// ```swift
/// let bot = try Bot.attach("bot-a")                   // /dev/shm/ringside.bot-a
/// let fill = try bot.histogram("order_fill_latency", unit: .nanoseconds, labels: ["symbol": "AAPL"])
/// let orders = try bot.counter("orders")
/// fill.record(elapsedNanos)                           // any thread or task: no lock, allocation or syscall
/// try await fill.measure { try await sendOrder() }    // an async span
/// orders.increment()                                  // exact, even when the thread's lane is full
/// ```
///
/// Each thread that records writes a lane of its own (a single-producer ring in the bot's file),
/// claimed on its first record and found by a thread-local read afterwards; a thread's exit
/// retires its lane for the next thread. With `maxLanes` lanes all held by live threads, a
/// further thread's histogram records are counted as dropped (its counter increments and gauge
/// values are still exact). Swift's cooperative pool, Dispatch queues and plain threads all work.
///
/// The bot and its handles are `Sendable`: share them with every thread and task. Make the
/// handles when the bot starts (a struct of your metrics): a module-level `let` is made on its
/// first use, and a metric not registered yet is not exported.
/// The collector shows the bot as one: one series per metric and label set, its lanes merged.
///
/// Several processes may write one bot as its workers (`Options.worker`), each its own file; the
/// collector merges them. After `fork()`, the child's first record through the parent's bot makes
/// it a worker of the bot: its handles work unchanged, and a child that never records makes
/// nothing.
public final class Bot: Sendable {
    /// How to attach.
    public struct Options: Sendable {
        /// Records each thread's lane holds (a power of two, 16 to 2^28). Default 65,536: 2 MiB a thread.
        public var laneCapacity: Int
        /// Metrics the registry holds (1 to 4,096). Default 256.
        public var maxMetrics: Int
        /// Threads that may hold a lane at once (1 to 1,024). Default 64. Lanes are added to the
        /// file as threads first record, so memory follows the threads that actually record.
        public var maxLanes: Int
        /// The former name of `maxLanes`, which C, Python and Rust call `max_lanes`.
        @available(*, deprecated, renamed: "maxLanes")
        public var maxThreads: Int {
            get { maxLanes }
            set { maxLanes = newValue }
        }
        /// The file's permission bits when created. Default 0600: the bot's user only.
        public var fileMode: UInt32
        /// What to do when an existing file's layout differs or the file is corrupt.
        public var onIncompatible: IncompatiblePolicy
        /// Write the bot as one of its workers, beside other processes that write it: this
        /// process writes a file of its own, `ringside.<name>@<pid>`, which the collector merges
        /// with the bot's other files. Default false: the bot is this process's alone.
        public var worker: Bool
        /// A worker (by this option, or a forked child of this process): the bound on the bot's
        /// worker files (1 to 65,536). Default 256. Past it, a new worker continues the file of a
        /// worker that is gone; when every one is alive, it writes nothing to the bot (see
        /// docs/workers.md).
        public var maxWorkers: Int
        /// How full a thread's lane is, in percent (1 to 99), below which its histograms are never
        /// sampled. Past it, they are only where the lane would fill before the collector's next
        /// drain (its top 1/32 at the most): then 1 call in 2, 4, ... 32,768 is written, the fuller
        /// the lane the fewer, and the others are gathered in the lane's shared memory, so the
        /// collector's count, sum and largest value stay exact, instead of the newest records being
        /// dropped when it fills (SAMPLING AND GATHERING in `ringside.h`). Default 50. 100: never
        /// sample (a full lane drops). Only while the bot's collector reads gather cells.
        public var sampleAbovePercent: Int

        public init(
            laneCapacity: Int = 1 << Int(RS_DEFAULT_LANE_CAPACITY_LOG2),
            maxMetrics: Int = Int(RS_DEFAULT_REGISTRY_CAPACITY),
            maxLanes: Int = Int(RS_DEFAULT_MAX_LANES),
            fileMode: UInt32 = 0o600, onIncompatible: IncompatiblePolicy = .fail, worker: Bool = false,
            maxWorkers: Int = Int(RS_DEFAULT_MAX_WORKERS),
            sampleAbovePercent: Int = Int(RS_DEFAULT_SAMPLE_ABOVE_PERCENT)
        ) {
            self.laneCapacity = laneCapacity
            self.maxMetrics = maxMetrics
            self.maxLanes = maxLanes
            self.fileMode = fileMode
            self.onIncompatible = onIncompatible
            self.worker = worker
            self.maxWorkers = maxWorkers
            self.sampleAbovePercent = sampleAbovePercent
        }

        /// The former initializer, whose `maxThreads` is now `maxLanes`.
        @available(
            *, deprecated, renamed: "init(laneCapacity:maxMetrics:maxLanes:fileMode:onIncompatible:worker:maxWorkers:sampleAbovePercent:)"
        )
        public init(
            laneCapacity: Int = 1 << Int(RS_DEFAULT_LANE_CAPACITY_LOG2),
            maxMetrics: Int = Int(RS_DEFAULT_REGISTRY_CAPACITY),
            maxThreads: Int,
            fileMode: UInt32 = 0o600, onIncompatible: IncompatiblePolicy = .fail, worker: Bool = false,
            maxWorkers: Int = Int(RS_DEFAULT_MAX_WORKERS),
            sampleAbovePercent: Int = Int(RS_DEFAULT_SAMPLE_ABOVE_PERCENT)
        ) {
            self.init(
                laneCapacity: laneCapacity, maxMetrics: maxMetrics, maxLanes: maxThreads, fileMode: fileMode,
                onIncompatible: onIncompatible, worker: worker, maxWorkers: maxWorkers, sampleAbovePercent: sampleAbovePercent)
        }
    }

    /// What `attach` does with an existing file it cannot use as it is.
    public enum IncompatiblePolicy: Sendable {
        /// Throw `.incompatibleLayout` or `.corrupt`, leaving the file alone.
        case fail
        /// Remove the file (its records are lost) and create it anew.
        case recreate
    }

    /// Set to `1` (or `true`) to make `attach` return disabled bots: bots run unchanged with
    /// telemetry switched off.
    public static let disableEnvironmentVariable = "RINGSIDE_DISABLED"

    /// The bot's name.
    public let name: String
    let attachment: BotAttachment
    /// The C bot (its handles carry its address too); it lives as long as `attachment`.
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
    public static func attach(_ name: String, directory: String? = nil, options: Options = Options()) throws(RingError) -> Bot {
        try RingDirectory.validate(name: name)
        do {
            _ = try RingLayout(capacity: options.laneCapacity, registryCapacity: options.maxMetrics, maxLanes: options.maxLanes)
        } catch {
            throw .invalidOptions(ring: name, reason: error.reason)
        }
        guard (1...Int(RS_MAX_WORKERS)).contains(options.maxWorkers) else {
            throw .invalidOptions(ring: name, reason: "maxWorkers \(options.maxWorkers) must be from 1 to \(RS_MAX_WORKERS)")
        }
        guard (1...100).contains(options.sampleAbovePercent) else {
            throw .invalidOptions(
                ring: name, reason: "sampleAbovePercent \(options.sampleAbovePercent) must be from 1 to 100 (100: never sample)")
        }
        let request = BotAttachment.Request(
            laneCapacity: options.laneCapacity, maxMetrics: options.maxMetrics,
            maxLanes: options.maxLanes, fileMode: options.fileMode,
            onIncompatible: options.onIncompatible, worker: options.worker, maxWorkers: options.maxWorkers,
            sampleAbovePercent: options.sampleAbovePercent)
        return Bot(attachment: try BotAttachment.attach(name, directory: directory, request: request))
    }

    /// A bot with telemetry switched off: registration checks its arguments as usual, and the
    /// handles' calls return at once without writing anything.
    /// - Throws: `.unavailable` only when the process already holds 64 bots.
    public static func disabled(_ name: String = "disabled", maxMetrics: Int = Int(RS_DEFAULT_REGISTRY_CAPACITY)) throws(RingError) -> Bot {
        let request = BotAttachment.Request(
            laneCapacity: 0, maxMetrics: max(1, min(maxMetrics, Int(RS_MAX_REGISTRY_CAPACITY))),
            maxLanes: 0, fileMode: 0o600, onIncompatible: .fail, disabled: true)
        return Bot(attachment: try BotAttachment.attach(name, directory: nil, request: request))
    }

    /// The bot's file, or nil when disabled.
    public var path: String? { attachment.path }
    /// False for a disabled bot, whose handles do nothing (and in a forked child that could not
    /// make its worker file); true in a forked child before the first record that makes it.
    public var isEnabled: Bool { attachment.isEnabled }
    /// The metrics in the registry, by this process and earlier ones.
    public var registeredMetrics: [MetricDescriptor] { attachment.metrics }
    /// Lanes in the file: the most threads that have recorded at once (lanes are reused).
    public var lanesAllocated: Int { Int(rs_bot_lanes_allocated(bot)) }

    /// Retires the calling thread's lane now, as the thread's exit would: for a thread that stops
    /// recording but lives on. Its next record claims a lane again.
    public func releaseCurrentThreadLane() { rs_bot_release_thread_lane(bot) }

    /// Names the calling thread in its lane (claiming the lane if it has none yet), for the
    /// collector's exemplars and thread health: a lane otherwise carries the kernel's name for its
    /// thread, 15 bytes at most (Foundation's `Thread.name` on Linux may not reach the kernel).
    /// Up to 32 bytes of UTF-8 are kept, cut at a character's boundary; the name holds until the
    /// thread's lane is released.
    /// - Throws: `RingError.invalidOptions` for a name holding a NUL.
    public func nameThread(_ threadName: String) throws(RingError) {
        let result = threadName.utf8CString.withUnsafeBufferPointer { name in
            rs_bot_name_thread(bot, name.baseAddress, name.count - 1)
        }
        if result != 0 { throw .invalidOptions(ring: name, reason: "a thread's name may not hold a NUL") }
    }

    // MARK: - Registration

    /// Registers (or finds again) a counter: increments that add up to an exact total.
    /// - Parameter resolution: the step its total is exact to, a power of ten: 1e-6 counts
    ///   dollars to a micro-dollar, and `increment(by: 0.37)` adds 370,000 of them (VALUES in
    ///   ringside.h). 1, whole units, by default.
    public func counter(
        _ name: String, labels: [String: String] = [:], help: String = "", resolution: Double = 1
    ) throws(RingError) -> Counter {
        Counter(
            bot: self,
            metric: try attachment.register(
                name, kind: .counter, unit: .none, labels: labels,
                help: help, sampleEvery: 1, resolution: resolution))
    }

    /// Registers (or finds again) a gauge: a value set now and then, read as the last one set.
    /// - Parameter merge: how the collector merges it across the bot's workers (processes that
    ///   write the bot, see docs/workers.md): the value set last by default; `.sum`, `.max` or
    ///   `.min` of the live workers' values; or `.perWorker`, a series per worker labelled `pid`
    ///   (its own labels may not name `pid`).
    public func gauge(
        _ name: String, unit: MetricUnit = .none, labels: [String: String] = [:],
        help: String = "", merge: GaugeMerge = .last
    ) throws(RingError) -> Gauge {
        Gauge(
            bot: self,
            metric: try attachment.register(
                name, kind: .gauge, unit: unit, labels: labels,
                help: help, sampleEvery: 1, gaugeMerge: merge))
    }

    /// Registers (or finds again) a histogram: observations whose distribution the collector
    /// reports as windowed percentiles.
    /// - Parameters:
    ///   - unit: the unit of recorded values; spans are converted to it (nanoseconds for
    ///     units that are not times).
    ///   - sampleEvery: write 1 in N calls (counted per thread); the collector multiplies counts by N.
    ///   - resolution: the step values are recorded to, a power of ten: 0.01 records basis points
    ///     to a hundredth (VALUES in ringside.h). 1, whole units, by default.
    ///   - signed: values may be negative (slippage, PnL): the collector keeps them apart, mirrored
    ///     about zero, and its quantiles, minimum and maximum read across zero.
    public func histogram(
        _ name: String, unit: MetricUnit = .none, labels: [String: String] = [:],
        help: String = "", sampleEvery: UInt32 = 1, resolution: Double = 1, signed: Bool = false
    ) throws(RingError) -> Histogram {
        Histogram(
            bot: self,
            metric: try attachment.register(
                name, kind: .histogram, unit: unit, labels: labels,
                help: help, sampleEvery: sampleEvery, resolution: resolution, signed: signed))
    }
}

// MARK: - The calling thread's lane, for the tools

extension Bot {
    /// The calling thread's lane (claimed now if it has none): what `ringside-emit` (which must
    /// not drop, so it waits for room) and the benchmark read. Not for bots: their threads never
    /// wait, and a full lane counts its drops for the collector to show.
    package var currentThreadLane: Lane { Lane(producer: rs_bot_producer(bot)) }

    /// Claims the calling thread's lane now, as its first record would, and throws when it
    /// cannot have one: `.noSpace` (the directory is full; a file this attach made and nobody
    /// used is removed) or `.unavailable` (every lane held). For tools that must say so at once.
    package func claimCurrentThreadLane() throws(RingError) -> Lane {
        var error = rs_error()
        guard rs_bot_claim_thread_lane(bot, &error) == 0 else {
            if error.code == -ENOSPC || error.code == -EDQUOT { attachment.removeIfUnused() }
            throw BotAttachment.ringError(
                error, name: name, path: path ?? "", directory: RingDirectory(),
                bytes: attachment.laneBytes)
        }
        return currentThreadLane
    }

    /// One lane's figures, as its producer sees them.
    package struct Lane {
        let producer: UnsafeMutablePointer<rs_producer>

        /// Records written into the lane since the file was made (by every producer it has had).
        package var recordsWritten: UInt64 { rs_producer_written(producer) }
        /// Records dropped because the lane was full, since the file was made.
        package var recordsDropped: UInt64 { rs_producer_dropped(producer) }
        /// Slots the consumer has freed and this thread may fill without dropping: only this
        /// thread fills them, so the figure can only grow until its next write.
        package var freeSlots: UInt64 { rs_producer_free_slots(producer) }
    }
}
