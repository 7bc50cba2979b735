import CRingside
#if canImport(Glibc)
import Glibc
#endif
import RingsideSystem

/// A bot attached through the C producer library (`ringside_producer.c`), owned: detached when
/// the last reference goes. `Bot` is its face.
///
/// `@unchecked Sendable`: the C bot is safe across threads by its contract (a mutex serialises
/// registration and lane claims; each thread records into its own lane), and `pointer` never changes.
final class BotAttachment: @unchecked Sendable {
    let name: String
    let pointer: UnsafeMutablePointer<rs_bot>

    private init(name: String, pointer: UnsafeMutablePointer<rs_bot>) {
        self.name = name
        self.pointer = pointer
    }

    deinit { rs_bot_detach(pointer) }

    /// What attaching asks for; zero takes an existing file's value (or the default for a new one).
    struct Request {
        var laneCapacity: Int
        var maxMetrics: Int
        var maxLanes: Int
        var fileMode: UInt32
        var onIncompatible: Bot.IncompatiblePolicy
        /// Write a worker's file, `<name>@<pid>`.
        var worker = false
        /// The bound on the bot's worker files, for a worker (0: the default).
        var maxWorkers = 0
        /// How full a lane is, in percent, when its histograms start to be sampled (0: the
        /// default; 100: never).
        var sampleAbovePercent = 0
        /// Map nothing: a bot whose handles do nothing.
        var disabled = false
    }

    /// Attaches (creating the file if needed); a disabled bot when `RINGSIDE_DISABLED=1`.
    static func attach(_ name: String, directory: String?, request: Request) throws(RingError) -> BotAttachment {
        try RingDirectory.validate(name: name)
        let ringDirectory = RingDirectory(directory)
        var options = rs_bot_options()
        options.lane_capacity = UInt64(request.laneCapacity)
        options.max_metrics = UInt32(request.maxMetrics)
        options.max_lanes = UInt32(request.maxLanes)
        options.mode = mode_t(request.fileMode & 0o777)
        options.recreate = request.onIncompatible == .recreate ? 1 : 0
        options.disabled = request.disabled ? 1 : 0
        options.worker = request.worker ? 1 : 0
        options.max_workers = UInt32(request.maxWorkers)
        options.sample_above_percent = UInt32(request.sampleAbovePercent)
        var error = rs_error()
        var bot: UnsafeMutablePointer<rs_bot>?
        let code = ringDirectory.path.withCString { path in
            options.directory = path
            return rs_bot_attach(&bot, name, &options, &error)
        }
        guard code == 0, let bot else {
            // What a new file reserves first: the part before its lanes.
            let capacity = request.laneCapacity > 0 ? request.laneCapacity : 1 << Int(RS_DEFAULT_LANE_CAPACITY_LOG2)
            let metrics = request.maxMetrics > 0 ? request.maxMetrics : Int(RS_DEFAULT_REGISTRY_CAPACITY)
            let headerBytes = Int(rs_geometry_of(UInt32(capacity.trailingZeroBitCount), UInt32(metrics)).lanes_offset)
            throw ringError(
                error, name: name, path: ringDirectory.filePath(for: request.worker ? "\(name)\(RS_WORKER_SEPARATOR)\(getpid())" : name),
                directory: ringDirectory,
                bytes: headerBytes)
        }
        return BotAttachment(name: name, pointer: bot)
    }

    /// The bot's file, or nil when disabled.
    var path: String? {
        guard pointer.pointee.enabled != 0 else { return nil }
        return String(cString: rs_bot_path(pointer))
    }

    /// Whether records are kept: a forked child's are, from its first record (its worker file).
    var isEnabled: Bool { rs_bot_is_recording(pointer) != 0 }

    /// Bytes one lane of this bot's file takes.
    var laneBytes: Int { Int(rs_geometry_of(pointer.pointee.capacity_log2, pointer.pointee.registry_capacity).lane_size) }

    /// Removes the file while this process still holds its lock, if it is as new as it gets
    /// (no lane, no metric): what an attach made whose lane then did not fit, and nobody else used.
    func removeIfUnused() {
        guard pointer.pointee.enabled != 0, rs_bot_lanes_allocated(pointer) == 0, rs_bot_metric_count(pointer) == 0 else { return }
        try? System.unlink(String(cString: rs_bot_path(pointer)))
    }

    /// Registers (or finds again) a metric; checks its arguments in Swift first, for typed errors.
    func register(
        _ metricName: String, kind: MetricKind, unit: MetricUnit, labels: [String: String],
        help: String, sampleEvery: UInt32, gaugeMerge: GaugeMerge = .last, resolution: Double = 1, signed: Bool = false
    ) throws(RingError) -> rs_metric {
        let ring = name
        func invalid(_ reason: String) -> RingError { .invalidMetric(ring: ring, metric: metricName, reason: reason) }
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
        guard let scale = MetricDescriptor.scale(ofResolution: resolution) else {
            throw invalid("resolution \(resolution) is not a power of ten from 1e\(RS_SCALE_MIN) to 1e\(RS_SCALE_MAX)")
        }
        var metric = rs_metric()
        var error = rs_error()
        var nameText = metricName, encoded = encodedLabels, helpText = help
        let code = nameText.withUTF8 { nameBytes in
            encoded.withUTF8 { labelBytes in
                helpText.withUTF8 { helpBytes in
                    rs_bot_register_encoded(
                        pointer, &metric, nameBytes.baseAddress, nameBytes.count, rs_kind(UInt32(kind.rawValue)),
                        rs_unit(UInt32(unit.rawValue)),
                        rs_values(form: UInt8(signed ? RS_FORM_SIGNED.rawValue : RS_FORM_UNSIGNED.rawValue), scale: scale),
                        labelBytes.baseAddress, labelBytes.count,
                        helpBytes.baseAddress, helpBytes.count, sampleEvery, rs_gauge_merge(UInt32(gaugeMerge.rawValue)), &error)
                }
            }
        }
        guard code == 0 else {
            let reason = Self.message(error, name: ring)
            switch code {
            case RS_E_CONFLICT: throw .metricConflict(ring: self.name, metric: metricName, reason: reason)
            case RS_E_REGISTRY_FULL:
                throw .registryFull(ring: self.name, capacity: Int(pointer.pointee.registry_capacity))
            case RS_E_INVALID: throw invalid(reason)
            default: throw Self.ringError(error, name: self.name, path: path ?? "", directory: RingDirectory(), bytes: 0)
            }
        }
        return metric
    }

    /// The metrics in the registry, by this process and earlier ones.
    var metrics: [MetricDescriptor] {
        (0..<rs_bot_metric_count(pointer)).compactMap { index in
            guard let entry = rs_bot_registry_entry(pointer, index) else { return nil }
            return try? MetricDescriptor(entry: entry.pointee, index: Int(index))
        }
    }

    // MARK: - Errors

    /// The C library's sentence without its "bot NAME: " prefix (our messages add their own).
    private static func message(_ error: rs_error, name: String) -> String {
        var copy = error
        let text = withUnsafeBytes(of: &copy.message) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
        let prefix = "bot \(name): "
        return text.hasPrefix(prefix) ? String(text.dropFirst(prefix.count)) : text
    }

    /// The typed error for an attach failure; `bytes`: what a full directory could not hold.
    static func ringError(_ error: rs_error, name: String, path: String, directory: RingDirectory, bytes: Int) -> RingError {
        let reason = message(error, name: name)
        switch error.code {
        case RS_E_PRODUCER_ALIVE: return .producerAlive(ring: name, pid: error.pid)
        case RS_E_INCOMPATIBLE:
            // The C library's advice, in this API's words.
            return .incompatibleLayout(
                ring: name,
                reason: reason.replacing(
                    "attach with recreate",
                    with: "attach with onIncompatible: .recreate"))
        case RS_E_CORRUPT where reason.hasPrefix("\(path) is ") && reason.contains("not a regular file"):
            // A FIFO, a device, a directory or a socket at the bot's name: its type and owner, as C says them.
            return .notARegularFile(ring: name, path: path, reason: String(reason.dropFirst(path.count + 4)))
        case RS_E_CORRUPT:
            // The reader names the problem as a typed value when it finds it too.
            do { _ = try MappedRingFile.open(name: name, directory: directory, role: .inspector) } catch {
                switch error {
                case .corrupt, .notARegularFile: return error
                default: break
                }
            }
            return .corrupt(ring: name, path: path, problem: .invalid(reason))
        case RS_E_INVALID: return .invalidOptions(ring: name, reason: reason)
        case RS_E_NOT_READY: return .system(ring: name, operation: "attach: the file kept being replaced", errno: EAGAIN)
        case RS_E_TOO_MANY_BOTS, RS_E_NO_LANE, RS_E_FORKED, RS_E_TOO_MANY_WORKERS: return .unavailable(ring: name, reason: reason)
        case -ENOSPC, -EDQUOT: return .noSpace(ring: name, path: path, bytes: bytes)
        case RS_E_NO_INODES: return .noSpace(ring: name, path: path, bytes: 0)
        case -EACCES, -EPERM: return .permissionDenied(ring: name, path: path, reason: reason)
        case -ELOOP: return .notARegularFile(ring: name, path: path, reason: "a symbolic link; Ringside never follows links")
        case -ENOENT: return RingFileHandle.openError(.noSuchFileOrDirectory, name: name, path: path, directory: directory)
        default: return .system(ring: name, operation: reason, errno: -error.code)
        }
    }
}
