#if canImport(Glibc)
import Glibc
#endif
import RingsideSnapshot
import RingsideSystem

/// A bot process the sampler follows: its `stat` and `fd`, when it started (so that another
/// process at its pid is never taken for it), and its last CPU time for a rate. Touched by the
/// sampler only; a class, so that a round reads it in place.
final class SampledProcess {
    let pid: Int32
    private var stat: ProcFile
    private var descriptors: OpenDescriptorCount
    /// Its start, in clock ticks after boot, from the first read: any other start later is another process.
    private(set) var startTicks: UInt64?
    private(set) var health: ProcessHealth?
    private var previousCPU: (ticks: UInt64, nanos: UInt64)?
    /// Let go of (its files closed): its threads are not read.
    private(set) var isClosed = false

    init(pid: Int32) {
        self.pid = pid
        stat = ProcFile("/proc/\(pid)/stat")
        descriptors = OpenDescriptorCount(pid: pid)
    }

    var keptDescriptors: Int { (stat.isKept ? 1 : 0) + (descriptors.isKept ? 1 : 0) }

    /// How a read went.
    enum Reading: Equatable {
        case read
        /// Gone from `/proc`, or unreadable (said for people).
        case gone
        case unreadable(String)
        /// The process at this pid started after its ring says its producer attached, or is not the
        /// one read before: the pid was reused.
        case anotherProcess
    }

    /// Reads its `stat` and counts its descriptors. `attachedRealtimeNanos`: when its rings say it
    /// attached (0: unknown), which a process first read must have started before.
    func read(
        _ buffer: UnsafeMutableRawBufferPointer, keep: Bool, nowNanos now: UInt64, attachedRealtimeNanos: UInt64,
        clock: ProcClock
    ) -> Reading {
        let text: ArraySlice<UInt8>
        switch stat.read(into: buffer, keep: keep) {
        case let .read(count): text = Array(UnsafeRawBufferPointer(rebasing: buffer[..<count]))[...]
        case .gone: return .gone
        case let .failed(reason): return .unreadable(reason)
        }
        guard let parsed = ProcessStat(text) else { return .unreadable("\(stat.path): not a stat line") }
        let startSeconds = clock.realtimeSeconds(ofTicks: parsed.startTicks)
        if let startTicks {
            guard startTicks == parsed.startTicks else { return .anotherProcess }
        } else if attachedRealtimeNanos > 0, startSeconds > Double(attachedRealtimeNanos) / 1e9 + ProcClock.startSlackSeconds {
            return .anotherProcess
        }
        startTicks = parsed.startTicks
        var health = ProcessHealth(
            cpuSeconds: Double(parsed.cpuTicks) / clock.ticksPerSecond,
            residentMemoryBytes: parsed.residentPages &* clock.pageBytes, threads: parsed.threads,
            openFDs: descriptors.count(keep: keep), majorPageFaults: parsed.majorFaults, startTimeSeconds: startSeconds)
        if let previousCPU, now > previousCPU.nanos, parsed.cpuTicks >= previousCPU.ticks {
            health.cpuRatio = Double(parsed.cpuTicks - previousCPU.ticks) / clock.ticksPerSecond / (Double(now - previousCPU.nanos) / 1e9)
        }
        previousCPU = (parsed.cpuTicks, now)
        self.health = health
        return .read
    }

    func close() {
        isClosed = true
        stat.close()
        descriptors.close()
    }
}

/// What turns `/proc` figures into seconds and bytes: clock ticks a second, the page size, and
/// when the system booted.
struct ProcClock {
    let ticksPerSecond: Double
    let pageBytes: UInt64
    /// `btime` of `/proc/stat`: whole seconds, so a start computed from it is early by up to one.
    let bootTimeSeconds: UInt64

    /// A process that started this much after its ring says it attached is another process: the
    /// boot time's second, a clock tick, and a small step of the wall clock meanwhile.
    static let startSlackSeconds = 2.0

    /// This system's, or nil where `/proc/stat` or `sysconf` cannot say.
    static let system: ProcClock? = {
        guard let ticks = try? System.sysconf(_SC_CLK_TCK), let page = try? System.sysconf(_SC_PAGESIZE), ticks > 0, page > 0,
            let boot = ProcessMetrics.bootTimeSeconds
        else { return nil }
        return ProcClock(ticksPerSecond: Double(ticks), pageBytes: UInt64(page), bootTimeSeconds: boot)
    }()

    /// Unix seconds of a time in clock ticks after boot (a process's start).
    func realtimeSeconds(ofTicks ticks: UInt64) -> Double { Double(bootTimeSeconds) + Double(ticks) / ticksPerSecond }
}
