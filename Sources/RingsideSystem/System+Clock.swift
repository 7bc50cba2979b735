#if canImport(Glibc)
import Glibc
#endif

extension System {
    /// CLOCK_MONOTONIC in nanoseconds: the clock deadlines are set on, since it never jumps
    /// (`clock_gettime` cannot fail for it).
    package static func monotonicNanos() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
