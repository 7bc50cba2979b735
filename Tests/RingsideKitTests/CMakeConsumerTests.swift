import CRingside
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

/// How a C or C++ project takes Ringside from tools/c.
enum RingsideConsumer: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case addSubdirectory = "add_subdirectory"
    case findPackage = "find_package"
    case pkgConfig = "pkg-config"

    var testDescription: String { rawValue }
}

@Suite("tools/c: a C++ project takes Ringside with add_subdirectory, find_package or pkg-config")
struct CMakeConsumerTests {
    @Test(
        "tools/c/example, built each way, writes exactly its records, counts and gauge; a parent installs nothing of Ringside unless asked",
        arguments: RingsideConsumer.allCases)
    func exampleBot(consumer: RingsideConsumer) throws {
        // make: cmake's default generator (only recommended by Debian's cmake package).
        guard let cmake = try requiredSystemTool("cmake"), try requiredSystemTool("make") != nil,
            try requiredSystemTool("cc") != nil, let cxx = try requiredSystemTool("c++")
        else { return }
        let build = try TemporaryDirectory("ringside-cmake")
        defer { build.remove() }
        let example = kitFile("tools/c/example")
        let exampleBuild = build.path + "/example"
        let executable: String

        switch consumer {
        case .addSubdirectory:
            try succeed(cmake, ["-S", example, "-B", exampleBuild, "-DRINGSIDE_FROM_SOURCE=ON"])
            try succeed(cmake, ["--build", exampleBuild, "-j", "2"])
            // The parent has no install rules of its own, and Ringside adds none unless asked.
            try succeed(cmake, ["--install", exampleBuild, "--prefix", build.path + "/parent-prefix"])
            #expect(
                !FileManager.default.fileExists(atPath: build.path + "/parent-prefix/include/ringside.h"),
                "a subproject installs nothing unless RINGSIDE_INSTALL=ON")
            executable = exampleBuild + "/example"
        case .findPackage:
            let prefix = try installRingside(cmake, into: build)
            try succeed(cmake, ["-S", example, "-B", exampleBuild, "-DCMAKE_PREFIX_PATH=" + prefix])
            try succeed(cmake, ["--build", exampleBuild, "-j", "2"])
            // The package found is the one just installed, not another on the machine.
            let cache = try String(contentsOfFile: exampleBuild + "/CMakeCache.txt", encoding: .utf8)
            #expect(cache.contains("Ringside_DIR:PATH=\(prefix)/lib"), "Ringside_DIR is not under \(prefix)")
            executable = exampleBuild + "/example"
        case .pkgConfig:
            guard let pkgConfig = try requiredSystemTool("pkg-config") else { return }
            let prefix = try installRingside(cmake, into: build)
            // lib64 where GNUInstallDirs chooses it (Fedora); lib on Debian.
            let environment = ["PKG_CONFIG_PATH": "\(prefix)/lib/pkgconfig:\(prefix)/lib64/pkgconfig"]
            let version = try succeed(pkgConfig, ["--modversion", "ringside"], environment: environment)
            #expect(version.trimmingCharacters(in: .whitespacesAndNewlines) == "0.4.0")
            let flags = try succeed(pkgConfig, ["--cflags", "--libs", "ringside"], environment: environment)
            #expect(
                flags.contains("-I\(prefix)/") && flags.contains("-lringside_producer") && flags.contains("-pthread"),
                "\(flags)")
            executable = build.path + "/example"
            try succeed(
                cxx,
                ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", example + "/main.cpp"]
                    + flags.split(whereSeparator: \.isWhitespace).map(String.init) + ["-o", executable])
        }

        try withRingDirectory { directory in
            let count: UInt64 = 5_000
            let bot = "cxx-" + consumer.rawValue
            let result = try runProcess(executable, [bot, directory.path, String(count)], mergingErrors: true)
            #expect(result.status == 0 && result.output == "wrote \(2 * count) values\n", "\(result.output)")

            let (metrics, lanes, cells) = try drainDecoded(bot, directory: directory)
            #expect(
                metrics == [
                    MetricDescriptor(
                        index: 0, name: "example_latency", kind: .histogram, unit: .microseconds,
                        encodedLabels: "venue=XNAS", help: "order round trip", sampleEvery: 1),
                    MetricDescriptor(
                        index: 1, name: "example_orders", kind: .counter, unit: .none, encodedLabels: "", help: "",
                        sampleEvery: 1),
                    MetricDescriptor(
                        index: 2, name: "example_exposure", kind: .gauge, unit: .none, encodedLabels: "", help: "",
                        sampleEvery: 1),
                ])
            // Each thread wrote 1...COUNT then its span into its lane (a thread that started after
            // the other ended may have taken its retired lane over: two runs, one after the other).
            let values = (1...count).map { DecodedRecord(metric: 0, kind: RS_KIND_HISTOGRAM.rawValue8, value: $0) }
            var runs = 0
            for (lane, records) in lanes.sorted(by: { $0.key < $1.key }) {
                var latencies = records.filter { $0.metric == 0 }[...]
                while !latencies.isEmpty {
                    let chunk = latencies.prefix(values.count + 1)
                    latencies = latencies.dropFirst(chunk.count)
                    runs += 1
                    expectSame(Array(chunk.dropLast()), values)
                    let span = chunk.last!
                    // A 1 ms sleep in microseconds: at least 1,000, far below 1,000,000 (nanoseconds).
                    #expect(
                        span.kind == RS_KIND_HISTOGRAM.rawValue8 && span.flags == UInt8(RS_FLAG_SPAN)
                            && span.value >= 1_000 && span.value < 1_000_000, "lane \(lane)'s span: \(span)")
                }
            }
            #expect(runs == 2, "two threads' runs of 1...\(count) and a span")
            let all = lanes.values.flatMap { $0 }
            #expect(!all.contains { $0.metric == 1 }, "counters write no records")
            #expect(
                all.filter { $0.metric == 2 } == [
                    DecodedRecord(
                        metric: 2, kind: RS_KIND_GAUGE.rawValue8,
                        value: (Double(count) * 2.5).bitPattern)
                ])
            #expect(cells["example_orders"]?.total == 2 * count)
            #expect(cells["example_exposure"]?.lastValue == Double(count) * 2.5)
            #expect(cells["example_latency"]?.dropped == 0)
            let status = try RingInspector(bot, directory: directory).status()
            #expect(status.producerAttaches == 1 && !status.producerAlive && status.dropped == 0)
        }
    }
}

/// Configures, builds and installs tools/c on its own into `build`/prefix (with `--prefix` at
/// install time, so the CMake config and ringside.pc must find their prefix from where they are).
func installRingside(_ cmake: String, into build: TemporaryDirectory) throws -> String {
    let libraryBuild = build.path + "/ringside", prefix = build.path + "/prefix"
    try succeed(cmake, ["-S", kitFile("tools/c"), "-B", libraryBuild])
    try succeed(cmake, ["--build", libraryBuild, "-j", "2"])
    try succeed(cmake, ["--install", libraryBuild, "--prefix", prefix])
    return prefix
}

/// Runs a build tool that must succeed; returns its output.
@discardableResult
private func succeed(
    _ tool: String, _ arguments: [String], environment: [String: String] = [:],
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> String {
    let result = try runProcess(tool, arguments, environment: environment, mergingErrors: true, timeoutSeconds: 300)
    try #require(
        result.status == 0, "\(tool) \(arguments.joined(separator: " ")) failed:\n\(result.output)",
        sourceLocation: sourceLocation)
    return result.output
}
