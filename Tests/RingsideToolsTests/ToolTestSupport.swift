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
