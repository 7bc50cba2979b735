import CRingside
import Ringside

extension RingRecord {
    /// An exemplar's part (EXEMPLARS in ringside.h): up to 16 of its bytes in the time and value
    /// fields, the rest zero.
    package static func exemplarPart(_ text: String, metric: UInt32 = 0, sequence: UInt64) -> RingRecord {
        var bytes = Array(text.utf8.prefix(16)) + [UInt8](repeating: 0, count: 16)
        let time = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        bytes.removeFirst(8)
        let value = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        return RingRecord(
            timestamp_ns: time, value: value, sequence: sequence, metric: metric, kind: UInt8(RS_KIND_EXEMPLAR.rawValue), flags: 0,
            exemplar_length: 0)
    }
}
