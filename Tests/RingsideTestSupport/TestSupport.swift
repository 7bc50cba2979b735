import RingsideSystem
import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideAggregation
import RingsideCollector
import Synchronization

/// A ring directory of the test's own under `/dev/shm`, removed with everything in it when the
/// body returns or throws. Tests run in parallel; each makes its own.
package func withRingDirectory<Result>(_ body: (RingDirectory) throws -> Result) throws -> Result {
    let directory = try TemporaryRingDirectory()
    defer { directory.remove() }
    return try body(directory.ringDirectory)
}

/// The async form of `withRingDirectory`.
package func withRingDirectory<Result>(_ body: (RingDirectory) async throws -> Result) async throws -> Result {
    let directory = try TemporaryRingDirectory()
    defer { directory.remove() }
    return try await body(directory.ringDirectory)
}

/// A parameterized test's argument, one of a few cases, shown in the test's name by its words
/// (its raw value) rather than by its case's name.
package protocol TestArgument: RawRepresentable<String>, CaseIterable, CustomStringConvertible {}

extension TestArgument {
    package var description: String { rawValue }
}

/// A fresh directory `/dev/shm/ringside-test.XXXXXX`.
package struct TemporaryRingDirectory {
    private let directory: TemporaryDirectory
    package var path: String { directory.path }
    package var ringDirectory: RingDirectory { RingDirectory(path) }

    package init() throws { directory = try TemporaryDirectory("ringside-test", in: "/dev/shm") }

    package func remove() { directory.remove() }
}

/// A fresh directory `parent/prefix.XXXXXX` (for build products, Prometheus data, rings), removed by `remove()`.
package struct TemporaryDirectory {
    package let path: String

    package init(_ prefix: String, in parent: String = "/tmp") throws {
        var template = Array("\(parent)/\(prefix).XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw TestSupportError("mkdtemp \(parent)/\(prefix): \(String(cString: strerror(errno)))")
        }
        path = String(cString: made)
    }

    package func remove() { try? FileManager.default.removeItem(atPath: path) }
}

package struct TestSupportError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

// MARK: - Executables of the package

/// The package's root, found from this file's path (Tests/RingsideTestSupport/TestSupport.swift).
package let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

/// The path of an executable built beside the test bundle (`swift test` builds them all).
package func builtExecutable(_ name: String) throws -> String {
    let bundleDirectory = URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        .deletingLastPathComponent()
    let candidate = bundleDirectory.appendingPathComponent(name).path
    guard FileManager.default.isExecutableFile(atPath: candidate) else {
        throw TestSupportError("\(name) is not built at \(candidate); run `swift build` first")
    }
    return candidate
}

/// A child process whose standard output the test reads line by line; killed, if still
/// running, when the test lets go of it.
package final class ChildProcess: @unchecked Sendable {
    private let process: SpawnedProcess
    private let output = Pipe()
    private let errors = Pipe()
    private let input: Pipe?
    private var buffered = Data()
    private var bufferedErrors = Data()

    /// Starts `executable` (a package executable's name or a path) with `arguments`, set up as
    /// `RunningProcess` sets up its process; `withInput` gives it a standard input to `write` to.
    package init(_ executable: String, _ arguments: [String], environment: [String: String] = [:], withInput: Bool = false) throws {
        input = withInput ? Pipe() : nil
        process = try startProcess(
            executable, arguments, environment: environment,
            standardInput: input.map { .descriptor($0.fileHandleForReading.fileDescriptor) } ?? .inherited,
            standardOutput: .descriptor(output.fileHandleForWriting.fileDescriptor),
            standardError: .descriptor(errors.fileHandleForWriting.fileDescriptor))
        // The child has its copies: closing ours lets the reads see its end of file.
        try? input?.fileHandleForReading.close()
        try? output.fileHandleForWriting.close()
        try? errors.fileHandleForWriting.close()
    }

    deinit { process.killAndReap() }

    package var pid: Int32 { process.pid }

    /// Writes to its standard input (started `withInput`); `closeInput` ends it.
    package func write(_ text: String) { input?.fileHandleForWriting.write(Data(text.utf8)) }
    package func closeInput() { try? input?.fileHandleForWriting.close() }

    /// The next line of standard output, or nil at end of file.
    package func readLine() -> String? {
        Self.readLine(from: output.fileHandleForReading, buffer: &buffered)
    }

    /// The next line of standard error, or nil at end of file.
    package func readErrorLine() -> String? {
        Self.readLine(from: errors.fileHandleForReading, buffer: &bufferedErrors)
    }

    /// Reads standard error until a line contains `text`; returns that line, or nil at end of file.
    package func waitForErrorLine(containing text: String) -> String? {
        while let line = readErrorLine() {
            if line.contains(text) { return line }
        }
        return nil
    }

    private static func readLine(from handle: FileHandle, buffer: inout Data) -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let chunk = handle.availableData
            if chunk.isEmpty {
                guard !buffer.isEmpty else { return nil }
                defer { buffer.removeAll() }
                return String(decoding: buffer, as: UTF8.self)
            }
            buffer.append(chunk)
        }
    }

    /// Sends `signal` to the process.
    package func send(_ signal: Int32) {
        process.send(signal)
    }

    /// Waits for the process to exit; returns its status and what it wrote to standard error.
    @discardableResult
    package func waitForExit() -> (status: Int32, standardError: String) {
        let errorText = String(decoding: bufferedErrors + errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        bufferedErrors.removeAll()
        let status = process.waitUntilExit()
        return (status ?? process.terminatingSignal ?? -1, errorText)
    }

    /// Kills the process with SIGKILL and waits for it.
    package func kill() {
        process.killAndReap()
    }
}

// MARK: - The test producer

/// The arguments of `ringside-test-producer` in `mode`, writing ring `ring` in `directory`, with
/// `options` after: every one of its modes takes `--dir` and `--ring` first.
private func testProducerArguments(_ mode: String, ring: String, in directory: RingDirectory, _ options: [String]) -> [String] {
    [mode, "--dir", directory.path, "--ring", ring] + options
}

extension ChildProcess {
    /// `ringside-test-producer` (Tests/ringside-test-producer) in `mode`, writing ring `ring` in
    /// `directory`, with `options` after.
    package convenience init(
        testProducer mode: String, ring: String, in directory: RingDirectory, _ options: [String] = [],
        environment: [String: String] = [:], withInput: Bool = false
    ) throws {
        try self.init(
            "ringside-test-producer", testProducerArguments(mode, ring: ring, in: directory, options), environment: environment,
            withInput: withInput)
    }
}

/// `ringside-test-producer` in `mode`, writing ring `ring` in `directory`, run to its end.
package func runTestProducer(_ mode: String, ring: String, in directory: RingDirectory, _ options: [String] = []) throws -> ProcessRun {
    try runProcess("ringside-test-producer", testProducerArguments(mode, ring: ring, in: directory, options))
}

// MARK: - HTTP

/// A plain HTTP/1.1 GET to 127.0.0.1:`port` over a connection of its own; returns the status code
/// and the body (chunks joined). Throws if the connection fails or the response is not HTTP.
package func httpGet(port: Int, path: String, timeoutSeconds: Int = 5) throws -> (status: Int, body: String) {
    let response = try httpGetWithHeaders(port: port, path: path, timeoutSeconds: timeoutSeconds)
    return (response.status, response.text)
}

/// `httpGet`, with the response's headers too.
package func httpGetWithHeaders(port: Int, path: String, timeoutSeconds: Int = 5) throws -> RawClient.Response {
    let client = try RawClient(port: port, timeoutSeconds: timeoutSeconds)
    try client.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    return try client.readResponse()
}

/// `text` parsed as one JSON object (a page, a log line, a tool's output); throws if it is not one.
package func jsonObject(_ text: String) throws -> [String: Any] {
    guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
        throw TestSupportError("not a JSON object: \(text.prefix(200))")
    }
    return object
}

/// Whether the long forms of the load and abuse tests were asked for (`RINGSIDE_LONG_TESTS=1`).
package var longTests: Bool { ProcessInfo.processInfo.environment["RINGSIDE_LONG_TESTS"] == "1" }

/// A tool the tests need from the system, such as `promtool`: its path, or nil when it is
/// missing outside CI (the caller skips with a message). Under CI (`CI` set) a missing tool is
/// an error, so CI cannot pass by skipping.
package func requiredSystemTool(_ name: String) throws -> String? {
    if let path = systemTool(name) { return path }
    let package = debianPackages[name] ?? name
    if ProcessInfo.processInfo.environment["CI"] != nil {
        throw TestSupportError("\(name) is not installed; .ci/run installs it (Debian package \(package))")
    }
    print("skipping: \(name) is not installed (apt-get install \(package)); CI runs this test")
    return nil
}

/// Whether this process runs as root, as a test that acts as another user (chown, `setpriv`)
/// needs: false, after saying why the test skips, when it does not. Under CI (`CI` set) not being
/// root is an error, so CI cannot pass by skipping.
package func requiredRoot(_ purpose: String) throws -> Bool {
    if geteuid() == 0 { return true }
    let problem = "\(purpose) needs root (this test runs as uid \(geteuid()))"
    if ProcessInfo.processInfo.environment["CI"] != nil { throw TestSupportError(problem + "; CI must run it as root") }
    print("skipping: \(problem)")
    return false
}

/// The last CPU this process may run on (`Cpus_allowed_list` of its status, such as `0-1` or
/// `0,2-3`): where a test pins the threads it wants on one CPU.
package func lastAllowedCPU() throws -> Int {
    let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Cpus_allowed_list:") }),
        let list = line.split(separator: ":").last?.trimmingCharacters(in: .whitespaces),
        let last = list.split(separator: ",").last?.split(separator: "-").last, let cpu = Int(last)
    else { throw TestSupportError("no Cpus_allowed_list in /proc/self/status") }
    return cpu
}

/// Names the calling thread for the kernel (its comm, which a producer writes into the lane the
/// thread claims). Foundation's `Thread.name` may not reach the kernel: a thread that runs
/// before its creator records it is left unnamed.
package func nameCurrentThread(_ name: String) throws {
    guard let comm = FileHandle(forWritingAtPath: "/proc/thread-self/comm") else {
        throw TestSupportError("cannot open /proc/thread-self/comm")
    }
    defer { try? comm.close() }
    try comm.write(contentsOf: Data(name.utf8))
}

/// The path of `name` on `PATH`, or nil.
package func systemTool(_ name: String) -> String? {
    (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        .map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
}

/// The Debian package of each tool the tests ask for, where its name differs.
private let debianPackages = [
    "promtool": "prometheus", "amtool": "prometheus-alertmanager", "systemd-nspawn": "systemd-container", "cc": "gcc", "c++": "g++",
    "clang++": "clang", "setpriv": "util-linux",
    "perl": "perl-base", "htpasswd": "apache2-utils",
]

// MARK: - Seeded randomness and file surgery

/// A small seeded generator (SplitMix64), so random tests repeat exactly.
package struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    package init(seed: UInt64) { state = seed }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Overwrites bytes of a ring file at `offset` (the tests' way of corrupting one).
package func patch<T>(_ path: String, at offset: Int, with value: T) {
    let fd = open(path, O_WRONLY)
    precondition(fd >= 0, "open \(path) for patching")
    defer { close(fd) }
    var copy = value
    let written = withUnsafeBytes(of: &copy) { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
    precondition(written == MemoryLayout<T>.size, "patch \(path)")
}

/// The offset of a header field, from the C layout.
package func headerOffset<T>(_ field: KeyPath<rs_header, T>) -> Int { MemoryLayout<rs_header>.offset(of: field)! }

/// The offset of a field in a lane's 256-byte header, from the lane's start.
/// The offset of a field of a record, from the record's start.
package func recordOffset<T>(_ field: KeyPath<rs_record, T>) -> Int { MemoryLayout<rs_record>.offset(of: field)! }

package func laneHeaderOffset<T>(_ field: KeyPath<rs_lane_header, T>) -> Int { MemoryLayout<rs_lane_header>.offset(of: field)! }

/// The offset of a field of a registry entry, from the entry's start.
package func entryOffset<T>(_ field: KeyPath<rs_registry_entry, T>) -> Int { MemoryLayout<rs_registry_entry>.offset(of: field)! }

/// The offset of a field of a metric's shared cell, from the cell's start.
package func metricCellOffset<T>(_ field: KeyPath<rs_metric_cell, T>) -> Int { MemoryLayout<rs_metric_cell>.offset(of: field)! }

/// The header a file holds now, read with pread (the tests' way of finding where things are).
package func fileHeader(_ path: String) -> rs_header {
    var header = rs_header()
    let fd = open(path, O_RDONLY)
    precondition(fd >= 0, "open \(path)")
    defer { close(fd) }
    let count = withUnsafeMutableBytes(of: &header) { pread(fd, $0.baseAddress, $0.count, 0) }
    precondition(count == MemoryLayout<rs_header>.size, "read the header of \(path)")
    return header
}

/// Where things lie in a bot file, from the format's own structs and geometry (`ringside.h`):
/// the tests patch files at these offsets, never at literal ones.
package struct BotFileLayout {
    package let capacity: Int
    package let registryCapacity: Int
    package let geometry: rs_geometry

    package init(capacity: Int, registryCapacity: Int = Int(RS_DEFAULT_REGISTRY_CAPACITY)) {
        self.capacity = capacity
        self.registryCapacity = registryCapacity
        geometry = rs_geometry_of(UInt32(capacity.trailingZeroBitCount), UInt32(registryCapacity))
    }

    package var registryOffset: Int { Int(geometry.registry_offset) }
    package var lanesOffset: Int { Int(geometry.lanes_offset) }
    package var laneSize: Int { Int(geometry.lane_size) }

    /// The file's size with `lanes` lanes.
    package func fileSize(lanes: Int) -> Int { lanesOffset + lanes * laneSize }

    /// A field of registry entry `index`.
    package func registry<T>(_ index: Int, _ field: KeyPath<rs_registry_entry, T>) -> Int {
        registryOffset + index * Int(RS_REGISTRY_ENTRY_SIZE) + entryOffset(field)
    }

    /// A field of lane `lane`'s header.
    package func lane<T>(_ lane: Int, _ field: KeyPath<rs_lane_header, T>) -> Int {
        lanesOffset + lane * laneSize + laneHeaderOffset(field)
    }

    /// Where lane `lane`'s records start.
    package func records(lane: Int) -> Int { lanesOffset + lane * laneSize + Int(geometry.lane_records_offset) }

    /// A field of the record in slot `slot` of lane `lane`.
    package func record<T>(lane: Int = 0, _ slot: Int, _ field: KeyPath<rs_record, T>) -> Int {
        records(lane: lane) + slot * Int(RS_RECORD_SIZE) + recordOffset(field)
    }
}

/// Drains everything in every lane of `consumer`; returns the records with the lane and cursor
/// they were read at.
package func drainAll(_ consumer: RingConsumer) throws -> [PeekedRecord] {
    var drained: [PeekedRecord] = []
    try consumer.drain(limitPerLane: .max) { records, first, lane in
        for (offset, record) in records.enumerated() {
            drained.append(PeekedRecord(lane: lane, cursor: first + UInt64(offset), record: record, consumed: true))
        }
    }
    return drained
}

/// Drains the ring `name` in `directory` as a collector would; returns its records.
package func drainAll(_ directory: RingDirectory, _ name: String) throws -> [RingRecord] {
    try drainAll(RingConsumer(name, directory: directory)).map(\.record)
}

/// Polls `body` every 10 ms (`every`) for up to `seconds` (at least once); returns its first non-nil answer.
///
/// `every`: the pause between tries. A try that renders a large page (thousands of rings) costs
/// the collector's threads, on two cores, what its drain needs: such tests ask less often.
package func eventually<T>(seconds: Double = 10, every pause: Double = 0.01, _ body: () throws -> T?) rethrows -> T? {
    let deadline = Date().addingTimeInterval(seconds)
    repeat {
        if let value = try body() { return value }
        usleep(UInt32(pause * 1_000_000))
    } while Date() < deadline
    return nil
}

/// Polls `condition` as `eventually` does; returns whether it came true within `seconds`.
package func eventually(seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    try eventually(seconds: seconds) { try condition() ? true : nil } ?? false
}

/// Starts the real `ringside-collector` on an ephemeral loopback port (unless `listen` names
/// another address); returns it and the port from its "listening on" log line (http or https).
///
/// With `openFileLimit`, it runs under `prlimit --nofile=N:N` (util-linux), which sets the limit
/// and then executes the collector in its own process, so `pid` is the collector's.
package func startCollector(
    _ arguments: [String], listen: String = "127.0.0.1:0",
    openFileLimit: Int? = nil
) throws -> (ChildProcess, Int) {
    let collector =
        try openFileLimit.map { limit in
            guard let prlimit = systemTool("prlimit") else { throw TestSupportError("prlimit (util-linux) is not installed") }
            return try ChildProcess(
                prlimit,
                [
                    "--nofile=\(limit):\(limit)", try builtExecutable("ringside-collector"),
                    "--listen", listen,
                ] + arguments)
        } ?? ChildProcess("ringside-collector", ["--listen", listen] + arguments)
    // http:// or, with a web configuration's TLS, https://
    guard let line = collector.waitForErrorLine(containing: "listening on http"),
        let address = line.components(separatedBy: "://").last?.split(separator: " ").first,
        let port = address.split(separator: ":").last.flatMap({ Int($0) })
    else {
        throw TestSupportError("the collector did not start: \(collector.waitForExit().standardError)")
    }
    return (collector, port)
}

extension CollectorOptions {
    /// The defaults, over `directory`: what a test's collector starts from.
    package init(directory: RingDirectory) {
        self.init()
        self.directory = directory
    }
}

/// A collector over `directory` with the given SLO rules, windows and poll interval (the
/// options' defaults where nil), logging into `captured`; not started.
package func makeCollector(
    _ directory: RingDirectory, slo: [String] = [], windows: [UInt64]? = nil, pollNanos: UInt64? = nil,
    captured: CapturedLog
) throws -> Collector {
    var options = CollectorOptions(directory: directory)
    options.sloRules = try slo.map { try SLORule(parsing: $0) }
    if let windows { options.windowNanos = windows }
    if let pollNanos { options.pollNanos = pollNanos }
    return try Collector(options: options, log: captured.log)
}

/// Log lines a collector wrote, kept for the test to read.
package final class CapturedLog: Sendable {
    private let lines = Locked<[String]>([])

    package init() {}

    package var log: CollectorLog { CollectorLog { [self] line in lines.withLock { $0.append(line) } } }
    package var all: [String] { lines.withLock { $0 } }
    /// Whether one line holds every one of `texts`.
    package func contains(_ texts: String...) -> Bool { all.contains { line in texts.allSatisfy { line.contains($0) } } }
}

/// The kernel thread id of the calling thread (`/proc/thread-self` links to `PID/task/TID`;
/// Glibc's `gettid` is not visible to Swift without `_GNU_SOURCE`).
package func currentThreadID() -> Int32 {
    var buffer = [CChar](repeating: 0, count: 128)
    let count = readlink("/proc/thread-self", &buffer, buffer.count - 1)
    precondition(count > 0, "readlink /proc/thread-self")
    let link = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return Int32(link.split(separator: "/").last ?? "") ?? 0
}

/// A bot's histograms drained as the collector drains them (SAMPLING in ringside.h): each record
/// counts once; the calls its lanes gathered are counted from their gather cells, with their exact
/// sum and largest, and placed among the records that stand for them (`GatherPlacement`). So a
/// test or a benchmark reads what a collector would, without one.
package final class ExactDrain {
    package let consumer: RingConsumer
    /// Each histogram's figures, by registry index.
    package private(set) var histograms: [Int: Histogram] = [:]
    /// Every record drained, with its lane and cursor.
    package private(set) var records: [PeekedRecord] = []
    /// Calls gathered, by registry index.
    package private(set) var gathered: [Int: UInt64] = [:]
    private var placement = GatherPlacement()

    package init(_ consumer: RingConsumer) { self.consumer = consumer }

    /// Drains at most `limitPerLane` records a lane; returns how many.
    @discardableResult
    package func drain(limitPerLane: Int = .max) throws -> Int {
        let count = try consumer.drain(limitPerLane: limitPerLane) { batch, first, lane in
            for (offset, record) in batch.enumerated() {
                records.append(PeekedRecord(lane: lane, cursor: first + UInt64(offset), record: record, consumed: true))
                guard record.kind == UInt8(RS_KIND_HISTOGRAM.rawValue) else { continue }
                let metric = Int(record.metric)
                histograms[metric, default: Histogram()].record(record.value)
                let earlier = UnsafeBufferPointer(rebasing: batch[..<offset])
                placement.placeBeside(record, after: earlier, firstCursor: first, lane: lane, timeNanos: record.timestamp_ns) {
                    value, calls in
                    histograms[metric]?.place(value, count: calls)
                }
            }
        }
        consumer.takeGathered { metric, lane, calls in
            histograms[metric, default: Histogram()].addSum(calls.sum, raisingMaxTo: calls.max)
            gathered[metric, default: 0] += calls.calls
            placement.take(calls, metric: metric, lane: lane) { value, _, placed in histograms[metric]?.place(value, count: placed) }
        }
        placement.placeUnclaimed(isDrained: consumer.isDrained(lane:)) { metric, value, calls in
            histograms[metric, default: Histogram()].place(value, count: calls)
        }
        return count
    }

    /// Histogram `metric`'s figures so far (empty when none arrived).
    package func histogram(_ metric: Int) -> Histogram { histograms[metric] ?? Histogram() }

    /// Records drained that were written while their lane sampled (k > 0), of any metric or of `metric`.
    package func weightedRecords(metric: UInt32? = nil) -> Int {
        var count = 0
        for entry in records where entry.record.weightLog2 > 0 && (metric == nil || entry.record.metric == metric) { count += 1 }
        return count
    }

    /// Records drained of `metric`.
    package func records(metric: UInt32) -> Int {
        var count = 0
        for entry in records where entry.record.metric == metric { count += 1 }
        return count
    }
}

/// Runs `body` with a fresh ring directory (see `withRingDirectory`) and bot `name` attached in it
/// with `options`.
@discardableResult
package func withBot<Result>(
    _ name: String, options: Bot.Options = Bot.Options(), _ body: (RingDirectory, Bot) throws -> Result
) throws -> Result {
    try withRingDirectory { directory in
        try body(directory, try Bot.attach(name, directory: directory.path, options: options))
    }
}
