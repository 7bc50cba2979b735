import CRingside
#if canImport(Glibc)
import Glibc
#endif
import RingsideSystem

/// One collector per ring directory (and user): an open-file-description lock (`F_OFD_SETLK`,
/// see `rs_lock_byte`) on byte 0 of `ringside-collector.lock` in the ring directory, held by the
/// collector that folds the directory's workers and writes its state, and released by the kernel
/// when that process dies, `SIGKILL` included. A second collector is refused, told the holder's
/// pid (written in the file by the holder).
///
/// The file is the collector's own (`0600`, a regular file of its user with one link): no one
/// else can open it, so no one else can hold its lock. In a sticky directory (`/dev/shm`) another
/// user may plant something at the name first; the next names (`ringside-collector.lock.1` to
/// `.7`) are tried in turn, the same by every collector. A collector locks every one of them that
/// is its own before it goes on, so one that found an earlier name planted and one that did not
/// still meet on the files both can see; if all eight are planted it runs without the lock, and
/// says so in the log.
///
/// Owned by the collector's `CollectorState`; released when it closes (`Collector.stop`) or goes.
final class DirectoryLock {
    /// The names tried, in order.
    static let names = ["ringside-collector.lock"] + (1...7).map { "ringside-collector.lock.\($0)" }

    /// Descriptors of the lock files held; their locks go with them.
    private var held: [Int32] = []

    /// Why a lock cannot be taken.
    enum Refusal: Error, Equatable, CustomStringConvertible {
        /// Another open file description (a collector of this user, maybe in this process) holds it.
        case held(path: String, pid: Int32?)
        /// Every name is planted by someone else (or cannot be opened): the reasons, name by name.
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
    ///   name can hold a lock file of ours.
    init(in directory: LogDirectory) throws(Refusal) {
        // Two rounds: a file another collector made between our look and our create is locked in the second.
        for _ in 0..<3 {
            var reasons: [String] = []
            for name in Self.names {
                do {
                    guard let opened = try directory.openOwn(name, access: O_RDWR) else { continue }
                    try take(opened.descriptor, path: directory.path(of: name))
                } catch let refusal as Refusal {
                    release()
                    throw refusal
                } catch {
                    reasons.append("\(error)")
                }
            }
            if !held.isEmpty {
                writePID()
                return
            }
            // None of ours: make the first name that holds nothing, and look again.
            guard let free = Self.names.first(where: { name in if case .some(.none) = try? directory.entry(name) { true } else { false } })
            else {
                throw .unavailable(reasons: reasons)
            }
            if let made = try? directory.create(free, access: O_RDWR, mode: 0o600) { System.close(made) }
        }
        throw .unavailable(reasons: ["the lock files kept changing under this collector"])
    }

    deinit { release() }

    /// Locks `descriptor`, a lock file of ours, keeping it; throws `Refusal.held` if another holds it.
    private func take(_ descriptor: Int32, path: String) throws(Refusal) {
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
        held.append(descriptor)
    }

    /// Writes this process's pid in every file held, for a collector that is refused to name.
    private func writePID() {
        let text = Array("\(getpid())\n".utf8)
        for descriptor in held {
            // Freshly opened: the file offset is 0.
            try? System.ftruncate(descriptor, 0)
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
        for descriptor in held { System.close(descriptor) }
        held.removeAll()
    }
}
