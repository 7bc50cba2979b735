import CZlib
import RingsideText
import RingsideAggregation

/// A Ringside ``Histogram`` in HdrHistogram's V2 encoding, compressed and in base64, as the
/// interval log (`--hlog`) carries it and HdrHistogram's Java, C and Python libraries (and
/// HistogramLogAnalyzer) decode it.
///
/// Parameters: 3 significant digits (2048 sub-buckets), lowest discernible value 1, highest
/// trackable value `Int64.max`, integer-to-double ratio 1, normalizing index offset 0. Values
/// below 2048 then have a bucket each, and above that HdrHistogram's buckets are half as wide as
/// Ringside's: each Ringside bucket (width `2^k` over `2^(k+9) ..< 2^(k+10)`) is exactly two
/// HdrHistogram buckets, and one below 1024 is exactly one.
///
/// A Ringside bucket's count goes to the lower of its two HdrHistogram buckets, the one holding
/// its lower bound. HdrHistogram's tools report a quantile as the highest value of its bucket:
/// here the Ringside midpoint less one unit (exactly the value below 1024), so their quantiles are
/// within 1/1024 of every value the bucket stands for, Ringside's own bound (the upper half would
/// report the bucket's top, up to 1/512 off). Their mean uses the lower half's midpoint, a quarter
/// of a Ringside bucket below Ringside's (1/2048 at most). Values of `2^63` and above (never a
/// latency) are counted in HdrHistogram's last bucket.
package enum HdrHistogramEncoding {
    /// The V2 encoding cookie and the compressed one, with the 0x10 flag HdrHistogram's writers
    /// set (readers mask it off).
    static let encodingCookie: UInt32 = 0x1c84_9303 | 0x10
    static let compressionCookie: UInt32 = 0x1c84_9304 | 0x10
    package static let significantDigits: UInt32 = 3
    package static let lowestDiscernibleValue: Int64 = 1
    package static let highestTrackableValue: Int64 = .max
    /// log2 of HdrHistogram's sub-bucket half count at 3 digits: 1024.
    static let subBucketHalfCountMagnitude = 10
    /// The number of counts HdrHistogram keeps up to `Int64.max`: 54 half-buckets of 1024.
    package static let countsLength = 54 << 10

    /// HdrHistogram's counts index of `value` (2048 sub-buckets, unit 1).
    package static func countsIndex(of value: UInt64) -> Int {
        let clamped = Swift.min(value, UInt64(Int64.max))
        let bucket = 64 - (clamped | 2047).leadingZeroBitCount - 11
        let subBucket = Int(clamped >> UInt64(bucket))
        return ((bucket + 1) << subBucketHalfCountMagnitude) + subBucket - 1024
    }

    /// The lowest value of counts index `index`, the inverse of ``countsIndex(of:)``.
    package static func lowestValue(ofIndex index: Int) -> UInt64 {
        var bucket = (index >> subBucketHalfCountMagnitude) - 1
        var subBucket = (index & 1023) + 1024
        if bucket < 0 {
            subBucket -= 1024
            bucket = 0
        }
        return UInt64(subBucket) << UInt64(bucket)
    }

    /// The HdrHistogram counts of `histogram`: (index, count) in increasing index order.
    package static func counts(of histogram: Histogram) -> [(index: Int, count: UInt64)] {
        var result: [(index: Int, count: UInt64)] = []
        histogram.forEachBucket { bucket in
            let index = countsIndex(of: bucket.lowerBound)
            if let last = result.last, last.index == index {  // only past 2^63
                let (sum, overflow) = last.count.addingReportingOverflow(bucket.count)
                result[result.count - 1].count = overflow ? .max : sum
            } else {
                result.append((index, bucket.count))
            }
        }
        return result
    }

    /// The uncompressed V2 encoding: a 40-byte big-endian header, then the counts as ZigZag
    /// LEB128 varints, a run of `n` empty counts written as `-n`, up to the last non-empty one.
    package static func encode(_ histogram: Histogram) -> [UInt8] {
        var varints: [UInt8] = []
        var next = 0
        for (index, count) in counts(of: histogram) {
            if index > next { appendVarint(-Int64(index - next), to: &varints) }
            // HdrHistogram's counts are signed 64-bit.
            appendVarint(Int64(Swift.min(count, UInt64(Int64.max))), to: &varints)
            next = index + 1
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(40 + varints.count)
        appendBigEndian(UInt64(encodingCookie), bytes: 4, to: &bytes)
        appendBigEndian(UInt64(varints.count), bytes: 4, to: &bytes)
        appendBigEndian(0, bytes: 4, to: &bytes)  // normalizing index offset
        appendBigEndian(UInt64(significantDigits), bytes: 4, to: &bytes)
        appendBigEndian(UInt64(lowestDiscernibleValue), bytes: 8, to: &bytes)
        appendBigEndian(UInt64(highestTrackableValue), bytes: 8, to: &bytes)
        appendBigEndian((1.0 as Double).bitPattern, bytes: 8, to: &bytes)  // integer-to-double ratio
        return bytes + varints
    }

    /// The compressed form: cookie, length, then the encoding in zlib's format (RFC 1950: a
    /// header and an Adler-32 trailer around DEFLATE data), as HdrHistogram's libraries write it.
    package static func compressed(_ histogram: Histogram) -> [UInt8] {
        let deflated = Zlib.compress(encode(histogram), .zlib, level: 9)  // the best, as HdrHistogram's Java writer uses
        var bytes: [UInt8] = []
        bytes.reserveCapacity(8 + deflated.count)
        appendBigEndian(UInt64(compressionCookie), bytes: 4, to: &bytes)
        appendBigEndian(UInt64(deflated.count), bytes: 4, to: &bytes)
        return bytes + deflated
    }

    /// The compressed form in base64: the last field of an interval log line.
    package static func base64(_ histogram: Histogram) -> String {
        Base64.encode(compressed(histogram))
    }

    // MARK: - Decoding (for the tests, which read back what was written)

    /// A decoded V2 histogram: its header fields and its non-empty counts.
    package struct Decoded: Equatable, Sendable {
        package var significantDigits: UInt32
        package var lowestDiscernibleValue: Int64
        package var highestTrackableValue: Int64
        package var normalizingIndexOffset: Int32
        package var conversionRatio: Double
        /// (index, count) of the non-empty counts in increasing index order.
        package var counts: [Int: UInt64]

        /// The total count.
        package var totalCount: UInt64 { counts.values.reduce(0, &+) }
    }

    /// Decodes a base64 compressed V2 histogram, or nil when it is not one.
    package static func decode(base64 text: String) -> Decoded? {
        guard let bytes = Base64.decode(text), bytes.count >= 8 else { return nil }
        guard readBigEndian(bytes, at: 0, bytes: 4) & ~0xf0 == UInt64(compressionCookie & ~0xf0),
            readBigEndian(bytes, at: 4, bytes: 4) == UInt64(bytes.count - 8),
            let inflated = Zlib.decompress(Array(bytes[8...]), .zlib)
        else { return nil }
        return decode(inflated)
    }

    /// Decodes an uncompressed V2 encoding, or nil when it is not one.
    package static func decode(_ bytes: [UInt8]) -> Decoded? {
        guard bytes.count >= 40, readBigEndian(bytes, at: 0, bytes: 4) & ~0xf0 == UInt64(encodingCookie & ~0xf0) else { return nil }
        let length = Int(readBigEndian(bytes, at: 4, bytes: 4))
        guard 40 + length <= bytes.count else { return nil }
        var decoded = Decoded(
            significantDigits: UInt32(readBigEndian(bytes, at: 12, bytes: 4)),
            lowestDiscernibleValue: Int64(bitPattern: readBigEndian(bytes, at: 16, bytes: 8)),
            highestTrackableValue: Int64(bitPattern: readBigEndian(bytes, at: 24, bytes: 8)),
            normalizingIndexOffset: Int32(bitPattern: UInt32(readBigEndian(bytes, at: 8, bytes: 4))),
            conversionRatio: Double(bitPattern: readBigEndian(bytes, at: 32, bytes: 8)), counts: [:])
        var position = 40
        var index = 0
        while position < 40 + length {
            guard let (value, size) = readVarint(bytes, at: position, end: 40 + length) else { return nil }
            position += size
            if value < 0 {
                index += Int(-value)
            } else {
                if value > 0 { decoded.counts[index] = UInt64(value) }
                index += 1
            }
        }
        return decoded
    }

    // MARK: - Bytes

    /// ZigZag, then LEB128 in at most 9 bytes (the ninth holds 8 bits), as HdrHistogram does.
    static func appendVarint(_ signed: Int64, to bytes: inout [UInt8]) {
        var value = UInt64(bitPattern: (signed << 1) ^ (signed >> 63))
        for _ in 0..<8 {
            if value < 0x80 {
                bytes.append(UInt8(value))
                return
            }
            bytes.append(UInt8(value & 0x7f) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    /// The varint at `position`, and its size; nil when truncated.
    static func readVarint(_ bytes: [UInt8], at position: Int, end: Int) -> (Int64, Int)? {
        var result: UInt64 = 0
        for offset in 0..<9 {
            guard position + offset < end else { return nil }
            let byte = UInt64(bytes[position + offset])
            if offset == 8 {
                result |= byte << 56
            } else {
                result |= (byte & 0x7f) << UInt64(7 * offset)
                if byte & 0x80 != 0 { continue }
            }
            let signed = Int64(bitPattern: (result >> 1) ^ (0 &- (result & 1)))
            return (signed, offset + 1)
        }
        return nil
    }

    static func appendBigEndian(_ value: UInt64, bytes count: Int, to bytes: inout [UInt8]) {
        for shift in stride(from: (count - 1) * 8, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }

    static func readBigEndian(_ bytes: [UInt8], at position: Int, bytes count: Int) -> UInt64 {
        var value: UInt64 = 0
        for offset in 0..<count { value = value << 8 | UInt64(bytes[position + offset]) }
        return value
    }
}
