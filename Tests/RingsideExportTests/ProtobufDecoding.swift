// A decoder of the delimited `io.prometheus.client.MetricFamily` stream, for the fields of
// metrics.proto the tests check: written from the .proto's field numbers, apart from the encoder
// (over RingsideTestSupport's `ProtobufReader`).
import RingsideTestSupport

struct DecodedHistogram {
    var count: UInt64 = 0, sum = 0.0, schema: Int64?, zeroCount: UInt64 = 0
    var spanLengths: [UInt64] = [], nativeCounts: [UInt64] = []
    /// The classic buckets (field 3), and the native histogram's exemplars (field 16).
    var buckets: [DecodedBucket] = []
    var exemplars: [DecodedExemplar] = []
}

struct DecodedBucket {
    var cumulativeCount: UInt64 = 0, upperBound = 0.0
    var exemplar: DecodedExemplar?
}

/// An `Exemplar`: labels as [name, value], value, and its `google.protobuf.Timestamp`.
struct DecodedExemplar: Equatable {
    var labels: [[String]] = []
    var value = 0.0
    var seconds: UInt64?, nanos: UInt64?
}

struct DecodedMetric {
    var labels: [[String]] = []
    var value: Double?
    var histogram: DecodedHistogram?
}

struct DecodedFamily {
    var name = "", type: UInt64 = 0
    var metrics: [DecodedMetric] = []
}

func decodeFamilies(_ page: [UInt8]) throws -> [DecodedFamily] {
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

func decodeMetric(_ bytes: [UInt8]) throws -> DecodedMetric {
    var reader = ProtobufReader(bytes: bytes)
    var metric = DecodedMetric()
    while !reader.atEnd {
        let field = try reader.field()
        switch field.number {
        case 1:
            metric.labels.append(try decodeLabelPair(field.bytes))
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
                case 3: histogram.buckets.append(try decodeBucket(inner.bytes))
                case 16: histogram.exemplars.append(try decodeExemplar(inner.bytes))
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

/// A `LabelPair`'s strings: [name, value].
private func decodeLabelPair(_ bytes: [UInt8]) throws -> [String] {
    var pair = ProtobufReader(bytes: bytes)
    var strings: [String] = []
    while !pair.atEnd { strings.append(String(decoding: try pair.field().bytes, as: UTF8.self)) }
    return strings
}

private func decodeBucket(_ bytes: [UInt8]) throws -> DecodedBucket {
    var reader = ProtobufReader(bytes: bytes)
    var bucket = DecodedBucket()
    while !reader.atEnd {
        let field = try reader.field()
        switch field.number {
        case 1: bucket.cumulativeCount = field.varint
        case 2: bucket.upperBound = Double(bitPattern: field.fixed)
        case 3: bucket.exemplar = try decodeExemplar(field.bytes)
        default: break
        }
    }
    return bucket
}

func decodeExemplar(_ bytes: [UInt8]) throws -> DecodedExemplar {
    var reader = ProtobufReader(bytes: bytes)
    var exemplar = DecodedExemplar()
    while !reader.atEnd {
        let field = try reader.field()
        switch field.number {
        case 1: exemplar.labels.append(try decodeLabelPair(field.bytes))
        case 2: exemplar.value = Double(bitPattern: field.fixed)
        case 3:
            var timestamp = ProtobufReader(bytes: field.bytes)
            while !timestamp.atEnd {
                let part = try timestamp.field()
                if part.number == 1 { exemplar.seconds = part.varint }
                if part.number == 2 { exemplar.nanos = part.varint }
            }
        default: break
        }
    }
    return exemplar
}
