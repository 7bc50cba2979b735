import Dispatch
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
import RingsideSystem

/// A ring directory of the benchmark's own, `/dev/shm/ringside-bench.XXXXXX`, removed with
/// everything in it by `remove()`, and also when the process is interrupted (SIGINT, SIGTERM);
/// the processes it was given to own (`own(processGroup:)`: a soak's collector and producers,
/// which write in it) are killed first.
package final class ScratchDirectory: Sendable {
    package let path: String

    private static let live = Locked<Set<String>>([])
    /// The process groups to kill before a directory goes, by directory.
    private static let owned = Locked<[String: Set<Int32>]>([:])
    private static let signalSources = Locked<[DispatchSourceSignal]>([])

    /// Makes the directory.
    package init(under parent: String = "/dev/shm") throws(BenchError) {
        let template = "\(parent)/ringside-bench.XXXXXX"
        do { path = try System.mkdtemp(template) } catch { throw BenchError("mkdtemp \(template): \(error)") }
        Self.installSignalCleanup()
        Self.live.withLock { _ = $0.insert(path) }
    }

    /// A subdirectory, made now (removed with this one).
    package func subdirectory(_ name: String) throws(BenchError) -> String {
        let sub = path + "/" + name
        do { try System.mkdir(sub, mode: 0o700) } catch { throw BenchError("mkdir \(sub): \(error)") }
        return sub
    }

    /// Kills the process group `group` (SIGKILL: a process and the workers it forked) when the
    /// directory is removed or the benchmark interrupted, unless `disown` comes first. For
    /// processes started in a group of their own (`SpawnedProcess`), whose files are in it.
    package func own(processGroup group: Int32) {
        Self.owned.withLock { _ = $0[path, default: []].insert(group) }
    }

    /// No longer kills `group`: its processes are gone and reaped (its number may be another's).
    package func disown(processGroup group: Int32) {
        Self.owned.withLock { _ = $0[path]?.remove(group) }
    }

    /// Kills the process groups it owns, then removes the directory and everything in it.
    package func remove() {
        Self.killOwned(path)
        try? FileManager.default.removeItem(atPath: path)
        Self.live.withLock { _ = $0.remove(path) }
    }

    deinit { remove() }

    private static func killOwned(_ path: String) {
        for group in owned.withLock({ $0.removeValue(forKey: path) ?? [] }) { try? System.kill(-group, SIGKILL) }
    }

    /// On SIGINT or SIGTERM: kill what every live scratch directory owns and remove it, then exit
    /// 128 + the signal.
    private static func installSignalCleanup() {
        signalSources.withLock { sources in
            guard sources.isEmpty else { return }
            for signalNumber in [SIGINT, SIGTERM] {
                System.signal(signalNumber, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
                source.setEventHandler {
                    for path in live.withLock({ $0 }) {
                        killOwned(path)
                        try? FileManager.default.removeItem(atPath: path)
                    }
                    exit(128 + signalNumber)
                }
                source.resume()
                sources.append(source)
            }
        }
    }
}

/// Something in the benchmark's environment went wrong; the message says what to do.
package struct BenchError: Error, CustomStringConvertible, Sendable {
    package let description: String
    package init(_ description: String) { self.description = description }
}

// MARK: - What /proc says about this process

enum ProcessInfoReader {
    /// The ids of this process's threads.
    static func threadIDs() -> Set<Int32> {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return Set(tasks.compactMap { Int32($0) })
    }

    /// The id of this process's thread named `name` (`/proc/self/task/*/comm`), if any.
    static func threadID(named name: String) -> Int32? {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return nil }
        for task in tasks {
            let comm = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? ""
            if comm.trimmingCharacters(in: .whitespacesAndNewlines) == name { return Int32(task) }
        }
        return nil
    }

    /// Nanoseconds a thread of this process has run on a CPU: `/proc/self/task/TID/schedstat`'s
    /// first field, else utime + stime from `stat` (clock ticks).
    static func threadCPUNanos(_ tid: Int32) -> UInt64? {
        if let text = try? String(contentsOfFile: "/proc/self/task/\(tid)/schedstat", encoding: .utf8),
            let first = text.split(separator: " ").first, let nanos = UInt64(first)
        {
            return nanos
        }
        guard let text = try? String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        // Fields after the command: state is field 3; utime and stime are fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = UInt64(fields[11]), let system = UInt64(fields[12]),
            let ticks = try? System.sysconf(_SC_CLK_TCK), ticks > 0
        else { return nil }
        return (user + system) * 1_000_000_000 / UInt64(ticks)
    }

    /// A `kB` field of `/proc/self/status` (VmRSS, RssAnon, ...), in megabytes (2^20 bytes).
    static func statusMegabytes(_ field: String) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            let number = line.dropFirst(field.count + 1).split { $0 == " " || $0 == "\t" }.first.flatMap { Double($0) } ?? 0
            return number / 1024
        }
        return 0
    }
}
