import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideTestSupport
import Testing

@Suite("ringside-emit writes every value a script gives it")
struct EmitToolTests {
    private func emit(_ directory: RingDirectory, _ arguments: [String], stdin: String = "") throws -> ProcessRun {
        try runProcess("ringside-emit", ["--dir", directory.path] + arguments, stdin: stdin)
    }

    @Test("values on the command line: creates the ring, registers the metric as asked, writes them")
    func commandLineValues() throws {
        try withRingDirectory { directory in
            let run = try emit(
                directory,
                [
                    "--ring", "cron", "backup_seconds", "--unit", "s", "--label", "host=db1",
                    "--label", "job=nightly", "12", "7", "0",
                ])
            #expect(run.status == 0)
            #expect(run.output == "wrote 3 values to cron/backup_seconds\n")
            let inspector = try RingInspector("cron", directory: directory)
            let metric = try #require(try inspector.metrics().first)
            #expect(metric.name == "backup_seconds" && metric.kind == .histogram && metric.unit == .seconds)
            #expect(metric.labelDictionary == ["host": "db1", "job": "nightly"])
            #expect(try inspector.peek().map(\.record.value) == [12, 7, 0])
            // A second run finds the metric again, and gauges take decimals, negative ones too.
            #expect(
                try emit(
                    directory,
                    [
                        "--ring", "cron", "backup_seconds", "--unit", "s", "--label", "job=nightly",
                        "--label", "host=db1", "5",
                    ]
                ).status == 0)
            #expect(try emit(directory, ["--ring", "cron", "temperature", "--kind", "gauge", "-1.5", "2e3"]).status == 0)
            let records = try inspector.peek().map(\.record)
            #expect(records.count == 6 && records[3].metric == 0 && records[3].value == 5)
            #expect(records[4...].map { Double(bitPattern: $0.value) } == [-1.5, 2000])
            #expect(try inspector.metrics().map(\.name) == ["backup_seconds", "temperature"])
        }
    }

    @Test("--resolution and --signed: decimals read exactly in steps, a finer one refused; ringside-dump shows them as written")
    func signedAndFractionalValues() throws {
        try withRingDirectory { directory in
            let run = try emit(
                directory, ["--ring", "desk", "slippage_bps", "--resolution", "0.01", "--signed", "--", "-3.25", "1.5", "0", "-0.07"])
            #expect(run.status == 0, "\(run.errors)")
            let inspector = try RingInspector("desk", directory: directory)
            let metric = try #require(try inspector.metrics().first)
            #expect(metric.isSigned && metric.scale == -2)
            #expect(try inspector.peek().map { OffsetBinary.value($0.record.value) } == [-325, 150, 0, -7])
            let finer = try emit(directory, ["--ring", "desk", "slippage_bps", "--resolution", "0.01", "--signed", "0.001"])
            #expect(finer.status == 2 && finer.errors.contains("finer than the resolution"), "\(finer.errors)")
            let unsigned = try emit(directory, ["--ring", "desk", "fill_usd", "--resolution", "0.01", "--", "-1"])
            #expect(unsigned.status == 2 && unsigned.errors.contains("negative"), "\(unsigned.errors)")
            #expect(
                try emit(directory, ["--ring", "desk", "fees_usd", "--kind", "counter", "--resolution", "1e-6", "0.37", "1.000001"]).status
                    == 0)
            let stats = try runProcess("ringside-dump", ["--dir", directory.path, "stats", "desk", "--json"])
            #expect(stats.output.contains(#""min":-3.25,"p50":-0.07"#), "\(stats.output)")
            #expect(stats.output.contains(#""total":1.370001"#), "\(stats.output)")
            let records = try runProcess("ringside-dump", ["--dir", directory.path, "records", "desk"])
            #expect(records.output.contains("-3.25") && records.output.contains("-0.07"), "\(records.output)")
            let bad = try emit(directory, ["--ring", "desk", "x", "--resolution", "0.03", "1"])
            #expect(bad.status == 2 && bad.errors.contains("a power of ten"), "\(bad.errors)")
        }
    }

    @Test("a full registry is explained in emit's terms, not the library's options")
    func registryFull() throws {
        try withRingDirectory { directory in
            do {
                let bot = try Bot.attach("crowded", directory: directory.path, options: .init(laneCapacity: 1024, maxMetrics: 2))
                _ = try bot.counter("first")
                _ = try bot.counter("second")
            }
            let run = try emit(directory, ["--ring", "crowded", "third", "--kind", "counter", "1"])
            #expect(run.status == 1)
            #expect(run.errors.contains("ring crowded: the metric registry is full (2 metrics"), "\(run.errors)")
            #expect(run.errors.contains("emit into another ring (--ring)") && !run.errors.contains("maxMetrics"), "\(run.errors)")
        }
    }

    @Test("a ring of another size is explained in emit's terms, once: --capacity, --ring, ringside-dump clean")
    func incompatibleRing() throws {
        try withRingDirectory { directory in
            #expect(try emit(directory, ["--ring", "sized", "--capacity", "1024", "m", "1"]).status == 0)
            let run = try emit(directory, ["--ring", "sized", "--capacity", "4096", "m", "1"])
            #expect(run.status == 1)
            #expect(
                run.errors.contains("ring sized: the existing ring is incompatible: ") && run.errors.contains("lanes of 1024 records"),
                "\(run.errors)")
            #expect(run.errors.contains("leave out --capacity") && !run.errors.contains("recreate"), "\(run.errors)")
        }
    }

    @Test("lines from standard input; a bad line is reported with its number and skipped, never read as 0")
    func standardInput() throws {
        try withRingDirectory { directory in
            let run = try emit(
                directory, ["--ring", "pipe", "fills", "--kind", "counter"],
                stdin: "3\n  4 \nabc\n\n-2\n1.5\n99999999999999999999\n5\r\n")
            #expect(run.status == 1)
            #expect(run.output == "wrote 3 values to pipe/fills, skipped 4 bad lines\n")
            #expect(run.errorLines.count == 4)
            #expect(
                run.errorLines[0]
                    == "ringside-emit: line 3: \"abc\": not a number: counters take whole numbers from 0 to 18446744073709551615; skipped")
            #expect(run.errorLines[1].hasPrefix("ringside-emit: line 5: \"-2\": negative"))
            #expect(run.errorLines[2].hasPrefix("ringside-emit: line 6: \"1.5\": not a whole number"))
            #expect(run.errorLines[3].hasPrefix("ringside-emit: line 7: \"99999999999999999999\": out of range"))
            // A counter's values are increments added to its cell (counters write no records): 3 + 4 + 5.
            let inspector = try RingInspector("pipe", directory: directory)
            let counter = try #require(try inspector.metrics().first)
            #expect(try inspector.cells(of: counter).total == 12)
            #expect(try inspector.peek().isEmpty)
        }
    }

    @Test("values are written as the lines arrive, not at end of file")
    func streaming() throws {
        try withRingDirectory { directory in
            let emitter = try RunningProcess("ringside-emit", ["--dir", directory.path, "--ring", "tail", "lag", "--unit", "ms"])
            func values() -> [UInt64] { (try? RingInspector("tail", directory: directory).peek().map(\.record.value)) ?? [] }
            emitter.write("17\n")
            #expect(eventually { values() == [17] })
            #expect(emitter.isRunning)
            emitter.write("18\n19\n")
            #expect(eventually { values() == [17, 18, 19] })
            let run = emitter.finish()
            #expect(run.status == 0 && run.output == "wrote 3 values to tail/lag\n")
        }
    }

    @Test("a full ring waits for a collector to make room: every value gets in, in order")
    func waitsForRoom() throws {
        try withRingDirectory { directory in
            _ = try Bot.attach("small", directory: directory.path, options: .init(laneCapacity: 16))  // made, then let go
            let emitter = try RunningProcess(
                "ringside-emit", ["--dir", directory.path, "--ring", "small", "n"] + (1...100).map(String.init))
            #expect(eventually { (try? RingInspector("small", directory: directory).status().backlog) == 16 })
            #expect(emitter.isRunning, "waiting for room, not dropping")
            let consumer = try RingConsumer("small", directory: directory)
            var received: [UInt64] = []
            #expect(
                try eventually(seconds: 20) {
                    try consumer.drain { records, _ in received += records.map(\.value) }
                    return received.count == 100
                })
            let run = emitter.finish()
            #expect(run.status == 0 && run.output == "wrote 100 values to small/n\n")
            #expect(run.errors.contains("is full; waiting for a collector"))
            #expect(received == Array(1...100))
            #expect(try consumer.status().dropped == 0)
        }
    }

    @Test("a counter never waits for room: its increments go to the cells, even when the ring is full")
    func counterInFullRing() throws {
        try withRingDirectory { directory in
            #expect(try emit(directory, ["--ring", "busy", "fills", "--capacity", "16"] + (1...16).map(String.init)).status == 0)
            #expect(try RingInspector("busy", directory: directory).status().backlog == 16)
            // No collector drains this ring: a counter that waited for room would never finish.
            let emitter = try RunningProcess(
                "ringside-emit",
                [
                    "--dir", directory.path, "--ring", "busy", "orders", "--kind", "counter",
                    "5", "6",
                ])
            let finished = eventually(seconds: 30) { !emitter.isRunning }
            #expect(finished, "the counter waited for room it does not need")
            if !finished { kill(emitter.pid, SIGKILL) }
            let run = emitter.finish()
            #expect(run.status == 0 && run.output == "wrote 2 values to busy/orders\n" && run.errors.isEmpty)
            let inspector = try RingInspector("busy", directory: directory)
            let orders = try #require(try inspector.metrics().first { $0.name == "orders" })
            #expect(try inspector.cells(of: orders).total == 11)
            #expect(try inspector.status().dropped == 0, "nothing was dropped either")
        }
    }

    @Test("--exemplar: each histogram value carries the exemplar, its bytes in the records after it")
    func exemplars() throws {
        try withRingDirectory { directory in
            let run = try emit(
                directory,
                ["--ring", "cron", "job_seconds", "--unit", "s", "--exemplar", "job_id=1234", "--exemplar", "host=db1", "42", "7"])
            #expect(run.status == 0 && run.output == "wrote 2 values to cron/job_seconds\n", "\(run.errors)")
            let records = try RingInspector("cron", directory: directory).peek().map(\.record)
            // 20 bytes: two exemplar records (kind 4) after each value (kind 3, flagged).
            #expect(records.map(\.kind) == [3, 4, 4, 3, 4, 4])
            #expect(records.map(\.exemplar_length) == [20, 0, 0, 20, 0, 0])
            #expect(records[0].value == 42 && records[3].value == 7)
            var bytes: [UInt8] = []
            for record in records[1...2] {
                withUnsafeBytes(of: record.timestamp_ns) { bytes += $0 }
                withUnsafeBytes(of: record.value) { bytes += $0 }
            }
            #expect(String(decoding: bytes.prefix(20), as: UTF8.self) == "job_id=1234\nhost=db1")
            let check = try runProcess("ringside-dump", ["--dir", directory.path, "check", "cron"])
            #expect(check.status == 0, "\(check.output) \(check.errors)")
        }
    }

    @Test("--exemplar in a full ring waits for room for the value and its exemplar records: none is dropped")
    func exemplarsWaitForRoom() throws {
        try withRingDirectory { directory in
            _ = try Bot.attach("small", directory: directory.path, options: .init(laneCapacity: 16))  // made, then let go
            // 3 slots a value (20 bytes of exemplar): 16 slots hold 5 values and leave 1, too few for a sixth.
            let emitter = try RunningProcess(
                "ringside-emit",
                ["--dir", directory.path, "--ring", "small", "n", "--exemplar", "order_id=A17", "--exemplar", "venue=X"]
                    + (1...20).map(String.init))
            #expect(eventually { (try? RingInspector("small", directory: directory).status().backlog) == 15 })
            let consumer = try RingConsumer("small", directory: directory)
            var received: [UInt64] = []
            #expect(
                try eventually(seconds: 20) {
                    try consumer.drain { records, _ in received += records.filter { $0.kind == 3 }.map(\.value) }
                    return received.count == 20
                })
            let run = emitter.finish()
            #expect(run.status == 0 && run.output == "wrote 20 values to small/n\n", "\(run.output) \(run.errors)")
            #expect(received == Array(1...20))
            #expect(try consumer.status().dropped == 0)
        }
    }

    @Test("--drop drops and counts instead of waiting")
    func drops() throws {
        try withRingDirectory { directory in
            let run = try emit(directory, ["--ring", "lossy", "n", "--capacity", "16", "--drop"] + (1...40).map(String.init))
            #expect(run.status == 0)
            #expect(run.output == "wrote 16 values to lossy/n, dropped 24 (the ring was full)\n")
            let status = try RingInspector("lossy", directory: directory).status()
            #expect(status.writeCursor == 16 && status.dropped == 24)
        }
    }

    @Test("attaches to an existing ring of any size")
    func existingRing() throws {
        try withRingDirectory { directory in
            try makeSequenceRing(directory, "odd", count: 3, capacity: 32)
            #expect(try emit(directory, ["--ring", "odd", "extra", "9"]).status == 0)
            let status = try RingInspector("odd", directory: directory).status()
            #expect(status.capacity == 32 && status.writeCursor == 4)
            #expect(status.lanes.count == 1, "the lane the exited producer held is taken over")
        }
    }

    @Test("a ring whose producer lives is refused, naming the producer")
    func liveProducer() throws {
        try withRingDirectory { directory in
            let bot = try holdRing(directory, "bot", count: 1)
            let run = try emit(directory, ["--ring", "bot", "x", "1"])
            #expect(run.status == 1)
            let refusal =
                "another producer is attached (pid \(bot.pid)); a bot has one process, or several as its workers (the worker option)"
            #expect(run.errors == "ringside-emit: ring bot: \(refusal)\n")
        }
    }

    @Test(
        "usage errors: exit 2, one line, and nothing written",
        arguments: [
            ["x", "1"], ["--ring", "r"], ["--ring", "r", "9bad", "1"], ["--ring", "r", "m", "abc"], ["--ring", "r", "m", "-1"],
            ["--ring", "r", "m", "--kind", "summary", "1"], ["--ring", "r", "m", "--unit", "parsecs", "1"],
            ["--ring", "r", "m", "--kind", "counter", "--unit", "ms", "1"], ["--ring", "r", "m", "--label", "novalue", "1"],
            ["--ring", "r", "m", "--label", "9k=v", "1"], ["--ring", "r", "m", "--capacity", "100", "1"],
            ["--ring", "r", "m", "--kind", "gauge", "nan"], ["--ring", "bad/name", "m", "1"], ["--ring", "r", "m", "--frob"],
            ["--ring", "r", "m", "--kind", "counter", "--exemplar", "a=b", "1"], ["--ring", "r", "m", "--exemplar", "novalue", "1"],
            ["--ring", "r", "m", "--exemplar", "a=1", "--exemplar", "a=2", "1"],
            ["--ring", "r", "m", "--exemplar", "order_id=" + String(repeating: "9", count: 60), "1"],
        ])
    func usageErrors(arguments: [String]) throws {
        try withRingDirectory { directory in
            let run = try emit(directory, arguments)
            #expect(run.status == 2)
            #expect(run.output.isEmpty)
            #expect(run.errorLines.count == 1 && run.errors.hasPrefix("ringside-emit: "), "\(run.errors)")
            #expect(directory.ringNames().isEmpty)
        }
    }

    @Test("--help, whose default --capacity is the capacity of the lanes a ring emit creates has")
    func help() throws {
        let run = try runProcess("ringside-emit", ["--help"])
        #expect(run.status == 0 && run.output.hasPrefix("usage: ringside-emit --ring NAME METRIC"))
        let said = try #require(
            run.output.components(separatedBy: "default: an existing ring's, else ").dropFirst().first?.prefix { $0.isNumber },
            "--help names no default capacity")
        try withRingDirectory { directory in
            #expect(try emit(directory, ["--ring", "fresh", "x", "1"]).status == 0)
            let capacity = try RingInspector("fresh", directory: directory).status().capacity
            #expect(String(said) == String(capacity), "--help says \(said) records; a new ring's lanes hold \(capacity)")
        }
    }
}
