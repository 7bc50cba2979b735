import Foundation
import RingsideTestSupport

/// The pinned file of each case of the conformance table: `Tests/conformance/expected/NAME.hex`,
/// the bytes a conforming producer writes for the case, masked (`ConformanceMask`). pytest
/// (tools/python/tests/test_conformance.py) and `cargo test` (tools/rust/ringside/tests/conformance.rs)
/// check their producer's files against these pins, without Swift; `ConformanceTests` checks every
/// producer's against them too, after its reader checked the files against the case, and writes
/// them when RINGSIDE_WRITE_PINNED=1 (then review the diff).
///
/// The text: comment lines (`#`), `length N` (the file's bytes), then each 16 bytes that are not
/// all zero as `OFFSET: HEX` (the offset in 8 hexadecimal digits, the bytes as 32); the bytes left
/// out are zero. A lane's records and most of a registry entry are zero: a pin is about 1 KB.
enum ConformancePin {
    static let directory = kitFile("Tests/conformance/expected")

    static func path(of caseName: String) -> String { directory + "/" + caseName + ".hex" }

    /// Whether this run writes the pins instead of reading them.
    static var writing: Bool { ProcessInfo.processInfo.environment["RINGSIDE_WRITE_PINNED"] == "1" }

    /// The pin's text of `bytes`, the masked file of case `caseName`.
    static func text(of bytes: [UInt8], caseName: String) -> String {
        var lines = [
            "# Case \(caseName) of Tests/conformance/cases.txt: the file a conforming producer writes, its times, ids and",
            "# thread names zeroed (ConformanceMask); each 16 bytes not all zero. Written by ConformanceTests with",
            "# RINGSIDE_WRITE_PINNED=1 (docs/development.md, \"Conformance\").",
            "length \(bytes.count)",
        ]
        for start in stride(from: 0, to: bytes.count, by: 16) {
            let chunk = bytes[start..<min(start + 16, bytes.count)]
            guard chunk.contains(where: { $0 != 0 }) else { continue }
            lines.append(hex(start, digits: 8) + ": " + chunk.map { hex(Int($0), digits: 2) }.joined())
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The bytes the pin of case `caseName` holds, or nil when it has none.
    static func bytes(of caseName: String) throws -> [UInt8]? {
        guard let text = try? String(contentsOfFile: path(of: caseName), encoding: .utf8) else { return nil }
        var bytes: [UInt8] = []
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let words = line.split(separator: " ")
            guard words.count == 2 else { throw ConformanceError("\(path(of: caseName)): bad line \(line)") }
            if words[0] == "length", let length = Int(words[1]) {
                bytes = [UInt8](repeating: 0, count: length)
                continue
            }
            let digits = Array(words[1].utf8)
            guard let offset = Int(words[0].dropLast(), radix: 16), words[0].hasSuffix(":"), offset + digits.count / 2 <= bytes.count
            else { throw ConformanceError("\(path(of: caseName)): bad line \(line)") }
            for index in 0..<digits.count / 2 {
                guard let byte = UInt8(String(decoding: digits[2 * index..<2 * index + 2], as: UTF8.self), radix: 16) else {
                    throw ConformanceError("\(path(of: caseName)): bad line \(line)")
                }
                bytes[offset + index] = byte
            }
        }
        return bytes
    }

    /// Writes the pin of case `caseName`.
    static func write(_ bytes: [UInt8], caseName: String) throws {
        try text(of: bytes, caseName: caseName).write(toFile: path(of: caseName), atomically: true, encoding: .utf8)
    }

    /// The cases pinned: the names of the directory's `.hex` files.
    static func pinnedCases() throws -> Set<String> {
        Set(try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".hex") }.map { String($0.dropLast(4)) })
    }

    private static func hex(_ value: Int, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
