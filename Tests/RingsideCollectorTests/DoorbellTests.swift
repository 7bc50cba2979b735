import CRingside
import Dispatch
import Foundation
import Ringside
import RingsideSystem
import RingsideTestSupport
import Synchronization
import Testing

@testable import RingsideCollector

/// The doorbell (DOORBELL in ringside.h): the first write after the drain announced its sleep
/// wakes it, and no wake is lost.
@Suite("Doorbells")
struct DoorbellTests {
    @Test("a bell waiter stops whenever it is stopped: 3,000 starts and stops at once or a moment later, each ended within a second")
    func waiterStopsWheneverStopped() {
        var hung = 0
        // A set doorbell of our own: a list the thread takes up and waits on.
        let bell = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
        defer { bell.deallocate() }
        bell.pointee = 1
        for round in 0..<3_000 {
            let waiter = DoorbellWaiter(wakeDrain: {})
            #expect(waiter.start())
            if round.isMultiple(of: 2) { waiter.watch([UInt64(UInt(bitPattern: bell))]) }
            // At once, or once the thread may have reached its wait.
            if round.isMultiple(of: 3) { sched_yield() }
            if !waiter.stop(deadlineNanos: System.monotonicNanos() + 1_000_000_000) { hung += 1 }
        }
        #expect(hung == 0, "\(hung) of 3,000 waiters did not stop")
    }

    @Test("a record, an increment and a gauge each clear a set doorbell (the producer rang), and say the process rings")
    func everyWriteRings() throws {
        try withBot("rings", options: .init(laneCapacity: 64)) { directory, bot in
            let latency = try bot.histogram("latency")
            let orders = try bot.counter("orders")
            let depth = try bot.gauge("depth")
            latency.record(1)  // the thread's lane
            let consumer = try RingConsumer("rings", directory: directory)
            #expect(consumer.ringsDoorbell, "a C producer registers for the barrier and says it rings")
            let writes: [(String, () -> Void)] = [
                ("record", { latency.record(2) }), ("increment", { orders.increment() }), ("gauge", { depth.set(3) }),
            ]
            for (what, write) in writes {
                consumer.armDoorbell()
                #expect(consumer.doorbellIsSet)
                write()
                #expect(!consumer.doorbellIsSet, "a \(what) rang the doorbell")
            }
            // Not set: a write leaves the word alone (no store to the consumer's line).
            latency.record(4)
            #expect(!consumer.doorbellIsSet)
        }
    }

    /// The drain here sleeps on the doorbell and on nothing else (no poll, no snapshot, no
    /// inotify): a wake lost would leave it asleep, and the minute's wait below would fail.
    @Test("no wake is lost: a record written at a random moment after the drain announced its sleep wakes it, 3,000 times")
    func noWakeIsLost() throws {
        try withBot("bell", options: .init(laneCapacity: 1 << 10)) { directory, bot in
            let values = try bot.histogram("values")
            let started = Atomic<Int>(0)  // 1: the producer's thread has its lane; 2: the watch is made
            let consumer = try RingConsumer("bell", directory: directory)
            let watch = LaneWatch()
            let signals = Atomic<Int>(0)
            let rung = DispatchSemaphore(value: 0)
            let doorbells = Self.startedDoorbells {
                signals.add(1, ordering: .relaxed)
                rung.signal()
            }
            defer { doorbells.stop() }

            let tries = 3_000
            let drainedTries = Atomic<Int>(0)
            let finished = Atomic<Bool>(false)
            // The producer's view of the word (the thread takes an address, not the consumer).
            let bell = UInt(consumer.doorbellAddress)
            let isSet = { @Sendable in rs_load_relaxed_u32(UnsafeMutablePointer<UInt32>(bitPattern: bell)!) != 0 }
            let producer = Thread {
                var generator = SystemRandomNumberGenerator()
                Self.claimLane(values, started: started)
                for attempt in 1...tries {
                    // The announcement: the drain set the word (its barrier and look may still be under way).
                    while !isSet() { if finished.load(ordering: .relaxed) { return } }
                    // Often at once (during the barrier and the look), else up to 30 µs later.
                    let delay = Bool.random(using: &generator) ? 0 : UInt64.random(in: 0..<30_000, using: &generator)
                    let until = System.monotonicNanos() + delay
                    while System.monotonicNanos() < until {}
                    values.record(UInt64(attempt))
                    while drainedTries.load(ordering: .acquiring) < attempt {}
                }
            }
            producer.start()
            let drained = try Self.watchOnceClaimed(consumer, watch, started: started)
            let (records, caught, woken) = try Self.drainSleepingOnTheDoorbell(
                consumer, watch, doorbells, rung: rung, from: drained, until: tries + 1, drainedCalls: drainedTries)
            drainedTries.store(tries, ordering: .releasing)
            finished.store(true, ordering: .relaxed)
            #expect(records == tries + 1)
            #expect(caught + woken == tries, "each record ended one sleep, or stopped one beginning")
            #expect(signals.load(ordering: .relaxed) == woken, "no wake without a ring")
            #expect(doorbells.figures.wakes == UInt64(woken) && doorbells.figures.caughtByLook == UInt64(caught))
            print("doorbell: \(woken) sleeps woken by a ring, \(caught) not begun (the look saw the record)")
        }
    }

    /// Here the producer writes whenever it likes, so some records come between the drain's last
    /// look and its announcement (no ring: the look after the barrier must see them), some during
    /// it, some while it sleeps. The drain sleeps on the doorbell alone.
    @Test("a record written at a random moment, whatever the drain is doing, never leaves it asleep: 5,000 records, one at a time")
    func recordsAtRandomMomentsAreAllSeen() throws {
        try withBot("random", options: .init(laneCapacity: 1 << 12)) { directory, bot in
            let values = try bot.histogram("values")
            let consumer = try RingConsumer("random", directory: directory)
            let rung = DispatchSemaphore(value: 0)
            let doorbells = Self.startedDoorbells { rung.signal() }
            defer { doorbells.stop() }
            // Up to 300 µs after the last record was drained: the drain may be draining, looking,
            // announcing, or asleep.
            let drained = try Self.drainRandomlyTimed(
                5_000, into: values, maxDelayNanos: 300_000, consumer: consumer, doorbells, rung: rung)
            #expect(drained == 5_000 + 1)
            let figures = doorbells.figures
            #expect(figures.wakes > 0)
            print("doorbell: \(figures.sleeps) sleeps, \(figures.wakes) woken by a ring, \(figures.caughtByLook) not begun")
        }
    }

    @Test(
        "a busy drain sets no doorbell: within the quiet spell after a pass drained records, or while a lane fills fast, it sleeps without one; after the spell it sets them"
    )
    func busyDrainSetsNoDoorbell() throws {
        try withBot("busy", options: .init(laneCapacity: 64)) { directory, bot in
            let consumer = try Self.drainedConsumer(of: bot, in: directory)
            let watch = LaneWatch()
            watch.watch([consumer])
            let doorbells = Self.startedDoorbells()
            defer { doorbells.stop() }
            let quiet = DrainTiming.doorbellQuietNanos
            let drainedAt = System.monotonicNanos()
            doorbells.noteDrained(nowNanos: drainedAt)
            // A millisecond later: the spell's 4 ms left, and nothing set.
            let within = doorbells.announceSleep(watch: watch, nowNanos: drainedAt + 1_000_000, plannedSleepNanos: .max)
            #expect(within == quiet - 1_000_000)
            #expect(!consumer.doorbellIsSet && doorbells.figures.sleeps == 0)
            // The parts ask for less than the spell: that is the spell.
            #expect(doorbells.announceSleep(watch: watch, nowNanos: drainedAt + 1_000_000, plannedSleepNanos: 2_000_000) == 1_000_000)
            // A lane filling fast (the drain back within 16 ms at its pace): no doorbell, however quiet.
            let busy = doorbells.announceSleep(
                watch: watch, nowNanos: drainedAt + quiet, plannedSleepNanos: .max, lanesPaceNanos: 16_000_000)
            #expect(busy == .max)
            #expect(!consumer.doorbellIsSet && doorbells.figures.sleeps == 0)
            // The spell over: the doorbell is set and the drain may sleep as long as its parts ask.
            let after = doorbells.announceSleep(watch: watch, nowNanos: drainedAt + quiet, plannedSleepNanos: .max)
            #expect(after == .max)
            #expect(consumer.doorbellIsSet && doorbells.figures.sleeps == 1)
            doorbells.wokeUp()
            #expect(consumer.doorbellIsSet, "settled: it stays set across the wake")
            // Drained within the spell again: the settled doorbell stays, and the record taken from
            // it is what the producer rings with.
            doorbells.noteDrained(nowNanos: drainedAt + quiet)
            _ = doorbells.announceSleep(watch: watch, nowNanos: drainedAt + quiet + 1, plannedSleepNanos: .max)
            #expect(consumer.doorbellIsSet && doorbells.figures.sleeps == 1)
            try bot.histogram("values").record(1)
            #expect(!consumer.doorbellIsSet, "the record rang")
        }
    }

    @Test("a doorbell still set from an earlier sleep wakes the drain asleep within its quiet spell, which sets none")
    func settledDoorbellWakesASpell() throws {
        try withBot("settled", options: .init(laneCapacity: 64)) { directory, bot in
            let consumer = try Self.drainedConsumer(of: bot, in: directory)
            let watch = LaneWatch()
            watch.watch([consumer])
            let rung = DispatchSemaphore(value: 0)
            let doorbells = Self.startedDoorbells { rung.signal() }
            defer { doorbells.stop() }
            let start = System.monotonicNanos()
            #expect(doorbells.announceSleep(watch: watch, nowNanos: start, plannedSleepNanos: .max) == .max)
            doorbells.wokeUp()  // woken for something else: the doorbell stays set
            // A pass drained another ring's records: the drain sleeps within the spell, sets nothing.
            doorbells.noteDrained(nowNanos: start + 1)
            let spell = doorbells.announceSleep(watch: watch, nowNanos: start + 2, plannedSleepNanos: .max)
            #expect(spell == DrainTiming.doorbellQuietNanos - 1 && consumer.doorbellIsSet && doorbells.figures.sleeps == 1)
            try bot.histogram("values").record(2)
            #expect(rung.wait(timeout: .now() + 10) == .success, "the settled doorbell's ring woke the spell's sleep")
            doorbells.wokeUp()
        }
    }

    @Test("every lane is looked at within 10 s, a busy drain's too: a 1 planted back after a record hides it no longer")
    func wholeLookReachesABusyDrain() throws {
        try withBot("planted", options: .init(laneCapacity: 64)) { directory, bot in
            let consumer = try Self.drainedConsumer(of: bot, in: directory)
            let watch = LaneWatch()
            watch.watch([consumer])
            var (moved, counted) = ([false], [false])
            let doorbells = Self.startedDoorbells()
            defer { doorbells.stop() }
            let start = System.monotonicNanos()
            #expect(doorbells.announceSleep(watch: watch, nowNanos: start, plannedSleepNanos: .max) == .max)
            doorbells.wokeUp()
            try bot.histogram("values").record(2)
            consumer.armDoorbell()  // planted back after the record took it: the settled word hides the record
            watch.markMoved(&moved, counted: &counted)
            #expect(moved == [false])
            // A busy drain (a lane filling fast) sets none; within 10 s the record stays hidden, then not.
            let busy: UInt64 = 16_000_000
            _ = doorbells.announceSleep(watch: watch, nowNanos: start + 1, plannedSleepNanos: .max, lanesPaceNanos: busy)
            doorbells.wokeUp()
            watch.markMoved(&moved, counted: &counted)
            #expect(moved == [false])
            _ = doorbells.announceSleep(
                watch: watch, nowNanos: start + DrainTiming.settledLookNanos, plannedSleepNanos: .max, lanesPaceNanos: busy)
            doorbells.wokeUp()
            watch.markMoved(&moved, counted: &counted)
            #expect(moved == [true], "looked at after 10 s")
        }
    }

    @Test(
        "which producers ring is read once a second and when the watch changes: a producer that stops ringing keeps its doorbell until then, then is polled; a ring that comes is armed at once"
    )
    func ringersReadOnceASecond() throws {
        try withBot("quiet", options: .init(laneCapacity: 64)) { directory, bot in
            let consumer = try Self.drainedConsumer(of: bot, in: directory)
            let watch = LaneWatch()
            watch.watch([consumer])
            let doorbells = Self.startedDoorbells()
            defer { doorbells.stop() }
            let start = System.monotonicNanos()
            func sleep(at now: UInt64) -> (set: Bool, watched: Int?) {
                _ = doorbells.announceSleep(watch: watch, nowNanos: now, plannedSleepNanos: .max)
                defer { doorbells.wokeUp() }
                return (consumer.doorbellIsSet, doorbells.figures.watchedRings)
            }
            #expect(sleep(at: start) == (true, 1))
            bot.sayDoesNotRing()
            // Read at the first sleep: within the second, the word is not read again.
            #expect(sleep(at: start + 500_000_000) == (true, 1))
            #expect(sleep(at: start + DrainTiming.doorbellRingersNanos) == (false, 0))
            // A ring that comes changes the watch: the words are read at once, within the second.
            let loud = try Bot.attach("loud", directory: directory.path, options: .init(laneCapacity: 64))
            let loudConsumer = try Self.drainedConsumer(of: loud, in: directory)
            watch.watch([consumer, loudConsumer])
            #expect(sleep(at: start + DrainTiming.doorbellRingersNanos + 1) == (false, 1))
            _ = doorbells.announceSleep(watch: watch, nowNanos: start + DrainTiming.doorbellRingersNanos + 2, plannedSleepNanos: .max)
            #expect(loudConsumer.doorbellIsSet && !consumer.doorbellIsSet)
            doorbells.wokeUp()
        }
    }

    /// 150 bots of other processes, then this one's: the first 127 rings go to one waiter, the rest
    /// to a second, started for them; this bot's records ring the second.
    @Test(
        "past the 127 rings one waiter watches, a second is started: 151 ringing bots all watched, none polled, and a record in the last wakes the drain, 200 times"
    )
    func manyRingsAllWatched() throws {
        try withRingDirectory { directory in
            var holders: [ChildProcess] = []
            defer {
                for holder in holders {
                    holder.send(SIGKILL)
                    holder.waitForExit()
                }
            }
            // A process holds at most 64 bots: three of 50 bots of one series each.
            for first in stride(from: 0, to: 150, by: 50) {
                let holder = try ChildProcess(
                    testProducer: "scale-series", ring: "many", in: directory,
                    ["--series", "50", "--metrics", "1", "--first", String(first)])
                holders.append(holder)
                let ready = holder.readLine()
                try #require(ready?.hasPrefix("ready") == true, "\(ready ?? "no line"): \(holder.waitForExit().standardError)")
            }
            let bot = try Bot.attach("zlast", directory: directory.path, options: .init(laneCapacity: 1 << 10))
            let values = try bot.histogram("values")
            let others = try (0..<150).map { try RingConsumer("many\($0)", directory: directory) }
            let consumer = try RingConsumer("zlast", directory: directory)
            let rung = DispatchSemaphore(value: 0)
            let doorbells = Self.startedDoorbells { rung.signal() }
            defer { doorbells.stop() }
            // This bot's ring last in the watch: past the first waiter's 127.
            let drained = try Self.drainRandomlyTimed(
                200, into: values, maxDelayNanos: 2_000_000, consumer: consumer, others: others, doorbells, rung: rung)
            #expect(drained == 200 + 1)
            #expect(doorbells.figures.watchedRings == 151 && doorbells.figures.polledRings == 0)
            #expect(doorbells.everyRingWatched)
            #expect(doorbells.figures.wakes > 0)
        }
    }

    /// `bot`'s ring as the drain holds it: its thread's lane claimed by a first record, mapped, drained.
    private static func drainedConsumer(of bot: Bot, in directory: RingDirectory) throws -> RingConsumer {
        try bot.histogram("values").record(1)
        let consumer = try RingConsumer(bot.name, directory: directory)
        consumer.lookForNewLanes()
        try consumer.drain { _, _ in }
        return consumer
    }

    /// Doorbells whose waiter runs, waking the drain with `wakeDrain` (none by default): the caller stops them.
    private static func startedDoorbells(wakeDrain: @escaping @Sendable () -> Void = {}) -> Doorbells {
        let doorbells = Doorbells(log: .standardError, wakeDrain: wakeDrain)
        doorbells.start()
        return doorbells
    }

    /// On the producer's thread: claims its lane with a first record, then waits for the watch.
    private static func claimLane(_ values: Bot.Histogram, started: borrowing Atomic<Int>) {
        values.record(0)
        started.store(1, ordering: .releasing)
        while started.load(ordering: .acquiring) != 2 {}
    }

    /// Once the producer's thread has its lane: maps it, drains the first record, and watches the
    /// lane (as a pass would after inotify said the file grew). Returns the records drained (1).
    private static func watchOnceClaimed(
        _ consumer: RingConsumer, _ watch: LaneWatch, others: [RingConsumer] = [], started: borrowing Atomic<Int>
    ) throws -> Int {
        while started.load(ordering: .acquiring) != 1 {}
        for ring in others {
            ring.lookForNewLanes()
            try ring.drain { _, _ in }
        }
        consumer.lookForNewLanes()
        var drained = 0
        try consumer.drain { batch, _ in drained += batch.count }
        watch.watch(others + [consumer])
        started.store(2, ordering: .releasing)
        return drained
    }

    /// Writes `records` records into `values` on a thread of its own, one at a time, each at a
    /// random moment up to `maxDelayNanos` after the last was drained (a record the drain missed is
    /// not rescued by the next one's ring), while the drain sleeps on the doorbell alone, watching
    /// `others` and then `consumer`, `values`' ring. Returns the records drained, the first
    /// (the thread's lane claimed) included.
    private static func drainRandomlyTimed(
        _ records: Int, into values: Bot.Histogram, maxDelayNanos: UInt64, consumer: RingConsumer, others: [RingConsumer] = [],
        _ doorbells: Doorbells, rung: DispatchSemaphore
    ) throws -> Int {
        let started = Atomic<Int>(0)
        let drainedRecords = Atomic<Int>(0)
        let finished = Atomic<Bool>(false)
        let producer = Thread {
            var generator = SystemRandomNumberGenerator()
            Self.claimLane(values, started: started)
            for value in 1...records {
                let until = System.monotonicNanos() + UInt64.random(in: 0..<maxDelayNanos, using: &generator)
                while System.monotonicNanos() < until {}
                values.record(UInt64(value))
                while drainedRecords.load(ordering: .acquiring) < value { if finished.load(ordering: .relaxed) { return } }
            }
        }
        producer.start()
        defer { finished.store(true, ordering: .relaxed) }
        let watch = LaneWatch()
        let first = try Self.watchOnceClaimed(consumer, watch, others: others, started: started)
        return try Self.drainSleepingOnTheDoorbell(
            consumer, watch, doorbells, rung: rung, from: first, until: records + 1, drainedCalls: drainedRecords
        ).records
    }

    /// The drain's loop, sleeping on the doorbell alone: marks the lanes moved, drains, and when
    /// nothing came announces its sleep and waits for a ring (a minute at most: a wake lost). Stores
    /// the records drained past the first in `drainedCalls` for the producer. Returns the records
    /// drained, the sleeps the look after the announcement stopped, and the sleeps a ring ended.
    private static func drainSleepingOnTheDoorbell(
        _ consumer: RingConsumer, _ watch: LaneWatch, _ doorbells: Doorbells, rung: DispatchSemaphore, from first: Int,
        until wanted: Int, drainedCalls: borrowing Atomic<Int>
    ) throws -> (records: Int, caught: Int, woken: Int) {
        var (drained, caught, woken) = (first, 0, 0)
        var moved = Array(repeating: false, count: watch.watchedConsumers.count)
        var counted = moved
        while drained < wanted {
            let before = drained
            // As a pass does: mark the lanes moved, then drain.
            watch.markMoved(&moved, counted: &counted)
            try consumer.drain { batch, _ in drained += batch.count }
            if drained > before {
                drainedCalls.store(drained - 1, ordering: .releasing)
                continue
            }
            // The least quiet spell: the drain arms again 250 µs after a ring, as soon as it may.
            guard
                let most = doorbells.announceSleep(
                    watch: watch, nowNanos: System.monotonicNanos(), plannedSleepNanos: DrainTiming.minimumSleepNanos)
            else {
                caught += 1  // written as the drain went to sleep: seen by the look after the announcement
                continue
            }
            if most == .max {
                guard rung.wait(timeout: .now() + 60) == .success else {
                    Issue.record("a wake was lost: the drain slept a minute with \(drained - 1) of \(wanted - 1) records drained")
                    break
                }
                woken += 1
            } else {
                System.nanosleep(most)  // just after a ring: no doorbell set, a short sleep
            }
            doorbells.wokeUp()
        }
        return (drained, caught, woken)
    }
}
