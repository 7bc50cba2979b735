import CRingside
import Foundation
import Ringside
import RingsideTestSupport
import Testing

/// What a record says, for comparing whole rings at once.
struct DecodedRecord: Equatable, CustomStringConvertible {
    var metric: UInt32
    var kind: UInt8
    var value: UInt64
    var flags: UInt8 = 0

    var description: String { "(metric \(metric), kind \(kind), value \(value), flags \(flags))" }
}

/// Drains every record of a ring as its consumer, checking each one's sequence against its cursor.
func drainAll(_ name: String, directory: RingDirectory) throws -> (metrics: [MetricDescriptor], records: [DecodedRecord]) {
    let consumer = try RingConsumer(name, directory: directory)
    var records: [DecodedRecord] = []
    var badSequences = 0
    _ = try consumer.drain { batch, first in
        for (offset, record) in batch.enumerated() {
            if record.sequence != first + UInt64(offset) || record.reserved != 0 { badSequences += 1 }
            records.append(DecodedRecord(metric: record.metric, kind: record.kind, value: record.value, flags: record.flags))
        }
    }
    #expect(badSequences == 0, "records whose sequence is not their cursor")
    try consumer.refreshMetrics()
    return (consumer.metrics, records)
}

@Suite("producers in C, C++ and Python")
struct OtherLanguageProducerTests {
    /// What one run of Tests/fixtures/c_producer.c writes for COUNT = `count`.
    static func expectedCRecords(count: UInt64) -> [DecodedRecord] {
        var records: [DecodedRecord] = []
        for i in 1...count {
            records.append(DecodedRecord(metric: 0, kind: RS_KIND_HISTOGRAM.rawValue8, value: i))
            // Sampled 1 in 10: calls 1, 11, 21 ... are written.
            if (i - 1) % 10 == 0 { records.append(DecodedRecord(metric: 1, kind: RS_KIND_COUNTER.rawValue8, value: 2)) }
            records.append(DecodedRecord(metric: 2, kind: RS_KIND_GAUGE.rawValue8, value: (Double(i) + 0.5).bitPattern))
        }
        return records
    }

    @Test("a C program, and the same file built as C++, write rings the Swift reader decodes exactly; a second run re-attaches",
          arguments: ["c", "c++"])
    func cProducerRoundTrip(language: String) throws {
        guard let compiler = try requiredSystemTool(language == "c" ? "cc" : "c++") else { return }
        let build = try TemporaryDirectory("ringside-kit-\(language == "c" ? "c" : "cxx")")
        defer { build.remove() }
        let executable = build.path + "/c_producer"
        let flags = language == "c" ? ["-std=gnu11"] : ["-x", "c++", "-std=c++17"]
        let compiled = try run(compiler, flags + ["-O2", "-Wall", "-Wextra", "-Werror", "-I", kitFile("Sources/CRingside/include"),
                                                  kitFile("Tests/fixtures/c_producer.c"), "-o", executable])
        try #require(compiled.status == 0, "\(compiler) failed:\n\(compiled.output)")

        try withRingDirectory { directory in
            let count: UInt64 = 900 // two runs of 1,890 records fit the ring of 4,096
            let line = "wrote \(count * 2 + count / 10) dropped 0 metrics 3\n"
            let first = try run(executable, [directory.path, "from-c", String(count)])
            #expect(first.status == 0 && first.output == line, "\(first.output)")
            let second = try run(executable, [directory.path, "from-c", String(count)])
            #expect(second.status == 0 && second.output == line, "the second run registers the same 3 metrics: \(second.output)")

            let (metrics, records) = try drainAll("from-c", directory: directory)
            #expect(metrics == [
                MetricDescriptor(index: 0, name: "c_latency", kind: .histogram, unit: .microseconds,
                                 encodedLabels: "symbol=AAPL\nvenue=XNAS", help: "from C", sampleEvery: 1),
                MetricDescriptor(index: 1, name: "c_orders", kind: .counter, unit: .none, encodedLabels: "", help: "", sampleEvery: 10),
                MetricDescriptor(index: 2, name: "c_exposure", kind: .gauge, unit: .bytes, encodedLabels: "", help: "", sampleEvery: 1),
            ])
            let expected = Self.expectedCRecords(count: count)
            expectSame(records, expected + expected)

            let status = try RingInspector("from-c", directory: directory).status()
            #expect(status.capacity == 4096 && status.maxMetrics == 8)
            #expect(status.producerAttaches == 2 && !status.producerAlive && status.dropped == 0)
            #expect(status.formatVersion == RS_FORMAT_VERSION)
        }
    }

    @Test("a C producer's full ring drops and counts, like the Swift producer's")
    func cProducerDrops() throws {
        guard let compiler = try requiredSystemTool("cc") else { return }
        let build = try TemporaryDirectory("ringside-kit-c")
        defer { build.remove() }
        let executable = build.path + "/c_producer"
        let compiled = try run(compiler, ["-std=gnu11", "-O2", "-I", kitFile("Sources/CRingside/include"),
                                          kitFile("Tests/fixtures/c_producer.c"), "-o", executable])
        try #require(compiled.status == 0, "\(compiler) failed:\n\(compiled.output)")
        try withRingDirectory { directory in
            // 3000 values: 6300 records into a ring of 4096 with nobody draining.
            let result = try run(executable, [directory.path, "full", "3000"])
            #expect(result.output == "wrote 4096 dropped 2204 metrics 3\n", "\(result.output)")
            let status = try RingInspector("full", directory: directory).status()
            #expect(status.writeCursor == 4096 && status.dropped == 2204)
        }
    }

    @Test("the Python producer writes rings the Swift reader decodes exactly, refuses a second producer and other CPUs")
    func pythonProducerRoundTrip() throws {
        guard let python = try requiredSystemTool("python3") else { return }
        try withRingDirectory { directory in
            let count = 500
            let arguments = [kitFile("Tests/fixtures/py_producer.py"), kitFile("tools/python"), directory.path, "from-py", String(count)]
            let first = try run(python, arguments)
            #expect(first.status == 0, "\(first.output)")
            let lines = first.output.split(separator: "\n").map(String.init)
            #expect(lines.contains("second producer refused: ring from-py: another producer is attached (pid \(lines.first.flatMap { $0.split(separator: " ").last } ?? "?")); a ring has one producer"),
                    "\(first.output)")
            #expect(lines.contains { $0.hasPrefix("aarch64 refused: ringside.py needs x86-64") }, "\(first.output)")
            #expect(lines.contains("conflict refused"), "\(first.output)")
            #expect(lines.contains("disabled wrote nothing"), "\(first.output)")
            #expect(lines.last == "wrote \(count * 2 + count / 4) dropped 0 metrics 3", "\(first.output)")
            let second = try run(python, arguments)
            #expect(second.status == 0 && second.output.hasSuffix("wrote \(count * 2 + count / 4) dropped 0 metrics 3\n"),
                    "\(second.output)")

            let (metrics, records) = try drainAll("from-py", directory: directory)
            #expect(metrics == [
                MetricDescriptor(index: 0, name: "py_latency", kind: .histogram, unit: .nanoseconds,
                                 encodedLabels: "desk=δ-1\nsymbol=MSFT", help: "from Python", sampleEvery: 1),
                MetricDescriptor(index: 1, name: "py_orders", kind: .counter, unit: .none, encodedLabels: "", help: "", sampleEvery: 4),
                MetricDescriptor(index: 2, name: "py_level", kind: .gauge, unit: .none, encodedLabels: "", help: "", sampleEvery: 1),
            ])
            var expected: [DecodedRecord] = []
            for i in 1...UInt64(count) {
                expected.append(DecodedRecord(metric: 0, kind: RS_KIND_HISTOGRAM.rawValue8, value: i * 1000 + 7))
                if (i - 1) % 4 == 0 { expected.append(DecodedRecord(metric: 1, kind: RS_KIND_COUNTER.rawValue8, value: 3)) }
                expected.append(DecodedRecord(metric: 2, kind: RS_KIND_GAUGE.rawValue8, value: (-Double(i) * 0.25).bitPattern))
            }
            expectSame(records, expected + expected)
            let status = try RingInspector("from-py", directory: directory).status()
            #expect(status.producerAttaches == 2 && !status.producerAlive && status.dropped == 0)
            #expect(status.capacity == 8192 && status.maxMetrics == 16)
        }
    }

    @Test("ringside.py --bench runs and reports a cost per call (the figure is for the README, not a threshold)")
    func pythonBenchRuns() throws {
        guard let python = try requiredSystemTool("python3") else { return }
        let result = try run(python, [kitFile("tools/python/ringside.py"), "--bench", "--calls", "2000", "--repeats", "1", "--json"])
        #expect(result.status == 0, "\(result.output)")
        let report = try jsonObject(result.output)
        for row in ["histogram.record", "counter.increment", "gauge.set"] {
            let nanos = try #require(report[row] as? Double, "\(row) missing: \(result.output)")
            #expect(nanos > 0)
        }
        #expect(report["dropped"] as? Int == 0)
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
