import CRingside

/// A ring file's geometry, validated: every offset and size the code uses comes from here,
/// never from the file directly, so a value another process changes later cannot mislead us.
struct RingLayout: Equatable, Sendable {
    let capacityLog2: UInt32
    let registryCapacity: UInt32

    var capacity: UInt64 { 1 << UInt64(capacityLog2) }
    var registryOffset: Int { Int(RS_HEADER_SIZE) }
    var recordsOffset: Int { registryOffset + Int(registryCapacity) * Int(RS_REGISTRY_ENTRY_SIZE) }
    var fileSize: Int { recordsOffset + Int(capacity) * Int(RS_RECORD_SIZE) }

    /// The layout for a new ring, or why the options cannot make one.
    init(capacity: Int, registryCapacity: Int) throws(LayoutProblem) {
        let minimum = 1 << Int(RS_MIN_CAPACITY_LOG2), maximum = 1 << Int(RS_MAX_CAPACITY_LOG2)
        guard capacity >= minimum, capacity <= maximum, capacity & (capacity - 1) == 0 else {
            throw LayoutProblem("capacity \(capacity) must be a power of two from \(minimum) to \(maximum) records")
        }
        guard registryCapacity >= 1, registryCapacity <= Int(RS_MAX_REGISTRY_CAPACITY) else {
            throw LayoutProblem("maxMetrics \(registryCapacity) must be from 1 to \(RS_MAX_REGISTRY_CAPACITY)")
        }
        self.capacityLog2 = UInt32(capacity.trailingZeroBitCount)
        self.registryCapacity = UInt32(registryCapacity)
    }

    /// The layout a header describes, checked field by field against the format and the file's size.
    init(validating header: rs_header, fileSize: Int) throws(RingCorruption) {
        guard header.magic == RS_MAGIC else { throw .badMagic(header.magic) }
        guard header.version == RS_FORMAT_VERSION else { throw .unsupportedVersion(header.version) }
        try Self.expect("header_size", UInt64(header.header_size), equals: UInt64(RS_HEADER_SIZE))
        try Self.expect("record_size", UInt64(header.record_size), equals: UInt64(RS_RECORD_SIZE))
        try Self.expect("registry_entry_size", UInt64(header.registry_entry_size), equals: UInt64(RS_REGISTRY_ENTRY_SIZE))
        guard (RS_MIN_CAPACITY_LOG2...RS_MAX_CAPACITY_LOG2).contains(header.capacity_log2) else {
            throw .badLayout(field: "capacity_log2", value: UInt64(header.capacity_log2),
                             expected: "\(RS_MIN_CAPACITY_LOG2) to \(RS_MAX_CAPACITY_LOG2)")
        }
        guard (1...RS_MAX_REGISTRY_CAPACITY).contains(header.registry_capacity) else {
            throw .badLayout(field: "registry_capacity", value: UInt64(header.registry_capacity),
                             expected: "1 to \(RS_MAX_REGISTRY_CAPACITY)")
        }
        let layout = RingLayout(capacityLog2: header.capacity_log2, registryCapacity: header.registry_capacity)
        try Self.expect("registry_offset", header.registry_offset, equals: UInt64(layout.registryOffset))
        try Self.expect("records_offset", header.records_offset, equals: UInt64(layout.recordsOffset))
        try Self.expect("file_size", header.file_size, equals: UInt64(layout.fileSize))
        guard fileSize == layout.fileSize else { throw .truncated(fileSize: fileSize, expected: layout.fileSize) }
        self = layout
    }

    private init(capacityLog2: UInt32, registryCapacity: UInt32) {
        self.capacityLog2 = capacityLog2
        self.registryCapacity = registryCapacity
    }

    private static func expect(_ field: String, _ value: UInt64, equals expected: UInt64) throws(RingCorruption) {
        guard value == expected else { throw .badLayout(field: field, value: value, expected: "\(expected)") }
    }
}

/// Why attach options cannot make a layout.
struct LayoutProblem: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}
