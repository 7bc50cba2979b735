#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideAggregation

/// HdrHistogram's interval log format (`--hlog`): header comments and a legend, then a line per
/// histogram series per interval, `Tag=<tag>,<start>,<length>,<max>,<histogram>`, which
/// HdrHistogram's log readers (Java, C, Python) and HistogramLogAnalyzer read.
///
/// Every line stays under 128 bytes but the interval lines, as the C reader's header parser needs.
package enum HistogramLog {
    /// The format version written: 1.3 has tags.
    package static let formatVersion = "1.3"

    /// The legend line, as HdrHistogram's writers print it.
    package static let legend = "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""

    /// The header of a new log file whose interval timestamps are relative to `startRealtimeNanos`
    /// (both `StartTime` and `BaseTime`), with a newline after each line. `contents` says what a
    /// histogram holds: the collector's, the records drained in the interval.
    package static func header(
        startRealtimeNanos start: UInt64, program: String, contents: String = "each series' records drained in the interval"
    ) -> String {
        let seconds = secondsText(start)
        return """
            #[Logged with \(program)]
            #[Histogram log format version \(formatVersion)]
            #[StartTime: \(seconds) (seconds since epoch), \(dateText(start))]
            #[BaseTime: \(seconds) (seconds since epoch)]
            #[Tag: RING.METRIC{KEY=VALUE;...}@UNIT; values and Interval_Max are in UNIT (ratio 1)]
            #[Histograms: 3 digits, 1 to 2^63-1; \(contents)]
            \(legend)

            """
    }

    /// The tag naming a series: `ring.metric{key=value;...}@unit` (`{...}` only with labels).
    ///
    /// Tags may not hold ',' or whitespace. Ring and metric names never do; in label values every
    /// byte outside `!`...`~` and each of `%,;{}@` is written `%XX` (its UTF-8 bytes in hex), so a
    /// tag reads back exactly (percent-decoding) and the unit is what follows the last `@`.
    package static func tag(ring: String, metric: MetricDescriptor) -> String {
        var tag = ring + "." + metric.name
        let labels = metric.labels
        if !labels.isEmpty {
            tag += "{" + labels.map { $0.key + "=" + escape($0.value) }.joined(separator: ";") + "}"
        }
        return tag + "@" + metric.unit.description
    }

    /// `value` with the bytes a tag cannot hold, and the tag's own separators, as `%XX`.
    package static func escape(_ value: String) -> String {
        var out: [UInt8] = []
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in value.utf8 {
            if byte > 0x20, byte < 0x7f, !"%,;{}@".utf8.contains(byte) {
                out.append(byte)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// One interval line (with its newline): times in seconds with 3 decimals (start relative to
    /// the log's StartTime), the interval's max in the series' unit, the histogram in base64.
    package static func line(tag: String, startNanos: UInt64, lengthNanos: UInt64, histogram: Histogram) -> String {
        line(
            tag: tag, startNanos: startNanos, lengthNanos: lengthNanos, max: histogram.max, encoded: HdrHistogramEncoding.base64(histogram))
    }

    /// The same with the histogram already encoded (``HdrHistogramEncoding/base64(_:)``).
    package static func line(tag: String, startNanos: UInt64, lengthNanos: UInt64, max: UInt64, encoded: String) -> String {
        "Tag=\(tag),\(secondsText(startNanos)),\(secondsText(lengthNanos)),\(max).0,\(encoded)\n"
    }

    /// Nanoseconds as seconds with 3 decimals (rounded down to the millisecond), as `12.345`.
    package static func secondsText(_ nanos: UInt64) -> String {
        let millis = nanos / 1_000_000
        let fraction = String(millis % 1000)
        return "\(millis / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// A UTC date as Java's `Date.toString()` writes it: `Sun Nov 22 20:07:47 UTC 2026`.
    static func dateText(_ realtimeNanos: UInt64) -> String {
        var seconds = time_t(realtimeNanos / 1_000_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%a %b %d %H:%M:%S UTC %Y", &parts)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
