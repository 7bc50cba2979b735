import CRingside
#if canImport(Glibc)
import Glibc
#endif

/// A single-threaded bot's ring: attach it by name once, register metrics, then record through
/// the handles from that one thread. For a bot with several threads or tasks, use `Telemetry`.
///
/// ```swift
/// let ring = try Ring.attach("bot-a")                 // /dev/shm/ringside.bot-a
/// let fill = try ring.histogram("order_fill_latency", unit: .nanoseconds, labels: ["symbol": "AAPL"])
/// fill.record(elapsedNanos)                           // a few ns: no lock, allocation or syscall
/// ```
///
/// A `Ring` is one lane of a bot file that it holds for itself: the handle is not `Sendable`,
/// so Swift's checking keeps it on one thread, and a second process that attaches the same name
/// while this one lives gets `RingError.producerAlive`. The lock dies with the process, so a bot
/// that restarts re-attaches its file, keeping unconsumed records, counter totals and metrics.
public final class Ring {
    /// How to attach.
    public struct Options: Sendable {
        /// Records the ring holds (a power of two, 16 to 2^28). Default 131,072: 4 MiB.
        public var capacity: Int
        /// Metrics the registry holds (1 to 4,096). Default 256.
        public var maxMetrics: Int
        /// The file's permission bits when created. Default 0600: the bot's user only.
        public var fileMode: UInt32
        /// What to do when an existing file's layout differs or the file is corrupt.
        public var onIncompatible: IncompatiblePolicy

        public init(capacity: Int = 1 << Int(RS_DEFAULT_CAPACITY_LOG2),
                    maxMetrics: Int = Int(RS_DEFAULT_REGISTRY_CAPACITY),
                    fileMode: UInt32 = 0o600, onIncompatible: IncompatiblePolicy = .fail) {
            self.capacity = capacity
            self.maxMetrics = maxMetrics
            self.fileMode = fileMode
            self.onIncompatible = onIncompatible
        }
    }

    /// What `attach` does with an existing file it cannot use as it is.
    public enum IncompatiblePolicy: Sendable {
        /// Throw `.incompatibleLayout` or `.corrupt`, leaving the file alone.
        case fail
        /// Remove the file (its records are lost) and create it anew.
        case recreate
    }

    /// Set to `1` (or `true`) to make `attach` return disabled rings: bots run unchanged with
    /// telemetry switched off.
    public static let disableEnvironmentVariable = "RINGSIDE_DISABLED"

    /// The ring's name.
    public let name: String
    /// The ring's file, or nil when disabled.
    public var path: String? { attachment.path }
    /// False for a disabled ring, whose handles do nothing.
    public var isEnabled: Bool { attachment.isEnabled }

    /// The lane this ring holds: the hot path's state, handed to the C producer functions.
    @usableFromInline let producer: UnsafeMutablePointer<rs_producer>
    let attachment: BotAttachment

    private init(attachment: BotAttachment) throws(RingError) {
        self.attachment = attachment
        var error = rs_error()
        guard let producer = rs_bot_exclusive_producer(attachment.pointer, &error) else {
            let path = attachment.path ?? ""
            // A new file whose one lane did not fit is not left behind for nothing.
            if error.code == -ENOSPC || error.code == -EDQUOT { attachment.removeIfUnused() }
            throw BotAttachment.ringError(error, name: attachment.name, path: path, directory: RingDirectory(),
                                          bytes: attachment.laneBytes)
        }
        self.producer = producer
        name = attachment.name
    }

    /// Attaches to the ring `name` as its producer, creating it if it does not exist.
    ///
    /// - Parameters:
    ///   - name: 1 to 200 of `[A-Za-z0-9._-]`; the file is `<directory>/ringside.<name>`.
    ///   - directory: the ring directory; default `RINGSIDE_DIR`, else `/dev/shm`.
    ///   - options: capacity, registry size, file mode, and what to do with an incompatible file.
    /// - Throws: `RingError`: a bad name or options, a live producer, a full directory
    ///   (`.noSpace`, never a SIGBUS later), a file owned by another user, a symbolic link,
    ///   an incompatible layout or a corrupt file.
    /// Returns a disabled ring when `RINGSIDE_DISABLED=1`.
    public static func attach(_ name: String, directory: String? = nil, options: Options = Options()) throws(RingError) -> Ring {
        try RingDirectory.validate(name: name)
        do { _ = try RingLayout(capacity: options.capacity, registryCapacity: options.maxMetrics, maxLanes: 1) } catch {
            throw .invalidOptions(ring: name, reason: error.reason)
        }
        // A new file gets one lane; an existing one (a multi-threaded bot's, say) keeps its lanes
        // (its lane capacity must be the one asked for, as the registry size must).
        let request = BotAttachment.Request(laneCapacity: options.capacity, maxMetrics: options.maxMetrics, maxLanes: 0,
                                            fileMode: options.fileMode, onIncompatible: options.onIncompatible)
        return try Ring(attachment: BotAttachment.attach(name, directory: directory, request: request))
    }

    /// A ring with telemetry switched off: registration checks its arguments as usual, and the
    /// handles' calls return at once without writing anything.
    /// - Throws: `.unavailable` only when the process already holds 64 bots (rings included).
    public static func disabled(_ name: String = "disabled", maxMetrics: Int = Int(RS_DEFAULT_REGISTRY_CAPACITY)) throws(RingError) -> Ring {
        let request = BotAttachment.Request(laneCapacity: 0, maxMetrics: max(1, min(maxMetrics, Int(RS_MAX_REGISTRY_CAPACITY))),
                                            maxLanes: 0, fileMode: 0o600, onIncompatible: .fail, disabled: true)
        return try Ring(attachment: BotAttachment.attach(name, directory: nil, request: request))
    }

    // MARK: - Registration

    /// Registers (or finds again) a counter: increments that add up to an exact total.
    public func counter(_ name: String, labels: [String: String] = [:], help: String = "") throws(RingError) -> Counter {
        let metric = try attachment.register(name, kind: .counter, unit: .none, labels: labels, help: help, sampleEvery: 1)
        return Counter(ring: self, index: metric.index)
    }

    /// Registers (or finds again) a gauge: a value set now and then, read as the last one set.
    public func gauge(_ name: String, unit: MetricUnit = .none, labels: [String: String] = [:],
                      help: String = "") throws(RingError) -> Gauge {
        let metric = try attachment.register(name, kind: .gauge, unit: unit, labels: labels, help: help, sampleEvery: 1)
        return Gauge(ring: self, index: metric.index)
    }

    /// Registers (or finds again) a histogram: observations whose distribution the collector
    /// reports as windowed percentiles.
    /// - Parameters:
    ///   - unit: the unit of recorded values; spans are converted to it (nanoseconds for
    ///     units that are not times).
    ///   - sampleEvery: write 1 in N calls; the collector multiplies counts by N.
    public func histogram(_ name: String, unit: MetricUnit = .none, labels: [String: String] = [:],
                          help: String = "", sampleEvery: UInt32 = 1) throws(RingError) -> Histogram {
        let metric = try attachment.register(name, kind: .histogram, unit: unit, labels: labels, help: help, sampleEvery: sampleEvery)
        return Histogram(ring: self, index: metric.index, isSampled: metric.sampled != 0,
                         nanosecondsPerUnit: UInt64(metric.ns_per_unit))
    }

    /// The metrics registered in this ring, by this producer and earlier ones.
    public var registeredMetrics: [MetricDescriptor] { attachment.metrics }

    // MARK: - Counters of this ring's lane

    /// Records published into the ring since it was created (by every producer it has had).
    public var recordsWritten: UInt64 { rs_producer_written(producer) }
    /// Records dropped because the ring was full, since it was created.
    public var recordsDropped: UInt64 { rs_producer_dropped(producer) }
    /// Slots the consumer has freed and the producer may fill without dropping. Only this
    /// producer fills them, so the figure can only grow until the next write: a caller that
    /// must not drop (a script, say) waits until it is non-zero, then writes.
    public var freeSlots: UInt64 { rs_producer_free_slots(producer) }

    // MARK: - The hot path

    /// Writes one record unless sampling skips it; a full ring counts a drop.
    @inlinable @inline(__always)
    func write(_ metric: UInt32, kind: MetricKind, flags: UInt8, value: UInt64, isSampled: Bool) {
        if isSampled && rs_producer_sample(producer, metric) == 0 { return }
        _ = rs_producer_write(producer, metric, kind.rawValue, flags, value)
    }
}

@available(*, unavailable, message: "a ring has one producer thread: use Telemetry to record from many")
extension Ring: Sendable {}
