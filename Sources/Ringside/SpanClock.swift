import CRingside

// The clock spans are timed with, as the C library chose it for this process (THE SPAN CLOCK in
// ringside.h): the TSC where it is invariant and the kernel keeps time with it, else
// CLOCK_MONOTONIC. Every language's producer chooses by the same rules.

extension Bot {
    /// A clock spans can be timed with.
    public enum SpanClock: Sendable, Equatable {
        /// The TSC (`rdtsc`), calibrated against `CLOCK_MONOTONIC`: a span's end is converted to
        /// `CLOCK_MONOTONIC` nanoseconds within `RS_SPAN_CLOCK_BOUND_NS` (5 µs).
        case tsc
        /// `CLOCK_MONOTONIC`, read through the vDSO: on a machine without a usable TSC, or with
        /// `RINGSIDE_SPAN_CLOCK=monotonic` in the environment.
        case monotonic
    }

    /// The clock this process's spans start on. The first attach chooses it (and calibrates the
    /// TSC, about a millisecond, once); asked before any attach, it is chosen now.
    public static var spanClock: SpanClock {
        rs_span_clock() == RS_SPAN_CLOCK_TSC ? .tsc : .monotonic
    }

    /// The span clock and why it is the one, for an operator's log: "tsc: invariant TSC,
    /// clocksource tsc; 2.4454 GHz, 7 anchors, the last within 30 ns", or "monotonic: the
    /// kernel's clocksource is kvm-clock, not tsc". The corresponding C function is
    /// `rs_span_clock_describe`.
    public static var spanClockDescription: String {
        var buffer = [CChar](repeating: 0, count: 512)
        _ = rs_span_clock_describe(&buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
