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
    let child = try ChildProcess(
        testProducer: "sequence", ring: name, in: directory, ["--count", "\(count)", "--start", "\(start)", "--capacity", "\(capacity)"])
    guard child.readLine() != nil, child.waitForExit().status == 0 else { throw TestSupportError("the test producer failed") }
}

/// A ring held by a live test producer process (which wrote `count` records); killed with the handle.
func holdRing(_ directory: RingDirectory, _ name: String, count: Int, capacity: Int = 1024) throws -> ChildProcess {
    let child = try ChildProcess(testProducer: "hold", ring: name, in: directory, ["--count", "\(count)", "--capacity", "\(capacity)"])
    guard let line = child.readLine(), line.hasPrefix("ready") else { throw TestSupportError("the test producer did not start") }
    return child
}

/// A bot file with `threads` lanes made by the test producer's `lanes` mode (see its header):
/// thread t holds lane t and wrote t*count+1 ... t*count+count into histogram "lane_values"
/// {source="test"}, then set gauge "lane_level" to t (each lane's record `count`); every thread
/// incremented counter "lane_increments" {source="test"} `count` times. The producer has exited.
func makeLanesRing(_ directory: RingDirectory, _ name: String, threads: Int, count: Int, capacity: Int = 1024) throws {
    let child = try ChildProcess(
        testProducer: "lanes", ring: name, in: directory, ["--threads", "\(threads)", "--count", "\(count)", "--capacity", "\(capacity)"])
    guard let line = child.readLine(), line.hasPrefix("lanes \(threads) "), child.waitForExit().status == 0 else {
        throw TestSupportError("the test producer failed")
    }
}

/// `makeLanesRing`'s bot held by a live producer whose threads still hold their lanes; killed with the handle.
func holdLanesRing(_ directory: RingDirectory, _ name: String, threads: Int, count: Int, capacity: Int = 1024) throws -> ChildProcess {
    let child = try ChildProcess(
        testProducer: "lanes", ring: name, in: directory,
        ["--threads", "\(threads)", "--count", "\(count)", "--capacity", "\(capacity)", "--hold"])
    guard let line = child.readLine(), line.hasPrefix("ready") else { throw TestSupportError("the test producer did not start") }
    return child
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
