#if canImport(Glibc)
import Glibc
#endif
import RingsideSystem

/// The directory of a file the collector writes (`--hlog`, `--json-dump`, and in the ring
/// directory its state and its lock), held open so that every name in it is looked up from one
/// descriptor and no link is ever followed.
///
/// The collector may run as root in a directory other users can write (a sticky one, as /tmp):
/// anything found at a name there may have been planted, such as a link to a file of root's, a
/// FIFO whose open would block, a file of another user's. So this type:
/// - opens the directory once, and refuses one another user could write (see ``init(path:)``);
/// - creates files only new (`O_EXCL`): what is at a name is never opened, so never written through;
/// - moves or replaces only a regular file of the collector's own with one link, and leaves
///   anything else where it is, saying what it found;
/// - makes no call that could block on a FIFO (`fstatat`, `renameat`, `O_EXCL|O_NONBLOCK` opens).
///
/// In a sticky directory another user can neither remove nor rename the collector's files, so a
/// name that holds a file of ours keeps holding it until we move it; between our move and our new
/// file they can plant something, and the new file's `O_EXCL` create then fails, reported.
///
/// It holds nothing that changes after `init`: threads may use one at once (the state's journal
/// on the drain thread, its snapshots on the saver's).
final class LogDirectory: Sendable {
    /// The directory's path, as given less trailing slashes.
    let path: String
    /// The collector's effective user: the owner of every file it makes, and of those it moves or replaces.
    let owner: uid_t
    private let descriptor: Int32

    /// The mode of the files made here: readable by all, as `/metrics` is to anyone on the host,
    /// so the operator's tools (HistogramLogAnalyzer, a log shipper) need not run as the collector's user.
    static let fileMode: mode_t = 0o644

    /// Opens the directory at `path` and checks that only the collector's user or root can change
    /// what is in it.
    ///
    /// The path's last component may not be a symbolic link (`O_NOFOLLOW`): the directory checked
    /// is then the one the operator named, not one a link points to now. Links among its parents
    /// are followed, as the kernel does; they should be as trusted as the directory (see
    /// docs/operations.md).
    ///
    /// - Throws: ``LogDirectoryError``: the directory cannot be opened or is a link; it is owned by
    ///   a user other than the collector's effective user and root; it is writable by its group or
    ///   others and not sticky.
    init(path: String) throws(LogDirectoryError) {
        // A trailing slash would make the kernel follow a link there despite O_NOFOLLOW.
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        let path = String(trimmed)
        self.path = path
        owner = geteuid()
        // O_NONBLOCK: with O_DIRECTORY a FIFO is refused before any open, but no open here may block.
        do { descriptor = try System.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) } catch {
            if let info = try? System.lstat(path), info.st_mode & S_IFMT == S_IFLNK {
                throw .directoryIsLink(path: path, target: (try? System.readlink(path)) ?? "?")
            }
            throw .cannotOpenDirectory(path: path, errno: error)
        }
        // From here every property is set, so a throw runs deinit, which closes the descriptor.
        let info: stat
        do { info = try System.fstat(descriptor) } catch { throw .cannotOpenDirectory(path: path, errno: error) }
        if info.st_uid != owner, info.st_uid != 0 {
            throw .directoryOwner(path: path, owner: info.st_uid, collector: owner)
        }
        if info.st_mode & (S_IWGRP | S_IWOTH) != 0, info.st_mode & S_ISVTX == 0 {
            throw .directoryWritable(path: path, mode: info.st_mode & 0o7777)
        }
    }

    deinit { System.close(descriptor) }

    /// `filePath`'s directory and its name in it: `/var/log/a.hlog` is (`/var/log`, `a.hlog`),
    /// `a.hlog` is (`.`, `a.hlog`), `/a.hlog` is (`/`, `a.hlog`). The name is empty, `.` or `..`
    /// when the path names no file (``namesFile(_:)``).
    static func split(_ filePath: String) -> (directory: String, name: String) {
        guard let slash = filePath.lastIndex(of: "/") else { return (".", filePath) }
        let name = String(filePath[filePath.index(after: slash)...])
        var directory = filePath[..<slash]
        while directory.hasSuffix("/") { directory = directory.dropLast() }
        return (directory.isEmpty ? "/" : String(directory), name)
    }

    /// Whether `filePath` names a file in a directory: not empty, not ending in `/`, `.` or `..`.
    static func namesFile(_ filePath: String) -> Bool {
        !["", ".", ".."].contains(split(filePath).name)
    }

    /// The path of `name` in this directory, for messages.
    func path(of name: String) -> String {
        path.hasSuffix("/") ? path + name : path + "/" + name
    }

    /// What is at `name`, the entry itself (a link is not followed); nil when nothing is.
    /// The corresponding C function is `fstatat` with `AT_SYMLINK_NOFOLLOW`.
    func entry(_ name: String) throws(LogDirectoryError) -> stat? {
        do { return try System.fstatat(descriptor, name, flags: AT_SYMLINK_NOFOLLOW) } catch {
            if error == .noSuchFileOrDirectory { return nil }
            throw .failed(action: "look at \(path(of: name))", errno: error)
        }
    }

    /// Renames `name` to `newName`, replacing what `newName` held, if `name` is a regular file of
    /// the collector's with one link; does nothing when nothing is at `name`.
    /// - Throws: ``LogDirectoryError/notOurs(path:found:)`` for anything else at `name`, left
    ///   where it is; ``LogDirectoryError/failed(action:errno:)`` if the rename fails.
    func moveAside(_ name: String, to newName: String) throws(LogDirectoryError) {
        guard let info = try entry(name) else { return }
        if let found = refusal(info) { throw .notOurs(path: path(of: name), found: found) }
        try rename(name, to: newName)
    }

    /// Creates `name`, which must not exist, open for appending (mode ``fileMode``, less the umask).
    ///
    /// `O_CREAT|O_EXCL|O_NOFOLLOW|O_NONBLOCK`: whatever is at `name` (a link, a FIFO, a file) makes
    /// the create fail without being opened. The new file is checked with `fstat` all the same.
    /// - Returns: the new file's descriptor, which the caller closes.
    /// - Throws: ``LogDirectoryError/notOurs(path:found:)`` when something is at `name`, saying
    ///   what; ``LogDirectoryError/failed(action:errno:)`` for other failures.
    /// - Parameters:
    ///   - access: `O_WRONLY | O_APPEND` (a log), or `O_RDWR` (a lock file).
    ///   - mode: the new file's mode, less the umask.
    func create(_ name: String, access: Int32 = O_WRONLY | O_APPEND, mode: mode_t = fileMode) throws(LogDirectoryError) -> Int32 {
        let opened: Int32
        do {
            opened = try System.openat(descriptor, name, access | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode: mode)
        } catch {
            // Usually planted after a move aside; said as moveAside would say it, so it is logged once.
            if error == .fileExists, let info = try? entry(name), let found = refusal(info) {
                throw .notOurs(path: path(of: name), found: found)
            }
            throw .failed(action: "create \(path(of: name))", errno: error)
        }
        _ = try checkOpened(opened, name)
        return opened
    }

    /// What `fstat` says of `opened`, just opened at `name`, if it is a regular file of the
    /// collector's with one link.
    /// - Throws: ``LogDirectoryError/notOurs(path:found:)`` for anything else,
    ///   ``LogDirectoryError/failed(action:errno:)`` if it cannot be looked at; `opened` is then closed.
    private func checkOpened(_ opened: Int32, _ name: String) throws(LogDirectoryError) -> stat {
        let info: stat
        do { info = try System.fstat(opened) } catch {
            System.close(opened)
            throw .failed(action: "look at \(path(of: name))", errno: error)
        }
        if let found = refusal(info) {
            System.close(opened)
            throw .notOurs(path: path(of: name), found: found)
        }
        return info
    }

    /// Writes `bytes` to a new temporary file (flushed to the disk first when `flushing`) and
    /// renames it to `name`; nil, or what went wrong (the temporary file is then removed).
    func writeFile(_ name: String, _ bytes: [UInt8], flushing: Bool) -> String? {
        let temporary: (name: String, descriptor: Int32)
        do { temporary = try createTemporary(for: name) } catch { return "\(error)" }
        var failure: String?
        do {
            try System.writeAll(temporary.descriptor, bytes)
            if flushing { try System.fsync(temporary.descriptor) }
        } catch {
            failure = "cannot write \(path(of: temporary.name)): \(error)"
        }
        System.close(temporary.descriptor)
        if failure == nil {
            do { try replace(name, with: temporary.name) } catch { failure = "\(error)" }
        }
        if failure != nil { remove(temporary.name) }
        return failure
    }

    /// The contents of `name`, if it is a regular file of the collector's with one link; nil when
    /// nothing is there.
    /// - Parameter limit: the most bytes read: a larger file is refused by its size, unread (a
    ///   sparse file of gigabytes costs nothing), and one that grows past it while read is too.
    /// - Throws: ``LogDirectoryError/notOurs(path:found:)`` for anything else at `name`, left
    ///   unread; ``LogDirectoryError/tooLarge(path:bytes:limit:)`` past `limit`;
    ///   ``LogDirectoryError/failed(action:errno:)`` if it cannot be read.
    func contents(of name: String, limit: Int = .max) throws(LogDirectoryError) -> [UInt8]? {
        guard let opened = try openOwn(name, access: O_RDONLY) else { return nil }
        defer { System.close(opened.descriptor) }
        if opened.info.st_size > limit { throw .tooLarge(path: path(of: name), bytes: Int(opened.info.st_size), limit: limit) }
        let bytes: [UInt8]
        do { bytes = try System.readAll(opened.descriptor, atMost: limit) } catch {
            throw .failed(action: "read \(path(of: name))", errno: error)
        }
        if bytes.count > limit { throw .tooLarge(path: path(of: name), bytes: bytes.count, limit: limit) }
        return bytes
    }

    /// Opens `name` (`access`: `O_RDONLY` or `O_RDWR`), if it is a regular file of the
    /// collector's with one link; nil when nothing is there. No link is followed, no open blocks
    /// (a FIFO), and what was opened is checked with `fstat`.
    /// - Returns: the descriptor, which the caller closes, and what `fstat` said of it.
    /// - Throws: ``LogDirectoryError/notOurs(path:found:)`` for anything else at `name` (closed
    ///   again); ``LogDirectoryError/failed(action:errno:)`` if it cannot be opened.
    func openOwn(_ name: String, access: Int32) throws(LogDirectoryError) -> (descriptor: Int32, info: stat)? {
        let opened: Int32
        do { opened = try System.openat(descriptor, name, access | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode: 0) } catch {
            if error == .noSuchFileOrDirectory { return nil }
            if let info = try? entry(name), let found = refusal(info) { throw .notOurs(path: path(of: name), found: found) }
            throw .failed(action: "open \(path(of: name))", errno: error)
        }
        return (opened, try checkOpened(opened, name))
    }

    /// Whether `name` holds a regular file of the collector's with one link: one it made (in a
    /// sticky directory no one else can put one there, nor take it away).
    func holdsOwn(_ name: String) -> Bool {
        guard let info = try? entry(name) else { return false }
        return refusal(info) == nil
    }

    /// Removes `name` if it holds a regular file of the collector's with one link; anything else
    /// is left where it is. Returns whether it went.
    @discardableResult
    func removeOwn(_ name: String) -> Bool {
        guard holdsOwn(name) else { return false }
        return (try? System.unlinkat(descriptor, name)) != nil
    }

    /// The names in the directory that start with `prefix` (all by default), `.` and `..` left out.
    func names(prefix: String = "") throws(LogDirectoryError) -> [String] {
        do { return try System.directoryEntries(path, prefix: prefix).filter { $0 != "." && $0 != ".." } } catch {
            throw .failed(action: "list \(path)", errno: error)
        }
    }

    /// Creates a new file beside `name` whose name another user cannot guess (`NAME.tmp.PID.RANDOM`),
    /// as ``create(_:)`` does; for a file to be written whole, then renamed over `name`.
    func createTemporary(for name: String) throws(LogDirectoryError) -> (name: String, descriptor: Int32) {
        var random = SystemRandomNumberGenerator()
        let suffix = String(random.next() as UInt64, radix: 16)
        let temporary = "\(name).tmp.\(getpid()).\(suffix)"
        return (temporary, try create(temporary))
    }

    /// Renames `temporary` to `name` if `name` holds nothing or a regular file of the collector's
    /// with one link (an earlier one); otherwise leaves both alone.
    /// - Throws: ``LogDirectoryError/notOurs(path:found:)`` for anything else at `name`;
    ///   ``LogDirectoryError/failed(action:errno:)`` if the rename fails.
    func replace(_ name: String, with temporary: String) throws(LogDirectoryError) {
        if let info = try entry(name), let found = refusal(info) {
            throw .notOurs(path: path(of: name), found: found)
        }
        // Something planted at `name` since the look is replaced, not written through: renameat
        // replaces the entry itself, a link included, and never follows it.
        try rename(temporary, to: name)
    }

    /// Renames `name` to `newName`, replacing the entry at `newName` whatever it is (a link is
    /// replaced, not followed), unchecked: ``moveAside(_:to:)`` and ``replace(_:with:)`` check first.
    /// The corresponding C function is `renameat`.
    func rename(_ name: String, to newName: String) throws(LogDirectoryError) {
        do { try System.renameat(descriptor, name, descriptor, newName) } catch {
            throw .failed(action: "rename \(path(of: name)) to \(path(of: newName))", errno: error)
        }
    }

    /// Removes the entry `name` (not what a link points to), if it can; for temporary files.
    func remove(_ name: String) {
        try? System.unlinkat(descriptor, name)
    }

    /// Why the entry `info` is not a file the collector may move, replace or keep writing: nil for
    /// a regular file of its own with one link (another link could be a name the collector does not control).
    private func refusal(_ info: stat) -> String? {
        if info.st_mode & S_IFMT != S_IFREG { return fileKind(info.st_mode) }
        if info.st_uid != owner { return "a file owned by uid \(info.st_uid), not by the collector's uid \(owner)" }
        if info.st_nlink != 1 { return "a file with \(info.st_nlink) links (another name shares it)" }
        return nil
    }
}

/// Why a ``LogDirectory`` refused a directory or a file, or could not do what it was asked.
/// Each message names the path and what was found there.
enum LogDirectoryError: Error, Equatable, CustomStringConvertible {
    /// The directory is missing, not a directory, or not ours to open.
    case cannotOpenDirectory(path: String, errno: Errno)
    /// The directory's path ends in a symbolic link.
    case directoryIsLink(path: String, target: String)
    /// The directory belongs to another user (not the collector's, not root).
    case directoryOwner(path: String, owner: uid_t, collector: uid_t)
    /// The directory is writable by its group or others and has no sticky bit.
    case directoryWritable(path: String, mode: mode_t)
    /// What is at `path` is not a regular file of the collector's with one link: left alone.
    case notOurs(path: String, found: String)
    /// A call failed: `cannot ACTION: STRERROR (errno: N)`.
    case failed(action: String, errno: Errno)
    /// A file is larger than what is read of it: left unread.
    case tooLarge(path: String, bytes: Int, limit: Int)

    var description: String {
        switch self {
        case let .cannotOpenDirectory(path, errno):
            return "cannot open the directory \(path): \(errno)"
        case let .directoryIsLink(path, target):
            return "the directory \(path) is a symbolic link (to \(target)); give the directory's own path: "
                + "the collector follows no link there, where it could be pointed elsewhere"
        case let .directoryOwner(path, owner, collector):
            return "the directory \(path) is owned by uid \(owner), not by the collector's uid \(collector) or root: "
                + "its owner could replace the collector's files; use a directory of the collector's user or of root"
        case let .directoryWritable(path, mode):
            let who = mode & S_IWGRP != 0 && mode & S_IWOTH != 0 ? "its group and others" : mode & S_IWGRP != 0 ? "its group" : "others"
            return "the directory \(path) (mode \(octal(mode))) is writable by \(who) and not sticky: they could "
                + "rename the collector's files and plant links in their place; chmod go-w it, or chmod +t it as /tmp is"
        case let .notOurs(path, found):
            return "\(path) is \(found), not a regular file of the collector's: left alone (remove it if it should not be there)"
        case let .failed(action, errno):
            return "cannot \(action): \(errno)"
        case let .tooLarge(path, bytes, limit):
            return "\(path) holds \(bytes) bytes, more than the \(limit) read at most: left unread"
        }
    }
}

/// A mode as four octal digits: `0775`, `1777`.
private func octal(_ mode: mode_t) -> String {
    let digits = String(mode, radix: 8)
    return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}
