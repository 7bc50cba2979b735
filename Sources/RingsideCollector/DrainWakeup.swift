#if canImport(Glibc)
import RingsideExport
import Glibc
#endif
import Ringside
import RingsideSystem

/// What the drain thread sleeps on between passes: inotify on the ring directory, so a new bot
/// file (or a bot adding a lane, which grows its file) wakes it within milliseconds, and a pipe,
/// so `stop` wakes it at once. Without inotify (a file system that lacks it, or no watches left)
/// it is a plain timed sleep, and the collector falls back to scanning the directory.
final class DrainWakeup {
    private let inotify: Int32
    private var watch: Int32 = -1
    /// A self-pipe (Glibc's Swift module lacks eventfd): `signal` writes a byte, `wait` reads
    /// it once poll says it is there, so the read never blocks.
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let prefix = Array(RingDirectory.filePrefix.utf8)
    /// Rings whose files were written to, changed, opened or closed since `takeTouched`, by name,
    /// with what happened (`IN_MODIFY`, `IN_ATTRIB`, `IN_OPEN`, `IN_CLOSE_WRITE`, or'd), and
    /// whether events were lost (the queue overflowed): then any ring may have been touched.
    private var touched: [String: UInt32] = [:]
    private var overflowed = false

    init() {
        inotify = (try? System.inotifyInit1(Int32(IN_NONBLOCK | IN_CLOEXEC))) ?? -1
        (wakeRead, wakeWrite) = (try? System.pipe()) ?? (-1, -1)
    }

    deinit {
        for fd in [inotify, wakeRead, wakeWrite] where fd >= 0 { System.close(fd) }
    }

    /// Whether the directory is watched: if not, the caller must scan it often.
    var isWatching: Bool { watch >= 0 }

    /// Watches `path` (again: after it was missing, say); returns whether it is watched.
    @discardableResult
    func watchDirectory(_ path: String) -> Bool {
        guard inotify >= 0 else { return false }
        // IN_MODIFY: a lane added (fallocate), or a file cut short or hole-punched under us;
        // IN_OPEN: a producer attaching again to a ring whose file the collector let go of;
        // IN_CLOSE_WRITE: a producer detaching or dying (its lock goes with its last descriptor).
        let events =
            UInt32(IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_MODIFY | IN_ATTRIB | IN_OPEN)
            | UInt32(IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
        watch = (try? System.inotifyAddWatch(inotify, path, events)) ?? -1
        return watch >= 0
    }

    /// Wakes a `wait` now (from another thread).
    func signal() {
        _ = try? withUnsafeBytes(of: UInt8(1)) { (byte) throws(Errno) in try System.write(wakeWrite, byte) }
    }

    /// Sleeps until a ring file in the directory changes, `signal` is called, or `timeoutNanos`
    /// pass. Returns whether a ring file changed (or the watch was lost, or events overflowed:
    /// then the directory must be looked at anyway).
    func wait(timeoutNanos: UInt64) -> Bool {
        var fds = [
            pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
        ]
        var milliseconds = Int32(min(timeoutNanos / 1_000_000 + (timeoutNanos % 1_000_000 == 0 ? 0 : 1), 60_000))
        if timeoutNanos < 10_000_000 {
            // poll waits whole milliseconds, and rounds up: a short wait (a lane filling fast,
            // where half a millisecond more can cost records) is slept through precisely, then
            // the descriptors are looked at without waiting.
            if timeoutNanos > 0 { System.nanosleep(timeoutNanos) }
            milliseconds = 0
        }
        // A signal ends the wait early with nothing seen; the drain loop comes back to it.
        guard let ready = try? System.poll(&fds, timeoutMillis: milliseconds), ready > 0 else { return false }
        if fds[1].revents != 0 {
            var bytes = [UInt8](repeating: 0, count: 64)
            _ = bytes.withUnsafeMutableBytes { try? System.read(wakeRead, into: $0) }
        }
        return fds[0].revents != 0 && readEvents()
    }

    /// The rings touched since the last call (see `touched`), and whether events were lost.
    func takeTouched() -> (events: [String: UInt32], overflowed: Bool) {
        defer {
            touched.removeAll(keepingCapacity: true)
            overflowed = false
        }
        return (touched, overflowed)
    }

    /// Whether `kinds` (a touched ring's events) hold more than a close: an open, a write, a change.
    static func moreThanClosed(_ kinds: UInt32) -> Bool { kinds & ~UInt32(IN_CLOSE_WRITE) != 0 }

    /// Consumes pending events; true if one names a ring file (an open or a close aside: they
    /// only mark the ring touched) or says the watch is gone.
    private func readEvents() -> Bool {
        var relevant = false
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            // Non-blocking: nothing left to read (EAGAIN) ends the loop.
            let count = buffer.withUnsafeMutableBytes { (try? System.read(inotify, into: $0)) ?? 0 }
            guard count > 0 else { break }
            var offset = 0
            let headerSize = MemoryLayout<inotify_event>.size
            while offset + headerSize <= count {
                let (mask, length) = buffer.withUnsafeBytes { raw in
                    (raw.load(fromByteOffset: offset + 4, as: UInt32.self), Int(raw.load(fromByteOffset: offset + 12, as: UInt32.self)))
                }
                let name = buffer[(offset + headerSize)..<min(count, offset + headerSize + length)].prefix { $0 != 0 }
                if mask & UInt32(IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF) != 0 {
                    if mask & UInt32(IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF) != 0 { watch = -1 }
                    if mask & UInt32(IN_Q_OVERFLOW) != 0 { overflowed = true }
                    relevant = true
                } else if name.starts(with: prefix) {
                    let kinds = mask & UInt32(IN_MODIFY | IN_ATTRIB | IN_OPEN | IN_CLOSE_WRITE)
                    if kinds != 0 { touched[String(decoding: name.dropFirst(prefix.count), as: UTF8.self), default: 0] |= kinds }
                    if mask & ~UInt32(IN_OPEN | IN_CLOSE_WRITE) != 0 { relevant = true }
                }
                offset += headerSize + length
            }
        }
        return relevant
    }
}
