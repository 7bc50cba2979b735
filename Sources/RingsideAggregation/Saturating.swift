/// Saturating arithmetic for totals: a count or a sum that reaches `UInt64.max` stays there. A
/// total that wrapped would read lower than before, and Prometheus' `rate()` would take it for a
/// reset that never happened; one that saturates is flagged (``Histogram/isSaturated``, the
/// collector's `ringside_collector_series_saturated`) and never goes back.
extension UInt64 {
    /// `self + other`, or `UInt64.max` where that overflows.
    @inline(__always)
    package func saturatingAdd(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }

    /// `self * other`, or `UInt64.max` where that overflows.
    @inline(__always)
    package func saturatingMultiply(_ other: UInt64) -> UInt64 {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        return overflow ? .max : product
    }
}

extension Int64 {
    /// `self * other`, or the end of the range (±(2^63 - 1)) on the product's side where that
    /// overflows: a signed histogram's gathered sum times its sampling weight.
    @inline(__always)
    package func saturatingMultiply(_ other: UInt64) -> Int64 {
        guard self != 0, other != 0 else { return 0 }
        let (product, overflow) = multipliedReportingOverflow(by: Int64(clamping: other))
        return overflow || other > UInt64(Int64.max) || product == .min ? (self < 0 ? -.max : .max) : product
    }
}
