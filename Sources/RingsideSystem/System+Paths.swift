#if canImport(Glibc)
import Glibc
#endif

extension System {
    /// The absolute path of `path` with every symbolic link, `.` and `..` resolved.
    /// The corresponding C function is `realpath`.
    package static func realpath(_ path: String) throws(Errno) -> String {
        guard let resolved = Glibc.realpath(path, nil) else { throw .current }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
