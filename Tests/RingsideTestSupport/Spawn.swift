import RingsideSystem
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A child process started with `posix_spawn`, under the tests' process wrappers.
///
/// Not Foundation's `Process`: on Linux its `run()` (swift-corelibs-foundation before its fix
/// #5472) copies each `/proc/self/fd` entry past the end of `readdir`'s buffer and crashes once
/// the test process holds about 1,365 descriptors, as it does while the abuse tests hold 1,000
/// idle connections and another test starts a process. Here the child closes every descriptor
/// above its standard three (`closefrom`), starts with no signal blocked (a test's thread blocks
/// SIGCHLD, and a child that waits for it, such as cmake through libuv, would hang), and runs in
/// a process group of its own, as Foundation's did. A child may be given more descriptors (a
/// browser's pipe), as 3 and up.
package final class SpawnedProcess: Sendable {
    /// Where one of the child's standard streams goes.
    package enum Stream {
        /// The test process's own descriptor of the same number.
        case inherited
        case nullDevice
        /// A descriptor of the test process (a pipe's end); the caller closes its copy.
        case descriptor(Int32)
    }

    package let pid: pid_t
    /// The raw wait status, once the child is reaped.
    private let reaped = Locked<Int32?>(nil)

    /// - Parameter extraDescriptors: descriptors of the test process the child gets as 3, 4, ...
    ///   (a browser's `--remote-debugging-pipe` reads 3 and writes 4); the caller closes its own.
    package init(
        path: String, arguments: [String], environment: [String: String],
        standardInput: Stream, standardOutput: Stream, standardError: Stream, extraDescriptors: [Int32] = []
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (stream, target) in [(standardInput, Int32(0)), (standardOutput, 1), (standardError, 2)] {
            switch stream {
            case .inherited: break
            case .nullDevice: posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .descriptor(let source): posix_spawn_file_actions_adddup2(&actions, source, target)
            }
        }
        // Copies numbered above every target first, so that no dup2 overwrites a source still to come.
        let firstFree = 3 + Int32(extraDescriptors.count)
        let copies = extraDescriptors.map { fcntl($0, F_DUPFD_CLOEXEC, firstFree) }
        defer { copies.filter { $0 >= 0 }.forEach { close($0) } }
        guard copies.allSatisfy({ $0 >= 0 }) else {
            throw TestSupportError("cannot copy a descriptor: \(String(cString: strerror(errno)))")
        }
        for (index, copy) in copies.enumerated() { posix_spawn_file_actions_adddup2(&actions, copy, 3 + Int32(index)) }
        try Self.closeDescriptors(from: firstFree, &actions)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var child = pid_t()
        let result = posix_spawn(&child, path, &actions, &attributes, argv, envp)
        guard result == 0 else { throw TestSupportError("cannot start \(path): \(String(cString: strerror(result)))") }
        pid = child
    }

    /// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34), looked up at run time: the Glibc
    /// module does not import it.
    private static func closeDescriptors(from first: Int32, _ actions: inout posix_spawn_file_actions_t) throws {
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else {
            throw TestSupportError("posix_spawn_file_actions_addclosefrom_np is missing: the tests need glibc 2.34 or later")
        }
        let result = unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, first)
        guard result == 0 else { throw TestSupportError("closefrom action: \(String(cString: strerror(result)))") }
    }

    package var isRunning: Bool { wait(blocking: false) == nil }

    /// Waits for the child to end; returns its exit status, or nil when a signal ended it.
    @discardableResult
    package func waitUntilExit() -> Int32? {
        while true {
            if let status = wait(blocking: true) { return Self.exitStatus(status) }
        }
    }

    /// The signal that ended the child, once it has ended of one.
    package var terminatingSignal: Int32? {
        guard let status = reaped.withLock({ $0 }), Self.exitStatus(status) == nil else { return nil }
        return status & 0x7f
    }

    /// Sends `signal` to the child, unless it has been reaped (its pid may then be another's).
    package func send(_ signal: Int32) {
        reaped.withLock { status in
            if status == nil { _ = kill(pid, signal) }
        }
    }

    /// Kills the child if it still runs and reaps it: a test's processes never outlive their handles.
    package func killAndReap() {
        send(SIGKILL)
        waitUntilExit()
    }

    private static func exitStatus(_ status: Int32) -> Int32? { status & 0x7f == 0 ? (status >> 8) & 0xff : nil }

    /// The raw status once reaped. Only this reaps, under the lock, so `send` never signals a
    /// reaped child's pid; a blocking wait first waits outside the lock without reaping (WNOWAIT).
    private func wait(blocking: Bool) -> Int32? {
        if blocking {
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
        }
        return reaped.withLock { stored in
            if let stored { return stored }
            var status: Int32 = 0
            guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
            stored = status
            return status
        }
    }
}
