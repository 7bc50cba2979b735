import CRingside
#if canImport(Glibc)
import Glibc
#endif

/// A bot's ring: attach it by name once, register metrics, then record through the handles.
///
/// ```swift
/// let ring = try Ring.attach("bot-a")                 // /dev/shm/ringside.bot-a
/// let fill = try ring.histogram("order_fill_latency", unit: .nanoseconds, labels: ["symbol": "AAPL"])
/// fill.record(elapsedNanos)                           // a few ns: no lock, allocation or syscall
/// ```
///
/// A ring has one producer: the handle is not `Sendable`, so Swift's checking keeps it on one
/// thread, and a second process that attaches a ring whose producer lives gets
/// `RingError.producerAlive`. The producer's lock dies with its process, so a bot that
/// restarts re-attaches its ring, keeping unconsumed records, counters and metrics.
public final class Ring {
    /// How to attach.
    public struct Options: Sendable {
        /// Records the ring holds (a power of two, 16 to 2^28). Default 131,072: 4 MiB.
        public var capacity: Int
        /// Metrics the registry holds (1 to 4,096). Default 256.
        public var maxMetrics: Int
        /// The file's permission bits when created. Default 0600: the bot's user only.
        public var fileMode: UInt32
        /// What to do when an existing ring's layout differs or the file is corrupt.
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

    /// What `attach` does with an existing ring it cannot use as it is.
    public enum IncompatiblePolicy: Sendable {
        /// Throw `.incompatibleLayout` or `.corrupt`, leaving the file alone.
        case fail
        /// Remove the file (its records are lost) and create the ring anew.
        case recreate
    }

    /// Set to `1` (or `true`) to make `attach` return disabled rings: bots run unchanged with
    /// telemetry switched off.
    public static let disableEnvironmentVariable = "RINGSIDE_DISABLED"

    /// The ring's name.
    public let name: String
    /// The ring's file, or nil when disabled.
    public var path: String? { file?.path }
    /// False for a disabled ring, whose handles do nothing.
    public var isEnabled: Bool { file != nil }

    /// The hot path's state, handed to the C producer functions.
    @usableFromInline let producer: UnsafeMutablePointer<rs_producer>
    private let file: MappedRingFile?
    private let maxMetrics: Int
    private let sampleCountdown: UnsafeMutablePointer<UInt32>
    private let sampleEveryByMetric: UnsafeMutablePointer<UInt32>
    private var metrics: [MetricDescriptor] = []

    private init(name: String, file: MappedRingFile?, maxMetrics: Int) throws(RingError) {
        self.name = name
        self.file = file
        self.maxMetrics = maxMetrics
        sampleCountdown = .allocate(capacity: maxMetrics)
        sampleCountdown.initialize(repeating: 1, count: maxMetrics)
        sampleEveryByMetric = .allocate(capacity: maxMetrics)
        sampleEveryByMetric.initialize(repeating: 1, count: maxMetrics)
        producer = .allocate(capacity: 1)
        producer.initialize(to: rs_producer())
        producer.pointee.sample_countdown = sampleCountdown
        producer.pointee.sample_every = UnsafePointer(sampleEveryByMetric)
        guard let file else { return }
        for index in 0..<Int(file.metricCount) {
            let metric: MetricDescriptor
            do { metric = try MetricDescriptor(entry: file.registryEntry(index), index: index) } catch {
                throw .corrupt(ring: name, path: file.path, problem: error)
            }
            metrics.append(metric)
            sampleEveryByMetric[index] = metric.sampleEvery
        }
        let cursor = file.writeCursor
        let read = file.readCursor
        guard read <= cursor, cursor - read <= file.layout.capacity else {
            throw .corrupt(ring: name, path: file.path,
                           problem: .cursorsOutOfRange(read: read, write: cursor, capacity: file.layout.capacity))
        }
        producer.pointee.records = file.records
        producer.pointee.write_cursor = file.pointer(to: \.write_cursor)
        producer.pointee.read_cursor = UnsafePointer(file.pointer(to: \.read_cursor))
        producer.pointee.dropped_total = file.pointer(to: \.dropped_total)
        producer.pointee.heartbeat_ns = file.pointer(to: \.heartbeat_ns)
        producer.pointee.mask = file.layout.capacity - 1
        producer.pointee.next = cursor
        producer.pointee.cached_read = read
    }

    deinit {
        producer.deallocate()
        sampleCountdown.deallocate()
        sampleEveryByMetric.deallocate()
    }

    /// Attaches to the ring `name` as its producer, creating it if it does not exist.
    ///
    /// - Parameters:
    ///   - name: 1 to 200 of `[A-Za-z0-9._-]`; the file is `<directory>/ringside.<name>`.
    ///   - directory: the ring directory; default `RINGSIDE_DIR`, else `/dev/shm`.
    ///   - options: capacity, registry size, file mode, and what to do with an incompatible ring.
    /// - Throws: `RingError`: a bad name or options, a live producer, a full directory
    ///   (`.noSpace`, never a SIGBUS later), a file owned by another user, a symbolic link,
    ///   an incompatible layout or a corrupt file.
    /// Returns a disabled ring when `RINGSIDE_DISABLED=1`.
    public static func attach(_ name: String, directory: String? = nil, options: Options = Options()) throws(RingError) -> Ring {
        try RingDirectory.validate(name: name)
        let layout: RingLayout
        do { layout = try RingLayout(capacity: options.capacity, registryCapacity: options.maxMetrics) } catch {
            throw .invalidOptions(ring: name, reason: error.reason)
        }
        if isDisabledByEnvironment { return disabled(name, maxMetrics: options.maxMetrics) }
        let ringDirectory = RingDirectory(directory)
        let mode = mode_t(options.fileMode & 0o777)
        func open() throws(RingError) -> Ring {
            let file = try MappedRingFile.openProducer(name: name, directory: ringDirectory, wanted: layout, mode: mode)
            return try Ring(name: name, file: file, maxMetrics: options.maxMetrics)
        }
        do {
            return try open()
        } catch {
            switch (error, options.onIncompatible) {
            case (.incompatibleLayout, .recreate), (.corrupt, .recreate):
                try MappedRingFile.removeForRecreate(name: name, directory: ringDirectory)
                return try open()
            default:
                throw error
            }
        }
    }

    /// A ring with telemetry switched off: registration checks its arguments as usual, and the
    /// handles' calls return at once without writing anything.
    public static func disabled(_ name: String = "disabled", maxMetrics: Int = Int(RS_DEFAULT_REGISTRY_CAPACITY)) -> Ring {
        // A ring without a file has nothing that can fail.
        try! Ring(name: name, file: nil, maxMetrics: max(1, maxMetrics))
    }

    private static var isDisabledByEnvironment: Bool {
        guard let value = getenv(disableEnvironmentVariable) else { return false }
        let text = String(cString: value).lowercased()
        return text == "1" || text == "true" || text == "yes"
    }

    // MARK: - Registration

    /// Registers (or finds again) a counter: increments that add up to a total.
    /// - Parameter sampleEvery: write 1 in N calls; the collector multiplies by N.
    public func counter(_ name: String, labels: [String: String] = [:], help: String = "",
                        sampleEvery: UInt32 = 1) throws(RingError) -> Counter {
        let metric = try register(name, kind: .counter, unit: .none, labels: labels, help: help, sampleEvery: sampleEvery)
        return Counter(ring: self, index: metric.index, isSampled: metric.sampleEvery > 1)
    }

    /// Registers (or finds again) a gauge: a value set now and then, read as the last one set.
    public func gauge(_ name: String, unit: MetricUnit = .none, labels: [String: String] = [:],
                      help: String = "") throws(RingError) -> Gauge {
        let metric = try register(name, kind: .gauge, unit: unit, labels: labels, help: help, sampleEvery: 1)
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
        let metric = try register(name, kind: .histogram, unit: unit, labels: labels, help: help, sampleEvery: sampleEvery)
        return Histogram(ring: self, index: metric.index, isSampled: metric.sampleEvery > 1,
                         nanosecondsPerUnit: unit.nanoseconds ?? 1)
    }

    /// The metrics registered in this ring, by this producer and earlier ones.
    public var registeredMetrics: [MetricDescriptor] { metrics }

    private func register(_ metricName: String, kind: MetricKind, unit: MetricUnit, labels: [String: String],
                          help: String, sampleEvery: UInt32) throws(RingError) -> MetricDescriptor {
        func invalid(_ reason: String) -> RingError { .invalidMetric(ring: name, metric: metricName, reason: reason) }
        if let problem = MetricDescriptor.problem(withName: metricName) { throw invalid(problem) }
        let encodedLabels: String
        switch MetricDescriptor.encode(labels: labels) {
        case let .success(encoded): encodedLabels = encoded
        case let .failure(problem): throw invalid(problem.reason)
        }
        guard help.utf8.count <= Int(RS_HELP_MAX), !help.utf8.contains(0) else {
            throw invalid("the help text must be at most \(RS_HELP_MAX) bytes without NUL")
        }
        guard sampleEvery >= 1 else { throw invalid("sampleEvery must be at least 1") }

        if let existing = metrics.first(where: { $0.name == metricName && $0.encodedLabels == encodedLabels }) {
            guard existing.kind == kind, existing.unit == unit, existing.sampleEvery == sampleEvery else {
                throw .metricConflict(ring: name, metric: metricName, reason: "as a \(existing.kind) in \(existing.unit) "
                    + "sampled 1 in \(existing.sampleEvery); asked for a \(kind) in \(unit) sampled 1 in \(sampleEvery)")
            }
            return existing
        }
        guard metrics.count < maxMetrics else { throw .registryFull(ring: name, capacity: maxMetrics) }
        let metric = MetricDescriptor(index: UInt32(metrics.count), name: metricName, kind: kind, unit: unit,
                                      encodedLabels: encodedLabels, help: help, sampleEvery: sampleEvery)
        file?.publishRegistryEntry(metric.entry, at: metrics.count)
        sampleEveryByMetric[metrics.count] = sampleEvery
        metrics.append(metric)
        return metric
    }

    // MARK: - Counters of this ring

    /// Records published into the ring since it was created (by every producer it has had).
    public var recordsWritten: UInt64 { file?.writeCursor ?? 0 }
    /// Records dropped because the ring was full, since it was created.
    public var recordsDropped: UInt64 { file?.droppedTotal ?? 0 }
    /// Slots the consumer has freed and the producer may fill without dropping. Only this
    /// producer fills them, so the figure can only grow until the next write: a caller that
    /// must not drop (a script, say) waits until it is non-zero, then writes.
    public var freeSlots: UInt64 {
        guard let file else { return .max }
        let next = producer.pointee.next
        let read = file.readCursor
        return read <= next && next - read <= file.layout.capacity ? file.layout.capacity - (next - read) : 0
    }

    // MARK: - The hot path

    /// Writes one record unless sampling skips it; a full ring counts a drop.
    @inlinable @inline(__always)
    func write(_ metric: UInt32, kind: MetricKind, flags: UInt8, value: UInt64, isSampled: Bool) {
        if isSampled && rs_producer_sample(producer, metric) == 0 { return }
        _ = rs_producer_write(producer, metric, kind.rawValue, flags, value)
    }

    /// Writes one record stamped with a time the caller already read (a span's end).
    @inlinable @inline(__always)
    func write(_ metric: UInt32, kind: MetricKind, flags: UInt8, value: UInt64, isSampled: Bool, at timestamp: UInt64) {
        if isSampled && rs_producer_sample(producer, metric) == 0 { return }
        _ = rs_producer_write_at(producer, metric, kind.rawValue, flags, value, timestamp)
    }
}

@available(*, unavailable, message: "a ring has one producer: keep it on one thread")
extension Ring: Sendable {}
