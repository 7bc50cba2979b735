import CRingside

/// A signed histogram's values as the file stores them (VALUES in ringside.h): each value v as
/// `UInt64(bitPattern: v) ^ 2^63`, so that unsigned order is signed order and 0 means "none".
/// The reader's one place to turn them back.
package enum OffsetBinary {
    /// The value stored as `stored`.
    package static func value(_ stored: UInt64) -> Int64 { Int64(bitPattern: stored ^ RS_OFFSET_BINARY_BIAS) }

    /// The sum of `count` values whose offset forms sum to `stored` (modulo 2^64): each added
    /// 2^63, which `count` of them make `count * 2^63` modulo 2^64. Exact when the values' sum
    /// lies within the int64 range, as an unsigned sum is when it stays below 2^64.
    package static func sum(_ stored: UInt64, count: UInt64) -> Int64 {
        Int64(bitPattern: stored &- (count &<< 63))
    }

    /// A largest value as a cell keeps it: nil for 0, "none yet".
    package static func maximum(_ stored: UInt64) -> Int64? { stored == 0 ? nil : value(stored) }
}
