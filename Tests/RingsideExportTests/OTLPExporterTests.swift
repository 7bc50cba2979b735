import Foundation
import Ringside
import RingsideAggregation
@testable import RingsideExport
import RingsideSnapshot
import RingsideTestSupport
import Testing

/// OTLP's exponential buckets from Ringside's histograms, and the request they go out in, read
/// back with the tests' protobuf reader from metrics.proto's field numbers.
@Suite("OTLP exponential histograms and requests")
struct OTLPExporterTests {
    /// The OTLP bucket of one value (in `unit`), through a histogram holding only it.
    func index(of value: UInt64, unit: MetricUnit = .none, scale: Int) -> Int32? {
        var histogram = Histogram()
        histogram.record(value)
        let buckets = ExportBuckets.exponential(histogram, unit: unit, scale: scale)
        return buckets.counts.isEmpty ? nil : buckets.offset
    }

    @Test("bucket i holds (base^i, base^(i+1)]: a power of two is the top of the bucket below its exponent's, one below Prometheus's index")
    func indexes() {
        // scale 0: base 2, so 1 is in (1/2, 1], bucket -1; 2 in (1, 2], bucket 0; 3 and 4 in (2, 4], bucket 1.
        #expect(index(of: 1, scale: 0) == -1)
        #expect(index(of: 2, scale: 0) == 0)
        #expect(index(of: 3, scale: 0) == 1)
        #expect(index(of: 4, scale: 0) == 1)
        #expect(index(of: 5, scale: 0) == 2)
        // scale -1: base 4: (1, 4] is bucket 0, (4, 16] bucket 1.
        #expect(index(of: 4, scale: -1) == 0)
        #expect(index(of: 5, scale: -1) == 1)
        // scale 5: 32 buckets an octave; 1 s (10^9 ns) is 2^0 exactly: the top of bucket -1.
        #expect(index(of: 2, scale: 5) == 31)
        #expect(index(of: 1_000_000_000, unit: .nanoseconds, scale: 5) == -1)
        #expect(index(of: 1_000, unit: .milliseconds, scale: 5) == -1)
        // 1 ns is 10^-9 s: log2 = -29.897, so at scale 0 the bucket (2^-30, 2^-29], -30.
        #expect(index(of: 1, unit: .nanoseconds, scale: 0) == -30)
    }

    @Test("every value lands in the bucket whose bounds hold it, at every scale, as Prometheus's native bucket numbered one less")
    func boundsHoldEveryValue() {
        var random = SplitMix64(seed: 7)
        for scale in NativeBuckets.schemas {
            for _ in 0..<2_000 {
                // Values below 1024 are exact in Ringside: the bucket's bounds must hold the value itself.
                let value = UInt64.random(in: 1..<1024, using: &random)
                let base = pow(2, pow(2, -Double(scale)))
                let bucket = index(of: value, scale: scale)!
                let position = log2(Double(value)) * pow(2, Double(scale))
                // pow's rounding could place a value on a boundary either way: those are checked above.
                guard abs(position - position.rounded()) > 1e-9 else { continue }
                #expect(
                    pow(base, Double(bucket)) < Double(value) && Double(value) <= pow(base, Double(bucket + 1)),
                    "\(value) at scale \(scale)")
                var histogram = Histogram()
                histogram.record(value)
                #expect(NativeBuckets(histogram, schema: scale, baseUnitsPerValue: 1).buckets.first?.index == bucket + 1)
            }
        }
    }

    @Test("buckets are dense from the first non-empty one, zeros in the zero bucket, counts as recorded")
    func denseBuckets() {
        var histogram = Histogram()
        for _ in 0..<3 { histogram.record(0) }
        for value: UInt64 in [1, 2, 2, 8, 8, 8] { histogram.record(value) }  // scale 0: buckets -1, 0, 0, 2, 2, 2
        let buckets = ExportBuckets.exponential(histogram, unit: .none, scale: 0)
        #expect(buckets.scale == 0 && buckets.zeroCount == 3 && buckets.zeroThreshold == NativeBuckets.defaultZeroThreshold)
        #expect(buckets.offset == -1)
        #expect(buckets.counts == [1, 2, 0, 3])
        #expect(ExportBuckets.exponential(Histogram(), unit: .none, scale: 0).counts.isEmpty)
    }

    // MARK: - The request

    func series(
        _ name: String, _ kind: MetricKind, unit: MetricUnit = .none, labels: String = "", merge: GaugeMerge = .last, id: UInt64
    )
        -> SeriesSnapshot
    {
        let metric = MetricDescriptor(
            index: 0, name: name, kind: kind, unit: unit, encodedLabels: labels, help: name == "fill" ? "Order to fill" : "",
            sampleEvery: 1, gaugeMerge: merge)
        return SeriesSnapshot(ring: "bot-a", metric: metric, id: id, windows: [])
    }

    /// Gives a histogram series' all-time figures: `values` recorded, their count and sum.
    func record(_ values: [UInt64], allTimeIn series: inout SeriesSnapshot) {
        var histogram = Histogram()
        for value in values { histogram.record(value) }
        series.cumulative = histogram
        series.cumulativeCount = UInt64(values.count)
        series.cumulativeSum = Double(values.reduce(0, +))
    }

    @Test("a histogram whose windows hold nothing sends no made-up figure: no window's quantile at all, and no min or max before a value")
    func quietHistograms() throws {
        var snapshot = Snapshot()
        snapshot.windowNanos = [1_000_000_000]
        snapshot.quantiles = [0.5, 0.99]
        // Registered, never recorded: count 0, and its one window empty.
        var never = series("fill", .histogram, unit: .microseconds, labels: "venue=X", id: 1)
        never.windows = [WindowStats()]
        never.cumulative = Histogram()
        // Recorded once, long ago: its window empty now (the old exporters read 0 there).
        var quiet = series("fill", .histogram, unit: .microseconds, labels: "venue=Y", id: 2)
        var empty = WindowStats()
        empty.quantileValues = [0, 0]
        quiet.windows = [empty]
        record([250], allTimeIn: &quiet)
        snapshot.series = [never, quiet]
        let bytes = OTLPExporter.request(
            snapshot, origin: OTLPExporter.Origin(hostName: "h1"), scale: 0, timeNanos: 2_000, startNanos: { _ in 1_000 })
        let metrics = try decodeRequest(bytes).flatMap(\.metrics)
        // One exponential histogram, cumulative: the windows (and their quantiles) are not OTLP's.
        #expect(metrics.map(\.kind) == [10] && metrics[0].points.count == 2)
        let (first, second) = (metrics[0].points[0], metrics[0].points[1])
        #expect(first.count == 0 && first.sum == 0 && first.min == nil && first.max == nil && first.counts.isEmpty)
        #expect(second.count == 1 && second.min == 0.00025 && second.max == 0.00025)
    }

    @Test("a request holds a resource per bot (and per per-worker gauge's process), a Metric per name, each series' values in base units")
    func request() throws {
        var snapshot = Snapshot()
        var fill = series("fill", .histogram, unit: .microseconds, labels: "venue=X", id: 1)
        record([0, 250, 1_000_000], allTimeIn: &fill)  // 0, 250 us, 1 s
        var orders = series("orders", .counter, labels: "side=buy", id: 2)
        orders.cumulativeExactSum = 7
        orders.cumulativeSum = 7
        var exposure = series("exposure", .gauge, unit: .bytes, id: 3)
        exposure.lastValue = 1.5
        var inFlight = series("in_flight", .gauge, labels: "pid=4242", merge: .perWorker, id: 4)
        inFlight.lastValue = 2
        var fillY = fill
        fillY.metric = series("fill", .histogram, unit: .microseconds, labels: "venue=Y", id: 5).metric
        fillY.id = 5
        snapshot.series = [fill, orders, exposure, inFlight, fillY, series("unset", .gauge, id: 6)]

        let bytes = OTLPExporter.request(
            snapshot, origin: OTLPExporter.Origin(hostName: "h1"), scale: 0, timeNanos: 2_000, startNanos: { 1_000 + $0.id })
        let resources = try decodeRequest(bytes)
        #expect(
            resources.map(\.attributes) == [
                ["service.name": "bot-a", "service.instance.id": "h1", "host.name": "h1", "ringside.bot": "bot-a"],
                ["service.name": "bot-a", "service.instance.id": "h1", "host.name": "h1", "ringside.bot": "bot-a", "process.pid": "4242"],
            ])
        // The user's attributes: on every resource, over the collector's but for the bot's own.
        let given = OTLPExporter.Origin(hostName: "h1", attributes: [("service.name", "desk"), ("ringside.bot", "x"), ("region", "ldn")])
        let named = try decodeRequest(OTLPExporter.request(snapshot, origin: given, scale: 0, timeNanos: 2_000, startNanos: { _ in 1 }))
        #expect(
            named.first?.attributes
                == ["service.name": "desk", "region": "ldn", "service.instance.id": "h1", "host.name": "h1", "ringside.bot": "bot-a"])
        #expect(resources.map(\.scope) == ["ringside", "ringside"])
        let metrics = resources[0].metrics
        #expect(metrics.map(\.name) == ["fill", "orders", "exposure"])  // never set: no data point, no Metric
        #expect(metrics.map(\.unit) == ["s", "", "By"])
        #expect(metrics[0].description == "Order to fill")
        // The histogram: both series, cumulative, in seconds.
        #expect(metrics[0].kind == 10 && metrics[0].temporality == 2)
        let point = metrics[0].points[0]
        #expect(metrics[0].points.map(\.attributes) == [["venue": "X"], ["venue": "Y"]])
        #expect(point.start == 1_001 && point.time == 2_000)
        #expect(point.count == 3 && point.sum == 1.00025 && point.min == 0 && point.max == 1)
        #expect(point.scale == 0 && point.zeroCount == 1 && point.zeroThreshold == NativeBuckets.defaultZeroThreshold)
        // 250 us is in (2^-12, 2^-11], bucket -12; 1 s in (1/2, 1], bucket -1.
        #expect(point.offset == -12 && point.counts.count == 12 && point.counts.first == 1 && point.counts.last == 1)
        #expect(point.counts.reduce(0, +) == 2)
        // The counter: monotonic, cumulative, an exact integer; the gauge: a double, no start.
        #expect(metrics[1].kind == 7 && metrics[1].temporality == 2 && metrics[1].monotonic)
        #expect(metrics[1].points[0].asInt == 7 && metrics[1].points[0].start == 1_002)
        #expect(metrics[2].kind == 5 && metrics[2].points[0].asDouble == 1.5 && metrics[2].points[0].start == 0)
        #expect(resources[1].metrics.map(\.name) == ["in_flight"])
        #expect(resources[1].metrics[0].points[0].attributes == ["pid": "4242"])
    }

    @Test("a Metric's name leaves out the unit the Metric carries, and a counter's _total, as /metrics's families do")
    func namesWithoutUnits() throws {
        var snapshot = Snapshot()
        var latency = series("order_submission_latency_us", .histogram, unit: .microseconds, id: 1)
        record([250], allTimeIn: &latency)
        var orders = series("orders_total", .counter, id: 2)
        orders.cumulativeExactSum = 3
        var queue = series("queue_seconds", .gauge, id: 3)  // unitless: its name is its own
        queue.lastValue = 1
        snapshot.series = [latency, orders, queue]
        let request = OTLPExporter.request(
            snapshot, origin: OTLPExporter.Origin(hostName: "h"), scale: 0, timeNanos: 2, startNanos: { _ in 1 })
        let metrics = try decodeRequest(request)[0].metrics
        #expect(metrics.map(\.name) == ["order_submission_latency", "orders", "queue_seconds"])
        #expect(metrics.map(\.unit) == ["s", "", ""])
    }

    @Test("a signed histogram: values below zero in the negative buckets of their magnitudes, min and max signed, the sum exact")
    func signedHistogram() throws {
        var slippage = series("slippage_bps", .histogram, id: 1)
        slippage.metric = MetricDescriptor(
            index: 0, name: "slippage_bps", kind: .histogram, unit: .none, encodedLabels: "", help: "", sampleEvery: 1,
            isSigned: true, scale: -2)
        var histogram = SignedHistogram()
        for steps: Int64 in [-800, -800, -300, 0, 150] { histogram.record(steps) }  // -8, -8, -3, 0, 1.5 bps
        slippage.signedCumulative = histogram
        slippage.cumulativeCount = histogram.count
        slippage.cumulativeSum = histogram.sum
        var commission = series("commission_usd", .counter, id: 2)
        commission.metric = MetricDescriptor(
            index: 0, name: "commission_usd", kind: .counter, unit: .none, encodedLabels: "", help: "", sampleEvery: 1, scale: -2)
        commission.cumulativeExactSum = 1_000_000
        commission.cumulativeSum = 1_000_000
        var snapshot = Snapshot()
        snapshot.series = [slippage, commission]
        let bytes = OTLPExporter.request(
            snapshot, origin: OTLPExporter.Origin(hostName: "h1"), scale: 0, timeNanos: 2_000, startNanos: { _ in 1_000 })
        let metrics = try decodeRequest(bytes)[0].metrics
        let point = metrics[0].points[0]
        #expect(point.count == 5 && point.sum == -17.5 && point.min == -8 && point.max == 1.5)
        #expect(point.zeroCount == 1)
        // Scale 0: 8 in (4, 8] is bucket 2, 3 in (2, 4] bucket 1, 1.5 in (1, 2] bucket 0.
        #expect(point.negativeOffset == 1 && point.negativeCounts == [1, 2])
        #expect(point.offset == 0 && point.counts == [1])
        // A counter of hundredths as a double: 1,000,000 hundredths are 10000.
        #expect(metrics[1].points[0].asDouble == 10_000 && metrics[1].points[0].asInt == nil)
    }

    @Test("an exemplar's trace_id and span_id go in their fields as bytes, its other labels as attributes")
    func exemplars() throws {
        var snapshot = Snapshot()
        var fill = series("fill", .histogram, unit: .nanoseconds, id: 1)
        record([5_000], allTimeIn: &fill)
        fill.bucketExemplars = [
            KeptExemplar(
                value: 5_000, timeNanos: 1, wallTimeNanos: 77,
                labels: "trace_id=0af7651916cd43dd8448eb211c80319c\nspan_id=b7ad6b7169203331\norder=42", pid: 1, threadID: 1, threadName: ""
            )
        ]
        snapshot.series = [fill]
        let bytes = OTLPExporter.request(
            snapshot, origin: OTLPExporter.Origin(hostName: "h"), scale: 5, timeNanos: 100, startNanos: { _ in 1 })
        let exemplar = try #require(try decodeRequest(bytes).first?.metrics.first?.points.first?.exemplars.first)
        #expect(exemplar.attributes == ["order": "42"] && exemplar.time == 77 && exemplar.value == 5e-6)
        #expect(exemplar.traceID == [0x0A, 0xF7, 0x65, 0x19, 0x16, 0xCD, 0x43, 0xDD, 0x84, 0x48, 0xEB, 0x21, 0x1C, 0x80, 0x31, 0x9C])
        #expect(exemplar.spanID == [0xB7, 0xAD, 0x6B, 0x71, 0x69, 0x20, 0x33, 0x31])
    }
}
