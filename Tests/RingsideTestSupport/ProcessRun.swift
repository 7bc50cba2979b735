import RingsideSystem
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import Synchronization

/// How a process ended and what it printed.
package struct ProcessRun: Sendable {
    /// The exit status; nil when it died of a signal or was killed at the deadline.
    package let status: Int32?
    /// Standard output (with standard error too, for a process run `mergingErrors`).
    package let output: String
    package let errors: String

    package init(status: Int32?, output: String, errors: String) {
        (self.status, self.output, self.errors) = (status, output, errors)
    }

    /// False when the process died of a signal (a crash) or was killed at the deadline.
    package var exitedNormally: Bool { status != nil }
    package var outputLines: [String] { output.split(separator: "\n").map(String.init) }
    package var errorLines: [String] { errors.split(separator: "\n").map(String.init) }

    /// Standard output parsed as one JSON object.
    package func json() throws -> [String: Any] { try jsonObject(output) }
}

/// Starts a package executable (by name) or a program (by path), for `RunningProcess` and
/// `ChildProcess`. `RINGSIDE_DIR` and `RINGSIDE_DISABLED` are removed from its environment (a
/// test names its ring directory), then `environment` is added.
package func startProcess(
    _ executable: String, _ arguments: [String], environment: [String: String],
    standardInput: SpawnedProcess.Stream, standardOutput: SpawnedProcess.Stream, standardError: SpawnedProcess.Stream
) throws -> SpawnedProcess {
    var variables = ProcessInfo.processInfo.environment
    variables.removeValue(forKey: RingDirectory.environmentVariable)
    variables.removeValue(forKey: Bot.disableEnvironmentVariable)
    return try SpawnedProcess(
        path: executable.hasPrefix("/") ? executable : try builtExecutable(executable), arguments: arguments,
        environment: variables.merging(environment) { _, new in new },
        standardInput: standardInput, standardOutput: standardOutput, standardError: standardError)
}

/// A process run to completion, with pipes to its standard input, output and error; killed, if
/// still running, when released.
package final class RunningProcess: @unchecked Sendable {
    // @unchecked: Pipe is not Sendable; the readers' results are behind mutexes.
    private let process: SpawnedProcess
    private let input = Pipe()
    private let group = DispatchGroup()
    private let output = Locked(Data())
    private let errors = Locked(Data())

    /// - Parameter mergingErrors: standard error goes to the same pipe as standard output, in order.
    package init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        mergingErrors: Bool = false
    ) throws {
        let outputPipe = Pipe(), errorPipe = mergingErrors ? nil : Pipe()
        process = try startProcess(
            executable, arguments, environment: environment,
            standardInput: .descriptor(input.fileHandleForReading.fileDescriptor),
            standardOutput: .descriptor(outputPipe.fileHandleForWriting.fileDescriptor),
            standardError: .descriptor((errorPipe ?? outputPipe).fileHandleForWriting.fileDescriptor))
        // The child has its copies: closing ours lets the readers see its end of file.
        try? input.fileHandleForReading.close()
        try? outputPipe.fileHandleForWriting.close()
        try? errorPipe?.fileHandleForWriting.close()
        // Read both pipes as the process writes, so a large output never blocks it.
        read(outputPipe, isErrors: false)
        if let errorPipe { read(errorPipe, isErrors: true) }
    }

    private func read(_ pipe: Pipe, isErrors: Bool) {
        group.enter()
        DispatchQueue.global().async { [self] in
            let all = pipe.fileHandleForReading.readDataToEndOfFile()
            if isErrors { errors.withLock { $0 = all } } else { output.withLock { $0 = all } }
            group.leave()
        }
    }

    deinit { process.killAndReap() }

    package var pid: Int32 { process.pid }
    package var isRunning: Bool { process.isRunning }

    /// Sends `signal` to the process.
    package func send(_ signal: Int32) { process.send(signal) }

    package func write(_ text: String) { input.fileHandleForWriting.write(Data(text.utf8)) }
    package func closeInput() { try? input.fileHandleForWriting.close() }

    /// Closes standard input, waits for the exit (killing the process at `timeoutSeconds`), and
    /// returns what it printed.
    package func finish(timeoutSeconds: Double = 60) -> ProcessRun {
        closeInput()
        var killed = false
        if group.wait(timeout: .now() + timeoutSeconds) == .timedOut {
            process.send(SIGKILL)
            killed = true
            group.wait()
        }
        let exitStatus = process.waitUntilExit()
        let status = killed ? nil : exitStatus
        return ProcessRun(
            status: status, output: String(decoding: output.withLock { $0 }, as: UTF8.self),
            errors: String(decoding: errors.withLock { $0 }, as: UTF8.self))
    }
}

/// Runs a package executable (by name) or a program (by path) to completion with `stdin`,
/// killing it at `timeoutSeconds`.
@discardableResult
package func runProcess(
    _ executable: String, _ arguments: [String], stdin: String = "", environment: [String: String] = [:],
    mergingErrors: Bool = false, timeoutSeconds: Double = 60
) throws -> ProcessRun {
    let process = try RunningProcess(executable, arguments, environment: environment, mergingErrors: mergingErrors)
    if !stdin.isEmpty { process.write(stdin) }
    return process.finish(timeoutSeconds: timeoutSeconds)
}

/// A process's resident set in KiB, in all (VmRSS) and anonymous (RssAnon), from /proc; nil once it is gone.
package func residentKiB(of pid: Int32) -> (total: Int, anonymous: Int)? {
    guard let total = statusKiB(of: pid, "VmRSS"), let anonymous = statusKiB(of: pid, "RssAnon") else { return nil }
    return (total, anonymous)
}

/// A field of /proc/PID/status in KiB (VmHWM, RssShmem, RssFile ...), nil once the process is gone.
package func statusKiB(of pid: Int32, _ name: String) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") })
    else { return nil }
    return line.split(separator: " ").compactMap { Int($0) }.first
}

/// A process's open descriptors and memory mappings, from /proc (-1 once it is gone).
package func openDescriptorCount(of pid: Int32) -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
}

package func mappingCount(of pid: Int32) -> Int {
    guard let maps = try? String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8) else { return -1 }
    return maps.split(separator: "\n").count
}

/// How long a process's thread named `name` (its comm) has waited for a CPU while it could run, in
/// nanoseconds (schedstat's second field): nil once it is gone. A test that finds a collector
/// thread late asks this whether the machine, rather than the collector, kept it waiting.
package func runQueueWaitNanos(of pid: Int32, thread name: String) -> UInt64? {
    let base = "/proc/\(pid)/task"
    for task in (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? [] {
        guard let comm = try? String(contentsOfFile: "\(base)/\(task)/comm", encoding: .utf8),
            comm.trimmingCharacters(in: .whitespacesAndNewlines) == name,
            let stat = try? String(contentsOfFile: "\(base)/\(task)/schedstat", encoding: .utf8)
        else { continue }
        let fields = stat.split(separator: " ")
        return fields.count >= 2 ? UInt64(fields[1]) : nil
    }
    return nil
}
