import Foundation
import Ringside
#if canImport(Glibc)
import Glibc
#endif

/// What another user may leave at a bot's name in a shared directory (/dev/shm is everyone's):
/// files a producer must never open as a bot file, nor wait on.
package enum PlantedFile: String, TestArgument, Sendable {
    /// A FIFO: an open for reading alone waits for a writer, unless it does not wait (`O_NONBLOCK`).
    case fifo
    /// A character device, 1:3 (what /dev/null is).
    case device
    case directory
    /// A Unix socket's file: it cannot be opened at all (ENXIO).
    case socket

    /// How the producers name it in their errors ("PATH is a FIFO (named pipe) owned by uid ...").
    package var kind: String {
        switch self {
        case .fifo: return "a FIFO (named pipe)"
        case .device: return "a character device"
        case .directory: return "a directory"
        case .socket: return "a socket"
        }
    }

    /// The user that plants it: nobody.
    package static let owner: uid_t = 65534
}

/// Makes `file` at `path`, owned by user nobody (65534), as another user sharing the directory
/// could: a FIFO and a directory made by nobody itself (`setpriv`); a device made by root and given
/// to nobody (only root may make one); a socket bound by root and given to nobody. The directory
/// must let nobody create (mode 1777, as /dev/shm). Needs root: callers ask `requiredRoot` first.
/// - Returns: false when `setpriv` is missing outside CI (the caller skips; under CI it throws).
package func plantAsNobody(_ file: PlantedFile, at path: String) throws -> Bool {
    let owner = PlantedFile.owner
    switch file {
    case .fifo, .directory:
        guard let setpriv = try requiredSystemTool("setpriv") else { return false }
        let tool = file == .fifo ? "/usr/bin/mkfifo" : "/usr/bin/mkdir"
        let run = try runProcess(setpriv, ["--reuid=\(owner)", "--regid=\(owner)", "--clear-groups", tool, path], timeoutSeconds: 30)
        guard run.status == 0 else { throw TestSupportError("\(tool) \(path) as nobody: \(run.output) \(run.errors)") }
        return true
    case .device:
        // Device 1:3 in Linux's encoding of small numbers (major << 8 | minor): what /dev/null is.
        guard mknod(path, S_IFCHR | 0o644, dev_t((1 << 8) | 3)) == 0 else { throw TestSupportError("mknod \(path): \(lastError())") }
    case .socket:
        try bindSocketFile(path)
    }
    guard lchown(path, owner, owner) == 0 else { throw TestSupportError("lchown \(path): \(lastError())") }
    return true
}

/// Runs `body` in a fresh ring directory shared as /dev/shm is (mode 1777: anyone may create,
/// only the owner remove).
package func withSharedRingDirectory(_ body: (RingDirectory) throws -> Void) throws {
    try withRingDirectory { directory in
        guard chmod(directory.path, 0o1777) == 0 else { throw TestSupportError("chmod 1777 \(directory.path): \(lastError())") }
        try body(directory)
    }
}

/// Runs `body` with `file` planted by nobody at ring `name`'s path (given to `body`) in a fresh
/// shared ring directory. Returns without running it where `requiredRoot(purpose)` or
/// `plantAsNobody` say to skip (not root, or no `setpriv`, outside CI).
package func withPlantedRing(
    _ file: PlantedFile, named name: String, purpose: String, _ body: (RingDirectory, String) throws -> Void
) throws {
    guard try requiredRoot(purpose) else { return }
    try withSharedRingDirectory { directory in
        let path = directory.filePath(for: name)
        guard try plantAsNobody(file, at: path) else { return }
        try body(directory, path)
    }
}

/// Whether what is at `path` is still `file`, owned by nobody: untouched by the producer refused.
package func isStillPlanted(_ file: PlantedFile, at path: String) -> Bool {
    var info = stat()
    guard lstat(path, &info) == 0, info.st_uid == PlantedFile.owner else { return false }
    let type: mode_t
    switch file {
    case .fifo: type = S_IFIFO
    case .device: type = S_IFCHR
    case .directory: type = S_IFDIR
    case .socket: type = S_IFSOCK
    }
    return info.st_mode & S_IFMT == type
}

private func lastError() -> String { "\(String(cString: strerror(errno))) (errno: \(errno))" }

/// Leaves a Unix socket's file at `path`, owned by this process's user, as a process that binds
/// one there does (bound, its descriptor closed).
package func bindSocketFile(_ path: String) throws {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestSupportError("socket: \(lastError())") }
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw TestSupportError("\(path): too long for a socket") }
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard bound == 0 else { throw TestSupportError("bind \(path): \(lastError())") }
}
