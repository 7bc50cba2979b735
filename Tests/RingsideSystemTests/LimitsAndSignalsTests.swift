import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RingsideSystem
import Testing

@Suite("RingsideSystem: limits, the system's configuration, files read to the end, signal dispositions and masks", .serialized)
struct LimitsAndSignalsTests {
    @Test("getrlimit reads the open-file limits /proc/self/limits shows; setrlimit sets them, and refuses a soft limit over the hard")
    func openFileLimits() throws {
        let limit = try System.getrlimit(RLIMIT_NOFILE)
        let limits = try String(contentsOfFile: "/proc/self/limits", encoding: .utf8)
        let line = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
        let shown = line.dropFirst("Max open files".count).split(separator: " ").prefix(2).map { String($0) }
        #expect(shown == [String(limit.rlim_cur), String(limit.rlim_max)], "\(line)")

        try System.setrlimit(RLIMIT_NOFILE, limit)  // the same limits: nothing changes for the other tests
        #expect(try System.getrlimit(RLIMIT_NOFILE).rlim_cur == limit.rlim_cur)
        #expect(limit.rlim_max < rlim_t.max, "the kernel caps the open-file limit (nr_open)")
        #expect(throws: Errno(rawValue: EINVAL)) {
            try System.setrlimit(RLIMIT_NOFILE, rlimit(rlim_cur: limit.rlim_max &+ 1, rlim_max: limit.rlim_max))
        }
        #expect(throws: Errno(rawValue: EINVAL)) { try System.getrlimit(__rlimit_resource(rawValue: 9_999)) }
    }

    @Test("sysconf gives the clock tick, the page size and the CPUs online; a name it does not know fails with EINVAL")
    func configuration() throws {
        #expect(try System.sysconf(_SC_CLK_TCK) == 100)  // USER_HZ, what /proc's times count in
        let pageSize = try #require(try System.sysconf(_SC_PAGESIZE))
        #expect(pageSize >= 4096 && pageSize & (pageSize - 1) == 0)
        let online = try #require(try System.sysconf(_SC_NPROCESSORS_ONLN))
        #expect(online >= 1 && online >= ProcessInfo.processInfo.activeProcessorCount)
        #expect(throws: Errno(rawValue: EINVAL)) { try System.sysconf(-1) }
    }

    @Test("uname names the kernel as /proc/sys/kernel does")
    func kernelNames() throws {
        let names = System.uname()
        func text<T>(_ field: T) -> String { withUnsafeBytes(of: field) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) } }
        #expect(text(names.sysname) == "Linux")
        let release = try String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8)
        #expect(text(names.release) == release.trimmingCharacters(in: .newlines))
    }

    @Test("readAll reads a /proc file whose size says 0, and a pipe in more than one read, to the end")
    func readToTheEnd() throws {
        let fd = try System.open("/proc/self/stat", O_RDONLY | O_CLOEXEC)
        defer { System.close(fd) }
        #expect(try System.fstat(fd).st_size == 0)
        #expect(String(decoding: try System.readAll(fd), as: UTF8.self).hasPrefix("\(getpid()) ("))

        let pipe = try System.pipe()
        defer { System.close(pipe.read) }
        let written = (0..<10_000).map { UInt8(truncatingIfNeeded: $0) }  // more than one read's 4 KiB
        try System.writeAll(pipe.write, written)
        System.close(pipe.write)
        #expect(try System.readAll(pipe.read) == written)
    }

    @Test("signal sets a disposition and gives the one before; pthreadSigmask blocks and unblocks in this thread")
    func dispositionsAndMasks() throws {
        let previous = System.signal(SIGUSR1, SIG_IGN)
        #expect(try signalBit(SIGUSR1, in: "SigIgn", of: "/proc/self/status"))
        System.signal(SIGUSR1, previous)
        #expect(try !signalBit(SIGUSR1, in: "SigIgn", of: "/proc/self/status"))

        try withThreadMaskRestored { () throws in
            System.pthreadSigmask(SIG_UNBLOCK, [SIGUSR1])
            #expect(try !signalBit(SIGUSR1, in: "SigBlk", of: "/proc/thread-self/status"))
            System.pthreadSigmask(SIG_BLOCK, [SIGUSR1])
            #expect(try signalBit(SIGUSR1, in: "SigBlk", of: "/proc/thread-self/status"))
        }
    }

    @Test("sigtimedwait takes a blocked signal sent to this thread; with none, it fails with EAGAIN once the time is up")
    func takingSignals() throws {
        try withThreadMaskRestored { () throws in
            System.pthreadSigmask(SIG_BLOCK, [SIGUSR1])
            #expect(pthread_kill(pthread_self(), SIGUSR1) == 0)
            #expect(try System.sigtimedwait([SIGUSR1], timeoutNanos: 5_000_000_000) == SIGUSR1)

            let start = DispatchTime.now().uptimeNanoseconds
            #expect(throws: Errno.resourceTemporarilyUnavailable) { try System.sigtimedwait([SIGUSR1], timeoutNanos: 20_000_000) }
            #expect(DispatchTime.now().uptimeNanoseconds - start >= 20_000_000)
        }
    }
}

/// Runs `body`, then gives the calling thread back the signal mask it had.
private func withThreadMaskRestored(_ body: () throws -> Void) throws {
    var previous = sigset_t()
    #expect(pthread_sigmask(SIG_SETMASK, nil, &previous) == 0)
    defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
    try body()
}

/// Whether `signal`'s bit is set in a mask line of a `/proc` status file (`SigIgn:`, `SigBlk:`: hexadecimal, bit N - 1 for signal N).
private func signalBit(_ signal: Int32, in field: String, of path: String) throws -> Bool {
    let text = try String(contentsOfFile: path, encoding: .utf8)
    let line = try #require(text.split(separator: "\n").first { $0.hasPrefix(field + ":") })
    let mask = try #require(UInt64(line.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces), radix: 16))
    return mask & (1 << UInt64(signal - 1)) != 0
}
