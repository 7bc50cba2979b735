import Ringside
import RingsideAggregation
import RingsideCommandLine
import RingsideSnapshot

/// Writes a snapshot as an OTLP `ExportMetricsServiceRequest` (opentelemetry-proto's
/// `collector/metrics/v1/metrics_service.proto` and `metrics/v1/metrics.proto`), protobuf-encoded,
/// for an OTLP/HTTP receiver's `/v1/metrics`.
///
/// - A `ResourceMetrics` per bot: `service.name` (the bot), `ringside.bot` (the bot, whatever
///   `service.name` the user gives), `service.instance.id` and `host.name` (this host's name),
///   and the user's attributes over these (`Origin.attributes`), with one `ScopeMetrics` (scope
///   `ringside`, the collector's version). The
///   series of a `per_worker` gauge (labelled `pid`, see docs/workers.md) go in a resource of the
///   bot and that process, which adds `process.pid`.
/// - A `Metric` per metric name (and kind and unit) of a bot, its description the metric's help,
///   a data point per series, its attributes the series' labels.
/// - Histograms: `ExponentialHistogram`, cumulative: count, sum, min, max and the buckets of
///   `scale` (see `ExponentialBuckets`: exactly the native histograms' buckets), and each bucket's
///   latest exemplar.
/// - Counters: `Sum`, cumulative and monotonic: the exact total as an integer (as a double of
///   seconds for a counter of time).
/// - Gauges: `Gauge`, the last value set (none before one is).
///
/// Values are in base units, as on `/metrics`: times in seconds (unit `s`), sizes in bytes
/// (`By`). Every data point's time is `timeNanos`; a cumulative one's start is `startNanos`'s for
/// its series.
package enum OTLPExporter {
    package static let contentType = "application/x-protobuf"
    /// The instrumentation scope's name.
    package static let scopeName = "ringside"
    /// The exponential histograms' scale without `--native-histograms`: 32 buckets an octave,
    /// each 2.2 % wide (a quantile read from them errs by at most 1.1 %, plus Ringside's 0.1 %).
    package static let defaultScale = 5

    /// What the request says of where the series come from, beside each bot's name.
    package struct Origin: Sendable {
        /// `host.name`, and `service.instance.id`: one collector serves one host, where a bot's
        /// name is unique.
        package var hostName: String
        /// The user's resource attributes, each key once: on every resource, replacing the
        /// collector's of the same key (`service.name`, `host.name`, `service.instance.id`), but for
        /// `ringside.bot` and `process.pid`, which are the bot's.
        package var attributes: [(key: String, value: String)]

        package init(hostName: String, attributes: [(key: String, value: String)] = []) {
            self.hostName = hostName
            self.attributes = attributes
        }

        /// Keys the user's attributes cannot replace.
        static let botKeys: Set<String> = ["ringside.bot", "process.pid"]
    }

    /// The request for `snapshot`'s series.
    /// - Parameters:
    ///   - scale: the exponential histograms' scale, one of `NativeBuckets.schemas`.
    ///   - timeNanos: when the values held (CLOCK_REALTIME).
    ///   - startNanos: when a series' cumulative values began (CLOCK_REALTIME).
    ///   - baseline: for delta temporality, what the last export taken sent: counters' and
    ///     histograms' points are the change since, from its time (a series it lacks, or whose
    ///     totals went down, is sent whole from its start); nil: cumulative.
    package static func request(
        _ snapshot: Snapshot, origin: Origin, scale: Int, timeNanos: UInt64, baseline: OTLPBaseline? = nil,
        startNanos: @escaping (SeriesSnapshot) -> UInt64
    ) -> [UInt8] {
        var writer = ProtobufWriter()
        for resource in resources(of: snapshot) {
            // ExportMetricsServiceRequest.resource_metrics
            writer.message(1) { out in
                out.message(1) { attributes(resource, origin: origin, into: &$0) }  // ResourceMetrics.resource
                out.message(2) { scopeMetrics in  // ResourceMetrics.scope_metrics
                    scopeMetrics.message(1) { scope in  // InstrumentationScope
                        scope.string(1, scopeName)
                        scope.string(2, RingsideVersion.version)
                    }
                    for metric in metrics(of: resource.series, in: snapshot) {
                        scopeMetrics.message(2) { out in
                            let points = Points(time: timeNanos, scale: scale, baseline: baseline, startNanos: startNanos)
                            write(metric, snapshot: snapshot, points, into: &out)
                        }
                    }
                }
            }
        }
        return writer.bytes
    }

    // MARK: - Resources and metrics

    /// A bot's series, or a per-worker gauge's process's: positions in the snapshot's series.
    struct Resource {
        var bot: String
        var pid: String?
        var series: [Int] = []
    }

    /// The snapshot's series by resource, in the order they first appear; but for gauges never
    /// set, which have no value to send (nor a resource or a `Metric` of their own: a receiver may
    /// refuse an empty one).
    static func resources(of snapshot: Snapshot) -> [Resource] {
        var resources: [Resource] = []
        var position: [String: [String?: Int]] = [:]
        for (index, series) in snapshot.series.enumerated() where series.metric.kind != .gauge || series.lastValue != nil {
            let pid = series.metric.gaugeMerge == .perWorker ? series.metric.labels.first { $0.key == "pid" }?.value : nil
            let at =
                position[series.ring, default: [:]][pid]
                ?? {
                    resources.append(Resource(bot: series.ring, pid: pid))
                    position[series.ring, default: [:]][pid] = resources.count - 1
                    return resources.count - 1
                }()
            resources[at].series.append(index)
        }
        return resources
    }

    /// The resource's attributes (`Resource.attributes`).
    private static func attributes(_ resource: Resource, origin: Origin, into out: inout ProtobufWriter) {
        var given: Set<String> = []
        for attribute in origin.attributes where !Origin.botKeys.contains(attribute.key) {
            out.keyValue(1, attribute.key, attribute.value)
            given.insert(attribute.key)
        }
        for (key, value) in [("service.name", resource.bot), ("service.instance.id", origin.hostName), ("host.name", origin.hostName)]
        where !given.contains(key) {
            out.keyValue(1, key, value)
        }
        out.keyValue(1, "ringside.bot", resource.bot)
        if let pid = resource.pid, let number = Int64(pid) { out.keyValue(1, "process.pid", number) }
    }

    /// One `Metric`: series of one name, kind and unit.
    struct Metric {
        var descriptor: MetricDescriptor
        var series: [Int]
    }

    /// `positions`' series grouped by metric, in the order each metric first appears.
    static func metrics(of positions: [Int], in snapshot: Snapshot) -> [Metric] {
        var metrics: [Metric] = []
        var index: [String: Int] = [:]
        for position in positions {
            let descriptor = snapshot.series[position].metric
            let key = "\(descriptor.name)\n\(descriptor.kind.rawValue)\n\(descriptor.unit.rawValue)"
            if let at = index[key] {
                metrics[at].series.append(position)
            } else {
                index[key] = metrics.count
                metrics.append(Metric(descriptor: descriptor, series: [position]))
            }
        }
        return metrics
    }

    /// OTLP's unit (UCUM) for values of `unit` in base units.
    static func unitName(_ unit: MetricUnit) -> String {
        unit.nanoseconds != nil ? "s" : unit == .bytes ? "By" : ""
    }

    // MARK: - Data points

    /// How data points are written: their time, the histograms' scale, and their start.
    struct Points {
        var time: UInt64
        var scale: Int
        var baseline: OTLPBaseline?
        var startNanos: (SeriesSnapshot) -> UInt64

        /// `AGGREGATION_TEMPORALITY_DELTA` (1) or `_CUMULATIVE` (2).
        var temporality: UInt64 { baseline == nil ? 2 : 1 }

        /// The series' totals at the last export taken, and the start of its point.
        func before(_ series: SeriesSnapshot, buckets: ExponentialBuckets? = nil) -> (OTLPBaseline.Totals?, start: UInt64) {
            guard let baseline, let totals = baseline.totals(of: series, buckets: buckets) else { return (nil, startNanos(series)) }
            return (totals, baseline.timeNanos)
        }
    }

    private static func write(_ metric: Metric, snapshot: Snapshot, _ points: Points, into out: inout ProtobufWriter) {
        let time = points.time
        let descriptor = metric.descriptor
        // The name without the unit OTLP carries apart (and a counter's `_total`), as /metrics's
        // families are named: a receiver that turns OTLP into Prometheus adds them back once.
        out.string(1, String(PrometheusExporter.baseName(of: descriptor)))
        if !descriptor.help.isEmpty { out.string(2, descriptor.help) }
        let unit = unitName(descriptor.unit)
        if !unit.isEmpty { out.string(3, unit) }
        let series = metric.series.map { snapshot.series[$0] }
        switch descriptor.kind {
        case .histogram:
            out.message(10) { histogram in  // Metric.exponential_histogram
                for one in series {
                    histogram.message(1) { point in exponentialPoint(one, points, into: &point) }
                }
                histogram.uint64(2, points.temporality)
            }
        case .counter:
            out.message(7) { sum in  // Metric.sum
                for one in series {
                    sum.message(1) { point in
                        let (before, start) = points.before(one)
                        let exact = one.cumulativeExactSum - (before?.exactSum ?? 0)
                        let total = one.cumulativeSum - (before?.sum ?? 0)
                        point.labels(7, one.metric)
                        point.fixed64(2, start)
                        point.fixed64(3, time)
                        if one.metric.hasSteps {
                            // A float, read from the exact decimal: 1,000,000 increments of 0.01 are 10000.
                            let text = ExactDecimal.text(negative: false, magnitude: exact, exponent: one.metric.baseUnitExponent)
                            point.double(4, Double(text) ?? one.metric.inBaseUnits(total))
                        } else if one.metric.unit.nanoseconds != nil {
                            point.double(4, one.metric.inBaseUnits(total))
                        } else {
                            point.fixed64(6, UInt64(bitPattern: Int64(clamping: exact)))  // as_int, an sfixed64
                        }
                    }
                }
                sum.uint64(2, points.temporality)
                sum.bool(3, true)  // is_monotonic
            }
        case .gauge:
            out.message(5) { gauge in  // Metric.gauge
                for one in series {
                    guard let value = one.lastValue else { continue }  // left out by `resources(of:)`
                    gauge.message(1) { point in
                        point.labels(7, one.metric)
                        point.fixed64(3, time)
                        point.double(4, one.metric.inBaseUnits(value))
                    }
                }
            }
        }
    }

    /// An `ExponentialHistogramDataPoint`'s fields.
    /// A delta point (of a series the baseline has) has no `min` or `max` (those of the values
    /// since are not known) and only the exemplars recorded since.
    private static func exponentialPoint(_ series: SeriesSnapshot, _ points: Points, into point: inout ProtobufWriter) {
        let whole = ExportBuckets.exponential(of: series, scale: points.scale)
        let (before, start) = points.before(series, buckets: whole)
        let buckets = before?.buckets.flatMap { OTLPBaseline.subtract($0, from: whole) } ?? whole
        point.labels(1, series.metric)
        point.fixed64(2, start)
        point.fixed64(3, points.time)
        point.fixed64(4, series.cumulativeCount - (before?.count ?? 0))
        point.double(5, series.metric.inBaseUnits(series.cumulativeSum - (before?.sum ?? 0)))
        point.sint64(6, Int64(points.scale))
        if buckets.zeroCount != 0 { point.fixed64(7, buckets.zeroCount) }
        if !buckets.counts.isEmpty {
            point.message(8) { positive in
                positive.sint64(1, Int64(buckets.offset))
                positive.packedUInt64(2, buckets.counts)
            }
        }
        if !buckets.negativeCounts.isEmpty {
            point.message(9) { negative in
                negative.sint64(1, Int64(buckets.negativeOffset))
                negative.packedUInt64(2, buckets.negativeCounts)
            }
        }
        for exemplar in series.bucketExemplars where before == nil || exemplar.wallTimeNanos > points.baseline?.timeNanos ?? 0 {
            point.exemplar(11, exemplar, metric: series.metric)
        }
        if before != nil {
            // The change since the last export: the min and max of its values are not known.
        } else if let cumulative = series.signedCumulative, cumulative.count != 0 {
            point.double(12, series.metric.inBaseUnits(Double(cumulative.min)))
            point.double(13, series.metric.inBaseUnits(Double(cumulative.max)))
        } else if let cumulative = series.cumulative, cumulative.count != 0 {
            point.double(12, series.metric.inBaseUnits(Double(cumulative.min)))
            point.double(13, series.metric.inBaseUnits(Double(cumulative.max)))
        }
        point.double(14, buckets.zeroThreshold)
    }
}

extension ProtobufWriter {
    /// A `KeyValue` of a string in field `field`.
    mutating func keyValue(_ field: Int, _ key: String, _ value: String) {
        message(field) { pair in
            pair.string(1, key)
            pair.message(2) { $0.string(1, value) }  // AnyValue.string_value
        }
    }

    /// A `KeyValue` of an integer in field `field`.
    mutating func keyValue(_ field: Int, _ key: String, _ value: Int64) {
        message(field) { pair in
            pair.string(1, key)
            pair.message(2) { $0.uint64(3, UInt64(bitPattern: value)) }  // AnyValue.int_value
        }
    }

    /// A series' labels as `KeyValue`s in field `field`.
    mutating func labels(_ field: Int, _ metric: MetricDescriptor) {
        for label in metric.labels { keyValue(field, label.key, label.value) }
    }

    /// An OTLP `Exemplar` in field `field`: its labels as filtered attributes, but for a
    /// `trace_id` of 32 hex digits and a `span_id` of 16, which go in the fields of their own.
    mutating func exemplar(_ field: Int, _ kept: KeptExemplar, metric: MetricDescriptor) {
        message(field) { exemplar in
            var traceID: [UInt8]?
            var spanID: [UInt8]?
            for pair in kept.pairs {
                if pair.key == "trace_id", traceID == nil, let bytes = hexBytes(pair.value, count: 16) {
                    traceID = bytes
                } else if pair.key == "span_id", spanID == nil, let bytes = hexBytes(pair.value, count: 8) {
                    spanID = bytes
                } else {
                    exemplar.keyValue(7, pair.key, pair.value)
                }
            }
            exemplar.fixed64(2, kept.wallTimeNanos)
            exemplar.double(3, metric.inBaseUnits(Double(kept.value)))
            if let spanID { exemplar.byteString(4, spanID) }
            if let traceID { exemplar.byteString(5, traceID) }
        }
    }
}

/// The `count` bytes `text` (of `2 * count` hex digits, either case) spells; nil when it is not that.
private func hexBytes(_ text: String, count: Int) -> [UInt8]? {
    let digits = Array(text.utf8)
    guard digits.count == 2 * count else { return nil }
    func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case 0x30...0x39: digit - 0x30
        case 0x61...0x66: digit - 0x61 + 10
        case 0x41...0x46: digit - 0x41 + 10
        default: nil
        }
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count)
    for index in stride(from: 0, to: digits.count, by: 2) {
        guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
        bytes.append(high << 4 | low)
    }
    return bytes
}
