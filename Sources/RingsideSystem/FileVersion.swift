#if canImport(Glibc)
import Glibc
#endif

/// What tells one version of a file from another, as `stat` says: which file it is (device,
/// inode), and what moves when anyone writes, grows, cuts, chowns or chmods it (size,
/// modification and status-change times, owner, mode). A file replaced by a rename, or written
/// in place, is another version.
package struct FileVersion: Hashable, Sendable {
    package let device: UInt64
    package let inode: UInt64
    package let size: Int64
    package let modifiedNanos: Int64
    package let changedNanos: Int64
    package let owner: UInt32
    package let mode: UInt32

    package init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modifiedNanos = Int64(info.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_mtim.tv_nsec)
        changedNanos = Int64(info.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_ctim.tv_nsec)
        owner = UInt32(info.st_uid)
        mode = UInt32(info.st_mode)
    }

    /// The version of the file at `path` (links followed), nil when there is none to read.
    package static func of(_ path: String) -> FileVersion? { (try? System.stat(path)).map(FileVersion.init) }
}
