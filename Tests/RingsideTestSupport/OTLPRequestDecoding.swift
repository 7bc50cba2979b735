// OTLP's `ExportMetricsServiceRequest` read back, for the tests of the OTLP exporter and for
// `ringside-bench soak`'s receiver: from opentelemetry-proto's field numbers (metrics.proto,
// common.proto, resource.proto), apart from the encoder.

/// One `ResourceMetrics`: its attributes (values as text), its scope's name and its metrics.
package struct DecodedResource {
    package var attributes: [String: String] = [:]
    package var scope = ""
    package var metrics: [DecodedOTLPMetric] = []
}

/// One `Metric`: its name, description and unit, its kind, and its data points.
package struct DecodedOTLPMetric {
    package var name = "", description = "", unit = ""
    /// The `data` field's number: 5 gauge, 7 sum, 10 exponential histogram.
    package var kind = 0
    package var temporality: UInt64 = 0
    package var monotonic = false
    package var points: [DecodedPoint] = []
}

/// One data point: of an exponential histogram (its count, sum, buckets and exemplars), or of a
/// sum or a gauge (`asInt` or `asDouble`).
package struct DecodedPoint {
    package var attributes: [String: String] = [:]
    package var start: UInt64 = 0, time: UInt64 = 0
    package var count: UInt64 = 0, sum = 0.0
    /// Optional fields: nil when the point does not carry them.
    package var min: Double?, max: Double?
    package var scale: Int64 = 0, zeroCount: UInt64 = 0, zeroThreshold = 0.0
    package var offset: Int64 = 0, counts: [UInt64] = []
    package var negativeOffset: Int64 = 0, negativeCounts: [UInt64] = []
    package var asInt: Int64?, asDouble: Double?
    package var exemplars: [DecodedOTLPExemplar] = []
}

/// One exemplar of an exponential histogram's point.
package struct DecodedOTLPExemplar {
    package var attributes: [String: String] = [:]
    package var time: UInt64 = 0, value = 0.0
    package var traceID: [UInt8] = [], spanID: [UInt8] = []
}

/// `ExportMetricsServiceRequest`'s resources, by metrics.proto's, common.proto's and
/// resource.proto's field numbers.
package func decodeRequest(_ bytes: [UInt8]) throws -> [DecodedResource] {
    var resources: [DecodedResource] = []
    try forEachField(bytes) { field in
        guard field.number == 1 else { return }
        var resource = DecodedResource()
        try forEachField(field.bytes) { part in
            switch part.number {
            case 1: try forEachField(part.bytes) { if $0.number == 1 { try keyValue($0.bytes, into: &resource.attributes) } }
            case 2:
                try forEachField(part.bytes) { scopeField in
                    if scopeField.number == 1 {
                        try forEachField(scopeField.bytes) {
                            if $0.number == 1 { resource.scope = String(decoding: $0.bytes, as: UTF8.self) }
                        }
                    } else if scopeField.number == 2 {
                        resource.metrics.append(try decodeMetric(scopeField.bytes))
                    }
                }
            default: break
            }
        }
        resources.append(resource)
    }
    return resources
}

private func decodeMetric(_ bytes: [UInt8]) throws -> DecodedOTLPMetric {
    var metric = DecodedOTLPMetric()
    try forEachField(bytes) { field in
        switch field.number {
        case 1: metric.name = String(decoding: field.bytes, as: UTF8.self)
        case 2: metric.description = String(decoding: field.bytes, as: UTF8.self)
        case 3: metric.unit = String(decoding: field.bytes, as: UTF8.self)
        case 5, 7, 10:
            metric.kind = field.number
            try forEachField(field.bytes) { data in
                switch data.number {
                case 1: metric.points.append(try decodePoint(data.bytes, exponential: field.number == 10))
                case 2: metric.temporality = data.varint
                case 3: metric.monotonic = data.varint == 1
                default: break
                }
            }
        default: break
        }
    }
    return metric
}

private func decodePoint(_ bytes: [UInt8], exponential: Bool) throws -> DecodedPoint {
    var point = DecodedPoint()
    try forEachField(bytes) { field in
        switch (exponential, field.number) {
        case (true, 1), (false, 7): try keyValue(field.bytes, into: &point.attributes)
        case (_, 2): point.start = field.fixed
        case (_, 3): point.time = field.fixed
        case (true, 4): point.count = field.fixed
        case (true, 5): point.sum = Double(bitPattern: field.fixed)
        case (true, 6): point.scale = zigzag(field.varint)
        case (true, 7): point.zeroCount = field.fixed
        case (true, 8):
            try forEachField(field.bytes) { buckets in
                if buckets.number == 1 { point.offset = zigzag(buckets.varint) }
                if buckets.number == 2 {
                    var packed = ProtobufReader(bytes: buckets.bytes)
                    while !packed.atEnd { point.counts.append(try packed.varint()) }
                }
            }
        case (true, 9):
            try forEachField(field.bytes) { buckets in
                if buckets.number == 1 { point.negativeOffset = zigzag(buckets.varint) }
                if buckets.number == 2 {
                    var packed = ProtobufReader(bytes: buckets.bytes)
                    while !packed.atEnd { point.negativeCounts.append(try packed.varint()) }
                }
            }
        case (true, 11): point.exemplars.append(try decodeExemplar(field.bytes))
        case (true, 12): point.min = Double(bitPattern: field.fixed)
        case (true, 13): point.max = Double(bitPattern: field.fixed)
        case (true, 14): point.zeroThreshold = Double(bitPattern: field.fixed)
        case (false, 4): point.asDouble = Double(bitPattern: field.fixed)
        case (false, 6): point.asInt = Int64(bitPattern: field.fixed)
        default: break
        }
    }
    return point
}

private func decodeExemplar(_ bytes: [UInt8]) throws -> DecodedOTLPExemplar {
    var exemplar = DecodedOTLPExemplar()
    try forEachField(bytes) { field in
        switch field.number {
        case 7: try keyValue(field.bytes, into: &exemplar.attributes)
        case 2: exemplar.time = field.fixed
        case 3: exemplar.value = Double(bitPattern: field.fixed)
        case 4: exemplar.spanID = field.bytes
        case 5: exemplar.traceID = field.bytes
        default: break
        }
    }
    return exemplar
}

/// A `KeyValue` whose `AnyValue` is a string (1) or an int (3, written in decimal).
private func keyValue(_ bytes: [UInt8], into attributes: inout [String: String]) throws {
    var key = "", value = ""
    try forEachField(bytes) { field in
        if field.number == 1 { key = String(decoding: field.bytes, as: UTF8.self) }
        if field.number == 2 {
            try forEachField(field.bytes) { any in
                if any.number == 1 { value = String(decoding: any.bytes, as: UTF8.self) }
                if any.number == 3 { value = String(Int64(bitPattern: any.varint)) }
            }
        }
    }
    attributes[key] = value
}

private func forEachField(
    _ bytes: [UInt8], _ body: ((number: Int, varint: UInt64, fixed: UInt64, bytes: [UInt8])) throws -> Void
) throws {
    var reader = ProtobufReader(bytes: bytes)
    while !reader.atEnd { try body(try reader.field()) }
}
