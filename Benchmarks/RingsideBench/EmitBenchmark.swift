import CRingside
import CRingsideBench
import Foundation
import Ringside
import RingsideAggregation
import RingsideCollector
import RingsideExport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
import RingsideJSON
import RingsideSystem

/// How long and how finely to measure.
package struct BenchSettings: Sendable, Equatable {
    /// Seconds of measurement per emit row (over all its rounds), and per collector phase.
    package var seconds: Double
    /// Calls per timed batch.
    package var batchSize: Int
    /// Emit rounds: each runs every row once, in order, for `seconds / rounds`.
    package var rounds: Int
    /// The collector's `--poll` in the collector benchmark's live run.
    package var collectorPollNanos: UInt64
    /// Records in the emit rows' rings (and in each of the bot rows' lanes). The rows write 50 to
    /// 150 M records/s, a hundred times a busy bot's rate, so the default is 8 times the
    /// library's (10 ms of them instead of about 1): a consumer that the scheduler pauses for a
    /// tick does not turn the rows into drops.
    package var ringCapacity: Int

    package init(
        seconds: Double = 2, batchSize: Int = 16, rounds: Int = 5,
        collectorPollNanos: UInt64 = CollectorOptions().pollNanos, ringCapacity: Int = 1 << 20
    ) {
        self.seconds = seconds
        self.batchSize = batchSize
        self.rounds = rounds
        self.collectorPollNanos = collectorPollNanos
        self.ringCapacity = ringCapacity
    }

    /// `--quick`: a few seconds in all.
    package static let quick = BenchSettings(seconds: 0.25, rounds: 3)
}

/// `ringside-bench emit`: what each way of emitting one metric costs, side by side.
///
/// The producer is this thread, pinned to one CPU; a consumer thread pinned to another drains
/// the rings (reading every record), receives the datagrams and scrapes the locked histogram,
/// as the other end of each transport would. The rows run interleaved, in rounds (A, B, C, A,
/// B, C, ...), because a virtual machine's speed can change between one row and the next: a
/// row is compared with `c.floor` in the same round.
///
/// Two rows measure a record in a worker of a bot (docs/workers.md) against the same record in
/// the bot's own process: `ringside.record.worker` (a `Bot` this process attaches as a worker)
/// against `ringside.record`, and `c.floor.forked` (the floor's round in a child made by fork(),
/// a worker since its first record) against `c.floor`.
///
/// The span rows run on the process's span clock (`Bot.spanClock`: the TSC where it serves), and
/// again on CLOCK_MONOTONIC (`ringside.span.monotonic`, `c.span.monotonic`: the clock switched with
/// `rs_span_clock_select` for the round, as a machine without a usable TSC runs them); `clock.tsc`
/// is the TSC's read alone, beside `clock.precise`'s.
package enum EmitBenchmark {
    /// The rows, in the order they run in each round and are printed.
    package static let rowNames = [
        "ringside.record", "ringside.record.behind", "ringside.record.doorbell", "ringside.record.signed", "ringside.record.sampled",
        "ringside.record.exemplar", "ringside.record.worker",
        "ringside.counter", "ringside.counter.fractional", "ringside.gauge", "ringside.span", "ringside.span.monotonic",
        "ringside.record.4threads",
        "c.floor", "c.floor.behind", "c.record", "c.floor.forked", "c.span", "c.span.monotonic", "unix-dgram", "mutex-histogram",
        "clock.precise",
        "clock.tsc",
        "clock.coarse",
    ]

    /// A/B rows, run only when asked (`--row`): `c.floor` with the write as it was before SAMPLING
    /// in ringside.h (issue 27), frozen in CRingsideBench, into a floor that never samples, and
    /// `c.record` with rs_bot_record as it was before CONTROL (issue 41), so each change's cost is
    /// read in one process, beside the row it is compared with.
    package static let abRowNames = ["c.floor.before", "c.record.before"]

    /// Every row `--row` takes.
    package static var allRowNames: [String] { rowNames + abRowNames }

    /// Threads in `ringside.record.4threads`.
    static let botThreads = 4

    /// One row: how to measure it for one round, and what the consumer does meanwhile.
    struct Row {
        let name: String
        let consumerMode: LiveConsumer.Mode
        let measure: () throws(BenchError) -> RoundSample
    }

    /// How one round of a row spends its time.
    struct RoundTiming {
        let warmNanos: UInt64
        let sampleNanos: UInt64
        let runNanos: UInt64
        let batch: Int
    }

    /// Runs every row; `only` picks some of them by name.
    package static func run(
        _ settings: BenchSettings, only: Set<String> = [],
        progress: (String) -> Void = { _ in }
    ) throws(BenchError) -> EmitReport {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let directory = scratch.path
        let cpus = (producer: rsb_allowed_cpu(0), consumer: rsb_allowed_cpu(1))
        var machine = Machine.current(pinned: false)
        let pinned = cpus.consumer >= 0 && rsb_pin_current_thread(cpus.producer) == 0
        defer { rsb_unpin_current_thread() }

        // The bots: one for the rows of one thread, this process as a worker of it too (its own
        // file, bench@<pid>), one that four threads record into at once, and one that the C floor
        // writes.
        let ring: Bot, worker: Bot, bot: Bot, sampledBot: Bot
        let record: Bot.Histogram, span: Bot.Histogram, counter: Bot.Counter, gauge: Bot.Gauge
        let signedRecord: Bot.Histogram, fractionalCounter: Bot.Counter
        let workerRecord: Bot.Histogram, botRecord: Bot.Histogram, sampledRecord: Bot.Histogram
        let sampledReader: RingConsumer
        let exemplar: Bot.Exemplar
        do {
            exemplar = try Bot.Exemplar("order_id", "A17")  // 12 bytes: one more slot
            ring = try Bot.attach("bench", directory: directory, options: .init(laneCapacity: settings.ringCapacity))
            record = try ring.histogram("bench_record_latency", unit: .nanoseconds)
            counter = try ring.counter("bench_orders")
            signedRecord = try ring.histogram("bench_slippage_bps", resolution: 0.01, signed: true)
            fractionalCounter = try ring.counter("bench_commission_usd", resolution: 1e-6)
            gauge = try ring.gauge("bench_exposure")
            span = try ring.histogram("bench_span_latency", unit: .nanoseconds)
            worker = try Bot.attach(
                "bench", directory: directory, options: .init(laneCapacity: settings.ringCapacity, worker: true))
            workerRecord = try worker.histogram("bench_record_latency", unit: .nanoseconds)
            bot = try Bot.attach("bench-bot", directory: directory, options: .init(laneCapacity: settings.ringCapacity))
            botRecord = try bot.histogram("bench_record_latency", unit: .nanoseconds)
            // A lane kept full by a consumer that reads gather cells and never drains: every call
            // takes the sampled path (SAMPLING AND GATHERING in ringside.h), nearly all gathered.
            sampledBot = try Bot.attach("bench-sampled", directory: directory, options: .init(laneCapacity: 1024))
            sampledRecord = try sampledBot.histogram("bench_record_latency", unit: .nanoseconds)
            sampledReader = try RingConsumer("bench-sampled", directory: RingDirectory(directory), readsWeights: true)
        } catch {
            throw BenchError("setting up the rings in \(directory): \(error)")
        }
        guard ring.isEnabled else {
            throw BenchError("telemetry is disabled (RINGSIDE_DISABLED is set): unset it to benchmark")
        }
        // The C floor attaches a bot of its own and writes it through an exclusive lane.
        var floor = rsb_floor()
        let opened = rsb_floor_open(&floor, directory, "floor", UInt64(settings.ringCapacity))
        guard opened == 0 else { throw BenchError("the C floor: \(String(cString: rsb_floor_error(&floor)))") }
        defer { rsb_floor_close(&floor) }
        // c.floor.before's: the same, never sampled, written by the write before SAMPLING.
        var floorBefore = rsb_floor()
        let openedBefore = rsb_floor_open_unsampled(&floorBefore, directory, "floor-before", UInt64(settings.ringCapacity))
        guard openedBefore == 0 else { throw BenchError("the C floor: \(String(cString: rsb_floor_error(&floorBefore)))") }
        defer { rsb_floor_close(&floorBefore) }

        let sockets: [Int32]
        do { sockets = try System.socketpair(AF_UNIX, Int32(SOCK_DGRAM.rawValue)) } catch {
            throw BenchError("socketpair(AF_UNIX, SOCK_DGRAM): \(error)")
        }
        defer {
            System.close(sockets[0])
            System.close(sockets[1])
        }
        // Room for bursts, as far as net.core.wmem_max / rmem_max allow (the kernel caps it).
        try? System.setsockopt(sockets[0], SOL_SOCKET, SO_SNDBUF, 4 << 20)
        try? System.setsockopt(sockets[1], SOL_SOCKET, SO_RCVBUF, 4 << 20)

        let locked = LockedHistogram()
        let values = LatencyValues()
        // ringside.record.signed's: the same table as slippages in basis points, half of them
        // negative, with fractions (-123.45), as a bot has them in a Double.
        let slippages = UnsafeMutableBufferPointer<Double>.allocate(capacity: LatencyValues.count)
        for index in 0..<LatencyValues.count {
            let magnitude = Double(values[index]) / 100  // about 20 bps, to 0.01
            slippages[index] = index % 2 == 0 ? -magnitude : magnitude
        }
        defer { slippages.deallocate() }
        // Every bucket the values touch exists before timing starts: recording never allocates.
        for index in 0..<LatencyValues.count { locked.mutex.withLock { $0.record(values[index]) } }

        let rounds = max(1, settings.rounds)
        let roundSeconds = settings.seconds / Double(rounds)
        let batch = settings.batchSize
        // At most 2 M samples a row, over its rounds: enough for a p99.9, and bounded memory.
        let sampleCapacity = min(2 << 20, max(1 << 14, Int(settings.seconds * 6e6))) / rounds

        // c.floor.forked's child, forked now: before the consumer's thread starts, and before
        // this process faults in the pages it times into (a page written after a fork is copied
        // at its first write while the child lives). It becomes a worker of the floor's bot
        // (floor@<pid>) at its first record, and runs c.floor's round when asked.
        var forked = rsb_forked()
        defer { rsb_forked_stop(&forked) }
        if only.isEmpty || only.contains("c.floor.forked") {
            let started = rsb_forked_start(&forked, &floor, values.pointer, UInt64(LatencyValues.count - 1), sampleCapacity)
            guard started == 0 else { throw BenchError("c.floor.forked: \(String(cString: rsb_forked_error(&forked)))") }
        }

        let consumer: LiveConsumer
        let botInspector: RingInspector
        do {
            // The worker files too: bench@<pid> (this process's) and floor@<child> (the child's).
            var rings = ["bench", "bench\(RS_WORKER_SEPARATOR)\(getpid())", "bench-bot", "floor", "floor-before"]
            if forked.pid > 0 { rings.append("floor\(RS_WORKER_SEPARATOR)\(forked.pid)") }
            consumer = try LiveConsumer(
                rings: rings, directory: directory, socket: sockets[1],
                histogram: locked, cpu: pinned ? cpus.consumer : -1)
            botInspector = try RingInspector("bench-bot", directory: RingDirectory(directory))
        } catch {
            throw BenchError("opening the rings as their consumer: \(error)")
        }
        consumer.start()
        defer { consumer.stop() }
        // Every lane's drops, full lanes' and laneless threads' alike.
        let botDropped = { (try? botInspector.status().dropped) ?? 0 }

        let buffer = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: sampleCapacity)
        buffer.initialize(repeating: 0)  // fault the pages in before any timing
        defer { buffer.deallocate() }

        // The timer's own cost: batches of no calls.
        let timerSamples = sample(buffer, batch: 0, until: rs_clock_precise_ns() + 50_000_000) {}
        let timerNanos = Double(Array(buffer[..<timerSamples]).sorted()[timerSamples / 2])

        let timing = RoundTiming(
            warmNanos: UInt64(min(roundSeconds * 0.1, 0.05) * 1e9),
            sampleNanos: UInt64(roundSeconds * 0.75e9), runNanos: UInt64(roundSeconds * 0.25e9),
            batch: batch)
        // The same, for the floor's rounds in C (c.floor's here, c.floor.forked's in the child).
        var floorTiming = rsb_round_timing(
            warm_ns: timing.warmNanos, sample_ns: timing.sampleNanos, run_ns: timing.runNanos,
            batch: UInt32(batch), reserved: 0)

        /// A round of one of the C loops (they share their arguments) on `floor`, into the sample buffer.
        func cRound(
            _ loop: (
                UnsafeMutablePointer<rsb_floor>?, UnsafePointer<UInt64>?, UInt64, UnsafePointer<rsb_round_timing>?,
                UnsafeMutablePointer<UInt32>?, Int, UnsafeMutablePointer<rsb_round>?
            ) -> Void,
            _ floor: UnsafeMutablePointer<rsb_floor>
        ) -> RoundSample {
            var result = rsb_round()
            loop(floor, values.pointer, UInt64(LatencyValues.count - 1), &floorTiming, buffer.baseAddress, buffer.count, &result)
            return RoundSample(result, buffer)
        }

        // A 32-byte datagram holding the same record: timestamp, value, sequence, metric.
        let datagram = UnsafeMutableRawPointer.allocate(byteCount: 32, alignment: 8)
        datagram.initializeMemory(as: UInt8.self, repeating: 0, count: 32)
        defer { datagram.deallocate() }
        var sendFailures: UInt64 = 0
        var sink: UInt64 = 0
        defer { blackhole = sink }

        // Each row's round keeps its own value index (timedRound(eachValue:)), so each row's call sits in its own
        // loop, as in a bot.
        let rows: [Row] = [
            Row(name: "ringside.record", consumerMode: .rings) {
                timedRound(buffer, timing, drops: { ring.currentThreadLane.recordsDropped }) { record.record(values[$0]) }
            },
            Row(name: "ringside.record.behind", consumerMode: .behind) {
                // ringside.record's loop with the consumer draining again as soon as it is done.
                timedRound(buffer, timing, drops: { ring.currentThreadLane.recordsDropped }) { record.record(values[$0]) }
            },
            Row(name: "ringside.record.doorbell", consumerMode: .rings) {
                // The call after a consumer's sleep: the doorbell set (a store, as the collector
                // makes before it sleeps), then the record that finds it, clears it and wakes.
                timedRound(buffer, timing, drops: { ring.currentThreadLane.recordsDropped }) {
                    consumer.armDoorbell(ring: 0)
                    record.record(values[$0])
                }
            },
            Row(name: "ringside.record.signed", consumerMode: .rings) {
                // ringside.record's loop, each value a Double into a signed histogram of hundredths:
                // rounded to its step (rint) and stored in offset binary (VALUES in ringside.h).
                timedRound(buffer, timing, drops: { ring.currentThreadLane.recordsDropped }) {
                    signedRecord.record(slippages[$0 & (LatencyValues.count - 1)])
                }
            },
            Row(name: "ringside.record.sampled", consumerMode: .rings) {
                // ringside.record's loop into a full lane that samples: each call reads the consumer's
                // cursor and is gathered into its gather cell (1 in 32,768 written, or dropped).
                withExtendedLifetime(sampledReader) {
                    timedRound(buffer, timing, drops: { sampledBot.currentThreadLane.recordsDropped }) { sampledRecord.record(values[$0]) }
                }
            },
            Row(name: "ringside.record.exemplar", consumerMode: .rings) {
                // ringside.record's loop, each value with an exemplar (order_id=A17: two slots a record).
                timedRound(buffer, timing, drops: { ring.currentThreadLane.recordsDropped }) {
                    record.record(values[$0], exemplar: exemplar)
                }
            },
            Row(name: "ringside.record.worker", consumerMode: .rings) {
                // ringside.record's loop, into this process's own file as a worker of the bot.
                timedRound(buffer, timing, drops: { worker.currentThreadLane.recordsDropped }) { workerRecord.record(values[$0]) }
            },
            Row(name: "ringside.counter", consumerMode: .rings) {
                timedRound(buffer, timing, drops: { ring.currentThreadLane.recordsDropped }) { counter.increment() }
            },
            Row(name: "ringside.counter.fractional", consumerMode: .rings) {
                // An increment of 0.37 to a counter of micro-dollars: rounded to its steps, then counted.
                timedRound(buffer, timing, drops: { ring.currentThreadLane.recordsDropped }) { fractionalCounter.increment(by: 0.37) }
            },
            Row(name: "ringside.gauge", consumerMode: .rings) {
                timedRound(buffer, timing, drops: { ring.currentThreadLane.recordsDropped }) { gauge.set(Double(values[$0])) }
            },
            Row(name: "ringside.span", consumerMode: .rings) {
                timedRound(buffer, timing, drops: { ring.currentThreadLane.recordsDropped }) { span.startTiming().stop() }
            },
            Row(name: "ringside.span.monotonic", consumerMode: .rings) {
                onMonotonicSpans {
                    timedRound(buffer, timing, drops: { ring.currentThreadLane.recordsDropped }) { span.startTiming().stop() }
                }
            },
            Row(name: "ringside.record.4threads", consumerMode: .rings) {
                concurrentRound(threads: botThreads, buffer, timing, drops: botDropped) { thread, buffer in
                    timedRound(buffer, timing, from: thread * 1024, drops: { 0 }) { botRecord.record(values[$0]) }
                }
            },
            Row(name: "c.floor", consumerMode: .rings) {
                // The same loops, in C: rsb_floor_round (rsb_floor_sample, then rsb_floor_run).
                cRound(rsb_floor_round, &floor)
            },
            Row(name: "c.floor.behind", consumerMode: .behind) {
                // c.floor's round with the consumer draining again as soon as it is done.
                cRound(rsb_floor_round, &floor)
            },
            Row(name: "c.record", consumerMode: .rings) {
                // rs_bot_record itself, as a C bot calls it, into the floor's bot: its thread's lane,
                // the operator's control word (CONTROL in ringside.h), its registered sampling.
                cRound(rsb_record_round, &floor)
            },
            Row(name: "c.record.before", consumerMode: .rings) {
                // c.record's round, with rs_bot_record before the operator's control word.
                cRound(rsb_record_round_before, &floor)
            },
            Row(name: "c.floor.before", consumerMode: .rings) {
                // c.floor's round, with the write before SAMPLING, into a floor that never samples.
                cRound(rsb_floor_round_before, &floorBefore)
            },
            Row(name: "c.floor.forked", consumerMode: .rings) { () throws(BenchError) -> RoundSample in
                // c.floor's round, run by the forked child in its worker file; this thread waits.
                var result = rsb_round()
                guard rsb_forked_round(&forked, &floorTiming, buffer.baseAddress, buffer.count, &result) == 0 else {
                    throw BenchError("c.floor.forked: \(String(cString: rsb_forked_error(&forked)))")
                }
                return RoundSample(result, buffer)
            },
            Row(name: "c.span", consumerMode: .rings) {
                // C's span through the floor's bot (this thread's lane of it): ringside.span's baseline.
                cSpanRound(&floor, buffer, timing)
            },
            Row(name: "c.span.monotonic", consumerMode: .rings) {
                onMonotonicSpans { cSpanRound(&floor, buffer, timing) }
            },
            Row(name: "unix-dgram", consumerMode: .datagrams) {
                timedRound(buffer, timing, drops: { sendFailures }) { v in
                    datagram.storeBytes(of: rs_clock_coarse_ns(), as: UInt64.self)
                    datagram.storeBytes(of: values[v], toByteOffset: 8, as: UInt64.self)
                    datagram.storeBytes(of: UInt64(truncatingIfNeeded: v), toByteOffset: 16, as: UInt64.self)
                    // The raw call, not RingsideSystem's: what is timed is the send itself.
                    if send(sockets[0], datagram, 32, Int32(MSG_DONTWAIT)) != 32 { sendFailures &+= 1 }
                }
            },
            Row(name: "mutex-histogram", consumerMode: .scrapes) {
                timedRound(buffer, timing, drops: { 0 }) { v in
                    let value = values[v]
                    locked.mutex.withLock { $0.record(value) }
                }
            },
            Row(name: "clock.precise", consumerMode: .rings) {
                var sum: UInt64 = 0
                defer { sink &+= sum }
                return timedRound(buffer, timing, drops: { 0 }) { sum &+= rs_clock_precise_ns() }
            },
            Row(name: "clock.tsc", consumerMode: .rings) {
                var sum: UInt64 = 0
                defer { sink &+= sum }
                return timedRound(buffer, timing, drops: { 0 }) { sum &+= rs_clock_tsc() }
            },
            Row(name: "clock.coarse", consumerMode: .rings) {
                var sum: UInt64 = 0
                defer { sink &+= sum }
                return timedRound(buffer, timing, drops: { 0 }) { sum &+= rs_clock_coarse_ns() }
            },
        ].filter { only.isEmpty ? !abRowNames.contains($0.name) : only.contains($0.name) }

        var measured = Array(repeating: [RoundSample](), count: rows.count)
        for round in 1...rounds {
            for (index, row) in rows.enumerated() {
                progress(rounds == 1 ? row.name : "\(row.name) (round \(round) of \(rounds))")
                consumer.mode.store(row.consumerMode.rawValue, ordering: .releasing)
                measured[index].append(try row.measure())
            }
        }
        let floorRounds = rows.firstIndex { $0.name == "c.floor" }.map { index in
            measured[index].map { $0.p50(batchSize: batch, timerNanos: timerNanos) }
        }
        let summaries = zip(rows, measured).map { row, rounds in
            LatencySummary(name: row.name, rounds: rounds, batchSize: batch, timerNanos: timerNanos, floorRoundP50s: floorRounds)
        }

        let consumerCPU = pinned ? "CPU \(cpus.consumer)" : "any CPU (pinning unavailable)"
        let method =
            "\(rounds) rounds, each running every row in turn for \(JSON.figureText(roundSeconds)) s "
            + "(A, B, C, A, B, C, ...); p50 is the median of a row's \(rounds) per-round p50s and ×c.floor the median "
            + "of its per-round p50 over c.floor's in the same round; the other percentiles pool the rounds. "
            + "Each sample is a batch of \(batch) back-to-back calls timed with CLOCK_MONOTONIC "
            + "(clock_gettime through the vDSO); the timer's own cost, \(JSON.figureText(timerNanos)) ns "
            + "(median of \(timerSamples) empty batches), is subtracted and the rest divided by \(batch), so "
            + "percentiles are of \(batch)-call means (one slow call of t ns shows as t/\(batch)); calls/s from a "
            + "separate untimed loop. Release build; the producer on "
            + (pinned ? "CPU \(cpus.producer)" : "any CPU (pinning unavailable)") + ", a live consumer on "
            + consumerCPU + " draining the rings every \(LiveConsumer.periodNanos / 1000) µs "
            + "(reading every record, like the collector's passes under load), receiving the datagrams (recvmmsg) "
            + "and scraping the locked histogram every ms (ringside.record.behind and c.floor.behind: draining again as "
            + "soon as a pass ends, right behind the producer, as a collector under load does); ringside.record.doorbell "
            + "is ringside.record with the ring's doorbell set before each call (a store, as a consumer makes before it "
            + "sleeps), so that each call clears it and makes one FUTEX_WAKE, no one waiting; ringside.record.4threads adds \(botThreads - 1) unpinned threads "
            + "to this one, each on its own lane, and sums their calls; ringside.record.exemplar is ringside.record "
            + "with an exemplar (order_id=A17, 12 bytes: the value's record and one exemplar record) on each value; "
            + "c.record is c.floor's loops through rs_bot_record (the thread's lane, the operator's control word, "
            + "the registered sampling) into the floor's bot; "
            + "ringside.record.signed is ringside.record with each value a Double (the table as basis points to 0.01, "
            + "half negative) into a signed histogram of hundredths; ringside.counter.fractional adds 0.37 to a counter "
            + "of micro-dollars; "
            + "ringside.record.sampled is ringside.record into a lane of 1,024 records kept full by a consumer that reads "
            + "gather cells and never drains: each call reads the consumer's cursor and is gathered (1 in 32,768 written "
            + "or dropped), the sampled path; "
            + "ringside.record.worker is ringside.record "
            + "into a bot this process also attached as a worker (its own file, <bot>@<pid>); the span rows on the "
            + "span clock (\(Bot.spanClock == .tsc ? "the TSC" : "CLOCK_MONOTONIC")), the .monotonic rows on "
            + "CLOCK_MONOTONIC (rs_span_clock_select for their rounds), clock.tsc the TSC read alone; c.floor.forked is "
            + "c.floor's round (the same C function) run by a child this process forked once, which became a worker "
            + "of the floor's bot at its first record (through the bot and metric it inherited) and writes that "
            + "record's lane, on the producer's CPU while this process waits; c.floor.before (only when asked) is "
            + "c.floor's round with the write as it was before adaptive sampling (frozen in CRingsideBench), into a "
            + "floor that never samples; c.record.before (only when asked) is c.record's round with rs_bot_record as "
            + "it was before the operator's control word (frozen in CRingsideBench); rings and lanes of "
            + "\(settings.ringCapacity) records; values from a table of \(LatencyValues.count) lognormal latencies."
        machine.pinned = pinned
        return EmitReport(machine: machine, method: method, rows: summaries)
    }
}
