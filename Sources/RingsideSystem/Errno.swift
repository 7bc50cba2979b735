#if canImport(Glibc)
import Glibc
#else
#error("RingsideSystem wraps Glibc; build it on Linux.")
#endif

/// The error number a failed system call left, as `System`'s calls throw it. Its description is
/// the form the package's error messages end with: `No such file or directory (errno: 2)`; a
/// message says what was being done first (`open /dev/shm/ringside.x: ...`).
package struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    package let rawValue: Int32

    package init(rawValue: Int32) { self.rawValue = rawValue }

    /// `errno` now: read right after the call that failed, before anything can overwrite it.
    package static var current: Errno { Errno(rawValue: Glibc.errno) }

    /// `strerror` text and the number.
    package var description: String { "\(String(cString: strerror(rawValue))) (errno: \(rawValue))" }

    // The numbers the package tells apart, named as swift-system names them.
    package static let notPermitted = Errno(rawValue: EPERM)
    package static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
    package static let noSuchProcess = Errno(rawValue: ESRCH)
    package static let interrupted = Errno(rawValue: EINTR)
    package static let noSuchAddressOrDevice = Errno(rawValue: ENXIO)
    package static let resourceTemporarilyUnavailable = Errno(rawValue: EAGAIN)
    /// The same number as `resourceTemporarilyUnavailable` on Linux.
    package static let wouldBlock = Errno(rawValue: EWOULDBLOCK)
    package static let noMemory = Errno(rawValue: ENOMEM)
    package static let permissionDenied = Errno(rawValue: EACCES)
    package static let fileExists = Errno(rawValue: EEXIST)
    package static let notDirectory = Errno(rawValue: ENOTDIR)
    package static let isDirectory = Errno(rawValue: EISDIR)
    package static let tooManyOpenFilesInSystem = Errno(rawValue: ENFILE)
    package static let tooManyOpenFiles = Errno(rawValue: EMFILE)
    package static let noSpace = Errno(rawValue: ENOSPC)
    package static let tooManySymbolicLinkLevels = Errno(rawValue: ELOOP)
    package static let noBufferSpace = Errno(rawValue: ENOBUFS)
    package static let addressInUse = Errno(rawValue: EADDRINUSE)
    package static let addressNotAvailable = Errno(rawValue: EADDRNOTAVAIL)
    package static let diskQuotaExceeded = Errno(rawValue: EDQUOT)
}
