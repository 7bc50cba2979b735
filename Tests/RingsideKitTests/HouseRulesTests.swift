import Foundation
import RingsideTestSupport
import Testing

/// The house's rules that can be read from the source tree (docs/development.md, "Layout"): checked
/// here so that the next feature cannot break them unseen.
@Suite("House rules")
struct HouseRulesTests {
    /// Every Swift file below `folder` (relative to the package root), with its lines.
    private func swiftFiles(under folder: String) throws -> [(path: String, lines: [Substring])] {
        let root = packageRoot + "/" + folder
        guard let walker = FileManager.default.enumerator(atPath: root) else { throw CocoaError(.fileNoSuchFile) }
        var files: [(path: String, lines: [Substring])] = []
        while let relative = walker.nextObject() as? String {
            guard relative.hasSuffix(".swift") else { continue }
            let text = try String(contentsOfFile: root + "/" + relative, encoding: .utf8)
            files.append((folder + "/" + relative, text.split(separator: "\n", omittingEmptySubsequences: false)))
        }
        return files.sorted { $0.path < $1.path }
    }

    /// `public` is for the product bots import (Ringside) and for the generic types whose
    /// `@inlinable` code another module specializes: Swift 6.3 specializes a generic type's
    /// inlinable code in another module only when the type is public (a `package` one's ran
    /// unspecialized in the collector, looking up generic metadata at run time: a ninth of the
    /// drain thread while a million series were drained; `ringside-bench collector`'s
    /// specialization row measures it). So a file outside Sources/Ringside says `public` only
    /// when it holds `@inlinable` code, at most 60 times in all; everything else says `package`.
    @Test(
        "public only in Ringside, the library bots import, and in the files whose inlinable code the collector specializes (at most 60 outside Ringside); the rest of the package says package"
    )
    func publicOnlyWhereNeeded() throws {
        let publicWord = try Regex("^\\s*(@\\w+(\\(.*\\))?\\s+)*public\\b")
        var offenders: [String] = []
        var outsideRingside = 0
        for folder in ["Sources", "Benchmarks", "tools/ringside-dump", "tools/ringside-emit"] {
            for file in try swiftFiles(under: folder) where !file.path.hasPrefix("Sources/Ringside/") {
                let inlinable = file.lines.contains { $0.contains("@inlinable") }
                for (index, line) in file.lines.enumerated() where line.contains(publicWord) {
                    outsideRingside += 1
                    if !inlinable { offenders.append("\(file.path):\(index + 1)") }
                }
            }
        }
        #expect(offenders.isEmpty, "public in a file with no inlinable code, outside Sources/Ringside: \(offenders.prefix(20))")
        #expect(outsideRingside <= 60, "\(outsideRingside) public declarations outside Sources/Ringside, over 60")
    }

    @Test("no source file is over 500 lines")
    func shortFiles() throws {
        var long: [String] = []
        for folder in ["Sources", "Benchmarks"] {
            for file in try swiftFiles(under: folder) where file.lines.count > 501 {
                long.append("\(file.path) (\(file.lines.count - 1) lines)")
            }
        }
        #expect(long.isEmpty, "over 500 lines: \(long)")
    }

    /// A function's or an initializer's length runs from its declaration's line to its closing
    /// brace's, the brace at the declaration's indentation (swift-format puts it there), both
    /// counted; a body on one line, and a requirement with none, are passed over.
    @Test("no function or initializer in Sources is over 80 lines, from its declaration to its closing brace")
    func shortFunctions() throws {
        let declaration = /^( *)(?:[@\w()]+ +)*?(?:func +(\S+?)[(<\s]|(init)[?!]?[(<])/
        var long: [String] = []
        var measured = 0
        for file in try swiftFiles(under: "Sources") {
            for (index, line) in file.lines.enumerated() {
                guard let match = line.firstMatch(of: declaration) else { continue }
                guard let end = closingLine(of: index, in: file.lines, indent: match.1.count) else { continue }
                measured += 1
                if end - index + 1 > 80 { long.append("\(file.path):\(index + 1) \(match.2 ?? match.3 ?? "") (\(end - index + 1) lines)") }
            }
        }
        #expect(long.isEmpty, "functions over 80 lines: \(long)")
        #expect(measured > 1000, "\(measured) functions measured: the test no longer reads the sources")
    }

    @Test("the collector's files live in its rooms, one folder a concern, none at the top")
    func collectorRooms() throws {
        let rooms: Set<String> = [
            "Discovery", "Drain", "Series", "Publish", "Health", "Outputs", "State", "Serve", "Daemon", "Capture", "Recorder",
        ]
        let files = try swiftFiles(under: "Sources/RingsideCollector")
        #expect(!files.isEmpty)
        for file in files {
            let parts = file.path.split(separator: "/")
            #expect(parts.count == 4 && rooms.contains(String(parts[2])), "\(file.path) is outside the rooms \(rooms.sorted())")
        }
    }

    @Test("discovery, the drain and the series compute with RingsideAggregation, never import the exporters")
    func drainDoesNotImportExport() throws {
        for room in ["Discovery", "Drain", "Series"] {
            for file in try swiftFiles(under: "Sources/RingsideCollector/" + room) {
                #expect(!file.lines.contains("import RingsideExport"), "\(file.path) imports RingsideExport")
            }
        }
    }

    /// The operator's tools and the trace read values with Ringside (`MetricValue`, `ExactDecimal`)
    /// and write text for people with RingsideText (times, measures, metric names, base64); they
    /// import the exporters only in a file that writes one of the exporters' formats, listed here
    /// with the format (the test fails when one more imports them, and when a listed one no
    /// longer does, so the list only shrinks).
    @Test("the tools and the trace import RingsideExport only in the files that write an export format, each listed with its format")
    func toolsImportExportOnlyToRenderIt() throws {
        let rendering: [String: String] = [
            "Sources/RingsideTrace/PerfettoTrace.swift": "Perfetto's protobuf trace, through the exporters' ProtobufWriter",
            "Sources/RingsideTrace/TraceHistogramLog.swift": "an HdrHistogram interval log, through the exporters' HistogramLog",
        ]
        var importing: Set<String> = []
        for folder in ["Sources/RingsideTools", "Sources/RingsideTrace", "tools/ringside-dump", "tools/ringside-emit"] {
            for file in try swiftFiles(under: folder) where file.lines.contains("import RingsideExport") {
                importing.insert(file.path)
            }
        }
        let (unlisted, gone) = (importing.subtracting(rendering.keys).sorted(), Set(rendering.keys).subtracting(importing).sorted())
        #expect(
            unlisted.isEmpty, "import RingsideExport without writing an export format (values: Ringside; text: RingsideText): \(unlisted)")
        #expect(gone.isEmpty, "listed as writing an export format, but no longer importing RingsideExport: strike \(gone)")
    }

    /// A stored value's meaning (a signed histogram's offset binary, steps of 10^scale, a gauge's
    /// double) is decided by `MetricDescriptor.value(ofStored:)` and `steps(ofStored:)`, in
    /// Ringside. Outside it, only the drain's per-record loop turns offset binary back itself
    /// (it knows the sign from its series' address, not from a metric, and runs for every record).
    @Test(
        "a stored value is read by MetricDescriptor.value(ofStored:), in Ringside; only the drain's per-record loop reads offset binary itself"
    )
    func valueMeaningInOnePlace() throws {
        let allowed: Set<String> = ["Sources/RingsideCollector/Series/BotAggregator+Draining.swift"]
        var offenders: Set<String> = []
        for folder in ["Sources", "Benchmarks", "tools/ringside-dump", "tools/ringside-emit"] {
            for file in try swiftFiles(under: folder) where !file.path.hasPrefix("Sources/Ringside/") && !allowed.contains(file.path) {
                if file.lines.contains(where: { $0.contains("OffsetBinary.value(") }) { offenders.insert(file.path) }
            }
        }
        #expect(offenders.isEmpty, "offset binary read outside MetricDescriptor.value(ofStored:): \(offenders.sorted())")
    }

    /// A record's road through the collector: discovery finds a bot's files and hands them to the
    /// drain (`DiscoveryHandoff`, waking it), the drain reads them into the bot's series, the
    /// publisher reads the series into a snapshot. Each room names only the types of the rooms it
    /// hands to or takes from; the series name none of the others. The publisher reads the rings
    /// through `SeriesFeed`, which the series declare and the drain offers.
    @Test("the collector's road runs one way: discovery, drain, series, publish; no room reaches back past the one it takes from")
    func oneWayRoad() throws {
        let mayName: [String: Set<String>] = [
            "Discovery": ["Drain"], "Drain": ["Discovery", "Series"], "Series": [], "Publish": ["Series"],
        ]
        var declared: [String: String] = [:]  // a top-level type's name: its room
        var code: [String: [String]] = [:]  // a room: its files, comments left out
        for room in mayName.keys {
            for file in try swiftFiles(under: "Sources/RingsideCollector/" + room) {
                for line in file.lines {
                    if let match = line.firstMatch(of: /^(?:[a-z]+ )*(?:class|struct|enum|protocol|typealias) (\w+)/) {
                        declared[String(match.1)] = room
                    }
                }
                let lines = file.lines.map { $0.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? "" }
                code[room, default: []].append(lines.joined(separator: "\n"))
            }
        }
        var climbs: Set<String> = []
        for (room, files) in code {
            for (name, home) in declared where home != room && !mayName[room]!.contains(home) {
                let word = try Regex("\\b\(name)\\b")
                if files.contains(where: { $0.contains(word) }) { climbs.insert("\(room) names \(home)'s \(name)") }
            }
        }
        #expect(climbs.isEmpty, "climbs back along the road: \(climbs.sorted())")
        #expect(declared.count > 30, "the rooms declare \(declared.count) types: the test no longer reads them")
    }

    @Test("threads share state behind Locked (a pthread mutex ThreadSanitizer sees), never the standard library's Mutex")
    func oneLock() throws {
        var offenders: [String] = []
        for folder in ["Sources", "Benchmarks", "Tests", "tools/ringside-dump", "tools/ringside-emit"] {
            for file in try swiftFiles(under: folder) {
                for (index, line) in file.lines.enumerated() where line.contains(/\bMutex(<|\()/) {
                    offenders.append("\(file.path):\(index + 1)")
                }
            }
        }
        #expect(offenders.isEmpty, "Mutex (a futex ThreadSanitizer does not see) at \(offenders)")
    }

    @Test("a project module is imported unconditionally, never inside #if canImport(Glibc)")
    func importsOutsideConditions() throws {
        var offenders: [String] = []
        for folder in ["Sources", "Benchmarks", "Tests", "tools/ringside-dump", "tools/ringside-emit"] {
            for file in try swiftFiles(under: folder) {
                var depth = 0
                for (index, line) in file.lines.enumerated() {
                    if line.hasPrefix("#if") { depth += 1 }
                    if line.hasPrefix("#endif") { depth -= 1 }
                    if depth > 0, line.contains(/^import (Ringside|CRingside)/) { offenders.append("\(file.path):\(index + 1)") }
                }
            }
        }
        #expect(offenders.isEmpty, "imports inside #if: \(offenders)")
    }

    /// A part is a class, or a struct that changes itself (a `mutating func`); a struct that does
    /// not is a plain value record (the options, a snapshot's row). A part's stored properties
    /// count those of the plain records nested in it (declared inside it, or in an extension of
    /// it) in a `var`: a bundle of fields its methods write is still its fields. A nested part
    /// (one with its own mutating methods) keeps its fields to itself and counts once, and so does
    /// a record it keeps in a `let` (settings no method writes).
    @Test("no part of the collector keeps more than 15 stored properties, its nested plain records' fields counted with its own")
    func smallParts() throws {
        var types: [String: (isClass: Bool, mutating: Bool, stored: [(type: String?, isLet: Bool)])] = [:]  // by qualified name
        for file in try swiftFiles(under: "Sources/RingsideCollector") {
            var open: [(indent: Int, name: String?)] = []  // the declarations the line is inside
            for line in file.lines {
                let indent = line.prefix { $0 == " " }.count
                if let match = line.firstMatch(of: /^ *(?:[\w()]+ )*(class|struct|enum|extension|protocol) (\w+)[^{]*\{$/) {
                    while let last = open.last, last.indent >= indent { open.removeLast() }
                    let kind = match.1
                    let outer = kind == "extension" ? nil : open.last?.name
                    let name = outer.map { "\($0).\(match.2)" } ?? String(match.2)
                    if kind == "class" || kind == "struct" { types[name] = types[name] ?? (kind == "class", false, []) }
                    open.append((indent, kind == "class" || kind == "struct" || kind == "extension" ? name : nil))
                    continue
                }
                if line.trimmingPrefix(while: \.isWhitespace) == "}", let last = open.last, last.indent == indent {
                    open.removeLast()
                    continue
                }
                guard let last = open.last, let name = last.name, types[name] != nil, indent == last.indent + 4 else { continue }
                if line.contains(/^ *(?:[\w()]+ )*mutating func\s/) {
                    types[name]!.mutating = true
                } else if let match = line.firstMatch(of: /^ *(?:[\w()@]+ )*(var|let) \w+\s*(?::\s*([\w.]+))?\s*(?:=\s*([\w.]+)[(<])?/),
                    !line.contains("static "), !isComputed(line)
                {
                    types[name]!.stored.append(((match.2 ?? match.3).map(String.init), match.1 == "let"))
                }
            }
        }
        func count(_ name: String) -> Int {
            types[name]!.stored.reduce(0) { sum, property in
                guard let type = property.type, !property.isLet, let nested = types["\(name).\(type)"], !nested.isClass, !nested.mutating
                else { return sum + 1 }
                return sum + count("\(name).\(type)")
            }
        }
        let large = Dictionary(
            uniqueKeysWithValues: types.keys.filter { types[$0]!.isClass || types[$0]!.mutating }.map { ($0, count($0)) }.filter {
                $0.1 > 15
            })
        #expect(large.isEmpty, "parts over 15 stored properties, nested records' counted: \(large.sorted { $0.key < $1.key })")
        #expect(types.count > 100, "the parser found \(types.count) types: it no longer reads the sources")
    }

    /// The line of the brace that closes the declaration on line `index`: the first after it at
    /// the declaration's indentation that starts with `}`. Nil for a body on the declaration's
    /// line, and for none (a protocol's requirement: the enclosing scope closes first).
    private func closingLine(of index: Int, in lines: [Substring], indent: Int) -> Int? {
        let opens = lines[index].filter { $0 == "{" }.count
        if opens > 0 && opens == lines[index].filter({ $0 == "}" }).count { return nil }
        for next in lines.indices.dropFirst(index + 1) {
            let line = lines[next]
            let text = line.drop { $0 == " " }
            if text.isEmpty { continue }
            let depth = line.count - text.count
            if depth < indent { return nil }
            if depth == indent && text.hasPrefix("}") { return next }
        }
        return nil
    }

    /// A property whose body opens before any initial value (`var count: Int { items.count }`).
    private func isComputed(_ line: Substring) -> Bool {
        guard let brace = line.firstIndex(of: "{") else { return false }
        guard let equals = line.firstIndex(of: "=") else { return true }
        return brace < equals
    }
}
