import Ringside
import RingsideAggregation
@testable import RingsideExport
import RingsideSnapshot
import Testing

/// A snapshot of one histogram (with native buckets), one counter and one gauge, on ring "bot".
private func sampleSnapshot() -> Snapshot {
    var snapshot = Snapshot()
    snapshot.windowNanos = [1_000_000_000, 60_000_000_000]
    snapshot.quantiles = [0.5, 0.99]
    snapshot.nativeHistogramSchema = 3
    func series(_ name: String, _ kind: MetricKind, _ unit: MetricUnit, labels: String) -> SeriesSnapshot {
        let metric = MetricDescriptor(index: 0, name: name, kind: kind, unit: unit, encodedLabels: labels, help: "", sampleEvery: 1)
        var series = SeriesSnapshot(ring: "bot", metric: metric, id: 1, windows: [])
        for window in 0..<2 {
            var stats = WindowStats()
            stats.count = UInt64(10 + window)
            stats.sum = 1_000_000
            stats.max = 90_000
            stats.quantileValues = [40_000, 80_000]
            stats.rate = 2.5
            stats.gaugeMin = 1
            stats.gaugeMax = 3
            series.windows.append(stats)
        }
        return series
    }
    var latency = series("order_fill_latency", .histogram, .nanoseconds, labels: "le=odd\nsymbol=AAPL")
    var histogram = Histogram()
    for value: UInt64 in [1_000, 2_000, 40_000, 40_000, 900_000] { histogram.record(value) }
    latency.cumulative = histogram
    latency.cumulativeCount = histogram.count
    latency.cumulativeSum = histogram.sum
    var orders = series("orders", .counter, .none, labels: "side=buy")
    orders.cumulativeSum = 42
    var depth = series("queue_depth", .gauge, .none, labels: "")
    depth.lastValue = 7
    snapshot.series = [latency, orders, depth]
    return snapshot
}

@Suite("the exposition formats: negotiation, OpenMetrics text, protobuf")
struct ExpositionFormatTests {
    @Test("the Accept header picks the format by q, as Prometheus 2.42 and prometheus_client send it; text otherwise")
    func negotiation() {
        let prometheusNative =
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.8,"
            + "application/openmetrics-text;version=1.0.0;q=0.7,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        let prometheusDefault =
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
            + "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        #expect(ExpositionFormat.negotiate(accept: prometheusNative) == .protobuf)
        #expect(ExpositionFormat.negotiate(accept: prometheusDefault) == .openMetrics)
        #expect(ExpositionFormat.negotiate(accept: nil) == .text)
        #expect(ExpositionFormat.negotiate(accept: "*/*") == .text)
        #expect(ExpositionFormat.negotiate(accept: "application/json") == .text)
        #expect(
            ExpositionFormat.negotiate(accept: "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text")
                == .text)
        #expect(ExpositionFormat.negotiate(accept: "application/openmetrics-text;version=2.0.0") == .text)
        #expect(ExpositionFormat.negotiate(accept: "text/plain;q=0.9, application/openmetrics-text;q=0.2") == .text)
        #expect(ExpositionFormat.negotiate(accept: "application/openmetrics-text;q=0, text/plain") == .text)
        #expect(acceptsGzip("gzip"))
        #expect(acceptsGzip("deflate, gzip;q=0.5"))
        #expect(acceptsGzip("*"))
        #expect(!acceptsGzip("gzip;q=0"))
        #expect(!acceptsGzip("identity"))
        #expect(!acceptsGzip(nil))
    }

    @Test("OpenMetrics: counter families without _total, UNIT for seconds, label values and HELP escaped, and # EOF last")
    func openMetrics() {
        let page = String(decoding: PrometheusRenderer().render(sampleSnapshot(), format: .openMetrics), as: UTF8.self)
        #expect(page.hasSuffix("\n# EOF\n"))
        #expect(page.components(separatedBy: "# EOF").count == 2)
        #expect(page.contains("# TYPE orders counter\n"))
        #expect(page.contains("orders_total{ring=\"bot\",side=\"buy\"} 42\n"))
        #expect(!page.contains("# TYPE orders_total"))
        #expect(page.contains("# TYPE order_fill_latency_seconds histogram\n# UNIT order_fill_latency_seconds seconds\n"))
        #expect(page.contains("# TYPE ringside_collector_records_drained counter\n"))
        #expect(page.contains("exported_le=\"odd\""))
        let text = String(decoding: PrometheusRenderer().render(sampleSnapshot()), as: UTF8.self)
        #expect(!text.contains("# EOF") && !text.contains("# UNIT") && text.contains("# TYPE orders_total counter\n"))
    }

    @Test("protobuf: every family of the text page, each metric with its labels; the histogram's native buckets add up to its count")
    func protobuf() throws {
        let snapshot = sampleSnapshot()
        let families = try decodeFamilies(PrometheusRenderer().render(snapshot, format: .protobuf))
        let text = String(decoding: PrometheusRenderer().render(snapshot), as: UTF8.self)
        let textFamilies = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { String($0.split(separator: " ")[2]) }
        #expect(families.map(\.name) == textFamilies)
        let latency = try #require(families.first { $0.name == "order_fill_latency_seconds" })
        #expect(latency.type == 4)
        let metric = try #require(latency.metrics.first)
        #expect(metric.labels == [["ring", "bot"], ["exported_le", "odd"], ["symbol", "AAPL"]])
        let histogram = try #require(metric.histogram)
        #expect(histogram.count == 5)
        #expect(histogram.schema == 3)
        #expect(histogram.nativeCounts.reduce(0, +) + histogram.zeroCount == 5)
        #expect(histogram.spanLengths.reduce(0, +) == UInt64(histogram.nativeCounts.count))
        #expect(abs(histogram.sum - 983_000e-9) < 1e-15, "the sum in seconds")
        let orders = try #require(families.first { $0.name == "orders_total" })
        #expect(orders.type == 0 && orders.metrics.first?.value == 42)
        let windowed = try #require(families.first { $0.name == "order_fill_latency_windowed_seconds" })
        #expect(windowed.type == 2 && windowed.metrics.count == 2)
        #expect(windowed.metrics.first?.labels.last == ["window", "1s"])
    }
}

// MARK: - A decoder for what the tests check (the fields of metrics.proto they need)

private struct DecodedHistogram {
    var count: UInt64 = 0, sum = 0.0, schema: Int64?, zeroCount: UInt64 = 0
    var spanLengths: [UInt64] = [], nativeCounts: [UInt64] = []
}

private struct DecodedMetric {
    var labels: [[String]] = []
    var value: Double?
    var histogram: DecodedHistogram?
}

private struct DecodedFamily {
    var name = "", type: UInt64 = 0
    var metrics: [DecodedMetric] = []
}

private struct ProtobufReader {
    let bytes: [UInt8]
    var position = 0

    var atEnd: Bool { position >= bytes.count }

    mutating func varint() throws -> UInt64 {
        var result: UInt64 = 0, shift: UInt64 = 0
        while true {
            guard position < bytes.count, shift < 64 else { throw TestDecodeError("truncated varint") }
            let byte = bytes[position]
            position += 1
            result |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return result }
            shift += 7
        }
    }

    /// The next field: its number, wire type, and its value (a varint, 8 bytes, or a slice).
    mutating func field() throws -> (number: Int, varint: UInt64, fixed: UInt64, bytes: [UInt8]) {
        let key = try varint()
        switch key & 7 {
        case 0: return (Int(key >> 3), try varint(), 0, [])
        case 1:
            guard position + 8 <= bytes.count else { throw TestDecodeError("truncated fixed64") }
            var value: UInt64 = 0
            for index in 0..<8 { value |= UInt64(bytes[position + index]) << (8 * UInt64(index)) }
            position += 8
            return (Int(key >> 3), 0, value, [])
        case 2:
            let length = Int(try varint())
            guard position + length <= bytes.count else { throw TestDecodeError("truncated field") }
            defer { position += length }
            return (Int(key >> 3), 0, 0, Array(bytes[position..<position + length]))
        default: throw TestDecodeError("wire type \(key & 7)")
        }
    }
}

private struct TestDecodeError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

private func zigzag(_ value: UInt64) -> Int64 { Int64(bitPattern: value >> 1) ^ -Int64(bitPattern: value & 1) }

private func decodeFamilies(_ page: [UInt8]) throws -> [DecodedFamily] {
    var stream = ProtobufReader(bytes: page)
    var families: [DecodedFamily] = []
    while !stream.atEnd {
        let length = Int(try stream.varint())
        var reader = ProtobufReader(bytes: Array(page[stream.position..<stream.position + length]))
        stream.position += length
        var family = DecodedFamily()
        while !reader.atEnd {
            let field = try reader.field()
            switch field.number {
            case 1: family.name = String(decoding: field.bytes, as: UTF8.self)
            case 3: family.type = field.varint
            case 4: family.metrics.append(try decodeMetric(field.bytes))
            default: break
            }
        }
        families.append(family)
    }
    return families
}

private func decodeMetric(_ bytes: [UInt8]) throws -> DecodedMetric {
    var reader = ProtobufReader(bytes: bytes)
    var metric = DecodedMetric()
    while !reader.atEnd {
        let field = try reader.field()
        switch field.number {
        case 1:
            var pair = ProtobufReader(bytes: field.bytes)
            var strings: [String] = []
            while !pair.atEnd { strings.append(String(decoding: try pair.field().bytes, as: UTF8.self)) }
            metric.labels.append(strings)
        case 2, 3:
            var value = ProtobufReader(bytes: field.bytes)
            metric.value = Double(bitPattern: try value.field().fixed)
        case 7:
            var reader = ProtobufReader(bytes: field.bytes)
            var histogram = DecodedHistogram()
            while !reader.atEnd {
                let inner = try reader.field()
                switch inner.number {
                case 1: histogram.count = inner.varint
                case 2: histogram.sum = Double(bitPattern: inner.fixed)
                case 5: histogram.schema = zigzag(inner.varint)
                case 7: histogram.zeroCount = inner.varint
                case 12:
                    var span = ProtobufReader(bytes: inner.bytes)
                    while !span.atEnd {
                        let part = try span.field()
                        if part.number == 2 { histogram.spanLengths.append(part.varint) }
                    }
                case 13:
                    var deltas = ProtobufReader(bytes: inner.bytes)
                    var count: Int64 = 0
                    while !deltas.atEnd {
                        count += zigzag(try deltas.varint())
                        histogram.nativeCounts.append(UInt64(count))
                    }
                default: break
                }
            }
            metric.histogram = histogram
        default: break
        }
    }
    return metric
}
