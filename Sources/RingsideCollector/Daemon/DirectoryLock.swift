import CRingside
#if canImport(Glibc)
import Glibc
#endif
import RingsideSystem

/// One collector per ring directory (and user): an open-file-description lock (`F_OFD_SETLK`,
/// see `rs_lock_byte`) on byte 0 of every lock file of the collector's user in the ring
/// directory, held by the collector that folds the directory's workers and writes its state, and
/// released by the kernel when that process dies, `SIGKILL` included. A second collector is
/// refused, told the holder's pid (written in the file by the holder).
///
/// A lock file is a regular file of the collector's user with one link, named
/// `ringside-collector.lock` or `ringside-collector.lock.<suffix>`: mode `0600`, so no one else can
/// open it, so no one else can hold its lock. In a sticky directory (`/dev/shm`) another user may
/// plant anything at any name first (a link, a FIFO, a directory, a file of theirs): what is not
/// a lock file of ours is passed over, never opened. A collector that finds none of its own makes
/// one: at the first name, or when something is planted there, at a name with a random suffix
/// no one can guess. It then locks every lock file of its user, in the order of their names, and
/// looks again until no new one has come, then writes its pid in them. One that finds a file
/// locked by a collector that wrote its pid is refused; two that each made a file at once, and
/// find each other's locked but unwritten, both let go and start again a moment apart, so one of
/// them takes every file and the other is refused. Another user
/// can therefore neither make two collectors of one user collect one directory nor keep one from
/// starting; only the collector's user (a collector of its own, or one holding the files open)
/// and root can.
///
/// Owned by the collector's `CollectorState`; released when it closes (`Collector.stop`) or goes.
final class DirectoryLock {
    /// The lock file's name, and the start of the names made when something else is there.
    static let name = "ringside-collector.lock"

    /// Descriptors of the lock files held, by name; their locks go with them.
    private var held: [String: Int32] = [:]

    /// Why a lock cannot be taken.
    enum Refusal: Error, Equatable, CustomStringConvertible {
        /// Another open file description (a collector of this user, maybe in this process) holds it.
        case held(path: String, pid: Int32?)
        /// No lock file of ours can be made (a directory the collector cannot write in, or full).
        case unavailable(reasons: [String])

        var description: String {
            switch self {
            case let .held(path, pid):
                let holder = pid.map { "collector pid \($0)" } ?? "another collector"
                return "\(holder) already collects this directory (it holds the lock on \(path)): one collector per ring "
                    + "directory, or they would fold the same workers and overwrite each other's totals; stop it first, or "
                    + "give this one another --dir"
            case let .unavailable(reasons):
                return "no lock file could be made: " + reasons.joined(separator: "; ")
            }
        }
    }

    /// Takes the lock in `directory`.
    /// - Throws: `Refusal.held` when another collector holds it; `Refusal.unavailable` when no
    ///   lock file of ours is there and none can be made.
    init(in directory: LogDirectory) throws(Refusal) {
        var reasons: [String] = []
        for _ in 0..<Self.rounds {
            let ours = Self.lockFiles(in: directory).sorted()
            if ours.isEmpty {
                do { try Self.make(in: directory) } catch { reasons.append("\(error)") }
                continue
            }
            if ours == held.keys.sorted() {
                writePID()
                return
            }
            var startAgain = false
            for name in ours where held[name] == nil {
                do {
                    guard let opened = try directory.openOwn(name, access: O_RDWR) else { continue }  // removed since the look
                    try take(opened.descriptor, name: name, path: directory.path(of: name))
                } catch let refusal as Refusal {
                    // A collector that has its lock (its pid written in the file) goes on: this one is refused.
                    if case .held(_, .some) = refusal {
                        release()
                        throw refusal
                    }
                    // One still taking its files (it made one while this one did): both start again, a moment apart.
                    startAgain = true
                    break
                } catch {
                    reasons.append("\(error)")
                }
            }
            if startAgain {
                release()
                usleep(UInt32.random(in: 1_000...20_000))
            }
        }
        release()
        if Self.lockFiles(in: directory).isEmpty { throw .unavailable(reasons: reasons) }
        throw .held(path: directory.path(of: Self.name), pid: nil)
    }

    /// Looks at the lock files at most this many times (one look takes them, or finds them held
    /// by another collector still taking its own: a few, in practice).
    static let rounds = 64

    deinit { release() }

    /// The names of the lock files of the collector's user in `directory` (unsorted).
    private static func lockFiles(in directory: LogDirectory) -> [String] {
        let names = (try? directory.names(prefix: name)) ?? []
        return names.filter { ($0 == name || $0.hasPrefix(name + ".")) && directory.holdsOwn($0) }
    }

    /// Makes a lock file: at `name`, or when something is there, at `name.<random>`.
    private static func make(in directory: LogDirectory) throws(LogDirectoryError) {
        let made: Int32
        if (try directory.entry(name)) == nil, let first = try? directory.create(name, access: O_RDWR, mode: 0o600) {
            made = first
        } else {
            var random = SystemRandomNumberGenerator()
            made = try directory.create("\(name).\(String(random.next() as UInt64, radix: 16))", access: O_RDWR, mode: 0o600)
        }
        System.close(made)
    }

    /// Locks `descriptor`, the lock file `name` of ours, keeping it; throws `Refusal.held` if another holds it.
    private func take(_ descriptor: Int32, name: String, path: String) throws(Refusal) {
        // A lock this process let go of (a collector stopped and another made, in one process) is
        // held a moment longer by a child it is spawning meanwhile: the child shares the lock's
        // open file description until its exec closes it. Such a lock is waited for, 2 s at most.
        let deadline = rs_clock_precise_ns() &+ 2_000_000_000
        while rs_lock_byte(descriptor, 0) != 0 {
            let holder = Self.holderPID(descriptor)
            guard holder == getpid(), rs_clock_precise_ns() < deadline else {
                System.close(descriptor)
                throw .held(path: path, pid: holder)
            }
            usleep(1_000)
        }
        held[name] = descriptor
    }

    /// Writes this process's pid in every file held, for a collector that is refused to name,
    /// and to say that it has its lock: a file whose holder wrote nothing is still being taken.
    /// 16 bytes, padded, so the whole of what was there is written over at once.
    private func writePID() {
        var text = Array("\(getpid())\n".utf8)
        text += [UInt8](repeating: UInt8(ascii: " "), count: max(0, 16 - text.count))
        for descriptor in held.values {
            // Each file is written once, just after it was opened: its offset is 0.
            try? System.writeAll(descriptor, text)
        }
    }

    /// The pid the holder wrote in the file (nil when it cannot be read).
    private static func holderPID(_ descriptor: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 16)
        let count = buffer.withUnsafeMutableBytes { bytes in (try? System.pread(descriptor, into: bytes, at: 0)) ?? 0 }
        return Int32(String(decoding: buffer[..<count].prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }, as: UTF8.self))
    }

    /// Lets go of every lock held (the files stay, for the next collector).
    func release() {
        for descriptor in held.values { System.close(descriptor) }
        held.removeAll()
    }
}
