#if canImport(Glibc)
import Glibc
#endif
import RingsideSnapshot
import RingsideSystem

/// A bot process the sampler follows: its `status` (who it runs as), its `stat` and `fd`, when
/// it started (so that another process at its pid is never taken for it), and its last CPU time
/// for a rate. Touched by the sampler only; a class, so that a round reads it in place.
final class SampledProcess {
    let pid: Int32
    private var status: ProcFile
    private var stat: ProcFile
    private var descriptors: OpenDescriptorCount
    /// Who it ran as at its last read, and the round of that read: its threads are read only in
    /// a round that found it their rings' owner's.
    private(set) var credentials: Credentials?
    private(set) var checkedRound: UInt64 = 0
    /// Its start, in clock ticks after boot, from the first read: any other start later is another process.
    private(set) var startTicks: UInt64?
    private(set) var health: ProcessHealth?
    private var previousCPU: (ticks: UInt64, nanos: UInt64)?
    /// Let go of (its files closed): its threads are not read.
    private(set) var isClosed = false

    init(pid: Int32) {
        self.pid = pid
        status = ProcFile("/proc/\(pid)/status")
        stat = ProcFile("/proc/\(pid)/stat")
        descriptors = OpenDescriptorCount(pid: pid)
    }

    var keptDescriptors: Int { (status.isKept ? 1 : 0) + (stat.isKept ? 1 : 0) + (descriptors.isKept ? 1 : 0) }
    /// The descriptors a read may keep.
    static let filesKept = 3

    /// The user it runs as, when its last read found it one user's and read it.
    var owner: UInt32? { health?.owner }

    /// How a read went.
    enum Reading: Equatable {
        case read
        /// Gone from `/proc`, or unreadable (said for people).
        case gone
        case unreadable(String)
        /// The process at this pid started after its ring says its producer attached, or is not the
        /// one read before: the pid was reused.
        case anotherProcess
        /// The pid is a thread of process `threadGroup`, not a process.
        case notAProcess(threadGroup: Int32)
        /// It runs as none of `owners` (its `credentials` say as whom): nothing else of it was read.
        case otherOwner
    }

    /// Reads who it runs as, and only when that is one of `owners` (the users owning the rings
    /// that name it), its `stat` and its descriptors. `attachedRealtimeNanos`: when its rings say
    /// it attached (0: unknown), which a process first read must have started before. `round`:
    /// the sampler's round, kept when it passes.
    func read(
        _ buffer: UnsafeMutableRawBufferPointer, keep: Bool, nowNanos now: UInt64, attachedRealtimeNanos: UInt64,
        clock: ProcClock, owners: Set<UInt32>, round: UInt64
    ) -> Reading {
        switch status.read(into: buffer, keep: keep) {
        case let .read(count):
            guard let identity = TaskIdentity(status: Array(UnsafeRawBufferPointer(rebasing: buffer[..<count]))[...]) else {
                return .unreadable("\(status.path): no Tgid, Uid and Gid")
            }
            credentials = identity.credentials
            guard identity.threadGroup == pid else { return .notAProcess(threadGroup: identity.threadGroup) }
            guard let user = identity.credentials.soleUser, owners.contains(user) else { return .otherOwner }
        case .gone: return .gone
        case let .failed(reason): return .unreadable(reason)
        }
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
        health.owner = credentials?.soleUser
        if let previousCPU, now > previousCPU.nanos, parsed.cpuTicks >= previousCPU.ticks {
            health.cpuRatio = Double(parsed.cpuTicks - previousCPU.ticks) / clock.ticksPerSecond / (Double(now - previousCPU.nanos) / 1e9)
        }
        previousCPU = (parsed.cpuTicks, now)
        self.health = health
        checkedRound = round
        return .read
    }

    func close() {
        isClosed = true
        status.close()
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

/// Turns a thread's start (clock ticks after boot, field 22 of its `stat`) into CLOCK_MONOTONIC
/// nanoseconds, no later than it was, to set against a lane's heartbeat.
struct ThreadStartClock {
    let ticksPerSecond: Double
    /// CLOCK_BOOTTIME less CLOCK_MONOTONIC now: the time the system was suspended since it booted.
    /// Starts count it and CLOCK_MONOTONIC does not; what it was at a start was no more.
    let suspendedNanos: UInt64

    init(ticksPerSecond: Double, suspendedNanos: UInt64) {
        self.ticksPerSecond = ticksPerSecond
        self.suspendedNanos = suspendedNanos
    }

    /// This system's now: CLOCK_MONOTONIC read first, so the difference can only be too large,
    /// which makes a start earlier.
    init(_ clock: ProcClock) {
        var monotonic = timespec(), boot = timespec()
        clock_gettime(CLOCK_MONOTONIC, &monotonic)
        clock_gettime(CLOCK_BOOTTIME, &boot)
        func nanos(_ time: timespec) -> UInt64 { UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec) }
        self.init(ticksPerSecond: clock.ticksPerSecond, suspendedNanos: nanos(boot) - min(nanos(boot), nanos(monotonic)))
    }

    /// A start of `ticks` (truncated to whole ticks by the kernel: early, never late).
    func monotonicNanos(ofTicks ticks: UInt64) -> UInt64 {
        let bootNanos = UInt64(min(Double(ticks) / ticksPerSecond * 1e9, 1.8e19))
        return bootNanos - min(bootNanos, suspendedNanos)
    }
}
