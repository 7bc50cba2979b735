import Glibc
import RingsideSystem

/// The files a web configuration is made of (the configuration, its certificate, key and client
/// CA), and the collector's configuration file (`--config`, which names the web configuration and
/// the listener), read as sshd reads its keys (`StrictModes`): what they say decides who may read the
/// metrics, so a file that anyone but the collector's user or root could change is refused, and
/// so is anything that is not a regular file (a FIFO, a device), which is never opened, so
/// never waited on.
///
/// A file is read when it is a regular file of at most `maxBytes`, owned by the collector's
/// user (its effective uid) or root and writable by neither its group nor others; each
/// directory on its path (as its links resolve) is owned by them too and writable by neither
/// its group nor others unless sticky (as `/tmp`: others cannot rename or remove what is not
/// theirs there); and each symbolic link on the path as written is owned by them, in a directory
/// checked the same way. Else the reason names the file or directory, its owner or mode, and
/// what to do.
package enum TrustedFile {
    /// Why a file was refused: a sentence that follows the file's name (`PATH: REASON`).
    package struct Refusal: Error, Equatable {
        package var reason: String
    }

    /// The bytes of the file at `path`, once every check passed.
    package static func read(_ path: String, maxBytes: Int) throws(Refusal) -> [UInt8] {
        // Looked at before any open: a FIFO or a device is refused unopened.
        let found: stat
        do { found = try System.stat(path) } catch { throw Refusal(reason: "\(error)") }
        if found.st_mode & S_IFMT != S_IFREG { throw Refusal(reason: notRegular(found)) }
        let fd: Int32
        do { fd = try System.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) } catch {
            throw Refusal(reason: "cannot open it: \(error)")
        }
        defer { System.close(fd) }
        // What was opened is what is checked and read (it may have been replaced since the look).
        let info: stat
        do { info = try System.fstat(fd) } catch { throw Refusal(reason: "cannot read it: \(error)") }
        if info.st_mode & S_IFMT != S_IFREG { throw Refusal(reason: notRegular(info)) }
        if let reason = untrusted(info, what: nil) { throw Refusal(reason: reason) }
        try checkPath(path, opened: fd)
        let bytes: [UInt8]?
        do { bytes = try System.readAll(fd, maxBytes: maxBytes) } catch { throw Refusal(reason: "cannot read it: \(error)") }
        guard let bytes else { throw Refusal(reason: "larger than \(sizeText(maxBytes)): is it the right file?") }
        return bytes
    }

    /// The users whose files are trusted: root and the collector's own (its effective uid).
    static var trustedOwners: Set<uid_t> { [0, geteuid()] }

    /// Those users, for a message: `uid 998 or root`, or `uid 0 (root)` when the collector runs as root.
    static var trustedOwnersText: String { geteuid() == 0 ? "uid 0 (root)" : "uid \(geteuid()) or root" }

    /// Why a file or directory with `info` is not trusted (owned by another user, or writable by
    /// its group or others; a directory may be if it is sticky); nil when it is. `what` names a
    /// directory; nil for the file itself, named before the reason.
    private static func untrusted(_ info: stat, what: String?) -> String? {
        let subject = what.map { $0 + " " } ?? ""
        if !trustedOwners.contains(info.st_uid) {
            return "\(subject)is owned by uid \(info.st_uid), not by the collector's \(trustedOwnersText): "
                + "that user could change who may read the metrics; chown it"
        }
        let isDirectory = info.st_mode & S_IFMT == S_IFDIR
        guard info.st_mode & (S_IWGRP | S_IWOTH) != 0, !(isDirectory && info.st_mode & S_ISVTX != 0) else { return nil }
        let who =
            info.st_mode & S_IWGRP != 0 && info.st_mode & S_IWOTH != 0
            ? "its group (gid \(info.st_gid)) and others" : info.st_mode & S_IWGRP != 0 ? "its group (gid \(info.st_gid))" : "others"
        let could = isDirectory ? "put another file in place of the collector's" : "change who may read the metrics"
        return "\(subject)has mode \(octal(info.st_mode)): writable by \(who), who could \(could); chmod go-w it"
    }

    /// Checks the directories on the path of the file open at `fd` (as its links resolve), and
    /// each link on `path` as written with the directory it is in.
    private static func checkPath(_ path: String, opened fd: Int32) throws(Refusal) {
        let resolved: String
        do { resolved = try System.readlink("/proc/self/fd/\(fd)") } catch {
            throw Refusal(reason: "cannot tell where it is (/proc/self/fd): \(error)")
        }
        var directories = ancestors(of: resolved)
        let components = path.split(separator: "/", omittingEmptySubsequences: true)
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in components {
            let parent = prefix.isEmpty ? "/" : prefix
            prefix += "/" + component
            guard let entry = try? System.lstat(prefix), entry.st_mode & S_IFMT == S_IFLNK else { continue }
            if !trustedOwners.contains(entry.st_uid) {
                throw Refusal(
                    reason: "the symbolic link \(prefix) on its path is owned by uid \(entry.st_uid), not by the collector's "
                        + "\(trustedOwnersText): that user could point it at another file; replace it with a link of your own")
            }
            do {
                let real = try System.realpath(parent)
                directories += [real] + ancestors(of: real)
            } catch {
                throw Refusal(reason: "cannot resolve the directory \(parent) on its path: \(error)")
            }
        }
        var checked: Set<String> = []
        for directory in directories where checked.insert(directory).inserted {
            let info: stat
            do { info = try System.stat(directory) } catch { throw Refusal(reason: "cannot check the directory \(directory): \(error)") }
            if let reason = untrusted(info, what: "the directory \(directory) on its path") { throw Refusal(reason: reason) }
        }
    }

    /// The directories above an absolute path, the nearest first: `/a/b/c` gives `/a/b`, `/a`, `/`.
    static func ancestors(of path: String) -> [String] {
        var result: [String] = []
        var current = Substring(path)
        while let slash = current.lastIndex(of: "/") {
            current = current[..<slash]
            result.append(current.isEmpty ? "/" : String(current))
        }
        return result
    }

    /// "is a FIFO (named pipe) owned by uid 65534, not a regular file", and what to do.
    private static func notRegular(_ info: stat) -> String {
        "is \(fileKind(info.st_mode)) owned by uid \(info.st_uid), not a regular file of \(trustedOwnersText): refused unread"
    }

    private static func octal(_ mode: mode_t) -> String {
        let digits = String(mode & 0o7777, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    private static func sizeText(_ bytes: Int) -> String {
        bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes) bytes"
    }
}
