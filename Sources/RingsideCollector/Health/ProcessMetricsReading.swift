#if canImport(Glibc)
import Glibc
#endif
import RingsideSnapshot
import RingsideSystem

/// Reads `ProcessMetrics` from `/proc` as the Prometheus client libraries do (client_golang
/// through procfs). On the HTTP render worker when a `/metrics` page is rendered: a few small
/// `/proc` reads and one listing of `/proc/self/fd`, never on the drain thread.
extension ProcessMetrics {
    /// This process's figures now, or nil where `/proc` cannot be read (then no process
    /// metrics are exported rather than wrong ones).
    package static func read() -> ProcessMetrics? {
        guard let stat = readSmallFile("/proc/self/stat"), let fields = statFields(stat),
            let bootTime = bootTimeSeconds, let openFDs = countOpenFDs(),
            let clockTicks = try? System.sysconf(_SC_CLK_TCK), let pageBytes = try? System.sysconf(_SC_PAGESIZE),
            clockTicks > 0, pageBytes > 0, let limit = try? System.getrlimit(RLIMIT_NOFILE)
        else { return nil }
        let ticks = Double(clockTicks), pageSize = Double(pageBytes)
        return ProcessMetrics(
            cpuSeconds: Double(fields.utime + fields.stime) / ticks,
            residentMemoryBytes: Double(fields.rss) * pageSize,
            virtualMemoryBytes: Double(fields.vsize),
            openFDs: Double(openFDs),
            maxFDs: limit.rlim_cur == rlim_t.max ? .infinity : Double(limit.rlim_cur),  // rlim_t.max: RLIM_INFINITY
            startTimeSeconds: Double(bootTime) + Double(fields.starttime) / ticks)
    }

    /// The fields of `/proc/PID/stat` these metrics need.
    struct StatFields: Equatable {
        var utime: UInt64, stime: UInt64, starttime: UInt64, vsize: UInt64, rss: UInt64
    }

    /// Parses `/proc/PID/stat` (proc(5)), its fields counted past the name as `ProcStat` counts them.
    static func statFields(_ text: String) -> StatFields? {
        guard let stat = ProcStat(text), let utime = stat.unsigned(14), let stime = stat.unsigned(15),
            let starttime = stat.unsigned(22), let vsize = stat.unsigned(23), let rss = stat.unsigned(24)
        else { return nil }
        return StatFields(utime: utime, stime: stime, starttime: starttime, vsize: vsize, rss: rss)
    }

    /// The `btime` line of `/proc/stat`: when the system booted, in Unix seconds. Fixed while it runs.
    static let bootTimeSeconds: UInt64? = readSmallFile("/proc/stat").flatMap(bootTime(inProcStat:))

    static func bootTime(inProcStat text: String) -> UInt64? {
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return UInt64(line.dropFirst(6).trimmingPrefix(" "))
        }
        return nil
    }

    /// Entries of `/proc/self/fd`, not counting the descriptor that lists them (open while the
    /// listing is read, so always among them).
    static func countOpenFDs() -> Int? {
        guard let names = try? System.directoryEntries("/proc/self/fd") else { return nil }
        return names.count { Int32($0) != nil } - 1  // "." and ".." are not numbers
    }

    /// A `/proc` file's text (they report a size of 0, so read until the end).
    static func readSmallFile(_ path: String) -> String? {
        guard let fd = try? System.open(path, O_RDONLY | O_CLOEXEC) else { return nil }
        defer { System.close(fd) }
        return (try? System.readAll(fd)).map { String(decoding: $0, as: UTF8.self) }
    }
}
