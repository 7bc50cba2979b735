import RingsideAggregation
import RingsideExport
import Testing

@Suite("the protobuf encoder of io.prometheus.client")
struct ProtobufTests {
    @Test("varints, zigzag integers, doubles and strings are encoded as the protobuf spec's examples")
    func scalars() {
        var writer = ProtobufWriter()
        writer.uint64(1, 150)
        #expect(writer.bytes == [0x08, 0x96, 0x01], "the spec's own example")
        writer = ProtobufWriter()
        writer.sint64(2, -1)
        writer.sint64(2, 1)
        writer.sint64(2, -2_147_483_648)
        #expect(writer.bytes == [0x10, 0x01, 0x10, 0x02, 0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F])
        writer = ProtobufWriter()
        writer.double(1, 1.0)
        #expect(writer.bytes == [0x09, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F])
        writer = ProtobufWriter()
        writer.string(2, "testing")
        #expect(writer.bytes == [0x12, 0x07] + Array("testing".utf8))
        writer = ProtobufWriter()
        writer.packedSInt64(13, [3, -1, 0])
        #expect(writer.bytes == [0x6A, 0x03, 0x06, 0x01, 0x00])
    }

    @Test("a gauge family is one delimited MetricFamily: name, help, type, a metric with its labels and value")
    func gaugeFamily() {
        var writer = ProtobufWriter()
        writer.metricFamily(name: "a", help: "", type: .gauge) { family in
            family.metric(labels: [(name: "k", value: "v")]) { $0.gaugeValue(1) }
        }
        let label: [UInt8] = [0x0A, 0x06, 0x0A, 0x01, 0x6B, 0x12, 0x01, 0x76]  // LabelPair{k, v}
        let gauge: [UInt8] = [0x12, 0x09, 0x09, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F]  // Gauge{1.0}
        let metric: [UInt8] = [0x22, UInt8(label.count + gauge.count)] + label + gauge
        let family: [UInt8] = [0x0A, 0x01, 0x61, 0x12, 0x00, 0x18, 0x01] + metric
        #expect(writer.bytes == [UInt8(family.count)] + family)
    }

    @Test("an empty native histogram carries the no-op span that tells it from a classic one")
    func emptyNative() {
        let native = NativeBuckets(Histogram(), schema: 3, baseUnitsPerValue: 1e-9)
        var writer = ProtobufWriter()
        writer.histogramValue(count: 0, sum: 0, classic: [], native: native)
        // ... positive_span (field 12) { offset 0, length 0 }, and no deltas.
        #expect(writer.bytes.suffix(6) == [0x62, 0x04, 0x08, 0x00, 0x10, 0x00])
    }

    @Test("a classic bucket's exemplar is Bucket.exemplar (3): labels (1), value (2), timestamp (3) of seconds (1) and nanos (2)")
    func bucketExemplar() {
        var writer = ProtobufWriter()
        let exemplar = ProtobufWriter.Exemplar(labels: [(name: "order_id", value: "A17")], value: 1, wallTimeNanos: 1_000_000_005)
        writer.histogramValue(count: 1, sum: 1, classic: [(upperBound: 2, cumulativeCount: 1, exemplar: exemplar)], native: nil)
        let one: [UInt8] = [0, 0, 0, 0, 0, 0, 0xF0, 0x3F], two: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0x40]
        let pair: [UInt8] = [0x0A, 0x0F, 0x0A, 0x08] + Array("order_id".utf8) + [0x12, 0x03] + Array("A17".utf8)
        let encoded: [UInt8] = pair + [0x11] + one + [0x1A, 0x04, 0x08, 0x01, 0x10, 0x05]
        let bucket: [UInt8] = [0x08, 0x01, 0x11] + two + [0x1A, UInt8(encoded.count)] + encoded
        let histogram: [UInt8] = [0x08, 0x01, 0x11] + one + [0x1A, UInt8(bucket.count)] + bucket
        #expect(writer.bytes == [0x3A, UInt8(histogram.count)] + histogram)
    }
}
