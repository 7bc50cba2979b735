// Protobuf's wire format read back, field by field, for the tests that decode what the collector
// encodes (Prometheus' protobuf exposition, OTLP's requests) and for `ringside-bench soak`'s OTLP
// receiver: written from the protobuf encoding's specification, apart from the encoder.

/// A reader of protobuf's wire format: varints, fixed 64-bit values and length-delimited fields.
package struct ProtobufReader {
    package let bytes: [UInt8]
    package var position = 0

    package init(bytes: [UInt8], position: Int = 0) {
        self.bytes = bytes
        self.position = position
    }

    package var atEnd: Bool { position >= bytes.count }

    package mutating func varint() throws -> UInt64 {
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
    package mutating func field() throws -> (number: Int, varint: UInt64, fixed: UInt64, bytes: [UInt8]) {
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

package struct TestDecodeError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

package func zigzag(_ value: UInt64) -> Int64 { Int64(bitPattern: value >> 1) ^ -Int64(bitPattern: value & 1) }
