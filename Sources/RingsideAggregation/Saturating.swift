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
