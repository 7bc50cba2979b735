import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RingsideSystem
import Synchronization
import Testing

@Suite("RingsideSystem: typed errno, its text, calls made again after EINTR", .serialized)
struct SystemTests {
    @Test("a missing file fails with ENOENT, typed, from every call that names it")
    func missingFile() throws {
        let path = "/nonexistent-ringside-\(getpid())/file"
        #expect(throws: Errno.noSuchFileOrDirectory) { try System.open(path, O_RDONLY) }
        #expect(throws: Errno.noSuchFileOrDirectory) { try System.stat(path) }
        #expect(throws: Errno.noSuchFileOrDirectory) { try System.lstat(path) }
        #expect(throws: Errno.noSuchFileOrDirectory) { try System.unlink(path) }
        #expect(throws: Errno.noSuchFileOrDirectory) { try System.directoryEntries(path) }
        #expect(throws: Errno.noSuchFileOrDirectory) { try System.readlink(path) }
    }

    @Test("the error text is strerror and the number, as the package's messages end")
    func errorText() throws {
        #expect("\(Errno.noSuchFileOrDirectory)" == "No such file or directory (errno: 2)")
        #expect("\(Errno(rawValue: EACCES))" == "Permission denied (errno: 13)")
        do {
            _ = try System.open("/", O_WRONLY)
            Issue.record("opened / for writing")
        } catch {
            #expect(error == .isDirectory && "open /: \(error)" == "open /: Is a directory (errno: 21)")
        }
    }

    @Test("a descriptor that is not open fails with EBADF; one that is reads and writes what was written")
    func descriptors() throws {
        var byte: UInt8 = 0
        #expect(throws: Errno(rawValue: EBADF)) {
            try withUnsafeMutableBytes(of: &byte) { (buffer) throws(Errno) in _ = try System.read(-1, into: buffer) }
        }
        let pipe = try System.pipe()
        defer {
            System.close(pipe.read)
            System.close(pipe.write)
        }
        try System.writeAll(pipe.write, "ok")
        var bytes = [UInt8](repeating: 0, count: 8)
        let count = try bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(Errno) in try System.read(pipe.read, into: buffer) }
        }.get()
        #expect(Array(bytes[..<count]) == Array("ok".utf8))
    }

    @Test("a poll to the nanosecond ends when a descriptor is ready, however long its timeout, and not before its timeout when none is")
    func pollToTheNanosecond() throws {
        let pipe = try System.pipe()
        defer {
            System.close(pipe.read)
            System.close(pipe.write)
        }
        var fds = [pollfd(fd: pipe.read, events: Int16(POLLIN), revents: 0)]
        let start = DispatchTime.now().uptimeNanoseconds
        #expect(try System.poll(&fds, timeoutNanos: 2_500_000) == 0)
        #expect(DispatchTime.now().uptimeNanoseconds - start >= 2_500_000)
        // A byte written by another thread while the poll waits without a timeout ends it.
        let writer = Thread {
            System.nanosleep(20_000_000)
            try? System.writeAll(pipe.write, "x")
        }
        writer.start()
        #expect(try System.poll(&fds, timeoutNanos: nil) == 1 && fds[0].revents & Int16(POLLIN) != 0)
        // Ready before the poll: it returns at once rather than after its minute.
        fds[0].revents = 0
        #expect(try System.poll(&fds, timeoutNanos: 60_000_000_000) == 1)
    }

    @Test("a read a signal interrupts is made again: it returns what is written after the signals")
    func readMadeAgain() throws {
        let pipe = try System.pipe()
        defer {
            System.close(pipe.read)
            System.close(pipe.write)
        }
        // The provocation is real: the raw call, interrupted the same way, fails with EINTR.
        let raw = try underSignals(3, thenWriteTo: pipe.write) { () -> (Int, Int32) in
            var byte: UInt8 = 0
            let count = Glibc.read(pipe.read, &byte, 1)
            return (count, errno)
        }
        #expect(raw.result.0 == -1 && raw.result.1 == EINTR && raw.signals >= 1)
        // The byte the raw read's helper wrote after it returned.
        var byte: UInt8 = 0
        #expect(Glibc.read(pipe.read, &byte, 1) == 1)

        let wrapped = try underSignals(3, thenWriteTo: pipe.write) { () -> Result<Int, Errno> in
            withUnsafeMutableBytes(of: &byte) { buffer in Result { () throws(Errno) in try System.read(pipe.read, into: buffer) } }
        }
        #expect(wrapped.signals == 3)
        #expect(try wrapped.result.get() == 1 && byte == 42)
    }

    @Test("a sleep a signal interrupts goes on for the time left")
    func sleepInFull() throws {
        let start = DispatchTime.now().uptimeNanoseconds
        let run = try underSignals(3, thenWriteTo: nil) { System.nanosleep(300_000_000) }
        #expect(run.signals >= 1)
        #expect(DispatchTime.now().uptimeNanoseconds - start >= 300_000_000)
    }

    @Test("a thread names itself for the kernel: its comm, cut to 15 bytes at a character's start")
    func threadName() throws {
        let names = Locked<[String]>([])
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            func comm() -> String {
                ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "").trimmingCharacters(in: .newlines)
            }
            for name in ["md-feed", "a-name-longer-than-fifteen", "fourteen-bytes\u{E9}x"] {
                try? System.setThreadName(name)
                names.withLock { $0.append(comm()) }
            }
            done.signal()
        }
        thread.start()
        done.wait()
        // é is two bytes, the 15th and 16th: it goes whole.
        #expect(names.withLock { $0 } == ["md-feed", "a-name-longer-t", "fourteen-bytes"])
        let own = ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "")
        #expect(!own.hasPrefix("md-feed"), "the caller's own thread only")
    }

    @Test("a thread asks for a scheduler slice of its own: the kernel keeps it (as /proc says), and 0 gives the default back")
    func threadSlice() throws {
        // EEVDF's custom slices came with Linux 6.12; before, sched_runtime is not a fair task's.
        let release = try String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8)
        let version = release.split(separator: ".").prefix(2).compactMap { Int($0.prefix { $0.isNumber }) }
        let hasSlices = version.count == 2 && (version[0], version[1]) >= (6, 12)
        // The slice before, then after asking for 250 µs, then after asking for 0: by the calls and by /proc.
        let seen = Locked<[(call: UInt64?, proc: String?)]>([])
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            func procSlice() -> String? {
                let text = (try? String(contentsOfFile: "/proc/thread-self/sched", encoding: .utf8)) ?? ""
                let line = text.split(separator: "\n").first { $0.hasPrefix("se.slice") }
                return line.map { String($0.split(separator: ":").last ?? "").trimmingCharacters(in: .whitespaces) }
            }
            seen.withLock { $0.append((try? System.threadSlice(), procSlice())) }
            for nanoseconds: UInt64 in [250_000, 0] {
                let set: UInt64? = (try? System.setThreadSlice(nanoseconds: nanoseconds)) != nil ? try? System.threadSlice() : nil
                seen.withLock { $0.append((set, procSlice())) }
            }
            done.signal()
        }
        thread.start()
        done.wait()
        let results = seen.withLock { $0 }
        #expect(results.count == 3 && results.allSatisfy { $0.call != nil }, "sched_setattr and sched_getattr succeed: \(results)")
        guard hasSlices, results.count == 3 else {
            print("Linux \(release.trimmingCharacters(in: .newlines)) has no custom slices: only the calls are checked")
            return
        }
        #expect(results[1].call == 250_000, "the slice asked for: \(results)")
        #expect(results[2].call == results[0].call && results[0].call != 250_000, "0 gives the default back: \(results)")
        if let shown = results[1].proc { #expect(shown == "250000", "se.slice \(shown)") }
        if let shown = results[2].proc { #expect(shown == results[0].proc, "se.slice \(shown)") }
    }
}

/// SIGUSR2 deliveries seen by the handler `underSignals` installs.
private let deliveries = Atomic<Int>(0)

/// Runs `block`, which waits in a system call, on this thread while another thread sends this
/// one SIGUSR2 each time it finds it asleep, up to `count` times, with a handler installed
/// without `SA_RESTART` (so the kernel does not restart the call itself); then writes the byte 42
/// to `fd`, so a read there can end. Returns `block`'s result and the signals the handler saw.
private func underSignals<T>(_ count: Int, thenWriteTo fd: Int32?, _ block: () -> T) throws -> (result: T, signals: Int) {
    var action = sigaction()
    action.__sigaction_handler.sa_handler = { _ in deliveries.add(1, ordering: .relaxed) }
    sigemptyset(&action.sa_mask)
    action.sa_flags = 0
    var previous = sigaction()
    #expect(sigaction(SIGUSR2, &action, &previous) == 0)
    defer { sigaction(SIGUSR2, &previous, nil) }
    // The test runs on a dispatch worker thread, which blocks signals: let this one through.
    var unblocked = sigset_t(), previousMask = sigset_t()
    sigemptyset(&unblocked)
    sigaddset(&unblocked, SIGUSR2)
    #expect(pthread_sigmask(SIG_UNBLOCK, &unblocked, &previousMask) == 0)
    defer { pthread_sigmask(SIG_SETMASK, &previousMask, nil) }

    let state = SignalState(target: pthread_self(), thread: try currentThreadID())
    let before = deliveries.load(ordering: .relaxed)
    let helper = Thread {
        var sent = 0
        while sent < count && !state.done.load(ordering: .acquiring) {
            if state.isAsleep() {
                pthread_kill(state.target, SIGUSR2)
                sent += 1
            }
            System.nanosleep(5_000_000)
        }
        if let fd {
            var byte: UInt8 = 42
            _ = Glibc.write(fd, &byte, 1)
        }
        state.finished.signal()
    }
    helper.start()
    let result = block()
    state.done.store(true, ordering: .releasing)
    state.finished.wait()
    return (result, deliveries.load(ordering: .relaxed) - before)
}

/// What the signalling thread knows of the thread it signals.
private final class SignalState: Sendable {
    let target: pthread_t
    let thread: Int32
    let done = Atomic<Bool>(false)
    let finished = DispatchSemaphore(value: 0)

    init(target: pthread_t, thread: Int32) {
        self.target = target
        self.thread = thread
    }

    /// Whether the thread sleeps (state S of `/proc/self/task/TID/stat`): blocked in a call.
    func isAsleep() -> Bool {
        guard let text = try? String(contentsOfFile: "/proc/self/task/\(thread)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return false }
        return text[close...].dropFirst(2).first == "S"
    }
}

/// The kernel's id of the calling thread: the first field of `/proc/thread-self/stat`.
private func currentThreadID() throws -> Int32 {
    let text = try String(contentsOfFile: "/proc/thread-self/stat", encoding: .utf8)
    return try #require(text.split(separator: " ").first.flatMap { Int32($0) })
}
