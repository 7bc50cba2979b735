import Foundation
#if canImport(Glibc)
import Glibc
#endif
import RingsideTestSupport
import Testing

/// A directory of C or C++ files and how they are built: the include directories (from the
/// package root), and the files it must hold, so that a move or a rename cannot leave the check
/// with nothing to build.
struct CSourceDirectory: Sendable {
    let path: String
    let expected: Set<String>
    var includes = ["Sources/CRingside/include"]
    /// Its .c files are bots' code, which C++ bots compile too: they are also built as C++.
    var alsoCxx = false
    /// Its .c files include Python.h (the Python package's extension).
    var python = false
}

/// The files of the kinds these tests build.
let cFamilyExtensions: Set<String> = ["c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx"]
let cxxSourceExtensions: Set<String> = ["cc", "cpp", "cxx"]
let cxxHeaderExtensions: Set<String> = ["hpp", "hh", "hxx"]

/// What the suite builds: every directory of the repository with C or C++ in it.
let cSourceDirectories: [CSourceDirectory] = {
    let bench = ["Benchmarks/CRingsideBench/include", "Sources/CRingside/include"]
    return [
        CSourceDirectory(path: "Sources/CRingside", expected: ["ringside.c", "ringside_producer.c"]),
        CSourceDirectory(path: "Sources/CRingside/include", expected: ["ringside.h", "ringside_producer.h"]),
        CSourceDirectory(path: "Sources/CZlib", expected: ["shim.h"], includes: []),
        CSourceDirectory(path: "Sources/COpenSSL", expected: ["shim.h"], includes: []),
        CSourceDirectory(path: "Sources/CCrypt", expected: ["shim.h"], includes: []),
        CSourceDirectory(path: "Sources/CRingsideSystem", expected: ["ringside_system.c"], includes: ["Sources/CRingsideSystem/include"]),
        CSourceDirectory(path: "Sources/CRingsideSystem/include", expected: ["ringside_system.h"], includes: []),
        CSourceDirectory(path: "Benchmarks/CRingsideBench", expected: ["floor.c"], includes: bench),
        CSourceDirectory(path: "Benchmarks/CRingsideBench/include", expected: ["CRingsideBench.h"], includes: bench),
        CSourceDirectory(
            path: "Tests/CAllocationCounter", expected: ["allocation_counter.c"], includes: ["Tests/CAllocationCounter/include"]),
        CSourceDirectory(path: "Tests/CAllocationCounter/include", expected: ["allocation_counter.h"], includes: []),
        CSourceDirectory(path: "Tests/CAbuseWatch", expected: ["abuse_watch.c"], includes: ["Tests/CAbuseWatch/include"]),
        CSourceDirectory(path: "Tests/CAbuseWatch/include", expected: ["abuse_watch.h"], includes: []),
        CSourceDirectory(path: "Tests/ringside-fuzz", expected: ["main.c"], includes: []),
        CSourceDirectory(
            path: "Tests/fixtures",
            expected: [
                "c_fork_pool.c", "c_merged.c", "c_planted.c", "c_postmortem.c", "c_producer.c", "first_bot.c", "fixture_bot.h",
            ], alsoCxx: true),
        CSourceDirectory(path: "Tests/conformance", expected: ["c_runner.c"]),
        CSourceDirectory(path: "tools/rust/ringside/bench", expected: ["c_loop.c"]),
        CSourceDirectory(path: "tools/python/ringside", expected: ["_ringside.c"], python: true),
        CSourceDirectory(path: "tools/c/example", expected: ["main.cpp"]),
    ]
}()

/// The C and C++ files directly in `directory` (relative to the package root), sorted.
func cFamilyFiles(in directory: String) -> [String] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: kitFile(directory))) ?? []
    return names.filter { cFamilyExtensions.contains(URL(fileURLWithPath: $0).pathExtension) }.sorted()
}

/// Every C or C++ file in the repository, relative to its root. Hidden directories (.build,
/// .git, a virtual environment), symbolic links (tools/python/ringside/_csrc is Sources/CRingside)
/// and build products (cargo's `target`, setuptools' `build` and `dist`) are not walked.
func repositoryCFamilyFiles() -> [String] {
    var found: [String] = []
    func walk(_ relative: String) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: kitFile(relative))) ?? []
        for name in names.sorted() where !name.hasPrefix(".") {
            let path = relative.isEmpty ? name : relative + "/" + name
            var info = stat()
            guard lstat(kitFile(path), &info) == 0 else { continue }
            switch info.st_mode & S_IFMT {
            case S_IFDIR where !["target", "build", "dist"].contains(name): walk(path)
            case S_IFREG where cFamilyExtensions.contains(URL(fileURLWithPath: name).pathExtension): found.append(path)
            default: break
            }
        }
    }
    walk("")
    return found
}

/// The toolchain's `clang` or `clang++`: the one beside the `swift` on PATH (symbolic links
/// resolved; every Swift toolchain has it, and SwiftPM builds CRingside with it), else the one on
/// PATH; nil after saying so when there is none (an error under CI, as for any tool).
func requiredClang(_ name: String) throws -> String? {
    if let swift = systemTool("swift") {
        let sibling = URL(fileURLWithPath: swift).resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: sibling) { return sibling }
    }
    return try requiredSystemTool(name)
}

/// Python's include directory, where Python.h is (python3-dev), for the extension; nil after
/// saying so when there is none (an error under CI, which installs python3-dev).
func requiredPythonIncludeDirectory() throws -> String? {
    guard let python = try requiredSystemTool("python3") else { return nil }
    let asked = try runProcess(python, ["-c", "import sysconfig; print(sysconfig.get_paths()['include'])"])
    let directory = asked.output.trimmingCharacters(in: .whitespacesAndNewlines)
    if asked.status == 0 && FileManager.default.fileExists(atPath: directory + "/Python.h") { return directory }
    let problem = "\(python) has no Python.h (in \(directory.isEmpty ? asked.errors : directory))"
    if ProcessInfo.processInfo.environment["CI"] != nil {
        throw TestSupportError(problem + "; .ci/run installs it (Debian package python3-dev)")
    }
    print("skipping the Python extension's C (tools/python/ringside): \(problem) (apt-get install python3-dev); CI builds it")
    return nil
}

/// One build of one file: the arguments after the compiler, and the text a header is included by
/// (on standard input) when it is a header.
struct CCompile {
    let file: String
    let arguments: [String]
    var stdin = ""
}

/// The warnings every build turns on, as errors.
let strictWarnings = ["-Wall", "-Wextra", "-Werror"]

/// Every C and C++ file of the repository built with -Wall -Wextra -Werror, by gcc and by clang:
/// the C sources as the project builds them (`-std=gnu11 -O2`, as tools/c's CMake, the Python
/// extension's setup.py and the Rust bench's build.rs do: gcc's flow-based warnings need the
/// optimizer, so each file is compiled, not only parsed), the bots' fixtures and the C++ example
/// as C++17 too, and each header on its own, as C and as C++11, C++17 and C++20, since C and C++
/// bots include them.
@Suite("the C and C++ sources build without a warning under gcc and clang")
struct CWarningsTests {
    @Test("every C and C++ file in the repository is one these tests build, and every file they expect is there")
    func everyFileIsBuilt() {
        let listed = Set(cSourceDirectories.map(\.path))
        let unlisted = repositoryCFamilyFiles().filter { !listed.contains($0.split(separator: "/").dropLast().joined(separator: "/")) }
        #expect(unlisted.isEmpty, "not built by CWarningsTests (add their directory to cSourceDirectories): \(unlisted)")
        for directory in cSourceDirectories {
            let missing = directory.expected.subtracting(cFamilyFiles(in: directory.path))
            #expect(missing.isEmpty, "\(directory.path) lacks \(missing.sorted()): update cSourceDirectories")
        }
    }

    @Test("C: every .c file (-std=gnu11 -O2) and every .h file, with -Wall -Wextra -Werror", arguments: ["gcc", "clang"])
    func c(compiler: String) throws {
        guard let cc = try compiler == "gcc" ? requiredSystemTool("gcc") : requiredClang("clang") else { return }
        try expectClean(
            cc,
            Self.compiles { file, directory, includes in
                switch URL(fileURLWithPath: file).pathExtension {
                case "c":
                    return [
                        CCompile(
                            file: file,
                            arguments: ["-std=gnu11", "-O2"] + strictWarnings + ["-pthread"] + includes
                                + ["-c", file, "-o", "/dev/null"])
                    ]
                case "h":
                    return [
                        CCompile(
                            file: file, arguments: ["-x", "c", "-std=gnu11"] + strictWarnings + includes + ["-fsyntax-only", "-"],
                            stdin: "#include \"\(file)\"\n")
                    ]
                default:
                    return []
                }
            })
    }

    @Test(
        "C++: the C++ sources and the bots' .c fixtures (-std=c++17 -O2), and every header as C++11, 17 and 20, with -Wall -Wextra -Werror",
        arguments: ["g++", "clang++"])
    func cxx(compiler: String) throws {
        guard let cxx = try compiler == "g++" ? requiredSystemTool("g++") : requiredClang("clang++") else { return }
        try expectClean(
            cxx,
            Self.compiles { file, directory, includes in
                let fileExtension = URL(fileURLWithPath: file).pathExtension
                if cxxSourceExtensions.contains(fileExtension) || (fileExtension == "c" && directory.alsoCxx) {
                    return [
                        CCompile(
                            file: file,
                            arguments: ["-x", "c++", "-std=c++17", "-O2"] + strictWarnings + ["-pthread"] + includes
                                + ["-c", file, "-o", "/dev/null"])
                    ]
                }
                guard fileExtension == "h" || cxxHeaderExtensions.contains(fileExtension) else { return [] }
                return ["c++11", "c++17", "c++20"].map { standard in
                    CCompile(
                        file: file, arguments: ["-x", "c++", "-std=\(standard)"] + strictWarnings + includes + ["-fsyntax-only", "-"],
                        stdin: "#include \"\(file)\"\n")
                }
            })
    }

    /// The compiles `plan` makes of each file of each listed directory (its path, its directory,
    /// its include arguments), and the files the list expects that it must build: those it
    /// makes a compile of, as found, wherever the list expects them to be. The Python extension's
    /// directory is built only when Python.h is there (always under CI).
    static func compiles(
        _ plan: (String, CSourceDirectory, [String]) -> [CCompile]
    ) throws
        -> (compiles: [CCompile], expected: Set<String>)
    {
        var compiles: [CCompile] = [], expected: Set<String> = []
        var pythonInclude: String?? = .none  // asked at most once, and only when a file needs it
        for directory in cSourceDirectories {
            var includes = directory.includes.flatMap { ["-I", kitFile($0)] }
            let files = cFamilyFiles(in: directory.path).map { kitFile(directory.path + "/" + $0) }
            if directory.python && files.contains(where: { !plan($0, directory, []).isEmpty }) {
                if pythonInclude == nil { pythonInclude = .some(try requiredPythonIncludeDirectory()) }
                guard let found = pythonInclude ?? nil else { continue }
                includes += ["-I", found]
            }
            for file in directory.expected.map({ kitFile(directory.path + "/" + $0) }) where !plan(file, directory, []).isEmpty {
                expected.insert(file)
            }
            for file in files { compiles += plan(file, directory, includes) }
        }
        return (compiles, expected)
    }

    /// Runs every compile; each must exit 0 and print nothing (a warning -Werror does not cover,
    /// such as the driver's, still fails). Every expected file must be among them, so that a
    /// glob that finds nothing cannot pass.
    func expectClean(
        _ compiler: String, _ planned: (compiles: [CCompile], expected: Set<String>),
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let missing = planned.expected.subtracting(planned.compiles.map(\.file))
        #expect(missing.isEmpty, "not built with \(compiler): \(missing.sorted())", sourceLocation: sourceLocation)
        for compile in planned.compiles {
            let ran = try runProcess(compiler, compile.arguments, stdin: compile.stdin, mergingErrors: true)
            let name = String(compile.file.dropFirst(packageRoot.count + 1))
            #expect(
                ran.status == 0 && ran.output.isEmpty,
                "\(name): \(compiler) \(compile.arguments.joined(separator: " ")) (exit \(ran.status.map { "\($0)" } ?? "by a signal")):\n\(ran.output)",
                sourceLocation: sourceLocation)
        }
    }
}
