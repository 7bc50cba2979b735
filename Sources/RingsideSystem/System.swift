// Where the package's Swift code makes its system calls (the C producer in CRingside makes its
// own). Callers see these thin wrappers, each named after its call, with Swift types at the edges
// (String paths, buffers, `stat` values) and an `Errno` thrown on failure: errno is read here,
// right after the call that set it, and never anywhere else.
//
// EINTR: a call the kernel may interrupt before it does anything is made again, except `close`
// (Linux releases the descriptor either way; a retry could close one another thread just opened)
// and `poll` and `sigtimedwait` (their callers decide how long is left to wait). Calls that cannot fail
// (`getpid`, `getppid`, `geteuid`, `clock_gettime` on the standard clocks) are made directly
// where they are needed.

import CRingsideSystem
#if canImport(Glibc)
import Glibc
#else
#error("RingsideSystem wraps Glibc; build it on Linux.")
#endif

/// The system calls, one thin wrapper each; each documents the C function it wraps.
package enum System {
    // MARK: - Files

    /// Opens `path` (`mode`: the new file's, with `O_CREAT`). The corresponding C function is `open`.
    package static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(Errno) -> Int32 {
        try retryingInterrupted { Glibc.open(path, flags, mode) }
    }

    /// Opens `path` relative to the directory open at `directory`. The corresponding C function is `openat`.
    package static func openat(_ directory: Int32, _ path: String, _ flags: Int32, mode: mode_t = 0) throws(Errno) -> Int32 {
        try retryingInterrupted { Glibc.openat(directory, path, flags, mode) }
    }

    /// The corresponding C function is `close`; never retried, and its result is not looked at:
    /// on Linux the descriptor is released whatever it returns.
    package static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// Reads into `buffer`; 0 at the end of the file. The corresponding C function is `read`.
    package static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try retryingInterrupted { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    /// Reads into `buffer` from `offset`, leaving the file offset alone. The corresponding C
    /// function is `pread`.
    package static func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        try retryingInterrupted { Glibc.pread(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// Writes what the descriptor takes of `bytes`. The corresponding C function is `write`.
    package static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try retryingInterrupted { Glibc.write(fd, bytes.baseAddress, bytes.count) }
    }

    /// Writes all of `bytes`, in as many `write` calls as the descriptor needs.
    package static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(Errno) {
        var offset = 0
        while offset < bytes.count {
            offset += try write(fd, UnsafeRawBufferPointer(rebasing: bytes[offset...]))
        }
    }

    /// Reads until the end of the file, in as many `read` calls as it takes: for files whose
    /// size says nothing (`/proc`'s say 0).
    package static func readAll(_ fd: Int32) throws(Errno) -> [UInt8] {
        try readAll(fd, atMost: .max)
    }

    /// Reads to the end of the file, or until more than `limit` bytes are read: at most
    /// `limit + 1` bytes, so a caller can tell a file past its bound without reading it all.
    package static func readAll(_ fd: Int32, atMost limit: Int) throws(Errno) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while bytes.count <= limit {
            let room = limit - bytes.count  // at least 0: one byte past it says the file is longer
            let wanted = room >= chunk.count ? chunk.count : room + 1
            // Array's closure rethrows untyped errors; the Result carries the typed one out.
            let count = try chunk.withUnsafeMutableBytes { buffer in
                Result { () throws(Errno) in try read(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<wanted])) }
            }.get()
            if count == 0 { return bytes }
            bytes += chunk[..<count]
        }
        return bytes
    }

    /// Reads until the end of the file as `readAll` does, but no more than `maxBytes`: nil for a
    /// file longer than that, read no further.
    package static func readAll(_ fd: Int32, maxBytes: Int) throws(Errno) -> [UInt8]? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = try chunk.withUnsafeMutableBytes { buffer in Result { () throws(Errno) in try read(fd, into: buffer) } }.get()
            if count == 0 { return bytes }
            guard bytes.count + count <= maxBytes else { return nil }
            bytes += chunk[..<count]
        }
    }

    /// Writes all of `bytes` (see `writeAll(_:_:)`).
    package static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(Errno) {
        // Array's closure rethrows untyped errors; the Result carries the typed one out.
        try bytes.withUnsafeBytes { buffer in Result { () throws(Errno) in try writeAll(fd, buffer) } }.get()
    }

    /// Writes all of `text`'s UTF-8 (see `writeAll(_:_:)`).
    package static func writeAll(_ fd: Int32, _ text: String) throws(Errno) {
        try writeAll(fd, Array(text.utf8))
    }

    /// The corresponding C function is `fstat`.
    package static func fstat(_ fd: Int32) throws(Errno) -> Glibc.stat {
        var info = Glibc.stat()
        _ = try retryingInterrupted { Glibc.fstat(fd, &info) }
        return info
    }

    /// Follows a symbolic link at `path`. The corresponding C function is `stat`.
    package static func stat(_ path: String) throws(Errno) -> Glibc.stat {
        var info = Glibc.stat()
        _ = try retryingInterrupted { statFollowing(path, &info) }
        return info
    }

    /// The entry at `path` itself: a symbolic link is not followed. The corresponding C function is `lstat`.
    package static func lstat(_ path: String) throws(Errno) -> Glibc.stat {
        var info = Glibc.stat()
        _ = try retryingInterrupted { Glibc.lstat(path, &info) }
        return info
    }

    /// `path` relative to the directory open at `directory` (`AT_SYMLINK_NOFOLLOW` in `flags`: the
    /// link itself). The corresponding C function is `fstatat`.
    package static func fstatat(_ directory: Int32, _ path: String, flags: Int32) throws(Errno) -> Glibc.stat {
        var info = Glibc.stat()
        _ = try retryingInterrupted { Glibc.fstatat(directory, path, &info, flags) }
        return info
    }

    /// Whether this process may use `path` as `mode` says (`R_OK | X_OK`...), by its real ids.
    /// The corresponding C function is `access`.
    package static func access(_ path: String, _ mode: Int32) throws(Errno) {
        _ = try retryingInterrupted { Glibc.access(path, mode) }
    }

    /// Cuts or extends the file open at `fd` to `length` bytes. The corresponding C function is `ftruncate`.
    package static func ftruncate(_ fd: Int32, _ length: Int) throws(Errno) {
        _ = try retryingInterrupted { Glibc.ftruncate(fd, off_t(length)) }
    }

    /// Writes the file's data and metadata to its device. The corresponding C function is `fsync`.
    package static func fsync(_ fd: Int32) throws(Errno) {
        _ = try retryingInterrupted { Glibc.fsync(fd) }
    }

    /// The corresponding C function is `unlink`.
    package static func unlink(_ path: String) throws(Errno) {
        _ = try retryingInterrupted { Glibc.unlink(path) }
    }

    /// Removes `path` relative to the directory open at `directory` (never what a link points to).
    /// The corresponding C function is `unlinkat`.
    package static func unlinkat(_ directory: Int32, _ path: String, flags: Int32 = 0) throws(Errno) {
        _ = try retryingInterrupted { Glibc.unlinkat(directory, path, flags) }
    }

    /// Renames `path` in `directory` to `newPath` in `newDirectory`, replacing the entry there
    /// (a link is replaced, not followed). The corresponding C function is `renameat`.
    package static func renameat(_ directory: Int32, _ path: String, _ newDirectory: Int32, _ newPath: String) throws(Errno) {
        _ = try retryingInterrupted { Glibc.renameat(directory, path, newDirectory, newPath) }
    }

    /// The corresponding C function is `mkdir`.
    package static func mkdir(_ path: String, mode: mode_t) throws(Errno) {
        _ = try retryingInterrupted { Glibc.mkdir(path, mode) }
    }

    /// Makes a new directory from `template`, whose name ends in `XXXXXX`; returns its path.
    /// The corresponding C function is `mkdtemp`.
    package static func mkdtemp(_ template: String) throws(Errno) -> String {
        var path = Array(template.utf8CString)
        guard Glibc.mkdtemp(&path) != nil else { throw .current }
        return String(decoding: path.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Where the symbolic link at `path` points. The corresponding C function is `readlink`.
    package static func readlink(_ path: String) throws(Errno) -> String {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = try retryingInterrupted {
            buffer.withUnsafeMutableBytes { Glibc.readlink(path, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count - 1) }
        }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    /// The names in the directory at `path`, `.` and `..` among them, in the order the file
    /// system gives; with `prefix`, only those that start with it (the others are passed over
    /// unmade: a directory of 100,000 files of others costs no string for each).
    /// The corresponding C functions are `opendir`, `readdir` and `closedir`.
    package static func directoryEntries(_ path: String, prefix: String = "") throws(Errno) -> [String] {
        guard let directory = Glibc.opendir(path) else { throw .current }
        defer { Glibc.closedir(directory) }
        let wanted = Array(prefix.utf8)
        var names: [String] = []
        while true {
            Glibc.errno = 0  // readdir returns nil at the end and on failure; errno tells them apart
            guard let entry = Glibc.readdir(directory) else {
                if Glibc.errno != 0 { throw .current }
                return names
            }
            withUnsafeBytes(of: &entry.pointee.d_name) { bytes in
                guard let start = bytes.baseAddress else { return }
                let length = strnlen(start.assumingMemoryBound(to: CChar.self), bytes.count)
                guard length >= wanted.count, memcmp(start, wanted, wanted.count) == 0 else { return }
                names.append(String(decoding: UnsafeRawBufferPointer(start: start, count: length), as: UTF8.self))
            }
        }
    }

    /// A directory read a few names at a time, so that a directory of a million entries is
    /// listed in bounded steps. Touched by one thread at a time.
    package final class DirectoryStream {
        private let directory: OpaquePointer

        /// Opens the directory at `path`. The corresponding C function is `opendir`.
        package init(_ path: String) throws(Errno) {
            guard let directory = Glibc.opendir(path) else { throw .current }
            self.directory = directory
        }

        deinit { Glibc.closedir(directory) }

        /// Up to `limit` more names (`.` and `..` among them), in the order the file system
        /// gives; an empty array at the end. The corresponding C function is `readdir`.
        package func next(_ limit: Int) throws(Errno) -> [String] {
            var names: [String] = []
            while names.count < limit {
                Glibc.errno = 0  // readdir returns nil at the end and on failure; errno tells them apart
                guard let entry = Glibc.readdir(directory) else {
                    if Glibc.errno != 0 { throw .current }
                    break
                }
                names.append(withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) })
            }
            return names
        }
    }

    // MARK: - Mappings

    /// Maps `length` bytes of the file open at `fd` from `offset`. The corresponding C function is `mmap`.
    package static func mmap(
        length: Int, protection: Int32, flags: Int32, fd: Int32,
        offset: Int
    ) throws(Errno) -> UnsafeMutableRawPointer {
        guard let base = Glibc.mmap(nil, length, protection, flags, fd, off_t(offset)), base != MAP_FAILED else { throw .current }
        return base
    }

    /// The corresponding C function is `munmap`; it fails only for a range that was never mapped.
    package static func munmap(_ base: UnsafeMutableRawPointer, length: Int) {
        _ = Glibc.munmap(base, length)
    }

    // MARK: - Descriptors and waiting

    /// A pipe: what is written to `write` is read from `read`. The corresponding C function is `pipe`.
    package static func pipe() throws(Errno) -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        _ = try checked(Glibc.pipe(&ends))
        return (ends[0], ends[1])
    }

    /// `command` with an integer argument (`F_GETFL`, `F_SETFL`, `F_SETFD`); the call's result.
    /// The corresponding C function is `fcntl`.
    package static func fcntl(_ fd: Int32, _ command: Int32, _ value: Int32 = 0) throws(Errno) -> Int32 {
        try retryingInterrupted { Glibc.fcntl(fd, command, value) }
    }

    /// Waits for readiness; returns how many descriptors have events. Not retried on EINTR
    /// (`Errno.interrupted`): the caller works out how long is left to wait.
    /// The corresponding C function is `poll`.
    package static func poll(_ fds: inout [pollfd], timeoutMillis: Int32) throws(Errno) -> Int {
        let count = fds.withUnsafeMutableBufferPointer { Glibc.poll($0.baseAddress, nfds_t($0.count), timeoutMillis) }
        return Int(try checked(count))
    }

    /// `poll` with a timeout to the nanosecond (nil: none), for a short wait that must end both
    /// when it is due and when a descriptor is ready. The corresponding C function is `ppoll`.
    package static func poll(_ fds: inout [pollfd], timeoutNanos: UInt64?) throws(Errno) -> Int {
        let ready = fds.withUnsafeMutableBufferPointer { rss_poll_ns($0.baseAddress, UInt32($0.count), timeoutNanos ?? .max) }
        if ready < 0 { throw Errno(rawValue: -ready) }
        return Int(ready)
    }

    /// Sleeps `nanoseconds` in full: a signal's handler runs, then the sleep goes on for the time
    /// left. The corresponding C function is `nanosleep`.
    package static func nanosleep(_ nanoseconds: UInt64) {
        var request = timespec(nanoseconds: nanoseconds)
        var remaining = timespec()
        while Glibc.nanosleep(&request, &remaining) != 0 && Glibc.errno == EINTR { request = remaining }
    }

    /// Gives the kernel back the heap's free pages (its arenas' whole free pages, at any place in
    /// the heap, not only at its top): memory freed in bulk (the windows of thousands of series
    /// gone idle) otherwise stays in the process's resident set. Returns whether any was given
    /// back. The corresponding C function is `malloc_trim`.
    @discardableResult
    package static func trimHeap() -> Bool { rss_trim_heap() == 1 }

    /// Has malloc map every block of `bytes` or more on its own (so it goes back to the kernel
    /// as soon as it is freed), and no longer raise that threshold as large blocks are freed.
    /// The corresponding C function is `mallopt` (`M_MMAP_THRESHOLD`).
    package static func mapBlocksOnTheirOwn(atLeast bytes: Int32) { rss_map_blocks_on_their_own(bytes) }

    /// A new inotify instance (`IN_NONBLOCK | IN_CLOEXEC` in `flags`). The corresponding C
    /// function is `inotify_init1`.
    package static func inotifyInit1(_ flags: Int32) throws(Errno) -> Int32 {
        try checked(inotify_init1(flags))
    }

    /// Watches `path` for `mask`'s events; returns the watch. The corresponding C function is
    /// `inotify_add_watch`.
    package static func inotifyAddWatch(_ fd: Int32, _ path: String, _ mask: UInt32) throws(Errno) -> Int32 {
        try checked(inotify_add_watch(fd, path, mask))
    }

    // MARK: - Processes

    /// Sends `signal` to process `pid` (0: only checks that it exists and may be signalled).
    /// The corresponding C function is `kill`.
    package static func kill(_ pid: pid_t, _ signal: Int32) throws(Errno) {
        _ = try checked(Glibc.kill(pid, signal))
    }

    /// The limits on `resource` (`RLIMIT_NOFILE`...): `rlim_cur`, the soft one the kernel
    /// enforces, and `rlim_max`, the hard one. The corresponding C function is `getrlimit`.
    package static func getrlimit(_ resource: __rlimit_resource) throws(Errno) -> rlimit {
        var limit = rlimit()
        _ = try checked(Glibc.getrlimit(__rlimit_resource_t(resource.rawValue), &limit))
        return limit
    }

    /// Sets the limits on `resource`: without privilege, the soft one up to the hard one, and the
    /// hard one only down. The corresponding C function is `setrlimit`.
    package static func setrlimit(_ resource: __rlimit_resource, _ limit: rlimit) throws(Errno) {
        var limit = limit
        _ = try checked(Glibc.setrlimit(__rlimit_resource_t(resource.rawValue), &limit))
    }

    /// Names the calling thread for the kernel (its `comm`: what `top -H` and `/proc/PID/task/TID`
    /// show), cut to its 15 bytes. The corresponding C function is `pthread_setname_np`, which
    /// Swift's Glibc module leaves out: this writes `/proc/thread-self/comm`, as glibc does for a
    /// thread other than the caller. (Foundation's `Thread.name` may not reach the kernel: a thread
    /// that runs before its creator records it is left unnamed.)
    package static func setThreadName(_ name: String) throws(Errno) {
        var bytes = Array(name.utf8)
        if bytes.count > 15 {
            bytes.removeLast(bytes.count - 15)
            // Cut at a character's start: drop a partial one (its continuation bytes, then its lead).
            while let last = bytes.last, last & 0xC0 == 0x80 { bytes.removeLast() }
            if let last = bytes.last, last >= 0xC0 { bytes.removeLast() }
        }
        let fd = try open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        defer { close(fd) }
        try writeAll(fd, bytes)
    }

    /// Whether `fd` is a terminal. The corresponding C function is `isatty`.
    package static func isatty(_ fd: Int32) -> Bool {
        Glibc.isatty(fd) == 1
    }

    /// The nice value of `who` (on Linux, `PRIO_PROCESS` with 0 is the calling thread).
    /// The corresponding C function is `getpriority`, whose -1 is also a nice value.
    package static func getpriority(_ which: __priority_which_t, _ who: id_t) throws(Errno) -> Int32 {
        Glibc.errno = 0
        let value = Glibc.getpriority(which, who)
        guard value != -1 || Glibc.errno == 0 else { throw .current }
        return value
    }

    /// The corresponding C function is `setpriority`.
    package static func setpriority(_ which: __priority_which_t, _ who: id_t, _ value: Int32) throws(Errno) {
        _ = try checked(Glibc.setpriority(which, who, value))
    }

    /// Asks the scheduler for a time slice of `nanoseconds` for the calling thread (Linux 6.12's
    /// EEVDF lets a waking thread with a shorter slice than the running one's take the CPU at
    /// once); its policy and nice value stay. The kernel keeps it within 0.1 ms and 100 ms; 0 is
    /// the default again. The corresponding C function is `sched_setattr` (`sched_runtime`).
    package static func setThreadSlice(nanoseconds: UInt64) throws(Errno) {
        let result = rss_set_thread_slice(nanoseconds)
        guard result == 0 else { throw Errno(rawValue: result) }
    }

    /// The calling thread's slice (0: the default). The corresponding C function is `sched_getattr`.
    package static func threadSlice() throws(Errno) -> UInt64 {
        var nanoseconds: UInt64 = 0
        let result = rss_thread_slice(&nanoseconds)
        guard result == 0 else { throw Errno(rawValue: result) }
        return nanoseconds
    }

    // MARK: - The system

    /// A value of the system's configuration (`_SC_CLK_TCK`, `_SC_PAGESIZE`,
    /// `_SC_NPROCESSORS_ONLN`...); nil for a limit the system does not set. The corresponding C
    /// function is `sysconf`, whose -1 is also "no limit".
    package static func sysconf(_ name: Int) throws(Errno) -> Int? {
        Glibc.errno = 0
        let value = Glibc.sysconf(Int32(name))
        guard value == -1 else { return value }
        guard Glibc.errno == 0 else { throw .current }
        return nil
    }

    /// The kernel's names (`sysname`, `release`, `machine`..., each a C string in a fixed array).
    /// The corresponding C function is `uname`; it fails only for a bad buffer.
    package static func uname() -> utsname {
        var names = utsname()
        _ = Glibc.uname(&names)
        return names
    }

    /// This machine's host name. The corresponding C function is `gethostname`.
    package static func gethostname() throws(Errno) -> String {
        var name = [CChar](repeating: 0, count: 256)
        _ = try checked(Glibc.gethostname(&name, name.count - 1))
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    // MARK: - Signals

    /// Sets what `signal` does to this process (`SIG_IGN`, `SIG_DFL` or a handler); what it did
    /// before. The corresponding C function is `signal`; it fails only for a number that is no
    /// signal or one that cannot be caught (`SIGKILL`, `SIGSTOP`).
    @discardableResult
    package static func signal(_ signal: Int32, _ disposition: sighandler_t?) -> sighandler_t? {
        Glibc.signal(signal, disposition)
    }

    /// Blocks `signals` in the calling thread (`SIG_BLOCK`) or lets them through again
    /// (`SIG_UNBLOCK`); threads it starts later inherit its mask. The corresponding C function is
    /// `pthread_sigmask`; it fails only for a `how` it does not know.
    package static func pthreadSigmask(_ how: Int32, _ signals: [Int32]) {
        var set = signalSet(signals)
        _ = pthread_sigmask(how, &set, nil)
    }

    /// Waits up to `timeoutNanos` for one of `signals`, which the threads block, and takes it;
    /// its number. `Errno.resourceTemporarilyUnavailable`: none came in time. Not retried on EINTR
    /// (`Errno.interrupted`, another signal's handler ran): as with `poll`, the caller's loop
    /// decides. The corresponding C function is `sigtimedwait`.
    package static func sigtimedwait(_ signals: [Int32], timeoutNanos: UInt64) throws(Errno) -> Int32 {
        var set = signalSet(signals)
        var timeout = timespec(nanoseconds: timeoutNanos)
        return try checked(Glibc.sigtimedwait(&set, nil, &timeout))
    }

    private static func signalSet(_ signals: [Int32]) -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        return set
    }

    // MARK: - Results

    /// `result`, unless it is the -1 of a failed call: then the errno it left.
    @inline(__always)
    static func checked<T: FixedWidthInteger>(_ result: T) throws(Errno) -> T {
        guard result == -1 else { return result }
        throw .current
    }

    /// Makes `call` again while it fails with EINTR; its result, or the errno it failed with.
    @inline(__always)
    static func retryingInterrupted<T: FixedWidthInteger>(_ call: () -> T) throws(Errno) -> T {
        while true {
            let result = call()
            guard result == -1 else { return result }
            let error = Errno.current
            guard error == .interrupted else { throw error }
        }
    }
}

extension timespec {
    init(nanoseconds: UInt64) {
        self.init(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
    }
}

/// C's `stat`: within `System`, the name is the wrapper's, and `Glibc.stat` the struct's.
private func statFollowing(_ path: String, _ info: inout stat) -> Int32 {
    stat(path, &info)
}
