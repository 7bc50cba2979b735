import CRingside
import Foundation
import Ringside
import RingsideTestSupport
import Testing

/// A producer that runs the conformance table: writes each case's file into a directory.
private struct ConformanceProducer {
    let name: String
    /// Whether it samples a filling lane (Python's pure backend never does: its header says so).
    let samples: Bool
    let run: (_ cases: String, _ directory: String) throws -> ProcessRun
}

@Suite("conformance: every producer writes each case of Tests/conformance/cases.txt as the case says, byte for byte alike")
struct ConformanceTests {
    private static let cases = kitFile("Tests/conformance/cases.txt")

    @Test(
        "C (also under AddressSanitizer with UndefinedBehaviorSanitizer), Python (C extension and pure backend) and Rust: each case's registry, records, weights, exemplars, cells and worker file read as the case says, and every producer's file, but for times, ids and thread names, is the case's pin (Tests/conformance/expected, which pytest and cargo test check too); what nobody planted at a bot's name is refused at once, naming it and its owner"
    )
    func producersConform() throws {
        var cases = try ConformanceCase.load(Self.cases)
        try #require(!cases.isEmpty, "no cases in \(Self.cases)")
        let build = try TemporaryDirectory("ringside-conformance")
        defer { build.remove() }
        // The cases of names another user took need root (and setpriv) to plant: without, they are left out.
        var casesPath = Self.cases
        if try !requiredRoot("planting files as user nobody at bot names") || requiredSystemTool("setpriv") == nil {
            let planted = Set(cases.filter { $0.planted != nil }.map(\.name))
            casesPath = build.path + "/cases.txt"
            try ConformanceCase.text(of: Self.cases, dropping: planted).write(toFile: casesPath, atomically: false, encoding: .utf8)
            cases.removeAll { planted.contains($0.name) }
        }
        try #require(chmod(build.path, 0o711) == 0, "nobody plants in the runners' directories below it")
        var outputs: [(producer: ConformanceProducer, directory: String, output: String)] = []
        for producer in try Self.producers(build) {
            let directory = build.path + "/" + producer.name
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            try #require(chmod(directory, 0o1777) == 0, "shared, as /dev/shm is")
            for expected in cases {
                if let planted = expected.planted { try #require(try plantAsNobody(planted, at: directory + "/ringside." + expected.name)) }
            }
            // A runner that waits on what was planted is killed at the deadline, and fails.
            let ran = try producer.run(casesPath, directory)
            try #require(ran.status == 0, "the \(producer.name) runner failed (or hung):\n\(ran.output)")
            outputs.append((producer, directory, ran.output))
        }
        for expected in cases {
            if let planted = expected.planted {
                for (producer, directory, output) in outputs {
                    let path = directory + "/ringside." + expected.name
                    #expect(isStillPlanted(planted, at: path), "\(producer.name), case \(expected.name): what nobody planted is untouched")
                    guard expected.refused else { continue }
                    // The producer's error: the file, what it is and whose, and the bot's user.
                    let said =
                        "refused \(expected.name): bot \(expected.name): \(path) is \(planted.kind) owned by uid "
                        + "\(PlantedFile.owner), not a regular file of uid \(geteuid()); "
                    #expect(output.split(separator: "\n").contains { $0.hasPrefix(said) }, "\(producer.name): \(output)")
                }
            }
            if expected.refused { continue }
            // The pin (ConformancePin): what pytest and cargo test check their producer's files against.
            let pinPath = "Tests/conformance/expected/\(expected.name).hex"
            var pinned = ConformancePin.writing ? nil : try ConformancePin.bytes(of: expected.name)
            var reference = "the pin \(pinPath)"
            if pinned == nil, !ConformancePin.writing {
                Issue.record("case \(expected.name): no pin \(pinPath): write the pins with RINGSIDE_WRITE_PINNED=1")
            }
            for (producer, directory, _) in outputs {
                let file = try expected.fileName(in: directory)
                // The bytes first: the reader below only reads, but compare what the producer left.
                let bytes = ConformanceMask.masked(Array(try Data(contentsOf: URL(fileURLWithPath: directory + "/ringside." + file))))
                if let pinned {
                    if let offset = ConformanceMask.firstDifference(pinned, bytes) {
                        Issue.record(
                            "case \(expected.name): \(producer.name)'s file, masked, differs from \(reference) at offset 0x\(String(offset, radix: 16))"
                        )
                    }
                } else {
                    if ConformancePin.writing {
                        try ConformancePin.write(bytes, caseName: expected.name)
                    } else {
                        reference = "\(producer.name)'s"
                    }
                    pinned = bytes
                }
                try Self.check(expected, file: file, directory: directory, producer: producer)
            }
        }
        let pinnable = Set(try ConformanceCase.load(Self.cases).filter { !$0.refused }.map(\.name))
        #expect(
            try ConformancePin.pinnedCases() == pinnable,
            "Tests/conformance/expected/ holds a pin of each case that writes a file, and no other")
    }

    /// Reads a producer's file of a case with the Swift reader and checks it against the case.
    private static func check(_ expected: ConformanceCase, file: String, directory: String, producer: ConformanceProducer) throws {
        let inspector = try RingInspector(file, directory: RingDirectory(directory))
        let context = "\(producer.name), case \(expected.name)"
        let metrics = try inspector.metrics()
        #expect(metrics == expected.metrics.map(\.descriptor), "\(context): registry")
        var check = RecordCheck(metrics: metrics)
        var exemplars = ExemplarAssembler()
        var records: [ConformanceCase.Record] = []
        for peeked in try inspector.peek().sorted(by: { ($0.lane, $0.cursor) < ($1.lane, $1.cursor) }) {
            let record = peeked.record
            if let problem = check.problem(with: record, at: peeked.cursor, lane: peeked.lane) {
                Issue.record("\(context): lane \(peeked.lane) \(problem)")
            }
            if record.isExemplarPart {
                if case let .complete(slot, _, _, labels) = exemplars.take(record, at: peeked.cursor, lane: peeked.lane) {
                    records[slot].exemplar = labels
                }
                continue
            }
            #expect(record.flags & ~ExemplarAssembler.exemplarFlag == 0, "\(context): record \(peeked.cursor) flags \(record.flags)")
            if record.carriesExemplar { _ = exemplars.begin(record, at: peeked.cursor, lane: peeked.lane, slot: records.count) }
            records.append(.init(metric: record.metric, kind: record.kind, value: record.value))
        }
        #expect(records == expected.records, "\(context): records")
        for metric in expected.metrics {
            let cells = try inspector.cells(of: metric.descriptor)
            let cellsExpected = MetricCells(
                total: metric.descriptor.kind == .counter ? metric.counted : 0, dropped: metric.dropped, lastValue: metric.lastSet,
                droppedSum: metric.droppedSum, droppedMax: metric.droppedMax, exemplarsRefused: metric.exemplarsRefused)
            #expect(cells == cellsExpected, "\(context): \(metric.descriptor.name)'s cells")
            #expect(inspector.isRetired(metric.descriptor) == metric.retired, "\(context): \(metric.descriptor.name) retired")
        }
        let status = try inspector.status()
        #expect(status.dropped == expected.metrics.reduce(0) { $0 + $1.dropped } && !status.producerAlive, "\(context): \(status)")
        let wrote = !expected.records.isEmpty || expected.metrics.contains { $0.counted > 0 }
        #expect(status.lanes.count == (wrote ? 1 : 0), "\(context): one thread, one lane")
        // SAMPLING in ringside.h: past half a lane by default; 0 (never) from a producer that never samples.
        let header = inspector.header
        let sampleAbove = producer.samples ? max(1, UInt32((UInt64(RS_DEFAULT_SAMPLE_ABOVE_PERCENT) << header.capacity_log2) / 100)) : 0
        #expect(header.sample_above == sampleAbove, "\(context): sample_above")
    }

    /// The runners, built: C, Python's two backends, Rust. A missing tool skips its producer
    /// outside CI (with a message) and fails under CI.
    private static func producers(_ build: TemporaryDirectory) throws -> [ConformanceProducer] {
        var producers: [ConformanceProducer] = []
        if let cc = try requiredSystemTool("cc") {
            let runner = build.path + "/c_runner"
            let compiled = try runProcess(
                cc,
                ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-I", kitFile("Sources/CRingside/include")]
                    + [kitFile("Tests/conformance/c_runner.c")]
                    + [kitFile("Sources/CRingside/ringside_producer.c"), kitFile("Sources/CRingside/ringside.c"), "-o", runner],
                mergingErrors: true)
            try #require(compiled.status == 0, "cc failed:\n\(compiled.output)")
            producers.append(ConformanceProducer(name: "c", samples: true) { try runProcess(runner, [$0, $1], mergingErrors: true) })
        }
        // The C module under AddressSanitizer and UndefinedBehaviorSanitizer: every case, its files C's.
        let sanitized = CSanitizer.addressUndefined
        if let runner = try sanitized.build([kitFile("Tests/conformance/c_runner.c")], into: build.path + "/c_runner_sanitized") {
            producers.append(
                ConformanceProducer(name: sanitized.rawValue, samples: true) { try runProcess(runner, [$0, $1], mergingErrors: true) })
        }
        if let python = try requiredSystemTool("python3") {
            let script = kitFile("Tests/conformance/py_runner.py"), package = kitFile("tools/python")
            let extensionDirectory = build.path + "/python-extension-build"
            let built = try runProcess(
                "/bin/sh",
                [
                    "-c",
                    "cd \"$1\" && RINGSIDE_REQUIRE_EXTENSION=1 \"$2\" setup.py -q build_ext --build-lib \"$3\" --build-temp \"$3/temp\"",
                    "sh", package, python, extensionDirectory,
                ], mergingErrors: true, timeoutSeconds: 300)
            if built.status == 0 {
                producers.append(
                    ConformanceProducer(name: "python-extension", samples: true) {
                        try runProcess(python, [script, package, $0, $1, "extension", extensionDirectory], mergingErrors: true)
                    })
            } else if ProcessInfo.processInfo.environment["CI"] != nil {
                Issue.record("the Python C extension does not build (CI must run its producer):\n\(built.output)")
            } else {
                print(
                    "skipping the Python C extension's producer: it does not build here (setuptools, Python's headers?):\n\(built.output)")
            }
            producers.append(
                ConformanceProducer(name: "python-pure", samples: false) {
                    try runProcess(python, [script, package, $0, $1, "pure"], mergingErrors: true)
                })
        }
        if let cargo = try requiredSystemTool("cargo") {
            // Built, then run itself (not through `cargo run`): the deadline kills the runner.
            let built = try runProcess(
                cargo,
                [
                    "build", "--quiet", "--offline", "--example", "conformance", "--manifest-path",
                    kitFile("tools/rust/ringside/Cargo.toml"),
                ],
                mergingErrors: true, timeoutSeconds: 300)
            try #require(built.status == 0, "cargo build failed:\n\(built.output)")
            let target = ProcessInfo.processInfo.environment["CARGO_TARGET_DIR"] ?? kitFile("tools/rust/ringside/target")
            let runner = target + "/debug/examples/conformance"
            producers.append(ConformanceProducer(name: "rust", samples: true) { try runProcess(runner, [$0, $1], mergingErrors: true) })
        }
        return producers
    }
}
