import RingsideSystem
import CRingside
import Dispatch
import Foundation
import Ringside
import RingsideAggregation
@testable import RingsideCollector
import RingsideExport
import RingsideSnapshot
import RingsideTestSupport
import Synchronization
import Testing

@Suite("Exemplars: written with their values, put back together, kept by the slowest, exported")
struct ExemplarTests {
    @Test("an exemplar is checked when it is made: too long or malformed is an error, never a cut one")
    func exemplarsAreChecked() throws {
        #expect(try Bot.Exemplar("order_id", "A17").encoded == "order_id=A17")
        #expect(try Bot.Exemplar(["order_id": "A17", "trace_id": "0af7651916cd43dd"]).encoded == "order_id=A17\ntrace_id=0af7651916cd43dd")
        let longest = "k=" + String(repeating: "x", count: Bot.Exemplar.maxBytes - 2)
        #expect(try Bot.Exemplar(encoded: longest).encoded == longest)
        #expect(throws: RingError.self) { try Bot.Exemplar(encoded: longest + "x") }
        for bad in ["", "=x", "a", "1a=b", "a b=c", "a=b\n", "a=1\na=2", "a=b\u{0}c"] {
            #expect(throws: RingError.self, "\(bad.debugDescription)") { try Bot.Exemplar(encoded: bad) }
        }
        do {
            _ = try Bot.Exemplar("order_id", String(repeating: "9", count: 60))
            Issue.record("a 69-byte exemplar was accepted")
        } catch {
            #expect(error.description.contains("69 bytes, over the 64"), "\(error)")
        }
    }

    @Test("a value with an exemplar is its record and one exemplar record per 16 bytes, published together")
    func recordsOnTheLane() throws {
        try withBot("ex", options: .init(laneCapacity: 16)) { directory, bot in
            let fill = try bot.histogram("fill", unit: .nanoseconds)
            fill.record(10, exemplar: try Bot.Exemplar("order_id", "A17"))  // 12 bytes: one more record
            fill.record(11, exemplar: try Bot.Exemplar("trace_id", "0af7651916cd43dd8448eb211c80319c"))  // 41: three
            fill.record(12)
            let consumer = try RingConsumer("ex", directory: directory)
            var records: [RingRecord] = []
            try consumer.drain { batch, _ in records += batch }
            #expect(records.map(\.kind) == [3, 4, 3, 4, 4, 4, 3])
            #expect(records.map(\.flags) == [2, 0, 2, 0, 0, 0, 0])
            #expect(records.map(\.exemplar_length) == [12, 0, 41, 0, 0, 0, 0])
            #expect(records.enumerated().allSatisfy { $0.element.sequence == UInt64($0.offset) && $0.element.metric == 0 })
            var bytes: [UInt8] = []
            for record in records[3...5] {
                withUnsafeBytes(of: record.timestamp_ns) { bytes += $0 }
                withUnsafeBytes(of: record.value) { bytes += $0 }
            }
            #expect(String(decoding: bytes.prefix(41), as: UTF8.self) == "trace_id=0af7651916cd43dd8448eb211c80319c")
            #expect(bytes.dropFirst(41).allSatisfy { $0 == 0 }, "the last record zero-padded")
            fill.record(13, exemplar: try Bot.Exemplar("order_id", "A18"))
            let check = try runProcess("ringside-dump", ["--dir", directory.path, "check", "ex"])
            #expect(check.status == 0 && check.output.contains("ring ex: ok (2 records"), "\(check.output) \(check.errors)")
            // Two groups in the backlog: a peek puts each exemplar record right after its value
            // (its timestamp_ns holds bytes, not a time), and the check reads them so.
            fill.record(14, exemplar: try Bot.Exemplar("order_id", "A19"))
            let peeked = try RingInspector("ex", directory: directory).peek()
            let kinds: [UInt8] = peeked.map(\.record.kind)
            let values: [UInt64] = [peeked[0].record.value, peeked[2].record.value]
            #expect(kinds == [3, 4, 3, 4] && values == [13, 14])
            let checkTwo = try runProcess("ringside-dump", ["--dir", directory.path, "check", "ex"])
            #expect(checkTwo.status == 0 && checkTwo.output.contains("ring ex: ok (4 records"), "\(checkTwo.output) \(checkTwo.errors)")
            try consumer.drain { _, _ in }

            // A lane without room for a value and all its exemplar records drops the value, once.
            let full = try bot.histogram("full", unit: .nanoseconds)
            // 16 slots free: four values of four records each fit, the fifth and sixth do not.
            for _ in 0..<6 { full.record(1, exemplar: try Bot.Exemplar("trace_id", "0af7651916cd43dd8448eb211c80319c")) }
            let status = try consumer.status()
            #expect(status.writeCursor == 11 + 16 && status.dropped == 2, "\(status.writeCursor) written, \(status.dropped) dropped")
            _ = try consumer.refreshMetrics()
            #expect(consumer.cells(of: try #require(consumer.metrics.first { $0.name == "full" })).dropped == 2)
        }
    }

    @Test("a value with an exemplar is stamped with the precise clock: never before its call (CLOCKS in ringside.h)")
    func exemplarStampNeverPrecedesItsCall() throws {
        try withBot("stamp", options: .init(laneCapacity: 4096)) { directory, bot in
            let fill = try bot.histogram("fill", unit: .nanoseconds)
            let exemplar = try Bot.Exemplar("order_id", "A17")
            // The coarse clock lags CLOCK_MONOTONIC by up to its resolution (a few ms): over a
            // thousand calls spread over milliseconds, a coarse stamp would fall before its call.
            var before: [UInt64] = []
            for index in 0..<1_000 {
                before.append(rs_clock_precise_ns())
                fill.record(UInt64(index), exemplar: exemplar)
                if index % 100 == 99 { usleep(1_000) }
            }
            let consumer = try RingConsumer("stamp", directory: directory)
            var records: [RingRecord] = []
            try consumer.drain { batch, _ in records += batch }
            let values = records.filter { $0.kind == 3 }
            try #require(values.count == before.count)
            let early = zip(values, before).filter { $0.0.timestamp_ns < $0.1 }.count
            #expect(early == 0, "\(early) of \(before.count) stamped before their call")
        }
    }

    @Test("nameThread names the calling thread's lane, cut to 32 bytes at a character's boundary; a NUL is refused")
    func namedThread() throws {
        try withBot("named") { directory, bot in
            let fill = try bot.histogram("fill")
            let recorded = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
            let refused = Locked(false)
            let thread = Thread {
                try? bot.nameThread("order-desk-" + String(repeating: "é", count: 12))  // 11 + 24 bytes
                fill.record(1)
                refused.withLock { $0 = (try? bot.nameThread("a\u{0}b")) == nil }
                recorded.signal()
                done.wait()  // alive, holding its lane, while the test reads it
            }
            thread.start()
            recorded.wait()
            defer { done.signal() }
            #expect(refused.withLock { $0 })
            let name = try RingConsumer("named", directory: directory).thread(lane: 0).name
            #expect(name == "order-desk-" + String(repeating: "é", count: 10), "31 bytes: 11 and ten é")
        }
    }

    @Test("the collector keeps the largest values' exemplars per window and each bucket's latest, with who recorded them")
    func collectorKeepsTheSlowest() throws {
        try withBot("trader", options: .init(laneCapacity: 4096)) { directory, bot in
            let fill = try bot.histogram("fill", unit: .microseconds)
            for order in 1...200 {
                let value = UInt64(order % 50 == 0 ? 5_000 + order : 100 + order % 7)
                fill.record(value, exemplar: try Bot.Exemplar("order_id", "A\(order)"))
            }
            fill.record(1)  // a value without one
            let collector = try makeCollector(directory, captured: CapturedLog())
            let snapshot = pass(collector)
            let series = try #require(snapshot.series("fill", ring: "trader"))
            #expect(series.cumulativeCount == 201 && series.windows[0].count == 201)
            let largest = series.windows[0].exemplars
            #expect(largest.map(\.value) == [5_200, 5_150, 5_100, 5_050, 106], "\(largest.map(\.value))")
            #expect(largest.first?.labels == "order_id=A200" && largest.first.map { Int128($0.value) } == series.windows[0].max)
            #expect(largest.first?.pid == getpid())
            #expect((largest.first?.threadID ?? 0) > 0, "the lane's thread")
            let now = UInt64(Date().timeIntervalSince1970 * 1e9)
            #expect(largest.allSatisfy { $0.wallTimeNanos <= now + 1_000_000_000 && $0.wallTimeNanos + 60_000_000_000 >= now })
            // Buckets of schema 0 (powers of two of a second): 100-106 us and 5.05-5.2 ms are one each.
            #expect(series.bucketExemplars.map(\.labels) == ["order_id=A199", "order_id=A200"], "\(series.bucketExemplars.map(\.labels))")
            #expect(snapshot.ring("trader")?.rejectedTotal == 0)

            // OpenMetrics: each bucket's latest exemplar on its line, in seconds, with its wall time.
            let page = String(decoding: PrometheusRenderer().render(snapshot, format: .openMetrics), as: UTF8.self)
            let line = try #require(page.split(separator: "\n").first { $0.hasPrefix("fill_seconds_bucket{ring=\"trader\",le=\"0.01\"}") })
            #expect(line.contains(" # {order_id=\"A200\"} 0.0052 "), "\(line)")
            #expect(page.split(separator: "\n").filter { $0.contains(" # {") }.count == 2)
            let text = String(decoding: PrometheusRenderer().render(snapshot, format: .text), as: UTF8.self)
            #expect(!text.contains(" # {"), "Prometheus's text format has no exemplars")
        }
    }

    @Test("an exemplar of a thread that let go of its lane before the drain names the thread the collector saw holding it")
    func exemplarOfAThreadThatLeft() throws {
        try withBot("leaving") { directory, bot in
            let fill = try bot.histogram("fill")
            let recorded = DispatchSemaphore(value: 0), goOn = DispatchSemaphore(value: 0)
            let threadID = Locked<Int32>(0)
            let first = try Bot.Exemplar("order_id", "A1"), second = try Bot.Exemplar("order_id", "A2")
            let thread = Thread {
                threadID.withLock { $0 = currentThreadID() }
                try? bot.nameThread("leaver")
                fill.record(1, exemplar: first)
                recorded.signal()
                goOn.wait()
                fill.record(1_000, exemplar: second)
            }  // the thread exits: its lane is retired, owner_tid 0
            thread.start()
            recorded.wait()
            let collector = try makeCollector(directory, captured: CapturedLog())
            pass(collector)  // the collector sees the thread holding lane 0
            goOn.signal()
            let tid = threadID.withLock { $0 }
            let deadline = Date().addingTimeInterval(30)
            while FileManager.default.fileExists(atPath: "/proc/self/task/\(tid)") && Date() < deadline { usleep(1_000) }
            let snapshot = pass(collector)
            #expect(snapshot.ring("leaving")?.lanes.first?.threadID == 0, "the lane is retired")
            let slowest = try #require(snapshot.series("fill", ring: "leaving")?.windows[0].exemplars.first)
            #expect(
                slowest.labels == "order_id=A2" && slowest.threadID == tid && slowest.threadName == "leaver",
                "\(slowest.labels) \(slowest.threadID) \(slowest.threadName) (thread \(tid))")
        }
    }

    @Test("a group split over two drains is put back together; strays, cut groups and bad bytes are rejected, the values kept")
    func assemblerTrustsNothing() {
        func record(
            _ kind: UInt8, _ sequence: UInt64, value: UInt64 = 0, flags: UInt8 = 0, length: UInt16 = 0, bytes: String = ""
        )
            -> RingRecord
        {
            guard kind != 4 else { return .exemplarPart(bytes, sequence: sequence) }
            return RingRecord(
                timestamp_ns: 0, value: value, sequence: sequence, metric: 0, kind: kind, flags: flags, exemplar_length: length)
        }
        var assembler = ExemplarAssembler()
        func begin(_ record: RingRecord, lane: Int, slot: Int?) -> Bool {
            assembler.begin(record, at: record.sequence, lane: lane, slot: slot)
        }
        func take(_ record: RingRecord, at cursor: UInt64, lane: Int) -> ExemplarAssembler.Outcome {
            assembler.take(record, at: cursor, lane: lane)
        }
        func abandon(lane: Int) -> Bool { assembler.abandon(lane: lane) }
        // 20 bytes over two parts, the second in the next drain.
        #expect(begin(record(3, 0, value: 7, flags: 2, length: 20), lane: 1, slot: 3))
        #expect(take(record(4, 1, bytes: "order_id=ABCDEFG"), at: 1, lane: 1) == .part)
        #expect(assembler.isPending(lane: 1) && !assembler.isPending(lane: 0))
        #expect(
            take(record(4, 2, bytes: "1234"), at: 2, lane: 1) == .complete(slot: 3, value: 7, timeNanos: 0, labels: "order_id=ABCDEFG1234"))
        // A part with nothing begun, or out of sequence.
        #expect(take(record(4, 3, bytes: "a=b"), at: 3, lane: 1) == .stray)
        #expect(begin(record(3, 4, flags: 2, length: 3), lane: 1, slot: 3))
        #expect(take(record(4, 9, bytes: "a=b"), at: 6, lane: 1) == .stray)
        // Lengths no producer writes, bytes that are no exemplar, padding that is not zero.
        #expect(!begin(record(3, 7, flags: 2, length: 65), lane: 0, slot: 3))
        #expect(!begin(record(3, 7, flags: 2, length: 0), lane: 0, slot: 3))
        #expect(begin(record(3, 7, flags: 2, length: 3), lane: 0, slot: 3))
        #expect(take(record(4, 8, bytes: "a b"), at: 8, lane: 0) == .malformed(parts: 1))
        #expect(begin(record(3, 9, flags: 2, length: 3), lane: 0, slot: 3))
        #expect(take(record(4, 10, bytes: "a=bc"), at: 10, lane: 0) == .malformed(parts: 1))
        #expect(begin(record(3, 11, flags: 2, length: 3), lane: 0, slot: nil))
        #expect(take(record(4, 12, bytes: "a=b"), at: 12, lane: 0) == .unwanted)
        // A group cut short by another record is abandoned.
        #expect(begin(record(3, 13, flags: 2, length: 20), lane: 0, slot: 3))
        #expect(abandon(lane: 0) && !abandon(lane: 0))
    }
}
