import RingsideAggregation

/// A protobuf encoder for the few messages the collector writes: Prometheus's exposition format
/// (`io.prometheus.client`, metrics.proto, below) and OpenTelemetry's metrics (OTLP, in
/// `OTLPExporter`): varints, zigzag integers, fixed-width numbers, doubles, strings, bytes and
/// nested messages, written field by field. Nested messages are encoded apart and appended with
/// their length: simple, and these messages are small.
package struct ProtobufWriter {
    package private(set) var bytes: [UInt8] = []

    package init() {}

    /// The wire types this encoder writes.
    enum WireType: UInt64 {
        case varint = 0
        case fixed64 = 1
        case lengthDelimited = 2
    }

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    mutating func key(_ field: Int, _ wire: WireType) {
        varint(UInt64(field) << 3 | wire.rawValue)
    }

    /// A `uint64` (or an enum) field.
    package mutating func uint64(_ field: Int, _ value: UInt64) {
        key(field, .varint)
        varint(value)
    }

    /// A `sint32` or `sint64` field: zigzag, so small negative numbers stay short.
    package mutating func sint64(_ field: Int, _ value: Int64) {
        key(field, .varint)
        varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    /// A `bool` field (written only when true, as proto3 leaves defaults out).
    package mutating func bool(_ field: Int, _ value: Bool) {
        if value { uint64(field, 1) }
    }

    /// A `fixed64` field: 8 bytes, little-endian (`sfixed64`: the same bytes of an `Int64`).
    package mutating func fixed64(_ field: Int, _ value: UInt64) {
        key(field, .fixed64)
        appendLittleEndian(value)
    }

    /// A `double` field: 8 bytes, little-endian.
    package mutating func double(_ field: Int, _ value: Double) {
        fixed64(field, value.bitPattern)
    }

    private mutating func appendLittleEndian(_ value: UInt64) {
        var bits = value
        for _ in 0..<8 {
            bytes.append(UInt8(truncatingIfNeeded: bits))
            bits >>= 8
        }
    }

    /// A `string` field (UTF-8).
    package mutating func string(_ field: Int, _ value: String) {
        key(field, .lengthDelimited)
        let utf8 = Array(value.utf8)
        varint(UInt64(utf8.count))
        bytes += utf8
    }

    /// A `bytes` field.
    package mutating func byteString(_ field: Int, _ value: [UInt8]) {
        key(field, .lengthDelimited)
        varint(UInt64(value.count))
        bytes += value
    }

    /// A nested message field, written by `body`.
    package mutating func message(_ field: Int, _ body: (inout ProtobufWriter) -> Void) {
        var nested = ProtobufWriter()
        body(&nested)
        key(field, .lengthDelimited)
        varint(UInt64(nested.bytes.count))
        bytes += nested.bytes
    }

    /// A `repeated sint64` field, packed (parsers take packed and unpacked alike).
    package mutating func packedSInt64(_ field: Int, _ values: [Int64]) {
        guard !values.isEmpty else { return }
        message(field) { packed in
            for value in values { packed.varint(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }
        }
    }

    /// A `repeated uint64` field, packed.
    package mutating func packedUInt64(_ field: Int, _ values: [UInt64]) {
        guard !values.isEmpty else { return }
        message(field) { packed in
            for value in values { packed.varint(value) }
        }
    }
}

/// The messages of `io.prometheus.client` (metrics.proto) the collector writes, by their field
/// numbers there.
extension ProtobufWriter {
    /// `MetricType`.
    package enum MetricType: UInt64 {
        case counter = 0
        case gauge = 1
        case summary = 2
        case untyped = 3
        case histogram = 4
    }

    /// One `MetricFamily`, delimited: name, help, type, then the metrics `body` writes with
    /// `metric(labels:_:)`.
    package mutating func metricFamily(name: String, help: String, type: MetricType, _ body: (inout ProtobufWriter) -> Void) {
        var metrics = ProtobufWriter()
        body(&metrics)
        metricFamilyHead(name: name, help: help, type: type, metricBytes: metrics.bytes.count)
        bytes += metrics.bytes
    }

    /// The head of a `MetricFamily` whose metrics, `metricBytes` of them, are written apart (after
    /// it): its length as a varint (the `encoding=delimited` stream a scrape returns), then its
    /// name, help and type.
    package mutating func metricFamilyHead(name: String, help: String, type: MetricType, metricBytes: Int) {
        var fields = ProtobufWriter()
        fields.string(1, name)
        fields.string(2, help)
        fields.uint64(3, type.rawValue)
        varint(UInt64(fields.bytes.count + metricBytes))
        bytes += fields.bytes
    }

    /// One `Metric` of a family (field 4): its `LabelPair`s, then the value `body` writes.
    package mutating func metric(labels: [(name: String, value: String)], _ body: (inout ProtobufWriter) -> Void) {
        message(4) { metric in
            metric.labelPairs(1, labels)
            body(&metric)
        }
    }

    /// A `LabelPair` (name 1, value 2) in field `field` for each of `labels`.
    private mutating func labelPairs(_ field: Int, _ labels: [(name: String, value: String)]) {
        for label in labels {
            message(field) { pair in
                pair.string(1, label.name)
                pair.string(2, label.value)
            }
        }
    }

    /// `Metric.gauge`.
    package mutating func gaugeValue(_ value: Double) {
        message(2) { $0.double(1, value) }
    }

    /// `Metric.counter`.
    package mutating func counterValue(_ value: Double) {
        message(3) { $0.double(1, value) }
    }

    /// `Metric.summary`: count, sum and (quantile, value) pairs.
    package mutating func summaryValue(count: UInt64, sum: Double, quantiles: [(quantile: Double, value: Double)]) {
        message(4) { summary in
            summary.countSumAndEntries(count: count, sum: sum, quantiles) { pair, quantile in
                pair.double(1, quantile.quantile)
                pair.double(2, quantile.value)
            }
        }
    }

    /// One classic bucket: its upper bound in the base unit, its cumulative count, and the
    /// exemplar of a value in it, if any.
    package typealias ClassicBucket = (upperBound: Double, cumulativeCount: UInt64, exemplar: Exemplar?)

    /// `Metric.histogram`: count and sum; the classic cumulative buckets (upper bounds in the base
    /// unit, +Inf left out unless an exemplar is in it), each with its exemplar; and, when given,
    /// the native buckets and their exemplars (`Histogram.exemplars`, field 16).
    package mutating func histogramValue(
        count: UInt64, sum: Double, classic: [ClassicBucket], native: NativeBuckets?, nativeExemplars: [Exemplar] = []
    ) {
        message(7) { histogram in
            histogram.countSumAndEntries(count: count, sum: sum, classic) { entry, bucket in
                entry.uint64(1, bucket.cumulativeCount)
                entry.double(2, bucket.upperBound)
                if let exemplar = bucket.exemplar { entry.exemplar(3, exemplar) }
            }
            guard let native else { return }
            histogram.sint64(5, Int64(native.schema))
            histogram.double(6, native.zeroThreshold)
            histogram.uint64(7, native.zeroCount)
            let spans = native.spans
            for span in native.negativeSpans {
                histogram.message(9) { entry in  // negative_span
                    entry.sint64(1, Int64(span.offset))
                    entry.uint64(2, UInt64(span.length))
                }
            }
            if !native.negativeBuckets.isEmpty { histogram.packedSInt64(10, native.negativeDeltas) }  // negative_delta
            if spans.isEmpty && native.negativeBuckets.isEmpty {
                // "A no-op span": what tells a native histogram with no observations from a classic one.
                histogram.message(12) { span in
                    span.sint64(1, 0)
                    span.uint64(2, 0)
                }
            }
            for span in spans {
                histogram.message(12) { entry in
                    entry.sint64(1, Int64(span.offset))
                    entry.uint64(2, UInt64(span.length))
                }
            }
            histogram.packedSInt64(13, native.deltas)
            for exemplar in nativeExemplars { histogram.exemplar(16, exemplar) }
        }
    }

    /// An `Exemplar`: the labels that name a value, the value in the base unit, and its wall time.
    package struct Exemplar: Sendable {
        package var labels: [(name: String, value: String)]
        package var value: Double
        package var wallTimeNanos: UInt64

        package init(labels: [(name: String, value: String)], value: Double, wallTimeNanos: UInt64) {
            self.labels = labels
            self.value = value
            self.wallTimeNanos = wallTimeNanos
        }
    }

    /// An `Exemplar` message in field `field`: its `LabelPair`s (1), value (2) and timestamp (3, a
    /// `google.protobuf.Timestamp`: seconds (1) and nanos (2), both varints; never negative here,
    /// so int64 and int32 encode as unsigned ones do).
    mutating func exemplar(_ field: Int, _ exemplar: Exemplar) {
        message(field) { message in
            message.labelPairs(1, exemplar.labels)
            message.double(2, exemplar.value)
            message.message(3) { timestamp in
                timestamp.uint64(1, exemplar.wallTimeNanos / 1_000_000_000)
                timestamp.uint64(2, exemplar.wallTimeNanos % 1_000_000_000)
            }
        }
    }

    /// How `Summary` and `Histogram` both begin: `sample_count` (1), `sample_sum` (2), then a
    /// field 3 message (a `Quantile`, a classic `Bucket`) for each of `entries`, written by `write`.
    private mutating func countSumAndEntries<Entry>(
        count: UInt64, sum: Double, _ entries: [Entry], _ write: (inout ProtobufWriter, Entry) -> Void
    ) {
        uint64(1, count)
        double(2, sum)
        for entry in entries {
            message(3) { write(&$0, entry) }
        }
    }
}
