import CRingside
#if canImport(Glibc)
import Glibc
#endif
import RingsideSystem

/// Where rings live and what they are called: `<directory>/ringside.<name>`.
///
/// The directory is the one given, else `RINGSIDE_DIR`, else `/dev/shm`.
public struct RingDirectory: Sendable, Equatable {
    /// The default ring directory.
    public static let defaultPath = "/dev/shm"
    /// The environment variable that overrides the default directory.
    public static let environmentVariable = "RINGSIDE_DIR"
    /// The file name prefix of ring files.
    public static let filePrefix = RS_FILE_PREFIX

    /// The directory's path.
    public let path: String

    /// The directory given, else `RINGSIDE_DIR`, else `/dev/shm`.
    public init(_ path: String? = nil) {
        if let path, !path.isEmpty {
            self.path = path
        } else if let value = getenv(Self.environmentVariable), value.pointee != 0 {
            self.path = String(cString: value)
        } else {
            self.path = Self.defaultPath
        }
    }

    /// The file of the ring with this (validated) name.
    package func filePath(for name: String) -> String {
        path + "/" + Self.filePrefix + name
    }

    /// Checks a ring name: 1 to 200 characters of `[A-Za-z0-9._-]`.
    package static func validate(name: String) throws(RingError) {
        let allowed = "letters, digits, '.', '_' and '-'"
        guard !name.isEmpty else { throw .invalidName(name, reason: "it is empty; 1 to 200 \(allowed) are allowed") }
        guard name.utf8.count <= Int(RS_NAME_LENGTH_MAX) else {
            throw .invalidName(name, reason: "it has \(name.utf8.count) characters; at most 200 are allowed")
        }
        for byte in name.utf8 where !isNameByte(byte) {
            let shown = byte < 0x80 ? "'\(Character(Unicode.Scalar(byte)))'" : "a non-ASCII character"
            throw .invalidName(name, reason: "it contains \(shown); only \(allowed) are allowed")
        }
    }

    /// Checks a ring's name: a bot's (see `validate(name:)`), or a worker's, `<bot>@<pid>`.
    package static func validate(ringName: String) throws(RingError) {
        guard let worker = WorkerRing(ringName) else { return try validate(name: ringName) }
        try validate(name: worker.bot)
    }

    /// Why the directory cannot be listed (missing, not a directory, no permission), or nil.
    package func accessProblem() -> String? {
        do {
            guard (try System.stat(path).st_mode & S_IFMT) == S_IFDIR else { return "not a directory" }
            try System.access(path, R_OK | X_OK)
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// The names of the rings in the directory (files `ringside.<valid name>`), sorted.
    /// A missing or unreadable directory has none.
    package func ringNames() -> [String] {
        let fileNames = (try? System.directoryEntries(path, prefix: Self.filePrefix)) ?? []
        return fileNames.compactMap { fileName in
            guard fileName.hasPrefix(Self.filePrefix) else { return nil }
            let name = String(fileName.dropFirst(Self.filePrefix.count))
            return (try? Self.validate(ringName: name)) != nil ? name : nil
        }.sorted()
    }

    /// Removes a ring's file. Processes that have it mapped keep their mapping; the name is free.
    /// - Throws: `RingError.notFound` if there is no such ring, `.system` if unlink fails.
    package func remove(_ name: String) throws(RingError) {
        try Self.validate(ringName: name)
        let file = filePath(for: name)
        do { try System.unlink(file) } catch {
            if error == .noSuchFileOrDirectory { throw .notFound(ring: name, path: file, existing: ringNames()) }
            throw .system(ring: name, operation: "unlink \(file)", errno: error.rawValue)
        }
    }

    /// Removes a ring's file if no producer holds it and `shouldRemove` agrees, deciding while
    /// holding the producer lock itself: no producer can attach or write between the decision
    /// and the unlink (one that tries meanwhile gets `.producerAlive`).
    ///
    /// - Parameter shouldRemove: given the ring's status, or why it cannot be read (corrupt, not
    ///   ready), says whether to remove it. The status shows `producerAlive` true: that lock is ours.
    /// - Returns: whether the file was removed.
    /// - Throws: `.producerAlive` when a producer holds the ring; `.notFound`,
    ///   `.permissionDenied` or `.system` when the file cannot be opened or unlinked.
    package func removeUnlessProducerAlive(
        _ name: String, allowedOwners: Set<UInt32> = [],
        if shouldRemove: (Result<RingStatus, RingError>) -> Bool
    ) throws(RingError) -> Bool {
        try RingFileHandle.withProducerLock(name: name, directory: self, allowedOwners: allowedOwners) { () throws(RingError) -> Bool in
            let status: Result<RingStatus, RingError>
            do throws(RingError) {
                let file = try MappedRingFile.open(name: name, directory: self, role: .inspector, allowedOwners: allowedOwners)
                status = .success(try file.status())
            } catch {
                status = .failure(error)
            }
            guard shouldRemove(status) else { return false }
            let file = filePath(for: name)
            do throws(Errno) { try System.unlink(file) } catch {
                throw .system(ring: name, operation: "unlink \(file)", errno: error.rawValue)
            }
            return true
        }
    }

    /// The identity of the ring file now at `name`'s path, or nil if there is none.
    /// Never follows a symbolic link.
    package func fileIdentity(of name: String) -> RingFileIdentity? {
        (try? System.lstat(filePath(for: name))).map(RingFileIdentity.init)
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }
}

/// A worker's ring, `<bot>@<pid>` or `<bot>@<pid>.<n>`: the file of one of the processes that
/// write bot `<bot>`, under a random `n` when its own name was unusable (see WORKERS in ringside.h).
package struct WorkerRing: Sendable, Hashable {
    /// The bot's name (not validated here).
    package let bot: String
    /// The process that made the file.
    package let pid: Int32
    /// The random number of a name taken in place of `<bot>@<pid>`; nil for that name.
    package let suffix: UInt32?

    /// The parts of a worker's ring name; nil for any other name (a bot's has no separator).
    package init?(_ ringName: String) {
        guard let separator = ringName.lastIndex(of: Character(RS_WORKER_SEPARATOR)) else { return nil }
        let rest = ringName[ringName.index(after: separator)...]
        let parts = rest.split(separator: Character(RS_WORKER_SUFFIX_SEPARATOR), maxSplits: 1, omittingEmptySubsequences: false)
        guard let pid = Self.number(parts[0], below: UInt64(Int32.max) + 1) else { return nil }
        if parts.count == 2 {
            guard let suffix = Self.number(parts[1], below: UInt64(UInt32.max) + 1) else { return nil }
            self.suffix = UInt32(suffix)
        } else {
            suffix = nil
        }
        bot = String(ringName[..<separator])
        self.pid = Int32(pid)
    }

    /// 1 to 10 ASCII digits without a leading 0, below `bound`; nil for anything else.
    private static func number(_ text: Substring, below bound: UInt64) -> UInt64? {
        guard (1...10).contains(text.utf8.count), text.utf8.first != UInt8(ascii: "0"),
            text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let value = UInt64(text), value > 0, value < bound
        else { return nil }
        return value
    }
}

/// Which file a path named: a ring removed and created again under the same name differs.
package struct RingFileIdentity: Sendable, Hashable {
    package let device: UInt64
    package let inode: UInt64

    init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}
