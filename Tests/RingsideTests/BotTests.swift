import RingsideSystem
import CRingside
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import Ringside
import RingsideTestSupport
import Synchronization
import Testing

/// Starts `count` threads that run `body(index)`, then wait for `release` before exiting.
/// Returns once every one of them has run its body (they are all alive then).
private func startThreads(
    _ count: Int, release: DispatchSemaphore, exited: DispatchGroup,
    _ body: @escaping @Sendable (Int) -> Void
) {
    let ran = DispatchGroup()
    for index in 0..<count {
        ran.enter()
        exited.enter()
        Thread {
            body(index)
            ran.leave()
            release.wait()
            exited.leave()
        }.start()
    }
    ran.wait()
}

/// The words of a line like "lanes 3 fds_before 5": each name followed by its number.
private func fields(_ line: String?) -> [String: Int] {
    let words = (line ?? "").split(separator: " ").map(String.init)
    var result: [String: Int] = [:]
    for index in stride(from: 0, to: words.count - 1, by: 2) { result[words[index]] = Int(words[index + 1]) }
    return result
}

/// Module-level metrics, as a bot declares them: a global `let` compiles in Swift 6 only because
/// the bot and its handles are Sendable ((0.1 handles were not)).
private let moduleLevelBot = try! Bot.disabled("module-level")
private let moduleLevelFills = try! moduleLevelBot.histogram("module_fills", unit: .nanoseconds)
private let moduleLevelOrders = try! moduleLevelBot.counter("module_orders")

@Suite("Bot: one bot, a lane per thread, from threads, tasks and forks")
struct BotTests {
    @Test("module-level metrics are used from concurrent tasks (a disabled bot: every call is a no-op)")
    func moduleLevelMetrics() async throws {
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<8 {
                group.addTask {
                    moduleLevelFills.record(UInt64(index))
                    moduleLevelOrders.increment()
                    try? await moduleLevelFills.measure { try await Task.sleep(nanoseconds: 1_000) }
                }
            }
        }
        #expect(!moduleLevelBot.isEnabled && moduleLevelBot.path == nil && moduleLevelBot.lanesAllocated == 0)
    }

    @Test("threads of one process each write a lane of their own: per-lane order and continuity, exact counter totals")
    func threadsInProcess() throws {
        try withRingDirectory { directory in
            let threads = 4, count = 20_000
            let bot = try Bot.attach("multi", directory: directory.path, options: .init(laneCapacity: 1 << 15))
            let values = try bot.histogram("values")
            let increments = try bot.counter("increments")
            let level = try bot.gauge("level")
            let threadIDs = Locked<[Int32: Int]>([:])
            let release = DispatchSemaphore(value: 0), exited = DispatchGroup()
            startThreads(threads, release: release, exited: exited) { thread in
                threadIDs.withLock { $0[currentThreadID()] = thread }
                let base = UInt64(thread * count)
                var index: UInt64 = 1
                while index <= UInt64(count) {
                    values.record(base + index)
                    increments.increment()
                    index += 1
                }
                level.set(Double(thread))
            }
            // Every thread alive and done recording: each holds a lane of its own, found by its thread id.
            let owners = threadIDs.withLock { $0 }
            let inspector = try RingInspector("multi", directory: directory)
            let live = try inspector.status()
            #expect(bot.lanesAllocated == threads && live.lanes.count == threads)
            #expect(live.lanes.allSatisfy { $0.state == .active && $0.claims == 1 && $0.dropped == 0 })
            #expect(Set(live.lanes.map(\.ownerTID)) == Set(owners.keys))
            #expect(live.lanes.allSatisfy { $0.writeCursor == UInt64(count + 1) })
            let threadOfLane = live.lanes.map { owners[$0.ownerTID] ?? -1 }

            for _ in 0..<threads { release.signal() }
            exited.wait()
            // Their exits retire the lanes (a thread's lane is released by its thread-exit destructor).
            let retired = try eventually { () -> RingStatus? in
                let status = try inspector.status()
                return status.lanes.allSatisfy { $0.state == .retired && $0.ownerTID == 0 } ? status : nil
            }
            #expect(retired != nil, "the exited threads' lanes were not retired")

            let consumer = try RingConsumer("multi", directory: directory)
            let drained = try drainAll(consumer)
            #expect(drained.count == threads * (count + 1))
            for lane in 0..<threads {
                let records = drained.filter { $0.lane == lane }
                let thread = threadOfLane[lane]
                try #require(thread >= 0, "lane \(lane)'s owner is none of the threads")
                let base = UInt64(thread * count)
                // Continuity: cursors 0, 1, 2 ... in the lane, each record's sequence its cursor.
                #expect(records.map(\.cursor) == Array(0...UInt64(count)), "lane \(lane)")
                #expect(records.allSatisfy { $0.record.sequence == $0.cursor }, "lane \(lane)")
                // One thread's values, in its order, then its gauge record.
                #expect(records.dropLast().map(\.record.value) == Array((base + 1)...(base + UInt64(count))), "lane \(lane)")
                #expect(records.dropLast().allSatisfy { $0.record.metric == 0 && $0.record.kind == MetricKind.histogram.rawValue })
                #expect(records.last?.record.metric == 2 && records.last?.record.value == Double(thread).bitPattern)
            }
            // Counters are exact, summed over the lanes' cells; the gauge's last value is one a thread set.
            #expect(consumer.cells(of: consumer.metrics[1]) == MetricCells(total: UInt64(threads * count), dropped: 0, lastValue: nil))
            #expect(consumer.cells(of: consumer.metrics[0]).dropped == 0)
            let last = try #require(consumer.cells(of: consumer.metrics[2]).lastValue)
            #expect((0..<threads).map(Double.init).contains(last))

            // A new thread takes over a retired lane (the lowest), carrying on from its cursor: no lane is added.
            let again = DispatchGroup()
            again.enter()
            Thread {
                values.record(1)
                increments.increment(by: 10)
                again.leave()
            }.start()
            again.wait()
            #expect(bot.lanesAllocated == threads)
            let more = try drainAll(consumer)
            #expect(more.count == 1 && more.first?.lane == 0 && more.first?.cursor == UInt64(count + 1))
            #expect(more.first?.record.sequence == UInt64(count + 1))
            #expect(consumer.cells(of: consumer.metrics[1]).total == UInt64(threads * count) + 10)
            #expect(try consumer.status().lanes[0].claims == 2)
        }
    }

    @Test("full lanes drop per lane: attempts == written + dropped and written == consumed + backlog, per lane and summed")
    func perLaneAccounting() throws {
        try withRingDirectory { directory in
            let threads = 4, attempts = 1_000, capacity = 64
            let bot = try Bot.attach("tiny", directory: directory.path, options: .init(laneCapacity: capacity))
            let values = try bot.histogram("values")
            let increments = try bot.counter("increments")
            let release = DispatchSemaphore(value: 0), exited = DispatchGroup()
            defer {
                for _ in 0..<threads { release.signal() }
                exited.wait()
            }
            startThreads(threads, release: release, exited: exited) { thread in
                for index in 1...attempts {
                    values.record(UInt64(thread * attempts + index))
                    increments.increment()
                }
            }
            let consumer = try RingConsumer("tiny", directory: directory)
            let inspector = try RingInspector("tiny", directory: directory)
            let full = try consumer.status()
            #expect(full.lanes.count == threads)
            for lane in full.lanes {
                #expect(lane.writeCursor + lane.dropped == UInt64(attempts), "lane \(lane.index)")
                #expect(lane.writeCursor == UInt64(capacity) && lane.backlog == UInt64(capacity), "lane \(lane.index)")
            }
            #expect(full.writeCursor == full.lanes.reduce(0) { $0 + $1.writeCursor })
            #expect(full.dropped == full.lanes.reduce(0) { $0 + $1.dropped } && full.unlanedDropped == 0)
            #expect(full.writeCursor + full.dropped == UInt64(threads * attempts))
            #expect(consumer.cells(of: consumer.metrics[0]).dropped == full.dropped)
            #expect(consumer.cells(of: consumer.metrics[1]).total == UInt64(threads * attempts))

            // Peek sees every lane's records, with their lanes and cursors, and moves nothing.
            let peeked = try inspector.peek()
            #expect(peeked.count == threads * capacity)
            #expect(Set(peeked.map(\.lane)) == Set(0..<threads))
            #expect(zip(peeked, peeked.dropFirst()).allSatisfy { $0.record.timestamp_ns <= $1.record.timestamp_ns })
            #expect(try inspector.peek(last: 3).count == threads * 3)

            // A limit per lane takes that many from each lane.
            var taken: [Int: [UInt64]] = [:]
            let drained = try consumer.drain(limitPerLane: 10) { records, _, lane in taken[lane, default: []] += records.map(\.value) }
            #expect(drained == threads * 10 && taken.count == threads)
            let partial = try consumer.status()
            for lane in partial.lanes {
                #expect(lane.readCursor == 10 && lane.backlog == UInt64(capacity - 10), "lane \(lane.index)")
                #expect(lane.writeCursor == lane.readCursor + lane.backlog)
                #expect(lane.writeCursor + lane.dropped == UInt64(attempts))
                // Never overwritten: each lane keeps its thread's first values.
                let first = try #require(taken[lane.index]?.first)
                #expect(taken[lane.index] == Array(first..<(first + 10)) && (first - 1) % UInt64(attempts) == 0)
            }
            #expect(partial.writeCursor == partial.readCursor + partial.backlog)
            #expect(try inspector.peek().count == threads * (capacity - 10))
        }
    }

    @Test("three threads fill their lanes while a consumer drains and an inspector peeks: nothing torn, mixed or overwritten")
    func lanesUnderLoad() throws {
        try withRingDirectory { directory in
            let threads = 3, attempts: UInt64 = 200_000
            let bot = try Bot.attach("busy", directory: directory.path, options: .init(laneCapacity: 64))
            let values = try bot.histogram("values")
            let go = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            let finished = DispatchGroup(), exited = DispatchGroup()
            for thread in 0..<threads {
                finished.enter()
                exited.enter()
                Thread {
                    go.wait()
                    // Each value says whose it is (the top bits) and which attempt (the rest).
                    var attempt: UInt64 = 1
                    while attempt <= attempts {
                        values.record(UInt64(thread + 1) << 40 | attempt)
                        attempt += 1
                    }
                    finished.leave()
                    release.wait()  // alive, holding its lane, until every thread is done
                    exited.leave()
                }.start()
            }
            defer {
                for _ in 0..<threads { release.signal() }
                exited.wait()
            }
            let consumer = try RingConsumer("busy", directory: directory)
            let inspector = try RingInspector("busy", directory: directory)
            var drained: [Int: [UInt64]] = [:]
            var problems: [String] = []
            func drainSome(limit: Int) throws {
                try consumer.drain(limitPerLane: limit) { records, first, lane in
                    for (offset, record) in records.enumerated() where record.sequence != first + UInt64(offset) {
                        problems.append("lane \(lane): sequence \(record.sequence) at cursor \(first + UInt64(offset))")
                    }
                    drained[lane, default: []] += records.map(\.value)
                }
            }
            for _ in 0..<threads { go.signal() }
            var peeks = 0
            while finished.wait(timeout: .now()) == .timedOut || peeks == 0 {
                try drainSome(limit: 17)
                var lastByLane: [Int: UInt64] = [:]
                for peeked in try inspector.peek().sorted(by: { ($0.lane, $0.cursor) < ($1.lane, $1.cursor) }) {
                    if peeked.record.sequence != peeked.cursor { problems.append("peek: lane \(peeked.lane) cursor \(peeked.cursor) torn") }
                    if let last = lastByLane[peeked.lane], peeked.record.value <= last {
                        problems.append("peek: lane \(peeked.lane) out of order at \(peeked.cursor)")
                    }
                    lastByLane[peeked.lane] = peeked.record.value
                }
                peeks += 1
            }
            try drainSome(limit: .max)
            #expect(problems.isEmpty, "\(problems.prefix(5))")
            let status = try consumer.status()
            #expect(status.lanes.count == threads && status.backlog == 0)
            for lane in status.lanes {
                let values = drained[lane.index] ?? []
                // One thread's values per lane, strictly increasing: drops only skip, nothing is overwritten.
                #expect(Set(values.map { $0 >> 40 }).count <= 1, "lane \(lane.index) mixes threads")
                #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 }, "lane \(lane.index) out of order")
                #expect(UInt64(values.count) == lane.writeCursor && lane.writeCursor == lane.readCursor + lane.backlog)
                #expect(lane.writeCursor + lane.dropped == attempts, "lane \(lane.index): attempts == written + dropped")
            }
            #expect(status.writeCursor + status.dropped == attempts * UInt64(threads))
            #expect(consumer.cells(of: consumer.metrics[0]).dropped == status.dropped)
        }
    }

    @Test("registering a metric again differently says so once, naming both registrations")
    func conflictSaidOnce() throws {
        try withBot("conflict") { directory, bot in
            _ = try bot.counter("dup_metric", labels: ["venue": "X"])
            let error = #expect(throws: RingError.self) { try bot.histogram("dup_metric", unit: .nanoseconds, labels: ["venue": "X"]) }
            let text = "\(try #require(error))"
            #expect(text.hasPrefix("ring conflict: metric dup_metric{venue=X} is already registered as a counter"), "\(text)")
            #expect(text.components(separatedBy: "already registered").count == 2, "said once: \(text)")
            #expect(text.contains("asked for a histogram"), "\(text)")
        }
    }

    @Test("a TaskGroup of 100 tasks times async spans with measure: 100 records in the histogram's unit")
    func asyncMeasureInTasks() throws {
        try withRingDirectory { directory in
            let launched = rs_clock_precise_ns()
            let child = try ChildProcess(testProducer: "tasks", ring: "tasks", in: directory, ["--tasks", "100"])
            let report = fields(child.readLine())
            let exit = child.waitForExit()
            #expect(exit.status == 0, "\(exit.standardError)")
            let finished = rs_clock_precise_ns()
            #expect(report["tasks"] == 100)
            let lanes = try #require(report["lanes"])
            #expect(lanes >= 1 && lanes <= Int(RS_DEFAULT_MAX_LANES))

            let consumer = try RingConsumer("tasks", directory: directory)
            let span = try metric(consumer.metrics, "task_span")
            #expect(span.kind == .histogram && span.unit == .microseconds)
            let drained = try drainAll(consumer)
            #expect(drained.count == 100)
            #expect(drained.allSatisfy { $0.record.metric == span.index && $0.record.kind == MetricKind.histogram.rawValue })
            #expect(drained.allSatisfy { $0.record.flags == UInt8(RS_FLAG_SPAN) && $0.record.sequence == $0.cursor })
            // Each task slept 1 ms inside its span: at least 1,000 us.
            #expect(drained.allSatisfy { $0.record.value >= 1_000 }, "\(drained.map(\.record.value).sorted().prefix(5))")
            // In microseconds, not nanoseconds: a span record is stamped with its end (the precise
            // clock), so end - value * 1,000 ns is when it started, after the process was launched.
            for record in drained.map(\.record) {
                #expect(record.timestamp_ns <= finished)
                let (nanoseconds, overflow) = record.value.multipliedReportingOverflow(by: 1_000)
                #expect(
                    !overflow && record.timestamp_ns >= nanoseconds && record.timestamp_ns - nanoseconds >= launched,
                    "a span of \(record.value) us ending at \(record.timestamp_ns) started before the launch at \(launched)")
            }
            let status = try consumer.status()
            #expect(status.lanes.count == lanes && status.writeCursor == 100 && status.dropped == 0)
            #expect(Set(drained.map(\.lane)).isSubset(of: Set(0..<lanes)))
            #expect(consumer.cells(of: span).dropped == 0)
        }
    }

    /// 10,000 threads, 4 at a time, each recording 10 values and 10 increments, then exiting.
    ///
    /// Lanes, with threads joined before the next wave (`short-threads-joined`): a joined thread has
    /// run its exit destructor, which retired its lane, so at most `parallel` lanes are ever held at
    /// once and the file never has more. With Foundation threads that signal the wave done and then
    /// exit (`short-threads`), a thread may still be exiting, its lane still held, when the next wave
    /// starts; how many are at once depends on the scheduler (a loaded machine has shown more than
    /// 2 x parallel), so the bound there is the bot's 64 lanes, and what proves the lanes are reused
    /// is that 10,000 threads never ran out of them (no thread without a lane, every value kept).
    /// `--capacity 131072` makes one lane able to hold all 100,000 records, so no distribution of
    /// threads over lanes can drop one.
    ///
    /// Descriptors must be exactly as before. Mappings may grow only by what is not a leak per
    /// thread: one mapping per lane added (at most 64), glibc's cache of freed thread stacks
    /// (40 MiB: five 8 MiB stacks, two lines each with the guard page) and malloc's per-thread
    /// arenas (at most 8 per core, two lines each); a leak per thread would add thousands.
    @Test(
        "10,000 short-lived threads: lanes stay few, every value drained, no descriptor or mapping leaked",
        arguments: ["short-threads-joined", "short-threads"])
    func shortLivedThreads(mode: String) throws {
        try withRingDirectory { directory in
            let threads = 10_000, count = 10, parallel = 4
            let child = try ChildProcess(
                testProducer: mode, ring: "short", in: directory,
                ["--threads", "\(threads)", "--count", "\(count)", "--parallel", "\(parallel)", "--capacity", "\(1 << 17)"])
            let line = child.readLine()
            let exit = child.waitForExit()
            #expect(exit.status == 0, "\(exit.standardError)")
            let report = fields(line)
            let lanes = try #require(report["lanes"], "\(line ?? "no output")")
            let bound = mode == "short-threads-joined" ? parallel : Int(RS_DEFAULT_MAX_LANES)
            #expect(lanes >= 1 && lanes <= bound, "\(mode): \(line ?? "")")
            let fdsBefore = try #require(report["fds_before"]), fdsAfter = try #require(report["fds_after"])
            let mapsBefore = try #require(report["maps_before"]), mapsAfter = try #require(report["maps_after"])
            #expect(fdsAfter == fdsBefore, "\(line ?? "")")
            let cores = ProcessInfo.processInfo.activeProcessorCount
            let allowance = lanes + 2 * 5 + 2 * 8 * cores
            #expect(mapsAfter <= mapsBefore + allowance, "\(line ?? ""): more than \(allowance) mappings added")

            let consumer = try RingConsumer("short", directory: directory)
            let values = try metric(consumer.metrics, "short_values"), increments = try metric(consumer.metrics, "short_increments")
            let drained = try drainAll(consumer)
            #expect(drained.count == threads * count)
            var perValue: [UInt64: Int] = [:]
            for record in drained { perValue[record.record.value, default: 0] += 1 }
            #expect(perValue == Dictionary(uniqueKeysWithValues: (1...UInt64(count)).map { ($0, threads) }))
            #expect(consumer.cells(of: increments).total == UInt64(threads * count))
            #expect(consumer.cells(of: values).dropped == 0)
            let status = try consumer.status()
            #expect(status.lanes.count == lanes && status.dropped == 0 && status.lanesExhausted == 0)
            #expect(status.writeCursor == UInt64(threads * count) && status.backlog == 0)
            // Every claim was a thread's: 10,000 claims over the lanes. Joined threads have retired
            // theirs (the process exits without detaching, so a lane of a thread still exiting then
            // would stay active, as after a SIGKILL).
            #expect(status.lanes.reduce(0) { $0 + Int($1.claims) } == threads)
            if mode == "short-threads-joined" { #expect(status.lanes.allSatisfy { $0.state == .retired }) }
            // Per lane, records stay in order: each record's sequence is its cursor.
            #expect(drained.allSatisfy { $0.record.sequence == $0.cursor })
        }
    }

    @Test("a forked child's first record makes it a worker of the bot: its records land in a file of its own, the parent's stay apart")
    func forkedChildBecomesAWorker() throws {
        try withRingDirectory { directory in
            let n: UInt64 = 1000
            let child = try ChildProcess(testProducer: "fork", ring: "forked", in: directory, ["--count", "\(n)"])
            let line = child.readLine()
            let exit = child.waitForExit()
            #expect(exit.status == 0)
            let words = line?.split(separator: " ") ?? []
            #expect(words.count == 6 && words[0] == "child" && words[1] == "0" && words[5] == "\(n)", "\(line ?? "no output")")
            #expect(exit.standardError.isEmpty, "nothing said: \(exit.standardError)")
            let pid = try #require(words.count == 6 ? Int32(words[3]) : nil)

            let parent = try RingConsumer("forked", directory: directory)
            #expect(try parent.cells(of: metric(parent.metrics, "forked_increments")).total == n, "the parent's increments only")
            #expect(try drainAll(parent).isEmpty, "the parent recorded no value")
            #expect(try parent.status().producerAttaches == 1)

            // The child's file: the parent's registry, at the same indices, and the child's calls.
            let worker = try RingConsumer("forked@\(pid)", directory: directory)
            #expect(worker.metrics.map(\.name) == parent.metrics.map(\.name))
            #expect(worker.metrics.map(\.index) == parent.metrics.map(\.index))
            #expect(try worker.cells(of: metric(worker.metrics, "forked_increments")).total == n)
            let values = try metric(worker.metrics, "forked_values")
            let records = try drainAll(worker)
            #expect(records.map(\.record.value) == Array(1...n))
            #expect(records.allSatisfy { $0.record.metric == values.index })
            #expect(WorkerRing("forked@\(pid)") == WorkerRing("forked@\(pid)") && WorkerRing("forked@\(pid)")?.bot == "forked")
        }
    }

    @Test("a worker is attached by asking: its file is <name>@<pid>, beside the bot's own")
    func workerByOption() throws {
        try withRingDirectory { directory in
            let owner = try Bot.attach("pool", directory: directory.path, options: .init(laneCapacity: 16))
            // This process holds the bot: a second attach is refused, and told about workers.
            #expect {
                _ = try Bot.attach("pool", directory: directory.path, options: .init(laneCapacity: 16))
            } throws: { "\($0)".contains("worker") }
            let worker = try Bot.attach("pool", directory: directory.path, options: .init(laneCapacity: 16, worker: true))
            #expect(worker.path == directory.path + "/ringside.pool@\(getpid())")
            #expect(directory.ringNames() == ["pool", "pool@\(getpid())"])
            try worker.counter("jobs").increment(by: 3)
            let reader = try RingConsumer("pool@\(getpid())", directory: directory)
            #expect(try reader.cells(of: metric(reader.metrics, "jobs")).total == 3)
            withExtendedLifetime(owner) {}
        }
    }

    @Test("forked while its thread holds lanes (of two bots): the child becomes a worker of each, the parent's files stay the parent's")
    func forkedChildOfAWarmProcess() throws {
        try withRingDirectory { directory in
            let n = 500
            let child = try ChildProcess(testProducer: "fork-warm", ring: "warm", in: directory, ["--count", "\(n)"])
            let line = child.readLine()
            let exit = child.waitForExit()
            #expect(exit.status == 0)
            let words = line?.split(separator: " ") ?? []
            #expect(words.count == 6 && words[1] == "0" && words[5] == "\(2 * n)", "\(line ?? "no output"): \(exit.standardError)")
            #expect(exit.standardError.isEmpty, "nothing said: \(exit.standardError)")
            let pid = try #require(words.count == 6 ? Int32(words[3]) : nil)

            for name in ["warm", "warm.single"] {
                let consumer = try RingConsumer(name, directory: directory)
                let increments = try metric(consumer.metrics, "forked_increments")
                let values = try metric(consumer.metrics, "forked_values"), level = try metric(consumer.metrics, "forked_level")
                #expect(consumer.cells(of: increments).total == UInt64(2 * n), "\(name): the parent's increments only")
                #expect(consumer.cells(of: level).lastValue == 2, "\(name): the parent's last value")
                let records = try drainAll(consumer)
                let histogram = records.filter { $0.record.metric == values.index }.map(\.record.value)
                let gauge = records.filter { $0.record.metric == level.index }.map { Double(bitPattern: $0.record.value) }
                #expect(histogram == Array(1...UInt64(n)) + Array(UInt64(2 * n + 1)...UInt64(3 * n)), "\(name): the parent's values only")
                #expect(gauge == [1, 2], "\(name)")
                #expect(records.allSatisfy { $0.lane == 0 && $0.record.sequence == $0.cursor }, "\(name): one lane, continuous")
                let status = try consumer.status()
                #expect(status.dropped == 0 && status.lanes.count == 1, "\(name)")

                let worker = try RingConsumer("\(name)@\(pid)", directory: directory)
                #expect(worker.cells(of: increments).total == UInt64(n), "\(name)'s worker")
                #expect(worker.cells(of: level).lastValue == -1, "\(name)'s worker")
                let workerRecords = try drainAll(worker)
                #expect(
                    workerRecords.filter { $0.record.metric == values.index }.map(\.record.value) == Array(UInt64(n + 1)...UInt64(2 * n)))
            }
        }
    }
}
