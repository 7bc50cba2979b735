import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import Ringside
import RingsideTestSupport

// MARK: - The format's layout, computed (never a literal offset)

/// Where lane `lane` starts in the file at `path`: `lanes_offset + lane * lane_size`, from its header.
func laneStart(_ path: String, lane: Int) -> Int {
    let header = fileHeader(path)
    return Int(header.lanes_offset) + lane * Int(header.lane_size)
}

/// The file offset of a field of lane `lane`'s header.
func laneFieldOffset<T>(_ path: String, lane: Int, _ field: KeyPath<rs_lane_header, T>) -> Int {
    laneStart(path, lane: lane) + laneHeaderOffset(field)
}

/// The file's size in bytes.
func fileSize(_ path: String) -> Int {
    var info = stat()
    precondition(stat(path, &info) == 0, "stat \(path)")
    return Int(info.st_size)
}

/// The metric named `name` among a reader's metrics.
func metric(_ metrics: [MetricDescriptor], _ name: String) throws -> MetricDescriptor {
    guard let found = metrics.first(where: { $0.name == name }) else {
        throw TestSupportError("no metric \(name) among \(metrics.map(\.name))")
    }
    return found
}
