#if canImport(Glibc)
import Glibc
#endif

/// One fuzz target: a parser of outside input, fed whole inputs. `run` calls the real parser (the
/// one the collector or the tool uses on that input) and checks what it can cheaply; a broken
/// check is a finding (`FuzzFinding.report`), as a crash or a hang is.
struct FuzzTarget: Sendable {
    /// The name `ringside-fuzz` and `RINGSIDE_FUZZ_TARGET` take; its corpus is
    /// `Tests/fixtures/fuzz/NAME/`.
    let name: String
    /// What it feeds, and to what: one line for `--list`.
    let covers: String
    let run: @Sendable ([UInt8]) -> Void
    /// Valid inputs, each made by the real writer where there is one, and a few edge cases.
    let seeds: @Sendable () throws -> [FuzzSeed]

    /// Every target, in the order `--list` shows them.
    static let all: [FuzzTarget] = [
        RingFileTarget.bot, RingFileTarget.worker, RecordTarget.target, PostmortemTarget.target,
        ConfigTargets.configFile, ConfigTargets.webConfig, HTTPRequestTarget.target, QueryTarget.target,
        StateTarget.target, EmitLinesTarget.target, OTLPResponseTarget.target,
    ]

    static func named(_ name: String) -> FuzzTarget? { all.first { $0.name == name } }
}

/// A seed: its file name in the corpus and its bytes.
struct FuzzSeed: Sendable {
    let name: String
    let bytes: [UInt8]

    init(_ name: String, _ bytes: [UInt8]) {
        self.name = name
        self.bytes = bytes
    }

    init(_ name: String, _ text: String) {
        self.init(name, Array(text.utf8))
    }
}

/// A target's check broke: said on standard error, then the process aborts, which libFuzzer
/// reports as a crash (with the input) and a replay as a death by SIGABRT.
enum FuzzFinding {
    static func report(_ target: String, _ what: String) -> Never {
        printError("ringside-fuzz: \(target): \(what)")
        abort()
    }
}

/// Writes `text` and a newline to standard error at once (unbuffered: the process may abort next).
func printError(_ text: String) {
    let line = Array((text + "\n").utf8)
    line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
}

/// Little-endian reading of a fuzz input's bytes, past its end as zeros: targets that take
/// structured input (a metric table, a chunking) read it through this, so every input means
/// something.
struct FuzzBytes {
    private let bytes: [UInt8]
    private(set) var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { position >= bytes.count }
    var remaining: ArraySlice<UInt8> { bytes[min(position, bytes.count)...] }

    mutating func byte() -> UInt8 {
        defer { position += 1 }
        return position < bytes.count ? bytes[position] : 0
    }

    mutating func take(_ count: Int) -> [UInt8] {
        let end = min(bytes.count, position + count)
        let taken = position < end ? Array(bytes[position..<end]) : []
        position += count
        return taken + [UInt8](repeating: 0, count: count - taken.count)
    }
}
