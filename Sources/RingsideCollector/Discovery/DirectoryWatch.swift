#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideSystem
import Synchronization

/// inotify on the ring directory for a chosen set of events, and a pipe through which another
/// thread wakes a `wait`. The collector has two: the drain thread's, for opens, closes and
/// changes of the files it holds, and discovery's, for names that come, go or change. So the
/// files discovery opens to look at (its own `IN_OPEN` and `IN_CLOSE_WRITE`) never reach the
/// watch that has it look again.
///
/// `wait` and `readEvents` belong to one thread; `signal`, `watch` and `isWatching` may be
/// called from any.
final class DirectoryWatch: Sendable {
    private let inotify: Int32
    private let events: UInt32
    private let watchDescriptor = Atomic<Int32>(-1)
    /// A self-pipe (Glibc's Swift module lacks eventfd): `signal` writes a byte, `wait` reads
    /// it once poll says it is there. Both ends are non-blocking, and a byte is written only when
    /// none is pending, so however often others signal, the pipe never fills.
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let signalled = Atomic<Bool>(false)

    /// Events that say the watch itself is gone (the directory removed or moved).
    static let watchLostEvents = UInt32(IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)

    /// A watch for `events` (`IN_*`, or'd); nothing is watched until `watch`.
    init(events: UInt32) {
        inotify = (try? System.inotifyInit1(Int32(IN_NONBLOCK | IN_CLOEXEC))) ?? -1
        (wakeRead, wakeWrite) = (try? System.pipe()) ?? (-1, -1)
        for end in [wakeRead, wakeWrite] where end >= 0 {
            _ = try? System.fcntl(end, F_SETFL, O_NONBLOCK)
            _ = try? System.fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        self.events = events | UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
    }

    deinit {
        for fd in [inotify, wakeRead, wakeWrite] where fd >= 0 { System.close(fd) }
    }

    /// Whether the directory is watched: if not, its owner must look at it often.
    var isWatching: Bool { watchDescriptor.load(ordering: .relaxed) >= 0 }

    /// Watches `path` (again: after it was missing, say); returns whether it is watched.
    @discardableResult
    func watch(_ path: String) -> Bool {
        guard inotify >= 0 else { return false }
        let descriptor = (try? System.inotifyAddWatch(inotify, path, events)) ?? -1
        watchDescriptor.store(descriptor, ordering: .relaxed)
        return descriptor >= 0
    }

    /// Wakes a `wait` now, or the next one if none is under way (from another thread).
    func signal() {
        guard !signalled.exchange(true, ordering: .acquiringAndReleasing) else { return }  // a byte is pending
        _ = try? withUnsafeBytes(of: UInt8(1)) { (byte) throws(Errno) in try System.write(wakeWrite, byte) }
    }

    /// What ended a `wait`: events wait to be read, `signal` was called, both, or neither (the
    /// time was up, or a signal interrupted it).
    struct Woken {
        var events = false
        var signalled = false
    }

    /// Sleeps until an event arrives, `signal` is called, or `timeoutNanos` pass; says which.
    @discardableResult
    func wait(timeoutNanos: UInt64) -> Woken {
        var fds = [
            pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
        ]
        // To the nanosecond (poll's whole milliseconds would round a short wait up: a lane filling
        // fast, where half a millisecond more can cost records), and ended by a `signal` however
        // short (the doorbells' waiter wakes the drain through it).
        guard let ready = try? System.poll(&fds, timeoutNanos: timeoutNanos), ready > 0 else { return Woken() }
        var woken = Woken(events: fds[0].revents != 0)
        if fds[1].revents != 0 {
            signalled.store(false, ordering: .releasing)  // first: a signal from now on writes again
            var bytes = [UInt8](repeating: 0, count: 64)
            _ = bytes.withUnsafeMutableBytes { try? System.read(wakeRead, into: $0) }
            woken.signalled = true
        }
        return woken
    }

    /// What reading the events found besides the names.
    struct Outcome {
        /// Events were lost (the queue overflowed): anything may have changed.
        var overflowed = false
        /// The watch is gone (the directory was removed or moved): `watch` it again.
        var watchLost = false
        /// Events were left unread for the next call (`maxReads` reached).
        var more = false
    }

    /// Consumes pending events, at most `maxReads` reads of 16 KiB (about 340 events each), and
    /// hands each that names a `ringside.` file to `body` with the ring's name (the bytes after
    /// the prefix, not validated) and the event's mask.
    func readEvents(maxReads: Int = .max, _ body: (ArraySlice<UInt8>, UInt32) -> Void) -> Outcome {
        var outcome = Outcome()
        let prefix = RingDirectory.filePrefixBytes
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var reads = 0
        while true {
            guard reads < maxReads else {
                outcome.more = true
                break
            }
            reads += 1
            // Non-blocking: nothing left to read (EAGAIN) ends the loop.
            let count = buffer.withUnsafeMutableBytes { (try? System.read(inotify, into: $0)) ?? 0 }
            guard count > 0 else { break }
            var offset = 0
            let headerSize = MemoryLayout<inotify_event>.size
            while offset + headerSize <= count {
                let (descriptor, mask, length) = buffer.withUnsafeBytes { raw in
                    (
                        raw.load(fromByteOffset: offset, as: Int32.self), raw.load(fromByteOffset: offset + 4, as: UInt32.self),
                        Int(raw.load(fromByteOffset: offset + 12, as: UInt32.self))
                    )
                }
                let name = buffer[(offset + headerSize)..<min(count, offset + headerSize + length)].prefix { $0 != 0 }
                // The end of the watch now held (not of one given up for a new one since).
                if mask & Self.watchLostEvents != 0, descriptor == watchDescriptor.load(ordering: .relaxed) {
                    watchDescriptor.store(-1, ordering: .relaxed)
                    outcome.watchLost = true
                }
                if mask & UInt32(IN_Q_OVERFLOW) != 0 { outcome.overflowed = true }
                if name.starts(with: prefix) { body(name.dropFirst(prefix.count), mask) }
                offset += headerSize + length
            }
        }
        return outcome
    }
}

extension RingDirectory {
    /// `filePrefix`'s bytes, to match inotify's names without making strings of them.
    static let filePrefixBytes = Array(filePrefix.utf8)
}
