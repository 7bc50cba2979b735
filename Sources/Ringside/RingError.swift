import CRingside
import RingsideSystem

/// Everything that can go wrong attaching, registering or reading a ring, each case with a
/// message a person can act on. The hot path never throws: a full ring is a counted drop.
public enum RingError: Error, Equatable, CustomStringConvertible {
    /// The ring name breaks the naming rule.
    case invalidName(String, reason: String)
    /// A metric's name, labels, help text or sampling is not acceptable.
    case invalidMetric(ring: String, metric: String, reason: String)
    /// A metric with this name and labels is already registered differently.
    case metricConflict(ring: String, metric: String, reason: String)
    /// Every registry entry is taken.
    case registryFull(ring: String, capacity: Int)
    /// Attach options that cannot make a ring (a programming or configuration error).
    case invalidOptions(ring: String, reason: String)
    /// No ring file by that name; `existing` lists the rings that are there.
    case notFound(ring: String, path: String, existing: [String])
    /// The file belongs to someone else, or its mode forbids us.
    case permissionDenied(ring: String, path: String, reason: String)
    /// The path is a symbolic link or not a regular file; Ringside never follows links.
    case notARegularFile(ring: String, path: String, reason: String)
    /// The ring directory has no room for the ring's file: `bytes` could not be reserved, or
    /// (`bytes` 0) the file could not be created at all, for want of inodes.
    case noSpace(ring: String, path: String, bytes: Int)
    /// Another live process is this ring's producer.
    case producerAlive(ring: String, pid: Int32)
    /// Another live process is this ring's consumer.
    case consumerAlive(ring: String, pid: Int32)
    /// The file is being created (its version is still 0); look again later.
    case notReady(ring: String)
    /// The file is not a sound ring: what is wrong with it.
    case corrupt(ring: String, path: String, problem: RingCorruption)
    /// An existing ring's layout differs from the one asked for.
    case incompatibleLayout(ring: String, reason: String)
    /// A limit of the process or the file is reached (bots per process, lanes), or the bot belongs
    /// to the parent of this forked process: what and what to do.
    case unavailable(ring: String, reason: String)
    /// A system call failed for a reason the cases above do not name.
    case system(ring: String, operation: String, errno: Int32)
    /// An exemplar that cannot be written whole: too long (over `Bot.Exemplar.maxBytes`) or
    /// malformed. Nothing is cut.
    case invalidExemplar(reason: String)

    public var description: String {
        switch self {
        case let .invalidName(name, reason):
            return "invalid ring name \"\(name)\": \(reason)"
        case let .invalidMetric(ring, metric, reason):
            return "ring \(ring): metric \"\(metric)\": \(reason)"
        case let .metricConflict(ring, _, reason):
            // The reason names the metric and both registrations: "metric m{…} is already registered as …".
            return "ring \(ring): \(reason)"
        case let .registryFull(ring, capacity):
            return "ring \(ring): the metric registry is full (\(capacity) metrics); "
                + "attach with a larger maxMetrics and recreate the ring"
        case let .invalidOptions(ring, reason):
            return "ring \(ring): \(reason)"
        case let .notFound(ring, path, existing):
            let known = existing.isEmpty ? "no rings there" : "rings there: " + existing.joined(separator: ", ")
            return "ring \(ring): no such ring (\(path)); \(known)"
        case let .permissionDenied(ring, path, reason):
            return "ring \(ring): \(path): \(reason)"
        case let .notARegularFile(ring, path, reason):
            return "ring \(ring): \(path): \(reason)"
        case let .noSpace(ring, path, bytes) where bytes == 0:
            return "ring \(ring): cannot create \(path): its file system has no free inodes (or a quota is "
                + "reached; df -i says which); remove files there (ringside-dump clean removes dead, drained rings)"
        case let .noSpace(ring, path, bytes):
            return "ring \(ring): no space for \(path) (\(bytes) bytes); free space in the ring "
                + "directory or attach with a smaller capacity"
        case let .producerAlive(ring, pid):
            return
                "ring \(ring): another producer is attached (pid \(pid)); a bot has one process, or several as its workers (the worker option)"
        case let .consumerAlive(ring, pid):
            return "ring \(ring): another consumer is attached (pid \(pid)); a ring has one consumer"
        case let .notReady(ring):
            return "ring \(ring): the file is still being created (format version 0)"
        case let .corrupt(ring, path, problem):
            return "ring \(ring): \(path) is corrupt: \(problem)"
        case let .incompatibleLayout(ring, reason):
            return "ring \(ring): the existing ring is incompatible: \(reason)"
        case let .unavailable(ring, reason):
            return "ring \(ring): \(reason)"
        case let .system(ring, operation, errno):
            return "ring \(ring): \(operation): \(Errno(rawValue: errno))"
        case let .invalidExemplar(reason):
            return "invalid exemplar: \(reason)"
        }
    }
}

/// What is wrong with a bot file's lanes, each lane's problem on its own
/// (`RingInspector.laneProblems()`, for `ringside-dump check`).
package enum LaneProblem: Equatable, Sendable, CustomStringConvertible {
    /// More lanes allocated than the file may hold.
    case tooManyLanes(allocated: Int, maxLanes: Int)
    /// The file is shorter than its lanes need.
    case truncated(fileSize: Int, lanes: Int, needed: Int)
    /// A lane's read cursor is past its write cursor.
    case readPastWrite(lane: Int, read: UInt64, write: UInt64)
    /// A lane's cursors are further apart than it holds records.
    case overCapacity(lane: Int, read: UInt64, write: UInt64, capacity: UInt64)

    package var description: String {
        switch self {
        case let .tooManyLanes(allocated, maxLanes):
            return "lanes_allocated is \(allocated), more than max_lanes \(maxLanes)"
        case let .truncated(fileSize, lanes, needed):
            return "truncated: the file has \(fileSize) bytes, its \(lanes) " + (lanes == 1 ? "lane needs" : "lanes need") + " \(needed)"
        case let .readPastWrite(lane, read, write):
            return "lane \(lane): cursors out of range: the read cursor \(read) is past the write cursor \(write)"
        case let .overCapacity(lane, read, write, capacity):
            return "lane \(lane): cursors out of range: read \(read), write \(write): \(write - read) records, more than the lane's "
                + "capacity of \(capacity)"
        }
    }
}

/// What makes a file not a sound ring. Each problem is its own case so tools and tests can
/// tell them apart.
public enum RingCorruption: Error, Equatable, CustomStringConvertible, Sendable {
    case truncated(fileSize: Int, expected: Int)
    case badMagic(UInt64)
    case unsupportedVersion(UInt32)
    case badLayout(field: String, value: UInt64, expected: String)
    case cursorsOutOfRange(read: UInt64, write: UInt64, capacity: UInt64)
    case badMetricCount(count: UInt32, capacity: UInt32)
    case badRegistryEntry(index: Int, reason: String)
    /// Pages of the file were never allocated (a sparse file): every honest producer reserves
    /// its pages with `posix_fallocate`, and a reader touching a hole of a tmpfs file would
    /// allocate it, charged to the reader.
    case unallocated(fileSize: Int, allocatedBytes: Int)
    /// What the producer library found wrong, in its words.
    case invalid(String)

    public var description: String {
        switch self {
        case let .truncated(fileSize, expected) where fileSize >= expected:
            // The SIGBUS guard caught a fault on a file that is not short: a page of it could not
            // be had (a sparse file on a full file system), which is not a truncation.
            return "a read faulted (SIGBUS) though the file has all its \(expected) bytes: a page of it could not be "
                + "allocated (a sparse file on a full file system?)"
        case let .truncated(fileSize, expected):
            return "truncated: the file has \(fileSize) bytes, the layout needs \(expected)"
        case let .badMagic(magic):
            return "bad magic 0x\(String(magic, radix: 16)) (not a Ringside ring)"
        case let .unsupportedVersion(version):
            let hint =
                version == 1 || version == 2
                ? ": written by an older Ringside (\(version == 1 ? "before lanes" : "before gather cells")); restart its bot with the current library, or remove the file"
                : ""
            return
                "unsupported format version \(version) (this build reads versions \(RS_FORMAT_VERSION_MIN) to \(RS_FORMAT_VERSION)\(hint))"
        case let .badLayout(field, value, expected):
            return "bad layout: \(field) is \(value), expected \(expected)"
        case let .cursorsOutOfRange(read, write, capacity):
            return "cursors out of range: read \(read), write \(write), capacity \(capacity)"
        case let .badMetricCount(count, capacity):
            return "metric count \(count) exceeds the registry's \(capacity) entries"
        case let .badRegistryEntry(index, reason):
            return "registry entry \(index): \(reason)"
        case let .unallocated(fileSize, allocated):
            return "sparse: \(allocated) of the file's \(fileSize) bytes are allocated; producers reserve every page "
                + "(posix_fallocate), and reading the rest would allocate it in this reader's name, so it is not read"
        case let .invalid(reason):
            return reason
        }
    }
}
