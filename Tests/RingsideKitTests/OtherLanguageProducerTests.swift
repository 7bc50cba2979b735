import CRingside
import Foundation
import Ringside
import RingsideTestSupport
import Testing

/// What a record says, for comparing whole lanes at once.
struct DecodedRecord: Equatable, CustomStringConvertible {
    var metric: UInt32
    var kind: UInt8
    var value: UInt64
    var flags: UInt8 = 0

    var description: String { "(metric \(metric), kind \(kind), value \(value), flags \(flags))" }
}

/// Drains every record of a bot as its consumer, checking each one's sequence against its
/// cursor; returns the metrics, each lane's records, and the cells of every metric.
func drainDecoded(
    _ name: String, directory: RingDirectory
)
    throws -> (metrics: [MetricDescriptor], lanes: [Int: [DecodedRecord]], cells: [String: MetricCells])
{
    let consumer = try RingConsumer(name, directory: directory)
    let drained = try drainAll(consumer)
    #expect(
        drained.allSatisfy { $0.record.sequence == $0.cursor && $0.record.exemplar_length == 0 },
        "records whose sequence is not their cursor")
    var lanes: [Int: [DecodedRecord]] = [:]
    for entry in drained {
        let record = entry.record
        lanes[entry.lane, default: []].append(
            DecodedRecord(metric: record.metric, kind: record.kind, value: record.value, flags: record.flags))
    }
    try consumer.refreshMetrics()
    var cells: [String: MetricCells] = [:]
    for metric in consumer.metrics { cells[metric.name] = consumer.cells(of: metric) }
    return (consumer.metrics, lanes, cells)
}

/// Builds a C producer of Tests/fixtures (c_producer.c unless `fixture` names another) as C or
/// as C++ (the library's .c files always as C), into `build`, named after the fixture; as C
/// `language` may also be a sanitized build (`CSanitizer`'s names: "c-asan-ubsan", "c-tsan").
func buildCProducer(_ language: String, fixture: String = "c_producer", into build: TemporaryDirectory) throws -> String? {
    if let sanitizer = CSanitizer(rawValue: language) {
        return try sanitizer.build([kitFile("Tests/fixtures/\(fixture).c")], into: build.path + "/" + fixture)
    }
    guard let cc = try requiredSystemTool("cc") else { return nil }
    let include = ["-I", kitFile("Sources/CRingside/include")]
    let library = [kitFile("Sources/CRingside/ringside_producer.c"), kitFile("Sources/CRingside/ringside.c")]
    let source = kitFile("Tests/fixtures/\(fixture).c"), executable = build.path + "/" + fixture
    let strict = ["-O2", "-Wall", "-Wextra", "-Werror", "-pthread"]
    if language == "c" {
        let compiled = try runProcess(
            cc,
            ["-std=gnu11"] + strict + include + [source] + library
                + ["-o", executable], mergingErrors: true)
        try #require(compiled.status == 0, "cc failed:\n\(compiled.output)")
        return executable
    }
    guard let cxx = try requiredSystemTool("c++") else { return nil }
    var objects: [String] = []
    for source in library {
        let object = build.path + "/" + URL(fileURLWithPath: source).deletingPathExtension().lastPathComponent + ".o"
        let compiled = try runProcess(cc, ["-std=gnu11", "-O2", "-pthread", "-c"] + include + [source, "-o", object], mergingErrors: true)
        try #require(compiled.status == 0, "cc failed:\n\(compiled.output)")
        objects.append(object)
    }
    let linked = try runProcess(
        cxx,
        ["-x", "c++", "-std=c++17"] + strict + include + [source, "-x", "none"]
            + objects + ["-o", executable], mergingErrors: true)
    try #require(linked.status == 0, "c++ failed:\n\(linked.output)")
    return executable
}

@Suite("producers in C, C++ and Python")
struct OtherLanguageProducerTests {
    @Test(
        "C, and the same file as C++ (std::thread, RAII span), and the C module under AddressSanitizer with UndefinedBehaviorSanitizer and under ThreadSanitizer: 4 threads' lanes decode exactly, spans in the histogram's unit, a forked child writes a worker file",
        arguments: ["c", "c++"] + CSanitizer.allCases.map(\.rawValue))
    func cProducerThreads(language: String) throws {
        let build = try TemporaryDirectory("ringside-kit-\(language == "c" ? "c" : "cxx")")
        defer { build.remove() }
        guard let executable = try buildCProducer(language, into: build) else { return }
        try withRingDirectory { directory in
            let count: UInt64 = 900, threads = 4
            let first = try runProcess(executable, [directory.path, "from-c", String(count), String(threads), "fork"], mergingErrors: true)
            #expect(first.status == 0, "\(first.output)")
            let lines = first.output.split(separator: "\n").map(String.init)
            #expect(
                lines.contains("child exited 0") && lines.contains("threads 4") && lines.contains("lanes 4")
                    && lines.contains("metrics 4"), "\(first.output)")
            #expect(!first.output.contains("ringside:"), "the library says nothing: \(first.output)")
            let childPID = try #require(lines.first { $0.hasPrefix("child pid ") }.flatMap { Int32($0.dropFirst(10)) }, "\(first.output)")
            // The child's calls: a worker file of the bot, its registry the parent's and then its own.
            let (workerMetrics, workerLanes, workerCells) = try drainDecoded("from-c@\(childPID)", directory: directory)
            #expect(workerMetrics.map(\.name) == ["c_latency", "c_orders", "c_exposure", "c_span", "c_child"])
            #expect(workerLanes.values.flatMap { $0 }.map(\.value) == Array(1...1000), "\(workerLanes.count) lanes")
            #expect(workerCells["c_orders"]?.total == 1000)

            var (metrics, lanes, cells) = try drainDecoded("from-c", directory: directory)
            #expect(
                metrics
                    == registered([
                        ("c_latency", .histogram, .microseconds, "symbol=AAPL\nvenue=XNAS", "from C", .last),
                        ("c_orders", .counter, .none, "", "", .last), ("c_exposure", .gauge, .bytes, "", "", .last),
                        ("c_span", .histogram, .microseconds, "", "", .last),
                    ]))
            // Each thread's lane holds its own 1...COUNT in order, and its span; the main thread's
            // gauge record is in a lane of its own. The child's 1,000 values landed nowhere.
            var threadLanes = 0
            for (_, records) in lanes where records.contains(where: { $0.metric == 0 }) {
                threadLanes += 1
                let latencies = records.filter { $0.metric == 0 }
                #expect(latencies == (1...count).map { DecodedRecord(metric: 0, kind: RS_KIND_HISTOGRAM.rawValue8, value: $0) })
                let spans = records.filter { $0.metric == 3 }
                #expect(spans.count == 1 && spans[0].flags == UInt8(RS_FLAG_SPAN))
                // A 2 ms sleep, in microseconds: at least 2,000, and far below the 2,000,000 of nanoseconds.
                #expect(spans.allSatisfy { $0.value >= 2_000 && $0.value < 1_000_000 }, "\(spans)")
                #expect(records.allSatisfy { $0.metric != 1 }, "counters write no records")
            }
            #expect(threadLanes == threads)
            #expect(cells["c_orders"]?.total == UInt64(threads) * count * 2, "the child's 1,000 counts landed nowhere")
            #expect(cells["c_exposure"]?.lastValue == Double(count) + 0.5)
            #expect(cells["c_latency"]?.dropped == 0)

            // A second run re-attaches: the same metrics, lanes reused, the counter's total goes on.
            let second = try runProcess(executable, [directory.path, "from-c", String(count), String(threads)], mergingErrors: true)
            #expect(second.status == 0 && second.output.contains("lanes 4") && second.output.contains("metrics 4"), "\(second.output)")
            (metrics, lanes, cells) = try drainDecoded("from-c", directory: directory)
            #expect(metrics.count == 4)
            #expect(cells["c_orders"]?.total == 2 * UInt64(threads) * count * 2)
            let status = try RingInspector("from-c", directory: directory).status()
            #expect(status.capacity == 4096 && status.maxMetrics == 8 && status.lanes.count == 4)
            #expect(status.producerAttaches == 2 && !status.producerAlive && status.dropped == 0)
            #expect(status.formatVersion == RS_FORMAT_VERSION_MIN, "format 3: no signed or scaled metric")
        }
    }

    @Test("a C producer's full lane drops and counts, per lane and per metric; its counter stays exact")
    func cProducerDrops() throws {
        let build = try TemporaryDirectory("ringside-kit-c")
        defer { build.remove() }
        guard let executable = try buildCProducer("c", into: build) else { return }
        try withRingDirectory { directory in
            // 5,000 values and a span from one thread into a lane of 4,096 with nobody draining.
            let result = try runProcess(executable, [directory.path, "full", "5000", "1"], mergingErrors: true)
            #expect(result.status == 0, "\(result.output)")
            let status = try RingInspector("full", directory: directory).status()
            let (_, _, cells) = try drainDecoded("full", directory: directory)
            // 5,002 attempts: 5,000 values and a span from the thread, the gauge from the main
            // thread (which takes the finished thread's lane over, or a lane of its own).
            let lane = try #require(status.lanes.first { $0.writeCursor == 4096 })
            #expect(lane.dropped > 0)
            #expect(status.writeCursor + status.dropped == 5_002)
            let perMetric = ["c_latency", "c_span", "c_exposure"].reduce(0) { $0 + (cells[$1]?.dropped ?? 0) }
            #expect(perMetric == status.dropped, "every drop is counted for its metric too")
            #expect(cells["c_orders"]?.total == 10_000)
        }
    }

    @Test(
        "the Python producer writes lanes from threads that the Swift reader decodes exactly (a gauge's merge policy too), and refuses what it must"
    )
    func pythonProducerRoundTrip() throws {
        guard let python = try requiredSystemTool("python3") else { return }
        try withRingDirectory { directory in
            let count = 500, threads = 3
            let arguments = [
                kitFile("Tests/fixtures/py_producer.py"), kitFile("tools/python"), directory.path, "from-py",
                String(count), String(threads),
            ]
            let first = try runProcess(python, arguments, mergingErrors: true)
            #expect(first.status == 0, "\(first.output)")
            let lines = first.output.split(separator: "\n").map(String.init)
            let pid = lines.first.flatMap { $0.split(separator: " ").last } ?? "?"
            #expect(lines.contains { $0.hasPrefix("second producer refused: ") && $0.contains("(pid \(pid))") }, "\(first.output)")
            #expect(lines.contains { $0.hasPrefix("aarch64 refused: ") }, "\(first.output)")
            #expect(lines.contains("conflict refused") && lines.contains("merge conflict refused"), "\(first.output)")
            #expect(lines.contains { $0.hasPrefix("bad value refused: ") && $0.contains("py_latency") }, "\(first.output)")
            #expect(lines.contains("disabled wrote nothing"), "\(first.output)")
            #expect(lines.contains("wrote \(count * threads + 2) dropped 0 metrics 4"), "\(first.output)")
            let second = try runProcess(python, arguments, mergingErrors: true)
            #expect(second.status == 0, "\(second.output)")

            let (metrics, lanes, cells) = try drainDecoded("from-py", directory: directory)
            #expect(
                metrics
                    == registered([
                        ("py_latency", .histogram, .nanoseconds, "desk=δ-1\nsymbol=MSFT", "from Python", .last),
                        ("py_orders", .counter, .none, "", "", .last), ("py_level", .gauge, .none, "", "", .last),
                        ("py_in_flight", .gauge, .none, "", "", .sum),
                    ]))
            // Every thread wrote i * 1000 + 7 for i in 1...COUNT, in order, into its own lane (a
            // lane may be reused by a later thread, and so hold two runs' values one after the other).
            let latencies: [UInt64] = lanes.values.flatMap { records in records.filter { $0.metric == 0 }.map(\.value) }
            var expected: [UInt64] = []
            for i in 1...UInt64(count) { expected += Array(repeating: i * 1000 + 7, count: 2 * threads) }
            #expect(latencies.count == 2 * threads * count)
            #expect(latencies.sorted() == expected)
            #expect(lanes.values.allSatisfy { $0.allSatisfy { $0.metric != 1 } }, "counters write no records")
            #expect(cells["py_orders"]?.total == UInt64(2 * threads * count * 3))
            #expect(cells["py_level"]?.lastValue == -Double(count) * 0.25)
            #expect(cells["py_in_flight"]?.lastValue == Double(count))
            let status = try RingInspector("from-py", directory: directory).status()
            #expect(status.producerAttaches == 2 && !status.producerAlive && status.dropped == 0)
            #expect(status.maxMetrics == 16 && status.lanes.count >= 1 && status.lanes.count <= threads + 1)
        }
    }
}

/// Expects two lists of records to be equal, naming the first difference (not both lists).
func expectSame(_ records: [DecodedRecord], _ expected: [DecodedRecord], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(records.count == expected.count, "\(records.count) records, expected \(expected.count)", sourceLocation: sourceLocation)
    if let index = zip(records.indices, zip(records, expected)).first(where: { $0.1.0 != $0.1.1 })?.0 {
        Issue.record("record \(index) is \(records[index]), expected \(expected[index])", sourceLocation: sourceLocation)
    }
}

extension rs_kind {
    /// The kind as a record stores it.
    var rawValue8: UInt8 { UInt8(rawValue) }
}

/// The registry a producer's calls should leave: the metrics in order of registration (indices
/// from 0), each sampled every call.
private func registered(
    _ metrics: [(name: String, kind: MetricKind, unit: MetricUnit, labels: String, help: String, merge: GaugeMerge)]
) -> [MetricDescriptor] {
    metrics.enumerated().map { index, metric in
        MetricDescriptor(
            index: UInt32(index), name: metric.name, kind: metric.kind, unit: metric.unit, encodedLabels: metric.labels,
            help: metric.help, sampleEvery: 1, gaugeMerge: metric.merge)
    }
}
