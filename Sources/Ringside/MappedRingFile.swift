import CRingside
#if canImport(Glibc)
import Glibc
#endif

/// The one type that owns a bot file's descriptor and mappings as a reader, does offset
/// arithmetic and calls the format's atomics. Everyone else sees typed cursors, records, cells,
/// metrics and errors. (Producers write through `ringside_producer.c`.)
///
/// The file, drawn (see `ringside.h` for every field):
///
///     0        4096              cellsOffset              lanesOffset    + laneSize  ...
///     | header | registry (512 x n) | metric cells (32 x n) | lane 0        | lane 1 | ...
///       0x080 producer line (lanes_allocated, metric_count, pid ...)
///       0x100 consumer line                              each lane: header (256) | cells (8 x n) | records (32 x capacity)
///
/// The part before the lanes is mapped at open; each lane is mapped on its own when a reader
/// first sees it allocated. Geometry comes from a validated `RingLayout` copied at open; dynamic
/// fields (cursors, cells, counts) are re-read with atomics and checked by the caller.
final class MappedRingFile {
    enum Role {
        /// Read-write, holds the consumer lock, moves the lanes' read cursors.
        case consumer
        /// Read-only, holds no lock, never writes.
        case inspector
    }

    let name: String
    let path: String
    let layout: RingLayout
    let role: Role
    /// Which file this is: a bot file replaced under the same name has another identity.
    let identity: RingFileIdentity
    private let descriptor: Int32
    private let header: Mapping
    private var lanes: [Mapping] = []

    /// One mapped range, registered with the SIGBUS guard (`rs_guard_register`).
    private struct Mapping {
        let base: UnsafeMutableRawPointer
        let size: Int
        /// The guard's slot, or -1 when unguarded.
        let guardSlot: Int32

        init(base: UnsafeMutableRawPointer, size: Int) {
            self.base = base
            self.size = size
            // Before any access: a file truncated from now on reads as zeros instead of raising SIGBUS.
            guardSlot = rs_guard_register(base, size)
        }

        func unmap() {
            rs_guard_unregister(guardSlot) // first: the range must not be claimed once it is unmapped
            munmap(base, size)
        }
    }

    private init(name: String, path: String, descriptor: Int32, header: Mapping, layout: RingLayout, role: Role) {
        self.name = name
        self.path = path
        self.descriptor = descriptor
        self.header = header
        self.layout = layout
        self.role = role
        var info = stat()
        fstat(descriptor, &info)
        identity = RingFileIdentity(info)
    }

    deinit {
        for lane in lanes { lane.unmap() }
        header.unmap()
        close(descriptor) // also releases this description's lock
    }

    // MARK: - Opening

    /// Opens an existing bot file to read it, as its consumer (locked) or as an inspector.
    static func open(name: String, directory: RingDirectory, role: Role,
                     allowedOwners: Set<UInt32> = []) throws(RingError) -> MappedRingFile {
        try RingDirectory.validate(name: name)
        let path = directory.filePath(for: name)
        // O_NONBLOCK: a FIFO planted under a ring's name must not block the open (it is then refused as
        // not a regular file); on regular files it changes nothing.
        let flags = (role == .inspector ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK
        let fd = Glibc.open(path, flags)
        guard fd >= 0 else { throw openError(errno, name: name, path: path, directory: directory) }
        do throws(RingError) {
            let size = try checkedFileSize(fd, name: name, path: path, allowedOwners: allowedOwners)
            if role == .consumer { try lock(fd, byte: RS_LOCK_BYTE_CONSUMER, name: name) }
            guard size > 0 else { throw RingError.notReady(ring: name) }
            let fields = try readHeader(fd, name: name, path: path, fileSize: size)
            guard fields.version != 0 || (fields.magic != 0 && fields.magic != RS_MAGIC) else {
                throw RingError.notReady(ring: name)
            }
            let layout: RingLayout
            do { layout = try RingLayout(validating: fields, fileSize: size) } catch {
                throw RingError.corrupt(ring: name, path: path, problem: error)
            }
            try checkAllocated(fd, name: name, path: path)
            let base = try map(fd, size: layout.lanesOffset, offset: 0, role: role, name: name)
            let file = MappedRingFile(name: name, path: path, descriptor: fd, header: Mapping(base: base, size: layout.lanesOffset),
                                      layout: layout, role: role)
            if role == .consumer {
                rs_store_relaxed_i32(file.field(Offset.consumerPID, as: Int32.self), getpid())
                rs_store_relaxed_u64(file.field(Offset.consumerHeartbeat, as: UInt64.self), rs_clock_coarse_ns())
            }
            return file
        } catch {
            close(fd)
            throw error
        }
    }

    /// Runs `body` holding the producer lock of an existing bot file, which it neither maps nor
    /// changes: no process can attach, and so none can write, until `body` returns.
    /// - Throws: `.producerAlive` when a process holds the bot, or why the file cannot be opened.
    static func withProducerLock<Result>(name: String, directory: RingDirectory, allowedOwners: Set<UInt32>,
                                         _ body: () throws(RingError) -> Result) throws(RingError) -> Result {
        try RingDirectory.validate(name: name)
        let path = directory.filePath(for: name)
        let fd = Glibc.open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw openError(errno, name: name, path: path, directory: directory) }
        defer { close(fd) } // also releases the lock
        _ = try checkedFileSize(fd, name: name, path: path, allowedOwners: allowedOwners)
        try lock(fd, byte: RS_LOCK_BYTE_PRODUCER, name: name)
        return try body()
    }

    // MARK: - The header

    /// Where each field the readers touch lies (`offsetof`), worked out once: an idle collector
    /// reads some of them for every lane of thousands of bots many times a second.
    private enum Offset {
        static let lanesAllocated = MemoryLayout<rs_header>.offset(of: \.lanes_allocated)!
        static let metricCount = MemoryLayout<rs_header>.offset(of: \.metric_count)!
        static let heartbeat = MemoryLayout<rs_header>.offset(of: \.heartbeat_ns)!
        static let producerStart = MemoryLayout<rs_header>.offset(of: \.producer_start_ns)!
        static let producerPID = MemoryLayout<rs_header>.offset(of: \.producer_pid)!
        static let producerAttaches = MemoryLayout<rs_header>.offset(of: \.producer_attaches)!
        static let lanesExhausted = MemoryLayout<rs_header>.offset(of: \.lanes_exhausted)!
        static let consumerPID = MemoryLayout<rs_header>.offset(of: \.consumer_pid)!
        static let consumerHeartbeat = MemoryLayout<rs_header>.offset(of: \.consumer_heartbeat_ns)!
        static let gaugeBits = MemoryLayout<rs_metric_cell>.offset(of: \.gauge_bits)!
        static let gaugeSet = MemoryLayout<rs_metric_cell>.offset(of: \.gauge_set)!
        static let unlaned = MemoryLayout<rs_metric_cell>.offset(of: \.unlaned)!
        static let writeCursor = MemoryLayout<rs_lane_header>.offset(of: \.write_cursor)!
        static let droppedTotal = MemoryLayout<rs_lane_header>.offset(of: \.dropped_total)!
        static let laneHeartbeat = MemoryLayout<rs_lane_header>.offset(of: \.heartbeat_ns)!
        static let state = MemoryLayout<rs_lane_header>.offset(of: \.state)!
        static let ownerTID = MemoryLayout<rs_lane_header>.offset(of: \.owner_tid)!
        static let claims = MemoryLayout<rs_lane_header>.offset(of: \.claims)!
        static let readCursor = MemoryLayout<rs_lane_header>.offset(of: \.read_cursor)!
    }

    /// A field at `offset` in the header page (every offset above lies in it).
    private func field<T>(_ offset: Int, as type: T.Type) -> UnsafeMutablePointer<T> {
        (header.base + offset).assumingMemoryBound(to: T.self)
    }

    /// The layout fields the creator wrote once (magic, sizes, creation times).
    var layoutFields: rs_header { header.base.assumingMemoryBound(to: rs_header.self).pointee }

    // Acquire: entries and lanes below the published counts are fully written.
    var metricCount: UInt32 { rs_load_acquire_u32(field(Offset.metricCount, as: UInt32.self)) }
    var lanesAllocated: UInt32 { rs_load_acquire_u32(field(Offset.lanesAllocated, as: UInt32.self)) }
    // Relaxed: figures for people; the locks are the truth about who is attached.
    var heartbeatNanos: UInt64 { rs_load_relaxed_u64(field(Offset.heartbeat, as: UInt64.self)) }
    var producerStartNanos: UInt64 { rs_load_relaxed_u64(field(Offset.producerStart, as: UInt64.self)) }
    var producerPID: Int32 { rs_load_relaxed_i32(field(Offset.producerPID, as: Int32.self)) }
    var producerAttaches: UInt32 { rs_load_relaxed_u32(field(Offset.producerAttaches, as: UInt32.self)) }
    var lanesExhausted: UInt64 { rs_load_relaxed_u64(field(Offset.lanesExhausted, as: UInt64.self)) }
    var consumerPID: Int32 { rs_load_relaxed_i32(field(Offset.consumerPID, as: Int32.self)) }
    var consumerHeartbeatNanos: UInt64 { rs_load_relaxed_u64(field(Offset.consumerHeartbeat, as: UInt64.self)) }

    /// Whether the file shrank under a mapping: the SIGBUS guard absorbed a fault in it (the
    /// pages past the file's end now read as zeros), or, for a mapping the guard could not take,
    /// the file is now smaller than what is mapped. Whatever was read from the mapping meanwhile
    /// may be zeros and must be thrown away.
    var wasTruncated: Bool {
        // No array of the mappings: an idle collector asks this of every lane many times a second.
        var unguarded = header.guardSlot < 0
        if rs_guard_was_truncated(header.guardSlot) != 0 { return true }
        for lane in lanes {
            if rs_guard_was_truncated(lane.guardSlot) != 0 { return true }
            unguarded = unguarded || lane.guardSlot < 0
        }
        return unguarded && currentFileSize.map { $0 < mappedFileSize } == true
    }

    /// The file's size now, or nil if fstat fails.
    var currentFileSize: Int? {
        var info = stat()
        return fstat(descriptor, &info) == 0 ? Int(info.st_size) : nil
    }

    /// The size the mapped part of the file needs.
    var mappedFileSize: Int { layout.fileSize(lanes: lanes.count) }

    /// Throws `.corrupt(.truncated)` when the file shrank under a mapping (see `wasTruncated`).
    func checkNotTruncated() throws(RingError) {
        guard wasTruncated else { return }
        throw .corrupt(ring: name, path: path,
                       problem: .truncated(fileSize: currentFileSize ?? 0, expected: mappedFileSize))
    }

    /// Whether a live process holds the producer (or consumer) lock.
    func isLocked(byte: Int32) -> Bool { rs_lock_byte_is_held(descriptor, byte) == 1 }

    /// Says the consumer is still here (for people reading the file).
    func markConsumerHeartbeat() {
        precondition(role == .consumer, "only the consumer writes its line")
        rs_store_relaxed_u64(field(Offset.consumerHeartbeat, as: UInt64.self), rs_clock_coarse_ns())
    }

    // MARK: - The registry and the metric cells

    /// A copy of registry entry `index` (below the registry's capacity), for validation.
    func registryEntry(_ index: Int) -> rs_registry_entry { registrySlot(index).pointee }

    /// The kind byte of registry entry `index`, without copying the entry (unchecked).
    func registryKind(_ index: Int) -> UInt8 {
        UnsafeRawPointer(registrySlot(index)).load(fromByteOffset: Self.kindOffset, as: UInt8.self)
    }
    private static let kindOffset = MemoryLayout<rs_registry_entry>.offset(of: \.kind)!

    private func registrySlot(_ index: Int) -> UnsafeMutablePointer<rs_registry_entry> {
        precondition(index >= 0 && index < Int(layout.registryCapacity), "registry index out of range")
        // registryOffset + index * 512 stays below cellsOffset for index < registryCapacity.
        return (header.base + layout.registryOffset + index * Int(RS_REGISTRY_ENTRY_SIZE)).assumingMemoryBound(to: rs_registry_entry.self)
    }

    /// A field of metric `metric`'s shared cell.
    private func metricCell(_ metric: Int, _ offset: Int) -> UnsafeMutablePointer<UInt64> {
        precondition(metric >= 0 && metric < Int(layout.registryCapacity), "metric index out of range")
        // cellsOffset + metric * 32 + offset stays below lanesOffset for metric < registryCapacity.
        return (header.base + layout.cellsOffset + metric * Int(RS_METRIC_CELL_SIZE) + offset).assumingMemoryBound(to: UInt64.self)
    }

    /// A gauge's last value, or nil if none was set.
    func gaugeValue(metric: Int) -> Double? {
        // Acquire pairs with the setter's release store of gauge_set: the bits stored before it are visible.
        guard rs_load_acquire_u64(metricCell(metric, Offset.gaugeSet)) != 0 else { return nil }
        return Double(bitPattern: rs_load_relaxed_u64(metricCell(metric, Offset.gaugeBits)))
    }

    /// What threads without a lane added to a counter, or the records of other metrics they lost.
    func unlaned(metric: Int) -> UInt64 {
        // Relaxed: a running total read as a figure; nothing else is published through it.
        rs_load_relaxed_u64(metricCell(metric, Offset.unlaned))
    }

    // MARK: - Lanes

    /// Lanes mapped so far; `mapNewLanes` maps those allocated since.
    var laneCount: Int { lanes.count }

    /// Maps the lanes the producer allocated since the last call; returns how many are new.
    /// - Throws: `.corrupt` when the count exceeds `max_lanes` or the file is too short for it.
    @discardableResult
    func mapNewLanes() throws(RingError) -> Int {
        let allocated = Int(lanesAllocated)
        guard allocated > lanes.count else { return 0 }
        guard allocated <= Int(layout.maxLanes) else {
            throw .corrupt(ring: name, path: path, problem: .badLayout(field: "lanes_allocated", value: UInt64(allocated),
                                                                      expected: "at most max_lanes \(layout.maxLanes)"))
        }
        let needed = layout.fileSize(lanes: allocated)
        guard let size = currentFileSize, size >= needed else {
            throw .corrupt(ring: name, path: path, problem: .truncated(fileSize: currentFileSize ?? 0, expected: needed))
        }
        try Self.checkAllocated(descriptor, name: name, path: path) // the new lanes' pages too
        let before = lanes.count
        for index in before..<allocated {
            let base = try Self.map(descriptor, size: layout.laneSize, offset: layout.fileSize(lanes: index),
                                    role: role, name: name)
            lanes.append(Mapping(base: base, size: layout.laneSize))
        }
        return allocated - before
    }

    /// A field at `offset` in lane `lane`'s 256-byte header.
    private func laneField<T>(_ lane: Int, _ offset: Int, as type: T.Type) -> UnsafeMutablePointer<T> {
        (lanes[lane].base + offset).assumingMemoryBound(to: T.self)
    }

    /// Where lane `lane`'s write cursor lies: valid while this file is open (for `LaneWatch`).
    func writeCursorAddress(lane: Int) -> UnsafePointer<UInt64> {
        UnsafePointer(laneField(lane, Offset.writeCursor, as: UInt64.self))
    }

    // Acquire: the records below the write cursor are fully written.
    func writeCursor(lane: Int) -> UInt64 { rs_load_acquire_u64(laneField(lane, Offset.writeCursor, as: UInt64.self)) }
    // Acquire: whatever the consumer read below it is done with.
    func readCursor(lane: Int) -> UInt64 { rs_load_acquire_u64(laneField(lane, Offset.readCursor, as: UInt64.self)) }
    // Relaxed: figures for people and the drop accounting, written by one thread each.
    func droppedTotal(lane: Int) -> UInt64 { rs_load_relaxed_u64(laneField(lane, Offset.droppedTotal, as: UInt64.self)) }
    func heartbeatNanos(lane: Int) -> UInt64 { rs_load_relaxed_u64(laneField(lane, Offset.laneHeartbeat, as: UInt64.self)) }
    // Acquire: a lane seen active has its owner and claim count stored before the state.
    func state(lane: Int) -> UInt32 { rs_load_acquire_u32(laneField(lane, Offset.state, as: UInt32.self)) }
    func ownerTID(lane: Int) -> Int32 { rs_load_relaxed_i32(laneField(lane, Offset.ownerTID, as: Int32.self)) }
    func claims(lane: Int) -> UInt32 { rs_load_relaxed_u32(laneField(lane, Offset.claims, as: UInt32.self)) }

    /// A lane's cell of `metric`: a counter's increments made on the lane, or the records of
    /// another kind the lane dropped.
    func laneCell(lane: Int, metric: Int) -> UInt64 {
        precondition(metric >= 0 && metric < Int(layout.registryCapacity), "metric index out of range")
        // The cells follow the 256-byte lane header: metric * 8 stays below laneRecordsOffset.
        let cell = (lanes[lane].base + Int(RS_LANE_HEADER_SIZE) + metric * 8).assumingMemoryBound(to: UInt64.self)
        // Relaxed: a running total its one writer stores whole.
        return rs_load_relaxed_u64(cell)
    }

    /// The consumer publishes a lane's cursor: the slots below it are free for the producer.
    func publishReadCursor(_ cursor: UInt64, lane: Int) {
        precondition(role == .consumer, "only the consumer moves the read cursor")
        // Release: our reads of the slots below `cursor` finish before the producer may reuse them.
        rs_store_release_u64(laneField(lane, Offset.readCursor, as: UInt64.self), cursor)
    }

    /// A lane's record slots. Slot `cursor & (capacity - 1)` holds the record at `cursor`.
    func records(lane: Int) -> UnsafePointer<rs_record> {
        // laneRecordsOffset + capacity * 32 fits in laneSize, by the validated layout.
        UnsafePointer((lanes[lane].base + layout.laneRecordsOffset).assumingMemoryBound(to: rs_record.self))
    }

    // MARK: - System calls

    /// The file's size, after checking it is a regular file owned by us (or an allowed user).
    private static func checkedFileSize(_ fd: Int32, name: String, path: String,
                                        allowedOwners: Set<UInt32> = []) throws(RingError) -> Int {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .system(ring: name, operation: "fstat \(path)", errno: errno) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw .notARegularFile(ring: name, path: path, reason: "not a regular file")
        }
        guard info.st_uid == geteuid() || allowedOwners.contains(info.st_uid) else {
            throw .permissionDenied(ring: name, path: path, reason: "owned by uid \(info.st_uid), not \(geteuid()); "
                + "rings are private to their user (a collector may allow others with --allow-uid)")
        }
        return Int(info.st_size)
    }

    /// Throws `.corrupt(.unallocated)` unless every byte of the file is allocated (`st_blocks`).
    /// A producer reserves the header part and each lane with `posix_fallocate` before it
    /// publishes them, so a sound file is whole; a sparse one claiming a large capacity would have
    /// this reader allocate its holes (tmpfs charges a page to whoever touches it first).
    private static func checkAllocated(_ fd: Int32, name: String, path: String) throws(RingError) {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .system(ring: name, operation: "fstat \(path)", errno: errno) }
        let allocated = Int(info.st_blocks) * 512 // st_blocks counts 512-byte units, whatever the block size
        guard allocated >= Int(info.st_size) else {
            throw .corrupt(ring: name, path: path, problem: .unallocated(fileSize: Int(info.st_size), allocatedBytes: allocated))
        }
    }

    private static func readHeader(_ fd: Int32, name: String, path: String, fileSize: Int) throws(RingError) -> rs_header {
        var header = rs_header()
        let size = MemoryLayout<rs_header>.size
        guard fileSize >= Int(RS_HEADER_SIZE) else {
            throw .corrupt(ring: name, path: path, problem: .truncated(fileSize: fileSize, expected: Int(RS_HEADER_SIZE)))
        }
        let count = withUnsafeMutableBytes(of: &header) { pread(fd, $0.baseAddress, size, 0) }
        guard count == size else {
            if count < 0 { throw .system(ring: name, operation: "read \(path)", errno: errno) }
            throw .corrupt(ring: name, path: path, problem: .truncated(fileSize: count, expected: size))
        }
        return header
    }

    private static func lock(_ fd: Int32, byte: Int32, name: String) throws(RingError) {
        let result = rs_lock_byte(fd, byte)
        guard result != 0 else { return }
        guard result == EAGAIN || result == EACCES else {
            throw .system(ring: name, operation: "lock", errno: result)
        }
        // Who holds it, for the message: the pid field of the holder's line.
        var pid: Int32 = 0
        let offset = byte == RS_LOCK_BYTE_PRODUCER ? Offset.producerPID : Offset.consumerPID
        _ = pread(fd, &pid, 4, off_t(offset))
        throw byte == RS_LOCK_BYTE_PRODUCER ? .producerAlive(ring: name, pid: pid) : .consumerAlive(ring: name, pid: pid)
    }

    private static func map(_ fd: Int32, size: Int, offset: Int, role: Role, name: String) throws(RingError) -> UnsafeMutableRawPointer {
        let protection = role == .inspector ? PROT_READ : PROT_READ | PROT_WRITE
        guard let base = mmap(nil, size, protection, MAP_SHARED, fd, off_t(offset)), base != MAP_FAILED else {
            throw .system(ring: name, operation: "mmap \(size) bytes at \(offset)", errno: errno)
        }
        return base
    }

    static func openError(_ code: Int32, name: String, path: String, directory: RingDirectory) -> RingError {
        switch code {
        case ENOENT:
            var info = stat()
            if stat(directory.path, &info) != 0 {
                return .system(ring: name, operation: "open ring directory \(directory.path)", errno: ENOENT)
            }
            return .notFound(ring: name, path: path, existing: directory.ringNames())
        case ELOOP:
            return .notARegularFile(ring: name, path: path, reason: "a symbolic link; Ringside never follows links")
        case EACCES, EPERM:
            var info = stat()
            let owner = lstat(path, &info) == 0 ? "owned by uid \(info.st_uid) with mode \(String(info.st_mode & 0o777, radix: 8))" : "no access"
            return .permissionDenied(ring: name, path: path, reason: "permission denied (\(owner); we are uid \(geteuid()))")
        case ENOSPC, EDQUOT:
            return .noSpace(ring: name, path: path, bytes: 0)
        default:
            return .system(ring: name, operation: "open \(path)", errno: code)
        }
    }
}
