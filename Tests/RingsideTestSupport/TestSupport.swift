import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside

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

/// A fresh directory `/dev/shm/ringside-test.XXXXXX`.
package struct TemporaryRingDirectory {
    package let path: String
    package var ringDirectory: RingDirectory { RingDirectory(path) }

    package init() throws {
        var template = Array("/dev/shm/ringside-test.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw TestSupportError("mkdtemp under /dev/shm failed: \(String(cString: strerror(errno)))")
        }
        path = String(cString: made)
    }

    package func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

package struct TestSupportError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

// MARK: - Executables of the package

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
    private let process = Process()
    private let output = Pipe()
    private let errors = Pipe()
    private var buffered = Data()

    /// Starts `executable` (a package executable's name or a path) with `arguments`.
    package init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws {
        process.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : try builtExecutable(executable))
        process.arguments = arguments
        if let environment {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        process.standardOutput = output
        process.standardError = errors
        try process.run()
    }

    deinit {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    package var pid: Int32 { process.processIdentifier }

    /// The next line of standard output, or nil at end of file.
    package func readLine() -> String? {
        while true {
            if let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffered[buffered.startIndex..<newline], as: UTF8.self)
                buffered.removeSubrange(buffered.startIndex...newline)
                return line
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty {
                guard !buffered.isEmpty else { return nil }
                defer { buffered.removeAll() }
                return String(decoding: buffered, as: UTF8.self)
            }
            buffered.append(chunk)
        }
    }

    /// Waits for the process to exit; returns its status and what it wrote to standard error.
    @discardableResult
    package func waitForExit() -> (status: Int32, standardError: String) {
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, errorText)
    }

    /// Kills the process with SIGKILL and waits for it.
    package func kill() {
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
