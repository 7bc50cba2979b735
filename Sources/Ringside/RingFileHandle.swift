import CRingside
#if canImport(Glibc)
import Glibc
#endif
import RingsideSystem

/// The open, lock and reserve side of reading a bot file: its descriptor, the checks on it (a
/// regular file of ours, wholly allocated, with a valid layout), the locks, and `mmap`. It never
/// touches mapped memory: `MappedRingFile` is the memory side.
final class RingFileHandle {
    /// Who reads the file.
    enum Role {
        /// Read-write, holds the consumer lock, moves the lanes' read cursors.
        case consumer
        /// Read-only, holds no lock, never writes.
        case inspector
        /// Read-write, holds no lock, writes the operator's control words only (CONTROL in ringside.h).
        case `operator`
    }

    let name: String
    let path: String
    let role: Role
    /// Which file this is: a bot file replaced under the same name has another identity.
    let identity: RingFileIdentity
    /// The user that owns the file (nil when fstat failed: never taken for root). Only root may
    /// give a file away (chown), so it stays the owner while the file is open.
    let owner: UInt32?
    private let descriptor: Int32

    private init(name: String, path: String, descriptor: Int32, role: Role) {
        self.name = name
        self.path = path
        self.descriptor = descriptor
        self.role = role
        let info = try? System.fstat(descriptor)
        identity = RingFileIdentity(info ?? stat())
        owner = info?.st_uid
    }

    deinit {
        System.close(descriptor)  // also releases this description's lock
    }

    /// Opens an existing bot file to read it, as its consumer (locked) or as an inspector, and
    /// validates its layout (read with `pread`: nothing is mapped yet).
    static func open(
        name: String, directory: RingDirectory, role: Role,
        allowedOwners: Set<UInt32> = []
    ) throws(RingError) -> (handle: RingFileHandle, layout: RingLayout) {
        try RingDirectory.validate(ringName: name)
        let path = directory.filePath(for: name)
        // O_NONBLOCK: a FIFO planted under a ring's name must not block the open (it is then refused as
        // not a regular file); on regular files it changes nothing.
        let flags = (role == .inspector ? O_RDONLY : O_RDWR) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK
        let fd = try openFile(path, flags, name: name, directory: directory)
        let handle = RingFileHandle(name: name, path: path, descriptor: fd, role: role)  // closes fd if we throw
        let size = try handle.checkedFileSize(allowedOwners: allowedOwners)
        if role == .consumer { try handle.lock(byte: RS_LOCK_BYTE_CONSUMER) }
        guard size > 0 else { throw RingError.notReady(ring: name) }
        let fields = try handle.readHeader(fileSize: size)
        guard fields.version != 0 || (fields.magic != 0 && fields.magic != RS_MAGIC) else {
            throw RingError.notReady(ring: name)
        }
        let layout: RingLayout
        do { layout = try RingLayout(validating: fields, fileSize: size) } catch {
            throw RingError.corrupt(ring: name, path: path, problem: error)
        }
        try handle.checkAllocated()
        return (handle, layout)
    }

    /// Runs `body` holding the producer lock of an existing bot file, which it neither maps nor
    /// changes: no process can attach, and so none can write, until `body` returns.
    /// - Throws: `.producerAlive` when a process holds the bot, or why the file cannot be opened.
    static func withProducerLock<Result>(
        name: String, directory: RingDirectory, allowedOwners: Set<UInt32>,
        _ body: () throws(RingError) -> Result
    ) throws(RingError) -> Result {
        try RingDirectory.validate(ringName: name)
        let path = directory.filePath(for: name)
        let fd = try openFile(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, name: name, directory: directory)
        let handle = RingFileHandle(name: name, path: path, descriptor: fd, role: .consumer)
        defer { withExtendedLifetime(handle) {} }  // the lock lasts until `body` returns
        _ = try handle.checkedFileSize(allowedOwners: allowedOwners)
        try handle.lock(byte: RS_LOCK_BYTE_PRODUCER)
        return try body()
    }

    /// The file's size now, or nil if fstat fails.
    var currentFileSize: Int? { (try? System.fstat(descriptor)).map { Int($0.st_size) } }

    /// Whether a live process holds the producer (or consumer) lock.
    func isLocked(byte: Int32) -> Bool { rs_lock_byte_is_held(descriptor, byte) == 1 }

    /// Maps `size` bytes at `offset`, read-write for the consumer, read-only for an inspector,
    /// registered with the SIGBUS guard before anything reads it.
    /// - Throws: `.unavailable` when the guard cannot take the range (its `RS_GUARD_SLOTS`
    ///   ranges are all in use): an unguarded mapping is never read, since another process may
    ///   truncate the file under it.
    func map(size: Int, offset: Int) throws(RingError) -> Mapping {
        let protection = role == .inspector ? PROT_READ : PROT_READ | PROT_WRITE
        let base: UnsafeMutableRawPointer
        do { base = try System.mmap(length: size, protection: protection, flags: MAP_SHARED, fd: descriptor, offset: offset) } catch {
            if error == .noMemory {
                throw .unavailable(
                    ring: name,
                    reason: "cannot map \(size) bytes at \(offset): this process has as many "
                        + "mappings as the kernel allows (vm.max_map_count) or no address space left")
            }
            throw .system(ring: name, operation: "mmap \(size) bytes at \(offset)", errno: error.rawValue)
        }
        // Before any access: a file truncated from now on reads as zeros instead of raising SIGBUS.
        let slot = rs_guard_register(base, size)
        guard slot >= 0 else {
            System.munmap(base, length: size)
            throw .unavailable(
                ring: name,
                reason: "the SIGBUS guard holds \(RS_GUARD_SLOTS) mapped ranges at most "
                    + "and all are in use; a range it does not guard is never read")
        }
        return Mapping(base: base, size: size, guardSlot: slot)
    }

    /// One mapped range, registered with the SIGBUS guard (`rs_guard_register`). Only
    /// `MappedRingFile` reads through `base`.
    struct Mapping {
        let base: UnsafeMutableRawPointer
        let size: Int
        /// The guard's slot.
        let guardSlot: Int32

        fileprivate init(base: UnsafeMutableRawPointer, size: Int, guardSlot: Int32) {
            self.base = base
            self.size = size
            self.guardSlot = guardSlot
        }

        func unmap() {
            rs_guard_unregister(guardSlot)  // first: the range must not be claimed once it is unmapped
            System.munmap(base, length: size)
        }

        /// Whether the guard absorbed a fault in this range: the file shrank under it.
        var wasTruncated: Bool { rs_guard_was_truncated(guardSlot) != 0 }
    }

    // MARK: - Checks

    /// The file's size, after checking it is a regular file owned by us (or an allowed user).
    private func checkedFileSize(allowedOwners: Set<UInt32>) throws(RingError) -> Int {
        let info = try fileInfo()
        if let refusal = Self.refusal(mode: info.st_mode, owner: info.st_uid, name: name, path: path, allowedOwners: allowedOwners) {
            throw refusal
        }
        return Int(info.st_size)
    }

    /// Why a file of `mode` (`st_mode`, from `stat` or `lstat`) owned by `owner` cannot be read as
    /// a ring: not a regular file (a link, a FIFO, a directory), or owned by a user not allowed.
    /// One wording for the open and for a caller that looks before it opens (the collector's discovery).
    static func refusal(mode: mode_t, owner: uid_t, name: String, path: String, allowedOwners: Set<UInt32>) -> RingError? {
        switch mode & S_IFMT {
        case S_IFREG: break
        case S_IFLNK: return .notARegularFile(ring: name, path: path, reason: "a symbolic link; Ringside never follows links")
        default: return .notARegularFile(ring: name, path: path, reason: "\(fileKind(mode)) owned by uid \(owner), not a regular file")
        }
        guard owner == geteuid() || allowedOwners.contains(owner) else {
            return .permissionDenied(
                ring: name, path: path,
                reason: "owned by uid \(owner), not \(geteuid()); "
                    + "rings are private to their user (a collector may allow others with --allow-uid)")
        }
        return nil
    }

    /// Throws `.corrupt(.truncated)` when the file is now shorter than `neededSize` (the part
    /// mapped), and `.corrupt(.unallocated)` when it has holes: one `fstat`, for a reader told
    /// that the file changed (cut short with `ftruncate`, or hole-punched, under its mappings).
    func checkIntact(neededSize: Int) throws(RingError) {
        let info = try fileInfo()
        guard Int(info.st_size) >= neededSize else {
            throw .corrupt(ring: name, path: path, problem: .truncated(fileSize: Int(info.st_size), expected: neededSize))
        }
        let allocated = Int(info.st_blocks) * 512
        guard allocated >= Int(info.st_size) else {
            throw .corrupt(ring: name, path: path, problem: .unallocated(fileSize: Int(info.st_size), allocatedBytes: allocated))
        }
    }

    /// Throws `.corrupt(.unallocated)` unless every byte of the file is allocated (`st_blocks`).
    /// A producer reserves the header part and each lane with `posix_fallocate` before it
    /// publishes them, so a sound file is whole; a sparse one claiming a large capacity would have
    /// this reader allocate its holes (tmpfs charges a page to whoever touches it first).
    func checkAllocated() throws(RingError) {
        let info = try fileInfo()
        let allocated = Int(info.st_blocks) * 512  // st_blocks counts 512-byte units, whatever the block size
        guard allocated >= Int(info.st_size) else {
            throw .corrupt(ring: name, path: path, problem: .unallocated(fileSize: Int(info.st_size), allocatedBytes: allocated))
        }
    }

    /// The file's `fstat`.
    private func fileInfo() throws(RingError) -> stat {
        do { return try System.fstat(descriptor) } catch {
            throw .system(ring: name, operation: "fstat \(path)", errno: error.rawValue)
        }
    }

    /// A copy of the header's fields, read with `pread`.
    private func readHeader(fileSize: Int) throws(RingError) -> rs_header {
        var header = rs_header()
        let size = MemoryLayout<rs_header>.size
        guard fileSize >= Int(RS_HEADER_SIZE) else {
            throw .corrupt(ring: name, path: path, problem: .truncated(fileSize: fileSize, expected: Int(RS_HEADER_SIZE)))
        }
        let count: Int
        do {
            count = try withUnsafeMutableBytes(of: &header) { (bytes) throws(Errno) in try System.pread(descriptor, into: bytes, at: 0) }
        } catch {
            throw .system(ring: name, operation: "read \(path)", errno: error.rawValue)
        }
        guard count == size else {
            throw .corrupt(ring: name, path: path, problem: .truncated(fileSize: count, expected: size))
        }
        return header
    }

    /// An integer read from the file at `offset` with `pread` (nothing mapped: a file too short
    /// for it cannot fault); nil when the file does not hold it whole.
    func read<T: FixedWidthInteger>(_ type: T.Type, at offset: Int) -> T? {
        var value = T.zero
        let count = try? withUnsafeMutableBytes(of: &value) { (bytes) throws(Errno) in
            try System.pread(descriptor, into: bytes, at: offset)
        }
        return count == MemoryLayout<T>.size ? T(littleEndian: value) : nil
    }

    private func lock(byte: Int32) throws(RingError) {
        let result = rs_lock_byte(descriptor, byte)
        guard result != 0 else { return }
        guard result == EAGAIN || result == EACCES else {
            throw .system(ring: name, operation: "lock", errno: result)
        }
        // Who holds it, for the message: the pid field of the holder's line.
        let field = byte == RS_LOCK_BYTE_PRODUCER ? \rs_header.producer_pid : \rs_header.consumer_pid
        let pid = read(Int32.self, at: MemoryLayout<rs_header>.offset(of: field)!) ?? 0
        throw byte == RS_LOCK_BYTE_PRODUCER ? .producerAlive(ring: name, pid: pid) : .consumerAlive(ring: name, pid: pid)
    }

    /// Opens a bot file; the typed error of a failed open.
    private static func openFile(_ path: String, _ flags: Int32, name: String, directory: RingDirectory) throws(RingError) -> Int32 {
        do { return try System.open(path, flags) } catch { throw openError(error, name: name, path: path, directory: directory) }
    }

    static func openError(_ error: Errno, name: String, path: String, directory: RingDirectory) -> RingError {
        switch error {
        case .noSuchFileOrDirectory:
            if (try? System.stat(directory.path)) == nil {
                return .system(ring: name, operation: "open ring directory \(directory.path)", errno: ENOENT)
            }
            return .notFound(ring: name, path: path, existing: directory.ringNames())
        case .tooManySymbolicLinkLevels:
            return .notARegularFile(ring: name, path: path, reason: "a symbolic link; Ringside never follows links")
        case .noSuchAddressOrDevice, Errno(rawValue: ENODEV), .isDirectory:
            // A socket, a device without a driver; a directory opened to write: what it is, and whose.
            let found = (try? System.lstat(path)).map { "\(fileKind($0.st_mode)) owned by uid \($0.st_uid), " } ?? ""
            return .notARegularFile(ring: name, path: path, reason: found + "not a regular file")
        case .permissionDenied, .notPermitted:
            let owner =
                (try? System.lstat(path)).map { "owned by uid \($0.st_uid) with mode \(String($0.st_mode & 0o777, radix: 8))" }
                ?? "no access"
            return .permissionDenied(ring: name, path: path, reason: "permission denied (\(owner); we are uid \(geteuid()))")
        case .noSpace, .diskQuotaExceeded:
            return .noSpace(ring: name, path: path, bytes: 0)
        default:
            return .system(ring: name, operation: "open \(path)", errno: error.rawValue)
        }
    }
}
