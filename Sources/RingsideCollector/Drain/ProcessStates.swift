#if canImport(Glibc)
import Glibc
#endif
import RingsideSystem

/// Whether producer processes are stopped (SIGSTOP, a debugger's breakpoint): such a process
/// still holds its bot's lock, so it looks alive, yet none of its threads writes. Read from
/// `/proc/PID/stat`, once per process per look however many bots it has.
struct ProcessStates {
    private var stopped: [Int32: Bool] = [:]
    private var readAtNanos: UInt64 = 0

    /// True when process `pid` is stopped, false when it runs (or sleeps), nil when it cannot be
    /// read (gone, or in another PID namespace).
    mutating func isStopped(pid: Int32, nowNanos now: UInt64) -> Bool? {
        guard pid > 0 else { return nil }
        if now &- readAtNanos >= DrainTiming.processStateValidNanos {
            stopped.removeAll(keepingCapacity: true)
            readAtNanos = now
        }
        if let known = stopped[pid] { return known }
        guard let state = Self.state(of: pid) else { return nil }
        let isStopped = state == UInt8(ascii: "T") || state == UInt8(ascii: "t")
        stopped[pid] = isStopped
        return isStopped
    }

    /// The state letter of `/proc/PID/stat` (the field after the command, which is in
    /// parentheses and may itself hold spaces and parentheses).
    static func state(of pid: Int32) -> UInt8? {
        guard let fd = try? System.open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC) else { return nil }
        defer { System.close(fd) }
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = buffer.withUnsafeMutableBytes { try? System.read(fd, into: $0) } ?? 0
        guard count > 0 else { return nil }
        return state(inStat: buffer[..<count])
    }

    /// The state letter in the text of a `/proc/PID/stat`: after the last ") ".
    static func state(inStat text: ArraySlice<UInt8>) -> UInt8? {
        guard let close = text.lastIndex(of: UInt8(ascii: ")")), close + 2 < text.endIndex,
            text[close + 1] == UInt8(ascii: " ")
        else { return nil }
        return text[close + 2]
    }
}
