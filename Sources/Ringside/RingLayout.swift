import CRingside

/// A bot file's geometry, validated: every offset and size the code uses comes from here,
/// never from the file directly, so a value another process changes later cannot mislead us.
/// The three free choices (lane capacity, registry capacity, lanes) fix the rest
/// (`rs_geometry_of` in `ringside.h`).
package struct RingLayout: Equatable, Sendable {
    package let capacityLog2: UInt32
    package let registryCapacity: UInt32
    package let maxLanes: UInt32

    /// Records one lane holds.
    package var capacity: UInt64 { 1 << UInt64(capacityLog2) }
    private var geometry: rs_geometry { rs_geometry_of(capacityLog2, registryCapacity) }
    package var registryOffset: Int { Int(geometry.registry_offset) }
    package var cellsOffset: Int { Int(geometry.cells_offset) }
    /// Where lane 0 starts; also the size of the part mapped before any lane.
    package var lanesOffset: Int { Int(geometry.lanes_offset) }
    package var laneSize: Int { Int(geometry.lane_size) }
    /// Where a lane's gather cells start, from the lane's own start.
    package var laneGatherOffset: Int { Int(geometry.lane_gather_offset) }
    /// Where a lane's records start, from the lane's own start.
    package var laneRecordsOffset: Int { Int(geometry.lane_records_offset) }

    /// The file's least size with `lanes` lanes.
    func fileSize(lanes: Int) -> Int { lanesOffset + lanes * laneSize }

    /// The layout for a new bot file, or why the options cannot make one.
    init(capacity: Int, registryCapacity: Int, maxLanes: Int) throws(LayoutProblem) {
        let minimum = 1 << Int(RS_MIN_CAPACITY_LOG2), maximum = 1 << Int(RS_MAX_CAPACITY_LOG2)
        guard capacity >= minimum, capacity <= maximum, capacity & (capacity - 1) == 0 else {
            throw LayoutProblem("capacity \(capacity) must be a power of two from \(minimum) to \(maximum) records")
        }
        guard registryCapacity >= 1, registryCapacity <= Int(RS_MAX_REGISTRY_CAPACITY) else {
            throw LayoutProblem("maxMetrics \(registryCapacity) must be from 1 to \(RS_MAX_REGISTRY_CAPACITY)")
        }
        guard maxLanes >= 1, maxLanes <= Int(RS_MAX_LANES) else {
            throw LayoutProblem("maxLanes \(maxLanes) must be from 1 to \(RS_MAX_LANES)")
        }
        self.capacityLog2 = UInt32(capacity.trailingZeroBitCount)
        self.registryCapacity = UInt32(registryCapacity)
        self.maxLanes = UInt32(maxLanes)
    }

    /// The layout a header describes, checked field by field against the format and the file's
    /// size (which must hold at least the part before the lanes).
    package init(validating header: rs_header, fileSize: Int) throws(RingCorruption) {
        guard header.magic == RS_MAGIC else { throw .badMagic(header.magic) }
        guard (RS_FORMAT_VERSION_MIN...RS_FORMAT_VERSION).contains(header.version) else { throw .unsupportedVersion(header.version) }
        try Self.expect("header_size", UInt64(header.header_size), equals: UInt64(RS_HEADER_SIZE))
        try Self.expect("record_size", UInt64(header.record_size), equals: UInt64(RS_RECORD_SIZE))
        try Self.expect("registry_entry_size", UInt64(header.registry_entry_size), equals: UInt64(RS_REGISTRY_ENTRY_SIZE))
        try Self.expect("metric_cell_size", UInt64(header.metric_cell_size), equals: UInt64(RS_METRIC_CELL_SIZE))
        try Self.expect("lane_header_size", UInt64(header.lane_header_size), equals: UInt64(RS_LANE_HEADER_SIZE))
        try Self.expect("gather_cell_size", UInt64(header.gather_cell_size), equals: UInt64(RS_GATHER_CELL_SIZE))
        guard (RS_MIN_CAPACITY_LOG2...RS_MAX_CAPACITY_LOG2).contains(header.capacity_log2) else {
            throw .badLayout(
                field: "capacity_log2", value: UInt64(header.capacity_log2),
                expected: "\(RS_MIN_CAPACITY_LOG2) to \(RS_MAX_CAPACITY_LOG2)")
        }
        guard (1...RS_MAX_REGISTRY_CAPACITY).contains(header.registry_capacity) else {
            throw .badLayout(
                field: "registry_capacity", value: UInt64(header.registry_capacity),
                expected: "1 to \(RS_MAX_REGISTRY_CAPACITY)")
        }
        guard (1...RS_MAX_LANES).contains(header.max_lanes) else {
            throw .badLayout(field: "max_lanes", value: UInt64(header.max_lanes), expected: "1 to \(RS_MAX_LANES)")
        }
        let layout = RingLayout(
            capacityLog2: header.capacity_log2, registryCapacity: header.registry_capacity,
            maxLanes: header.max_lanes)
        try Self.expect("registry_offset", header.registry_offset, equals: UInt64(layout.registryOffset))
        try Self.expect("cells_offset", header.cells_offset, equals: UInt64(layout.cellsOffset))
        try Self.expect("lanes_offset", header.lanes_offset, equals: UInt64(layout.lanesOffset))
        try Self.expect("lane_size", header.lane_size, equals: UInt64(layout.laneSize))
        try Self.expect("lane_gather_offset", UInt64(header.lane_gather_offset), equals: UInt64(layout.laneGatherOffset))
        try Self.expect("lane_records_offset", UInt64(header.lane_records_offset), equals: UInt64(layout.laneRecordsOffset))
        guard fileSize >= layout.lanesOffset else { throw .truncated(fileSize: fileSize, expected: layout.lanesOffset) }
        self = layout
    }

    private init(capacityLog2: UInt32, registryCapacity: UInt32, maxLanes: UInt32) {
        self.capacityLog2 = capacityLog2
        self.registryCapacity = registryCapacity
        self.maxLanes = maxLanes
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
