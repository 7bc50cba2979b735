/// The process metrics every Prometheus client library exports: CPU time, memory, file
/// descriptors and start time. The collector reads them from `/proc`; the exporters write them.
package struct ProcessMetrics: Sendable, Equatable {
    /// User and system CPU time, in seconds (`utime + stime` of `/proc/self/stat` over `_SC_CLK_TCK`).
    package var cpuSeconds: Double
    /// Resident set size in bytes (`rss` of `/proc/self/stat` times the page size).
    package var residentMemoryBytes: Double
    /// Virtual memory size in bytes (`vsize` of `/proc/self/stat`).
    package var virtualMemoryBytes: Double
    /// Open file descriptors: the entries of `/proc/self/fd`, less the one listing them.
    package var openFDs: Double
    /// The soft limit on open file descriptors (RLIMIT_NOFILE).
    package var maxFDs: Double
    /// When the process started, in Unix seconds (`btime` of `/proc/stat` plus `starttime` of
    /// `/proc/self/stat` over `_SC_CLK_TCK`).
    package var startTimeSeconds: Double

    package init(
        cpuSeconds: Double, residentMemoryBytes: Double, virtualMemoryBytes: Double, openFDs: Double,
        maxFDs: Double, startTimeSeconds: Double
    ) {
        self.cpuSeconds = cpuSeconds
        self.residentMemoryBytes = residentMemoryBytes
        self.virtualMemoryBytes = virtualMemoryBytes
        self.openFDs = openFDs
        self.maxFDs = maxFDs
        self.startTimeSeconds = startTimeSeconds
    }
}
