#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Ringside

/// The one directory a fuzzing process writes in: `/dev/shm/ringside-fuzz.PID` (a ring directory,
/// as the readers need one), made at first use, emptied before each input that writes files, and
/// removed when the process exits. Directories of processes that died (a crash found) are removed
/// by the next process that starts.
enum FuzzScratch {
    static let parent = "/dev/shm"
    static let prefix = "ringside-fuzz."

    /// The directory's path; made (and its dead neighbours removed) on first use.
    static let path: String = {
        removeDeadProcessesDirectories()
        let path = "\(parent)/\(prefix)\(getpid())"
        removeTree(path)
        guard mkdir(path, 0o700) == 0 else { FuzzFinding.report("scratch", "cannot make \(path): \(String(cString: strerror(errno)))") }
        atexit { removeTree(FuzzScratch.path) }
        return path
    }()

    static var ringDirectory: RingDirectory { RingDirectory(path) }

    /// Removes everything in the directory: each input starts from nothing.
    static func empty() {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] { removeTree("\(path)/\(name)") }
    }

    /// Writes `bytes` as a new file `name` in the directory (mode 0600) and returns its path.
    @discardableResult
    static func write(_ name: String, _ bytes: [UInt8]) -> String {
        let file = "\(path)/\(name)"
        unlink(file)
        let fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { FuzzFinding.report("scratch", "cannot make \(file): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            guard written > 0 else { FuzzFinding.report("scratch", "cannot write \(file): \(String(cString: strerror(errno)))") }
            offset += written
        }
        return file
    }

    /// Our own directories of processes no longer running.
    private static func removeDeadProcessesDirectories() {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? [] where name.hasPrefix(prefix) {
            guard let pid = Int32(name.dropFirst(prefix.count)), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else { continue }
            var info = stat()
            guard lstat("\(parent)/\(name)", &info) == 0, info.st_uid == geteuid(), info.st_mode & S_IFMT == S_IFDIR else { continue }
            removeTree("\(parent)/\(name)")
        }
    }

    private static func removeTree(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }
}
