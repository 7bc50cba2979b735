// ringside-fuzz's two ways in: libFuzzer's (`LLVMFuzzerInitialize`, `LLVMFuzzerTestOneInput`) when
// built with `--sanitize=fuzzer`, and the replay of saved inputs (`fuzz_replay`, called by the weak
// C main of Tests/ringside-fuzz) in the usual build:
//
//   RINGSIDE_FUZZ_TARGET=NAME ringside-fuzz [libFuzzer flags] CORPUS...   (fuzzer build; .ci/fuzz)
//   ringside-fuzz NAME FILE|DIR...            replays each input (a directory's files, sorted)
//   ringside-fuzz --list                      the targets, one a line, and what each covers
//   ringside-fuzz --make-seeds DIR [NAME...]  writes each target's seeds, made by the real writers
//
// A replay prints each input's path on standard error before it runs it (so a crash names it),
// then `NAME: N inputs, no finding` on standard output. Exit 0; 2 for a usage error; an input
// that breaks a target's check aborts the process (as libFuzzer counts a crash).

#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The target libFuzzer runs, chosen at initialization.
nonisolated(unsafe) private var fuzzedTarget: FuzzTarget?

/// libFuzzer's start: the target is named by `RINGSIDE_FUZZ_TARGET`.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(
    _ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?
) -> CInt {
    _ = chosenTarget()
    return 0
}

/// libFuzzer's call for each input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    chosenTarget().run(bytes)
    return 0
}

/// The target `RINGSIDE_FUZZ_TARGET` names (once), or the process ends saying which there are.
private func chosenTarget() -> FuzzTarget {
    if let fuzzedTarget { return fuzzedTarget }
    let name = ProcessInfo.processInfo.environment["RINGSIDE_FUZZ_TARGET"] ?? ""
    guard let target = FuzzTarget.named(name) else {
        printError("ringside-fuzz: set RINGSIDE_FUZZ_TARGET to one of: \(FuzzTarget.all.map(\.name).joined(separator: ", "))")
        exit(2)
    }
    fuzzedTarget = target
    return target
}

/// The usual build's main: replays inputs, lists the targets, or writes their seeds.
@_cdecl("fuzz_replay")
public func fuzzReplay(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    let arguments = (1..<Int(argc)).map { String(cString: argv![$0]!) }
    guard let first = arguments.first else { return usage("give a target and inputs, --list or --make-seeds") }
    switch first {
    case "--list":
        for target in FuzzTarget.all { print("\(target.name.padding(toLength: 16, withPad: " ", startingAt: 0)) \(target.covers)") }
        return 0
    case "--make-seeds":
        guard arguments.count >= 2 else { return usage("--make-seeds DIR [TARGET...]") }
        return makeSeeds(into: arguments[1], names: Array(arguments.dropFirst(2)))
    default:
        guard let target = FuzzTarget.named(first) else { return usage("no target \(first) (--list names them)") }
        guard arguments.count >= 2 else { return usage("\(first): which inputs? give files or directories") }
        return replay(target, Array(arguments.dropFirst()))
    }
}

private func usage(_ message: String) -> CInt {
    printError("ringside-fuzz: \(message)")
    return 2
}

/// Runs every input of `paths` (files, and the files of directories, sorted) through `target`.
private func replay(_ target: FuzzTarget, _ paths: [String]) -> CInt {
    var inputs: [String] = []
    for path in paths {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            return usage("\(target.name): \(path) does not exist")
        }
        if isDirectory.boolValue {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
            inputs += names.filter { !$0.hasPrefix(".") }.sorted().map { "\(path)/\($0)" }
        } else {
            inputs.append(path)
        }
    }
    for input in inputs {
        guard let data = FileManager.default.contents(atPath: input) else { return usage("\(target.name): cannot read \(input)") }
        printError("replaying \(input)")
        target.run([UInt8](data))
    }
    print("\(target.name): \(inputs.count) inputs, no finding")
    return 0
}

/// Writes the seeds of the targets `names` (all when empty) under `directory`/NAME/.
private func makeSeeds(into directory: String, names: [String]) -> CInt {
    var targets: [FuzzTarget] = []
    for name in names {
        guard let target = FuzzTarget.named(name) else { return usage("no target \(name) (--list names them)") }
        targets.append(target)
    }
    for target in targets.isEmpty ? FuzzTarget.all : targets {
        let folder = "\(directory)/\(target.name)"
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let seeds = try target.seeds()
            for seed in seeds { try Data(seed.bytes).write(to: URL(fileURLWithPath: "\(folder)/\(seed.name)")) }
            print("\(target.name): \(seeds.count) seeds in \(folder)")
        } catch {
            printError("ringside-fuzz: \(target.name): cannot make its seeds: \(error)")
            return 1
        }
    }
    return 0
}
