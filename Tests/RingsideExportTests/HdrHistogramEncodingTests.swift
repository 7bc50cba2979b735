import Foundation
import Ringside
import RingsideAggregation
@testable import RingsideExport
import RingsideTestSupport
import Testing

@Suite("HdrHistogram's V2 encoding and interval log")
struct HdrHistogramEncodingTests {
    @Test("ZigZag LEB128 varints as HdrHistogram writes them, up to 9 bytes")
    func varints() {
        func encoded(_ value: Int64) -> [UInt8] {
            var bytes: [UInt8] = []
            HdrHistogramEncoding.appendVarint(value, to: &bytes)
            return bytes
        }
        #expect(encoded(0) == [0x00])
        #expect(encoded(-1) == [0x01])
        #expect(encoded(1) == [0x02])
        #expect(encoded(63) == [0x7E])
        #expect(encoded(64) == [0x80, 0x01])
        #expect(encoded(-1024) == [0xFF, 0x0F])
        #expect(encoded(.max).count == 9 && encoded(.min).count == 9)
        for value: Int64 in [0, 1, -1, 300, -300, 1 << 40, -(1 << 40), .max, .min] {
            let bytes = encoded(value)
            let decoded = HdrHistogramEncoding.readVarint(bytes, at: 0, end: bytes.count)
            #expect(decoded?.0 == value && decoded?.1 == bytes.count)
        }
    }

    @Test("each Ringside bucket is exactly two HdrHistogram buckets, its count in the lower one")
    func bucketMapping() {
        // Below 1024: one bucket each, the same.
        for value: UInt64 in [0, 1, 2, 1000, 1023] {
            #expect(HdrHistogramEncoding.countsIndex(of: value) == Int(value))
        }
        for octave in 1...53 {
            let width = UInt64(1) << UInt64(octave)
            for lower in [UInt64(512) * width, UInt64(777) * width, UInt64(1023) * width] {
                let index = HdrHistogramEncoding.countsIndex(of: lower)
                #expect(HdrHistogramEncoding.countsIndex(of: lower + width / 2 - 1) == index, "octave \(octave)")
                #expect(HdrHistogramEncoding.countsIndex(of: lower + width / 2) == index + 1, "octave \(octave)")
                #expect(HdrHistogramEncoding.countsIndex(of: lower + width - 1) == index + 1, "octave \(octave)")
                #expect(HdrHistogramEncoding.lowestValue(ofIndex: index) == lower)
                // What HdrHistogram reports for the bucket (its highest value) is Ringside's midpoint less one.
                #expect(HdrHistogramEncoding.lowestValue(ofIndex: index + 1) - 1 == Histogram.representativeValue(lower) - 1)
            }
        }
        #expect(HdrHistogramEncoding.countsIndex(of: UInt64(Int64.max)) == HdrHistogramEncoding.countsLength - 1)
        #expect(HdrHistogramEncoding.countsIndex(of: .max) == HdrHistogramEncoding.countsLength - 1)
    }

    @Test("the uncompressed header's bytes")
    func header() {
        var histogram = Histogram()
        histogram.record(3, count: 2)
        let bytes = HdrHistogramEncoding.encode(histogram)
        #expect(Array(bytes[0..<4]) == [0x1C, 0x84, 0x93, 0x13], "V2 encoding cookie, 0x10 flag")
        #expect(Array(bytes[4..<8]) == [0, 0, 0, 2], "payload: a run of 3 zeros, then 2")
        #expect(Array(bytes[8..<16]) == [0, 0, 0, 0, 0, 0, 0, 3], "normalizing offset 0, 3 digits")
        #expect(Array(bytes[16..<24]) == [0, 0, 0, 0, 0, 0, 0, 1], "lowest discernible value 1")
        #expect(Array(bytes[24..<32]) == [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], "highest trackable Int64.max")
        #expect(Array(bytes[32..<40]) == [0x3F, 0xF0, 0, 0, 0, 0, 0, 0], "ratio 1.0")
        #expect(Array(bytes[40...]) == [0x05, 0x04], "-3 then 2")
        #expect(HdrHistogramEncoding.encode(Histogram()).count == 40)
    }

    @Test("compressed (zlib's format) and base64, it decodes to the same counts and header")
    func roundTrip() throws {
        var random = SplitMix64(seed: 1503)
        var histogram = Histogram()
        for _ in 0..<20_000 {
            let bits = Int.random(in: 1...64, using: &random)
            histogram.record(random.next() >> UInt64(64 - bits))
        }
        for _ in 0..<1_000 { histogram.record(UInt64.random(in: 40_000...400_000, using: &random), count: 3) }
        let compressed = HdrHistogramEncoding.compressed(histogram)
        #expect(Array(compressed[0..<4]) == [0x1C, 0x84, 0x93, 0x14], "V2 compression cookie, 0x10 flag")
        #expect(compressed[8] == 0x78, "a zlib header (RFC 1950), not raw deflate or gzip")
        let text = HdrHistogramEncoding.base64(histogram)
        #expect(Data(base64Encoded: text).map(Array.init) == compressed, "standard base64")
        let decoded = try #require(HdrHistogramEncoding.decode(base64: text))
        #expect(decoded.significantDigits == 3 && decoded.lowestDiscernibleValue == 1 && decoded.highestTrackableValue == .max)
        #expect(decoded.normalizingIndexOffset == 0 && decoded.conversionRatio == 1)
        var expected: [Int: UInt64] = [:]
        for (index, count) in HdrHistogramEncoding.counts(of: histogram) { expected[index, default: 0] += count }
        #expect(decoded.counts == expected)
        #expect(decoded.totalCount == histogram.count)
        // Values of 2^63 and more go to the last bucket.
        #expect(decoded.counts.keys.max() == HdrHistogramEncoding.countsLength - 1)
        #expect(HdrHistogramEncoding.decode(base64: "not base64!") == nil)
        #expect(HdrHistogramEncoding.decode(base64: Data(compressed.dropLast(3)).base64EncodedString()) == nil)
        #expect(HdrHistogramEncoding.decode(base64: HdrHistogramEncoding.base64(Histogram()))?.counts == [:])
    }

    @Test("quantiles as HdrHistogram's tools read them stay within 1/1024 of Ringside's")
    func quantiles() throws {
        var random = SplitMix64(seed: 99)
        var histogram = Histogram()
        for _ in 0..<50_000 {
            // Lognormal-ish latencies from 1 us to 10 ms.
            histogram.record(UInt64(exp(Double.random(in: log(1_000.0)...log(10_000_000.0), using: &random))))
        }
        let decoded = try #require(HdrHistogramEncoding.decode(base64: HdrHistogramEncoding.base64(histogram)))
        let indexes = decoded.counts.keys.sorted()
        for q in [0.5, 0.9, 0.99, 0.999] {
            // HdrHistogram: the first index whose running count reaches the rank; its highest value.
            let rank = UInt64((q * Double(histogram.count)).rounded(.up))
            var seen: UInt64 = 0
            var hdr: UInt64 = 0
            for index in indexes {
                seen += decoded.counts[index]!
                if seen >= rank {
                    hdr = HdrHistogramEncoding.lowestValue(ofIndex: index + 1) - 1
                    break
                }
            }
            let ringside = histogram.value(atQuantile: q)
            #expect(Double(ringside > hdr ? ringside - hdr : hdr - ringside) <= Double(ringside) / 1024, "q \(q)")
        }
    }

    @Test("tags hold no ',' or whitespace, and name the ring, metric, labels and unit")
    func tags() {
        let plain = MetricDescriptor(
            index: 0, name: "order_fill_latency", kind: .histogram, unit: .nanoseconds,
            encodedLabels: "", help: "", sampleEvery: 1)
        #expect(HistogramLog.tag(ring: "demo-bot", metric: plain) == "demo-bot.order_fill_latency@ns")
        let labelled = MetricDescriptor(
            index: 1, name: "size", kind: .histogram, unit: .bytes,
            encodedLabels: "path=/a b,c;d{e}@f%g\tü\nsymbol=AAPL", help: "", sampleEvery: 1)
        let tag = HistogramLog.tag(ring: "bot.v2", metric: labelled)
        #expect(tag == "bot.v2.size{path=/a%20b%2Cc%3Bd%7Be%7D%40f%25g%09%C3%BC;symbol=AAPL}@bytes")
        #expect(!tag.contains(",") && !tag.contains(where: \.isWhitespace))
        #expect(tag.removingPercentEncoding?.contains("/a b,c;d{e}@f%g\tü") == true)
    }

    @Test("the header's lines: version, start and base time, legend, each under 128 bytes")
    func headerLines() {
        // 2026-11-22 20:07:47.123 UTC
        let start: UInt64 = 1_795_378_067_123_456_789
        let header = HistogramLog.header(startRealtimeNanos: start, program: "ringside-collector 0.2.0 (revision abc1234)")
        let lines = header.split(separator: "\n").map(String.init)
        #expect(header.hasSuffix("\n"))
        #expect(lines[0] == "#[Logged with ringside-collector 0.2.0 (revision abc1234)]")
        #expect(lines[1] == "#[Histogram log format version 1.3]")
        #expect(lines[2] == "#[StartTime: 1795378067.123 (seconds since epoch), Sun Nov 22 20:07:47 UTC 2026]")
        #expect(lines[3] == "#[BaseTime: 1795378067.123 (seconds since epoch)]")
        #expect(lines.last == "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"")
        #expect(lines.allSatisfy { $0.utf8.count < 128 })
        #expect(lines.dropLast().allSatisfy { $0.hasPrefix("#[") && $0.hasSuffix("]") })
    }

    @Test("an interval line: tag, start and length in seconds with 3 decimals, max, histogram")
    func intervalLine() throws {
        var histogram = Histogram()
        histogram.record(1_500)
        histogram.record(2_000_000)
        let line = HistogramLog.line(tag: "r.m@ns", startNanos: 12_345_678_901, lengthNanos: 1_002_000_000, histogram: histogram)
        let fields = line.dropLast().split(separator: ",").map(String.init)
        #expect(line.hasSuffix("\n") && fields.count == 5)
        #expect(fields[0] == "Tag=r.m@ns" && fields[1] == "12.345" && fields[2] == "1.002" && fields[3] == "2000000.0")
        #expect(try #require(HdrHistogramEncoding.decode(base64: fields[4])).totalCount == 2)
        #expect(HistogramLog.secondsText(0) == "0.000" && HistogramLog.secondsText(999_999) == "0.000")
        #expect(HistogramLog.secondsText(7_050_000_000) == "7.050")
    }
}
