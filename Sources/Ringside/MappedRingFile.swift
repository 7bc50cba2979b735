import CRingside
#if canImport(Glibc)
import Glibc
#endif

/// The one type that owns a ring file's descriptor and mapping, does offset arithmetic and
/// calls the format's atomics. Everyone else sees typed cursors, records, metrics and errors.
///
/// The mapping, drawn (see `ringside.h` for every field):
///
///     0        4096                 4096 + 512 * registryCapacity        fileSize
///     | header | registry entries ... | records (32 bytes) x capacity ... |
///       0x080 producer line (write_cursor, dropped_total, heartbeat, metric_count ...)
///       0x100 consumer line (read_cursor ...)
///
/// Geometry comes from a validated `RingLayout` copied at open; dynamic fields (cursors,
/// counters, the metric count) are re-read with atomics and checked by the caller.
final class MappedRingFile {
    enum Role {
        /// Read-write, holds the producer lock, may create and initialise the file.
        case producer
        /// Read-write, holds the consumer lock, moves the read cursor.
        case consumer
        /// Read-only, holds no lock, never writes.
        case inspector
    }

    let name: String
    let path: String
    let layout: RingLayout
    let role: Role
    /// Which file this is: a ring replaced under the same name has another identity.
    let identity: RingFileIdentity
    private let descriptor: Int32
    private let base: UnsafeMutableRawPointer
    /// The mapping's slot in the SIGBUS guard (`rs_guard_register`), or -1 when unguarded.
    private let guardSlot: Int32

    private init(name: String, path: String, descriptor: Int32, base: UnsafeMutableRawPointer,
                 layout: RingLayout, role: Role) {
        self.name = name
        self.path = path
        self.descriptor = descriptor
        self.base = base
        self.layout = layout
        self.role = role
        // Before any access: a file truncated from now on reads as zeros instead of raising SIGBUS.
        guardSlot = rs_guard_register(base, layout.fileSize)
        var info = stat()
        fstat(descriptor, &info)
        identity = RingFileIdentity(info)
    }

    deinit {
        rs_guard_unregister(guardSlot) // first: the range must not be claimed once it is unmapped
        munmap(base, layout.fileSize)
        close(descriptor) // also releases this description's lock
    }

    // MARK: - Opening

    /// Opens an existing ring to read it, as its consumer (locked) or as an inspector.
    static func open(name: String, directory: RingDirectory, role: Role,
                     allowedOwners: Set<UInt32> = []) throws(RingError) -> MappedRingFile {
        precondition(role != .producer, "producers attach with openProducer")
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
            let header = try readHeader(fd, name: name, path: path, fileSize: size)
            guard header.version != 0 || (header.magic != 0 && header.magic != RS_MAGIC) else {
                throw RingError.notReady(ring: name)
            }
            let layout: RingLayout
            do { layout = try RingLayout(validating: header, fileSize: size) } catch {
                throw RingError.corrupt(ring: name, path: path, problem: error)
            }
            let protection = role == .inspector ? PROT_READ : PROT_READ | PROT_WRITE
            let base = try map(fd, size: layout.fileSize, protection: protection, populate: false, name: name)
            let file = MappedRingFile(name: name, path: path, descriptor: fd, base: base, layout: layout, role: role)
            if role == .consumer {
                file.store(\.consumer_pid, getpid())
                file.storeRelaxed(\.consumer_heartbeat_ns, rs_clock_coarse_ns())
            }
            return file
        } catch {
            close(fd)
            throw error
        }
    }

    /// Attaches as the producer: creates and initialises the file if it is new (or was left
    /// half-created), else validates it and checks its layout against `wanted`.
    ///
    /// - Throws: `.producerAlive` when another producer holds the ring; `.incompatibleLayout`
    ///   or `.corrupt` for an existing file that does not fit (the caller may then recreate it
    ///   with `removeForRecreate`); `.noSpace` when the directory is full.
    static func openProducer(name: String, directory: RingDirectory, wanted: RingLayout,
                             mode: mode_t) throws(RingError) -> MappedRingFile {
        // A ring removed (or replaced) between our open and our lock is not the ring at the path
        // any more: open again. Each round needs someone else to unlink the file meanwhile.
        for _ in 0..<8 {
            if let file = try openProducerOnce(name: name, directory: directory, wanted: wanted, mode: mode) { return file }
        }
        throw RingError.system(ring: name, operation: "attach: the file kept being replaced", errno: EAGAIN)
    }

    /// One attempt of `openProducer`; nil when the path no longer names the file it locked.
    private static func openProducerOnce(name: String, directory: RingDirectory, wanted: RingLayout,
                                         mode: mode_t) throws(RingError) -> MappedRingFile? {
        let path = directory.filePath(for: name)
        var created = true
        var fd = Glibc.open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        if fd < 0 && errno == EEXIST {
            created = false
            fd = Glibc.open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        }
        guard fd >= 0 else {
            if errno == ENOENT && !created { return nil } // removed between the two opens
            throw openError(errno, name: name, path: path, directory: directory)
        }
        do throws(RingError) {
            if created { fchmod(fd, mode) } // exactly the mode asked for, whatever the umask
            _ = try checkedFileSize(fd, name: name, path: path)
            try lock(fd, byte: RS_LOCK_BYTE_PRODUCER, name: name)
            // Under the lock, the file can only change through us; first make sure it is still
            // the one at the path, then read its size (an earlier producer may have grown it).
            var opened = stat(), atPath = stat()
            guard fstat(fd, &opened) == 0, lstat(path, &atPath) == 0,
                  opened.st_ino == atPath.st_ino, opened.st_dev == atPath.st_dev else {
                close(fd)
                return nil
            }
            let size = Int(opened.st_size)
            // Version 0 means creation never finished (or has not begun): whoever holds the
            // producer lock (re)initialises the file.
            let header = size >= Int(RS_HEADER_SIZE) ? try readHeader(fd, name: name, path: path, fileSize: size) : nil
            let isReady = header.map { $0.version != 0 } ?? false
            let layout: RingLayout
            if let header, isReady {
                do { layout = try RingLayout(validating: header, fileSize: size) } catch {
                    throw RingError.corrupt(ring: name, path: path, problem: error)
                }
                guard layout == wanted else {
                    throw RingError.incompatibleLayout(ring: name, reason: "it holds \(layout.capacity) records and "
                        + "\(layout.registryCapacity) metrics; asked for \(wanted.capacity) and \(wanted.registryCapacity)")
                }
            } else {
                try reserve(fd, bytes: wanted.fileSize, name: name, path: path, removeOnFailure: created)
                layout = wanted
            }
            let base = try map(fd, size: layout.fileSize, protection: PROT_READ | PROT_WRITE, populate: true, name: name)
            let file = MappedRingFile(name: name, path: path, descriptor: fd, base: base, layout: layout, role: .producer)
            if !isReady { file.initialiseLayout() }
            file.markProducerAttached()
            return file
        } catch {
            close(fd)
            throw error
        }
    }

    /// Removes an incompatible or corrupt ring so that a producer can create it anew; a reader
    /// that has it mapped keeps its old mapping. Refuses while another producer holds it.
    static func removeForRecreate(name: String, directory: RingDirectory) throws(RingError) {
        let path = directory.filePath(for: name)
        let fd = Glibc.open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return }
            throw openError(errno, name: name, path: path, directory: directory)
        }
        defer { close(fd) }
        _ = try checkedFileSize(fd, name: name, path: path)
        try lock(fd, byte: RS_LOCK_BYTE_PRODUCER, name: name)
        guard unlink(path) == 0 || errno == ENOENT else {
            throw RingError.system(ring: name, operation: "unlink \(path)", errno: errno)
        }
    }

    /// Runs `body` holding the producer lock of an existing ring, which it neither maps nor
    /// changes: no producer can attach, and so none can write, until `body` returns.
    /// - Throws: `.producerAlive` when a producer holds the ring, or why the file cannot be opened.
    static func withProducerLock<Result>(name: String, directory: RingDirectory, allowedOwners: Set<UInt32>,
                                         _ body: () throws(RingError) -> Result) throws(RingError) -> Result {
        try RingDirectory.validate(name: name)
        let path = directory.filePath(for: name)
        let fd = Glibc.open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw openError(errno, name: name, path: path, directory: directory) }
        defer { close(fd) } // also releases the lock
        _ = try checkedFileSize(fd, name: name, path: path, allowedOwners: allowedOwners)
        try lock(fd, byte: RS_LOCK_BYTE_PRODUCER, name: name)
        return try body()
    }

    // MARK: - The header

    /// The header's fields, for reading plain (layout) values and for pointers to atomics.
    private var header: UnsafeMutablePointer<rs_header> { base.assumingMemoryBound(to: rs_header.self) }

    /// A pointer to a header field, for the atomics and for `rs_producer`.
    func pointer<T>(to field: WritableKeyPath<rs_header, T>) -> UnsafeMutablePointer<T> {
        // The offset of a stored C struct field is always known.
        header.pointer(to: field)!
    }

    /// The layout fields the creator wrote once (magic, sizes, creation times).
    var layoutFields: rs_header { header.pointee }

    var writeCursor: UInt64 { rs_load_acquire_u64(pointer(to: \.write_cursor)) }
    var readCursor: UInt64 { rs_load_acquire_u64(pointer(to: \.read_cursor)) }
    var metricCount: UInt32 { rs_load_acquire_u32(pointer(to: \.metric_count)) }
    var droppedTotal: UInt64 { rs_load_relaxed_u64(pointer(to: \.dropped_total)) }
    var heartbeatNanos: UInt64 { rs_load_relaxed_u64(pointer(to: \.heartbeat_ns)) }
    var producerStartNanos: UInt64 { rs_load_relaxed_u64(pointer(to: \.producer_start_ns)) }
    var producerPID: Int32 { rs_load_relaxed_i32(pointer(to: \.producer_pid)) }
    var producerAttaches: UInt32 { rs_load_relaxed_u32(pointer(to: \.producer_attaches)) }
    var consumerPID: Int32 { rs_load_relaxed_i32(pointer(to: \.consumer_pid)) }
    var consumerHeartbeatNanos: UInt64 { rs_load_relaxed_u64(pointer(to: \.consumer_heartbeat_ns)) }

    /// Whether the file shrank under the mapping: the SIGBUS guard absorbed a fault in it (the
    /// pages past the file's end now read as zeros), or, for a mapping the guard could not take,
    /// the file is now smaller than the layout. Whatever was read from the mapping meanwhile
    /// may be zeros and must be thrown away.
    var wasTruncated: Bool {
        if rs_guard_was_truncated(guardSlot) != 0 { return true }
        return guardSlot < 0 && currentFileSize.map { $0 < layout.fileSize } == true
    }

    /// The file's size now, or nil if fstat fails.
    var currentFileSize: Int? {
        var info = stat()
        return fstat(descriptor, &info) == 0 ? Int(info.st_size) : nil
    }

    /// Throws `.corrupt(.truncated)` when the file shrank under the mapping (see `wasTruncated`).
    func checkNotTruncated() throws(RingError) {
        guard wasTruncated else { return }
        throw .corrupt(ring: name, path: path,
                       problem: .truncated(fileSize: currentFileSize ?? 0, expected: layout.fileSize))
    }

    /// Whether a live process holds the producer (or consumer) lock.
    func isLocked(byte: Int32) -> Bool { rs_lock_byte_is_held(descriptor, byte) == 1 }

    /// The consumer publishes its cursor: the slots below it are free for the producer.
    func publishReadCursor(_ cursor: UInt64) {
        precondition(role == .consumer, "only the consumer moves the read cursor")
        // Release: our reads of the slots below `cursor` finish before the producer may reuse them.
        rs_store_release_u64(pointer(to: \.read_cursor), cursor)
        storeRelaxed(\.consumer_heartbeat_ns, rs_clock_coarse_ns())
    }

    // MARK: - Records

    /// The record slots. Slot `cursor & (capacity - 1)` holds the record at `cursor`.
    var records: UnsafeMutablePointer<rs_record> {
        // `recordsOffset` comes from the validated layout and lies inside the mapping.
        (base + layout.recordsOffset).assumingMemoryBound(to: rs_record.self)
    }

    // MARK: - The registry

    /// A copy of registry entry `index` (below the registry's capacity), for validation.
    func registryEntry(_ index: Int) -> rs_registry_entry {
        precondition(index >= 0 && index < Int(layout.registryCapacity), "registry index out of range")
        return registrySlot(index).pointee
    }

    /// Writes entry `index` in full, then publishes it by storing the metric count.
    func publishRegistryEntry(_ entry: rs_registry_entry, at index: Int) {
        precondition(role == .producer, "only the producer writes the registry")
        precondition(index == Int(metricCount) && index < Int(layout.registryCapacity), "entries are appended")
        registrySlot(index).pointee = entry
        // Release: the entry's bytes are visible before the count that publishes it.
        rs_store_release_u32(pointer(to: \.metric_count), UInt32(index + 1))
    }

    private func registrySlot(_ index: Int) -> UnsafeMutablePointer<rs_registry_entry> {
        // registryOffset + index * 512 stays below recordsOffset for index < registryCapacity.
        (base + layout.registryOffset + index * Int(RS_REGISTRY_ENTRY_SIZE)).assumingMemoryBound(to: rs_registry_entry.self)
    }

    // MARK: - Producer set-up

    private func initialiseLayout() {
        let now = rs_clock_realtime_ns()
        header.pointee.magic = RS_MAGIC
        header.pointee.header_size = RS_HEADER_SIZE
        header.pointee.record_size = RS_RECORD_SIZE
        header.pointee.capacity_log2 = layout.capacityLog2
        header.pointee.registry_capacity = layout.registryCapacity
        header.pointee.registry_entry_size = RS_REGISTRY_ENTRY_SIZE
        header.pointee.registry_offset = UInt64(layout.registryOffset)
        header.pointee.records_offset = UInt64(layout.recordsOffset)
        header.pointee.file_size = UInt64(layout.fileSize)
        header.pointee.created_realtime_ns = now
        header.pointee.created_monotonic_ns = rs_clock_precise_ns()
        // Release, written last: a reader that sees the version sees the whole layout.
        rs_store_release_u32(pointer(to: \.version), RS_FORMAT_VERSION)
    }

    private func markProducerAttached() {
        store(\.producer_pid, getpid())
        storeRelaxed(\.producer_start_ns, rs_clock_realtime_ns())
        rs_store_relaxed_u32(pointer(to: \.producer_attaches), producerAttaches &+ 1)
        storeRelaxed(\.heartbeat_ns, rs_clock_coarse_ns())
    }

    private func store(_ field: WritableKeyPath<rs_header, Int32>, _ value: Int32) {
        rs_store_relaxed_i32(pointer(to: field), value)
    }

    private func storeRelaxed(_ field: WritableKeyPath<rs_header, UInt64>, _ value: UInt64) {
        rs_store_relaxed_u64(pointer(to: field), value)
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
        var pid: Int32 = 0
        let offset = byte == RS_LOCK_BYTE_PRODUCER ? 0xA0 : 0x108
        _ = pread(fd, &pid, 4, off_t(offset))
        throw byte == RS_LOCK_BYTE_PRODUCER ? .producerAlive(ring: name, pid: pid) : .consumerAlive(ring: name, pid: pid)
    }

    private static func reserve(_ fd: Int32, bytes: Int, name: String, path: String, removeOnFailure: Bool) throws(RingError) {
        // Start from zeros: a half-created file may hold anything.
        var result = ftruncate(fd, 0) == 0 ? 0 : errno
        // Reserve every page now, so a full directory fails here and never as SIGBUS later.
        if result == 0 { result = posix_fallocate(fd, 0, off_t(bytes)) }
        guard result != 0 else { return }
        if removeOnFailure { unlink(path) }
        if result == ENOSPC || result == EDQUOT { throw .noSpace(ring: name, path: path, bytes: bytes) }
        throw .system(ring: name, operation: "reserve \(bytes) bytes for \(path)", errno: result)
    }

    private static func map(_ fd: Int32, size: Int, protection: Int32, populate: Bool,
                            name: String) throws(RingError) -> UnsafeMutableRawPointer {
        let flags = MAP_SHARED | (populate ? MAP_POPULATE : 0)
        guard let base = mmap(nil, size, protection, flags, fd, 0), base != MAP_FAILED else {
            throw .system(ring: name, operation: "mmap \(size) bytes", errno: errno)
        }
        return base
    }

    private static func openError(_ code: Int32, name: String, path: String, directory: RingDirectory) -> RingError {
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
