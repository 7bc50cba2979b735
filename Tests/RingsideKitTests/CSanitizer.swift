import Foundation
import RingsideTestSupport
import Testing

/// The C module built under a sanitizer by the Swift toolchain's clang (which ships their
/// runtimes), with a program of Tests/: AddressSanitizer with UndefinedBehaviorSanitizer, or
/// ThreadSanitizer. A report makes the program exit non-zero, the report on standard error
/// (AddressSanitizer 1, its leak check 23, UndefinedBehaviorSanitizer 1 with recovery off,
/// ThreadSanitizer 66 at exit), so a test that expects the program's status 0 fails on any.
enum CSanitizer: String, CaseIterable {
    case addressUndefined = "c-asan-ubsan"
    case thread = "c-tsan"

    var flags: [String] {
        switch self {
        case .addressUndefined: ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
        case .thread: ["-fsanitize=thread"]
        }
    }

    /// Builds `sources` with the C module into `executable` (nil, after saying why, without clang).
    func build(_ sources: [String], into executable: String) throws -> String? {
        guard let clang = try requiredClang("clang") else { return nil }
        let library = [kitFile("Sources/CRingside/ringside_producer.c"), kitFile("Sources/CRingside/ringside.c")]
        // The Swift toolchain's ThreadSanitizer runtime intercepts libdispatch too: it links the
        // toolchain's libdispatch and BlocksRuntime (ToolchainDir/usr/lib/swift/linux).
        let swiftLibraries = URL(fileURLWithPath: clang).deletingLastPathComponent().deletingLastPathComponent().path + "/lib/swift/linux"
        let runtime = self == .thread ? ["-L", swiftLibraries, "-ldispatch", "-lBlocksRuntime", "-Wl,-rpath," + swiftLibraries] : []
        let compiled = try runProcess(
            clang,
            ["-std=gnu11", "-O1", "-g", "-fno-omit-frame-pointer", "-fuse-ld=lld", "-Wall", "-Wextra", "-Werror", "-pthread"] + flags
                + ["-I", kitFile("Sources/CRingside/include")] + sources + library + runtime + ["-o", executable], mergingErrors: true,
            timeoutSeconds: 300)
        try #require(compiled.status == 0, "clang \(flags.joined(separator: " ")) failed:\n\(compiled.output)")
        return executable
    }

}
