import CRingside
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import RingsideJSON

/// What a tool run printed and how it ended.
struct ToolRun {
    let status: Int32
    let output: String
    let errors: String
    /// False when the process died of a signal (a crash).
    let exitedNormally: Bool

    var outputLines: [String] { output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty } }
    var errorLines: [String] { errors.split(separator: "\n").map(String.init) }

    /// Standard output parsed as one JSON document.
    func json() throws -> [String: Any] {
        let value = try JSONSerialization.jsonObject(with: Data(output.utf8))
        guard let object = value as? [String: Any] else { throw TestSupportError("not a JSON object: \(output)") }
        return object
    }
}

/// A tool of the package (`ringside-dump`, `ringside-emit`) running as its own process, with
/// a pipe to its standard input; killed, if still running, when the test lets go of it.
final class ToolProcess: @unchecked Sendable {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let errors = Pipe()
    private let group = DispatchGroup()
    private var outputData = Data()
    private var errorData = Data()

    init(_ tool: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: try builtExecutable(tool))
        process.arguments = arguments
        var variables = ProcessInfo.processInfo.environment
        variables.removeValue(forKey: RingDirectory.environmentVariable)
        variables.removeValue(forKey: Ring.disableEnvironmentVariable)
        process.environment = variables.merging(environment) { _, new in new }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // Read both pipes as the tool writes, so a large output never blocks it.
        group.enter()
        DispatchQueue.global().async { [self] in
            outputData = output.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
        group.enter()
        DispatchQueue.global().async { [self] in
            errorData = errors.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    func write(_ text: String) { input.fileHandleForWriting.write(Data(text.utf8)) }
    func closeInput() { try? input.fileHandleForWriting.close() }

    /// Closes standard input, waits for the exit, and returns what the tool printed.
    func finish() -> ToolRun {
        closeInput()
        process.waitUntilExit()
        group.wait()
        return ToolRun(status: process.terminationStatus, output: String(decoding: outputData, as: UTF8.self),
                       errors: String(decoding: errorData, as: UTF8.self),
                       exitedNormally: process.terminationReason == .exit)
    }
}

/// Runs a tool to completion, with `stdin` as its standard input.
func run(_ tool: String, _ arguments: [String], stdin: String = "", environment: [String: String] = [:]) throws -> ToolRun {
    let process = try ToolProcess(tool, arguments, environment: environment)
    if !stdin.isEmpty { process.write(stdin) }
    return process.finish()
}

/// Runs `ringside-dump` on the rings in `directory`.
func dump(_ directory: RingDirectory, _ arguments: String...) throws -> ToolRun {
    try run("ringside-dump", ["--dir", directory.path] + arguments)
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

/// Drains every record of a ring as its consumer.
func drainAll(_ directory: RingDirectory, _ name: String) throws -> [RingRecord] {
    let consumer = try RingConsumer(name, directory: directory)
    var drained: [RingRecord] = []
    try consumer.drain { records, _ in drained += records }
    return drained
}

/// Waits up to `seconds` for `condition`, polling; returns whether it came true.
func eventually(within seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(5_000)
    }
    return try condition()
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
