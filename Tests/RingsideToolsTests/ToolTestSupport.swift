import CRingside
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import RingsideJSON

/// Runs `ringside-dump` on the rings in `directory`.
func dump(_ directory: RingDirectory, _ arguments: String...) throws -> ProcessRun {
    try runProcess("ringside-dump", ["--dir", directory.path] + arguments)
}

/// A ring written by the test producer process: histogram "sequence" {source="test"} holding
/// start, start+1, ... (the last `capacity` of them when more were written); the producer has exited.
func makeSequenceRing(_ directory: RingDirectory, _ name: String, count: Int, start: Int = 0, capacity: Int = 1024) throws {
    let child = try ChildProcess("ringside-test-producer", [
        "sequence", "--dir", directory.path, "--ring", name, "--count", "\(count)", "--start", "\(start)",
        "--capacity", "\(capacity)",
    ])
    guard child.readLine() != nil, child.waitForExit().status == 0 else { throw TestSupportError("the test producer failed") }
}

/// A ring held by a live test producer process (which wrote `count` records); killed with the handle.
func holdRing(_ directory: RingDirectory, _ name: String, count: Int, capacity: Int = 1024) throws -> ChildProcess {
    let child = try ChildProcess("ringside-test-producer", [
        "hold", "--dir", directory.path, "--ring", name, "--count", "\(count)", "--capacity", "\(capacity)",
    ])
    guard let line = child.readLine(), line.hasPrefix("ready") else { throw TestSupportError("the test producer did not start") }
    return child
}

/// A bot file with `threads` lanes made by the test producer's `lanes` mode (see its header):
/// thread t holds lane t and wrote t*count+1 ... t*count+count into histogram "lane_values"
/// {source="test"}, then set gauge "lane_level" to t (each lane's record `count`); every thread
/// incremented counter "lane_increments" {source="test"} `count` times. The producer has exited.
func makeLanesRing(_ directory: RingDirectory, _ name: String, threads: Int, count: Int, capacity: Int = 1024) throws {
    let child = try ChildProcess("ringside-test-producer", [
        "lanes", "--dir", directory.path, "--ring", name, "--threads", "\(threads)", "--count", "\(count)",
        "--capacity", "\(capacity)",
    ])
    guard let line = child.readLine(), line.hasPrefix("lanes \(threads) "), child.waitForExit().status == 0 else {
        throw TestSupportError("the test producer failed")
    }
}

/// `makeLanesRing`'s bot held by a live producer whose threads still hold their lanes; killed with the handle.
func holdLanesRing(_ directory: RingDirectory, _ name: String, threads: Int, count: Int, capacity: Int = 1024) throws -> ChildProcess {
    let child = try ChildProcess("ringside-test-producer", [
        "lanes", "--dir", directory.path, "--ring", name, "--threads", "\(threads)", "--count", "\(count)",
        "--capacity", "\(capacity)", "--hold",
    ])
    guard let line = child.readLine(), line.hasPrefix("ready") else { throw TestSupportError("the test producer did not start") }
    return child
}

/// Where things lie in a bot file, from the format's own structs and geometry (`ringside.h`):
/// the tests patch files at these offsets, never at literal ones.
struct BotFileLayout {
    let capacity: Int
    let registryCapacity: Int
    let geometry: rs_geometry

    init(capacity: Int, registryCapacity: Int = Int(RS_DEFAULT_REGISTRY_CAPACITY)) {
        self.capacity = capacity
        self.registryCapacity = registryCapacity
        geometry = rs_geometry_of(UInt32(capacity.trailingZeroBitCount), UInt32(registryCapacity))
    }

    /// The header's first bytes of the file at `path`, as stored.
    static func header(of path: String) throws -> rs_header {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw TestSupportError("open \(path)") }
        defer { close(fd) }
        var header = rs_header()
        let size = MemoryLayout<rs_header>.size
        guard withUnsafeMutableBytes(of: &header, { pread(fd, $0.baseAddress, size, 0) }) == size else {
            throw TestSupportError("read the header of \(path)")
        }
        return header
    }

    var registryOffset: Int { Int(geometry.registry_offset) }
    var lanesOffset: Int { Int(geometry.lanes_offset) }
    var laneSize: Int { Int(geometry.lane_size) }

    /// The file's size with `lanes` lanes.
    func fileSize(lanes: Int) -> Int { lanesOffset + lanes * laneSize }

    /// A field of registry entry `index`.
    func registry<T>(_ index: Int, _ field: KeyPath<rs_registry_entry, T>) -> Int {
        registryOffset + index * Int(RS_REGISTRY_ENTRY_SIZE) + MemoryLayout<rs_registry_entry>.offset(of: field)!
    }

    /// A field of lane `lane`'s header.
    func lane<T>(_ lane: Int, _ field: KeyPath<rs_lane_header, T>) -> Int {
        lanesOffset + lane * laneSize + MemoryLayout<rs_lane_header>.offset(of: field)!
    }

    /// Where lane `lane`'s records start.
    func records(lane: Int) -> Int { lanesOffset + lane * laneSize + Int(geometry.lane_records_offset) }

    /// A field of the record in slot `slot` of lane `lane`.
    func record<T>(lane: Int = 0, _ slot: Int, _ field: KeyPath<rs_record, T>) -> Int {
        records(lane: lane) + slot * Int(RS_RECORD_SIZE) + MemoryLayout<rs_record>.offset(of: field)!
    }
}


extension [String: Any] {
    func int(_ key: String) -> Int? { number(self[key]).map { Int($0) } }
    func uint64(_ key: String) -> UInt64? {
        if let value = self[key] as? UInt64 { return value }
        if let value = self[key] as? Int, value >= 0 { return UInt64(value) }
        return (self[key] as? NSNumber)?.uint64Value
    }
    func double(_ key: String) -> Double? { number(self[key]) }
    func string(_ key: String) -> String? { self[key] as? String }
    func bool(_ key: String) -> Bool? { self[key] as? Bool }
    func object(_ key: String) -> [String: Any]? { self[key] as? [String: Any] }
    func objects(_ key: String) -> [[String: Any]] { self[key] as? [[String: Any]] ?? [] }

    private func number(_ value: Any?) -> Double? {
        switch value {
        case let value as Int: return Double(value)
        case let value as UInt64: return Double(value)
        case let value as Double: return value
        case let value as NSNumber: return value.doubleValue
        default: return nil
        }
    }
}
