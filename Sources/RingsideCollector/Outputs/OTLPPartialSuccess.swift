/// The `partial_success` of an OTLP `ExportMetricsServiceResponse` (metrics_service.proto): the
/// data points a receiver that took the export rejected all the same, and why. Read from the
/// protobuf body of a 2xx answer; nil when the body has none (the usual case) or is not protobuf.
package struct OTLPPartialSuccess: Equatable {
    package var rejectedDataPoints: UInt64
    package var errorMessage: String

    package init?(_ body: [UInt8]) {
        // ExportMetricsServiceResponse.partial_success (1), then its rejected_data_points (1,
        // an int64) and error_message (2).
        guard let partial = Self.fields(body)?.last(where: { $0.number == 1 && $0.bytes != nil })?.bytes,
            let fields = Self.fields(partial)
        else { return nil }
        rejectedDataPoints = fields.last { $0.number == 1 && $0.bytes == nil }?.value ?? 0
        errorMessage = fields.last { $0.number == 2 }?.bytes.map { String(decoding: $0, as: UTF8.self) } ?? ""
        guard rejectedDataPoints != 0 || !errorMessage.isEmpty else { return nil }
    }

    /// A message's fields: a varint's or fixed number's value, or a length-delimited field's
    /// bytes; nil when the bytes are not a well-formed message.
    private static func fields(_ bytes: [UInt8]) -> [(number: UInt64, value: UInt64, bytes: [UInt8]?)]? {
        var fields: [(number: UInt64, value: UInt64, bytes: [UInt8]?)] = []
        var at = 0
        func varint() -> UInt64? {
            var value: UInt64 = 0
            for shift in stride(from: 0, to: 64, by: 7) {
                guard at < bytes.count else { return nil }
                let byte = bytes[at]
                at += 1
                value |= UInt64(byte & 0x7F) << UInt64(shift)
                if byte < 0x80 { return value }
            }
            return nil
        }
        while at < bytes.count {
            guard let key = varint() else { return nil }
            switch key & 7 {
            case 0:
                guard let value = varint() else { return nil }
                fields.append((key >> 3, value, nil))
            case 1, 5:
                let width = key & 7 == 1 ? 8 : 4
                guard bytes.count - at >= width else { return nil }
                var value: UInt64 = 0
                for index in 0..<width { value |= UInt64(bytes[at + index]) << UInt64(8 * index) }
                at += width
                fields.append((key >> 3, value, nil))
            case 2:
                guard let length = varint(), length <= UInt64(bytes.count - at) else { return nil }
                fields.append((key >> 3, 0, Array(bytes[at..<(at + Int(length))])))
                at += Int(length)
            default:
                return nil
            }
        }
        return fields
    }
}
