#if canImport(Glibc)
import Glibc
#endif

/// What a file of `mode` (`st_mode`) is, for a person: "a regular file", "a FIFO (named pipe)",
/// "a directory", ...: the one wording of every refusal of a file by its type (the readers, the
/// collector's own files, the web configuration's, the tools').
package func fileKind(_ mode: mode_t) -> String {
    switch mode & S_IFMT {
    case S_IFREG: return "a regular file"
    case S_IFLNK: return "a symbolic link"
    case S_IFIFO: return "a FIFO (named pipe)"
    case S_IFDIR: return "a directory"
    case S_IFCHR: return "a character device"
    case S_IFBLK: return "a block device"
    case S_IFSOCK: return "a socket"
    default: return "a file of type 0o\(String(mode & S_IFMT, radix: 8))"
    }
}
