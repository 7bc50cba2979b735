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

@Suite("exemplars in the protobuf format")
struct ProtobufExemplarTests {
    /// An exemplar of `order_id=<id>` recorded at 1795378731.25 s plus `offset` seconds.
    static func kept(_ value: UInt64, _ id: String, offset: UInt64) -> KeptExemplar {
        KeptExemplar(
            value: value, timeNanos: offset * 1_000_000_000, wallTimeNanos: 1_795_378_731_250_000_000 + offset * 1_000_000_000,
            labels: "order_id=\(id)\nvenue=X", pid: 42, threadID: 43, threadName: "fills")
    }

    /// The sample snapshot's histogram with exemplars: two in the 1-2 us bucket (the later wins),
    /// one at 40 us, one at 20 s (past the last bound, 10 s: the +Inf bucket).
    static func snapshot(native: Bool) -> Snapshot {
        var snapshot = sampleSnapshot()
        snapshot.nativeHistogramSchema = native ? 3 : nil
        snapshot.series[0].bucketExemplars = [
            kept(1_500, "A1", offset: 2), kept(1_800, "A2", offset: 1), kept(40_000, "A3", offset: 0),
            kept(20_000_000_000, "A4", offset: 3),
        ]
        return snapshot
    }

    @Test("each classic bucket carries its latest exemplar (value in seconds, labels, wall time), +Inf too, as OpenMetrics does")
    func classicBuckets() throws {
        for native in [false, true] {
            let snapshot = Self.snapshot(native: native)
            let families = try decodeFamilies(PrometheusRenderer().render(snapshot, format: .protobuf))
            let histogram = try #require(families.first { $0.name == "order_fill_latency_seconds" }?.metrics.first?.histogram)
            let carrying = histogram.buckets.filter { $0.exemplar != nil }
            #expect(carrying.map(\.upperBound) == [2e-6, 5e-5, .infinity], "native \(native)")
            #expect(carrying.last?.cumulativeCount == 5, "the +Inf bucket counts everything")
            #expect(
                histogram.buckets.count == ExportBuckets.upperBounds(for: .nanoseconds).count + 1, "one +Inf bucket, added for its exemplar"
            )
            let first = try #require(carrying.first?.exemplar)
            #expect(first.labels == [["order_id", "A1"], ["venue", "X"]], "the bucket's latest, not its largest")
            #expect(first.value == 1.5e-6 && first.seconds == 1_795_378_733 && first.nanos == 250_000_000)
            #expect(carrying.last?.exemplar?.value == 20)

            // OpenMetrics puts the same exemplars on the same buckets.
            let text = String(decoding: PrometheusRenderer().render(snapshot, format: .openMetrics), as: UTF8.self)
            let withExemplar = text.split(separator: "\n").filter {
                $0.hasPrefix("order_fill_latency_seconds_bucket") && $0.contains(" # {")
            }
            #expect(withExemplar.count == 3)
            #expect(
                withExemplar.first?.contains(#"le="0.000002"} 2 # {order_id="A1",venue="X"} 0.0000015 1795378733.25"#) == true,
                "\(withExemplar)")
        }
        // Without exemplars, no +Inf bucket: the page is as it was.
        let plain = try decodeFamilies(PrometheusRenderer().render(sampleSnapshot(), format: .protobuf))
        let buckets = try #require(plain.first { $0.name == "order_fill_latency_seconds" }?.metrics.first?.histogram?.buckets)
        #expect(buckets.count == ExportBuckets.upperBounds(for: .nanoseconds).count && buckets.allSatisfy { $0.exemplar == nil })
    }

    @Test("a native histogram also carries every native bucket's latest exemplar in Histogram.exemplars (16); a classic one does not")
    func nativeExemplars() throws {
        let native = try decodeFamilies(PrometheusRenderer().render(Self.snapshot(native: true), format: .protobuf))
        let histogram = try #require(native.first { $0.name == "order_fill_latency_seconds" }?.metrics.first?.histogram)
        #expect(histogram.schema == 3)
        #expect(histogram.exemplars.map(\.value) == [1.5e-6, 1.8e-6, 4e-5, 20])
        #expect(histogram.exemplars.map { $0.labels.first?.last } == ["A1", "A2", "A3", "A4"])
        #expect(
            histogram.exemplars.allSatisfy { $0.seconds != nil && $0.nanos == 250_000_000 },
            "each with its timestamp, as the format requires")
        let classic = try decodeFamilies(PrometheusRenderer().render(Self.snapshot(native: false), format: .protobuf))
        let plain = try #require(classic.first { $0.name == "order_fill_latency_seconds" }?.metrics.first?.histogram)
        #expect(plain.schema == nil && plain.exemplars.isEmpty)
    }
}
