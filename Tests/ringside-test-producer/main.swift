// A producer process for the test suite: writes known records into a ring, or holds a ring
// as its producer until killed. Not for users: see ringside-emit for scripts.
//
//   ringside-test-producer sequence --dir DIR --ring NAME --count N [--start S] [--capacity C] [--wait]
//       registers histogram "sequence" {source="test"}, writes S, S+1, ... S+N-1 to the
//       histogram (waiting for room with --wait, else dropping when full), prints
//       "wrote W dropped D" and exits.
//   ringside-test-producer hold --dir DIR --ring NAME --count N
//       writes N records like `sequence`, prints "ready PID", then sleeps until killed.
//   ringside-test-producer many-metrics --dir DIR --ring NAME --count N [--capacity C] [--metrics M]
//       registers M metrics (histograms, counters and gauges in turn), writes N values to each,
//       prints "wrote W dropped D" and exits.
//   ringside-test-producer count-allocations --dir DIR --ring NAME --count N
//       makes N calls of each hot-path operation (record, increment, set, span) and prints
//       "allocations A heap_bytes B": malloc calls and the heap's growth over those calls.
//   ringside-test-producer blast --dir DIR --ring NAME --seconds S [--rate R] [--capacity C] [--nice N] [--counter yes]
//       [--start on-input]
//       prints "attached PID" (with --start on-input, then waits for a line on its input), then records into histogram "blast" {source="test"} for S seconds
//       (or until SIGTERM) at full speed, or R records a second, dropping when the ring is full.
//       Each record's value is its cursor + 1, so values count 1, 2, 3 ... across producers that
//       re-attach the ring. Prints "attempts A written W dropped D faults F late L": calls made,
//       what the ring's own counters moved by, SIGBUS faults the guard absorbed in this process,
//       and how many nanoseconds behind its schedule a paced run fell at worst. With --counter,
//       each call also increments counter "blast_calls" {source="test"}, and the line ends
//       "increments I" (I == A: a counter is exact whatever the lane drops).
//   ringside-test-producer first-bot
//       runs the README's first Swift bot (FirstBot.swift) in $RINGSIDE_DIR, and exits.
//   ringside-test-producer kit --dir DIR --ring NAME --count N [--start S] [--step T] [--per-second R]
//       records histogram order_fill_latency (ns) = S, S+T, ... (N values), prints "ready PID",
//       then counts "orders" R times a second and sets "gross_exposure" until killed.
//   ringside-test-producer threads --dir DIR --ring NAME --threads T --count N [--capacity C] [--max-threads M]
//       through the any-thread API (Bot): T threads each record N values into histogram
//       "thread_values" (thread t records t*N+1 ... t*N+N) and increment counter "thread_increments"
//       N times, then release their lanes; prints "lanes L written W dropped D" (records, over every lane).
//   ringside-test-producer burst-idle --dir DIR --ring NAME --count N [--capacity C] [--sample-above P]
//       prints "attached PID", waits for a line on its input, records burstValue(0 ... N-1) into
//       histogram "burst" on its main thread, prints "done", and sleeps with the bot attached until
//       killed.
//
//   Every mode drops when a lane is full, unless --sample-above P (1 to 99) has its lanes sampled
//   past P percent, while a collector that reads weights drains them (SAMPLING in ringside.h).
//   ringside-test-producer short-threads --dir DIR --ring NAME --threads T --count N [--parallel P]
//       starts T short-lived threads, P at a time, each recording N values into "short_values" and
//       incrementing "short_increments" N times; prints "lanes L fds_before A fds_after B maps_before C maps_after D".
//   ringside-test-producer short-threads-joined --dir DIR --ring NAME --threads T --count N [--parallel P]
//       like `short-threads`, but with POSIX threads each joined (pthread_join) before the next wave
//       starts, so a wave's threads have run their exit destructors (and retired their lanes) first;
//       prints the same line.
//   ringside-test-producer lanes --dir DIR --ring NAME --threads T --count N [--capacity C] [--hold]
//       through a Bot, a lane per thread, known in advance: starts T threads one after another,
//       each keeping its lane until all have written, so thread t holds lane t. Thread t records
//       t*N+1 ... t*N+N into histogram "lane_values" {source="test"} (dropping when its lane is
//       full), increments counter "lane_increments" {source="test"} N times, then sets gauge
//       "lane_level" to t (a record too). Prints "lanes L written W dropped D" and exits; with
//       --hold, prints "ready PID" instead and sleeps until killed, its threads holding their lanes.
//       (These Bot modes take --mode OCTAL, the bot file's permissions: 0660 for a collector of
//       another user sharing the file's group.)
//   ringside-test-producer short-bots --dir DIR --ring PREFIX --count N
//       attaches N rings PREFIX-0000 ... (capacity 1024), records 1 value in each, exits
//   ringside-test-producer wide-series --dir DIR --ring PREFIX --rings R --metrics M --label-bytes B
//       attaches R rings PREFIX-00 ... (4,096 metrics each), registers M histograms "wide" in each
//       with labels {series="i", pad="xxx..."} of about B bytes in all, records one value in each,
//       prints "ready PID", then sleeps until killed.
//   ringside-test-producer scale-series --dir DIR --ring PREFIX --series N --metrics M --first F [--kind K]
//       registers N histograms fill_latency{symbol="S0000000"} (--kind counter: counters fills_total,
//       gauge: gauges position), the symbols numbered from F, M to
//       a bot PREFIX<n> (n = F / M, F / M + 1, ...), records one value in each, prints
//       "ready PID", then sleeps until killed (ringside-bench scale's series).
//   ringside-test-producer tasks --dir DIR --ring NAME --tasks T
//       a TaskGroup of T tasks, each timing an async span (around Task.yield and a 1 ms sleep) into
//       histogram "task_span" (us) with measure; prints "tasks T lanes L".
//   ringside-test-producer fork --dir DIR --ring NAME --count N
//       registers counter "forked_increments" and histogram "forked_values", forks; the child
//       increments and records 1 ... N (into its worker file, NAME@PID) and exits (3 if the bot
//       was not enabled before its first record or after); the parent then
//       increments N times and prints "child STATUS pid PID parent N".
//   ringside-test-producer fork-pool --dir DIR --ring NAME --count N --children C [--kill-one yes]
//       registers histogram "pool_values" and counter "pool_increments", records N+1 and increments
//       once, then forks C children, each a worker of the bot: each records 1 ... N and
//       increments N times, and exits; with --kill-one, child 0 records 1 ... N over and over
//       (pausing 1 ms each time) until the parent kills it with SIGKILL, 200 ms after its first
//       round. Prints
//       "children PID... statuses STATUS...".
//   ringside-test-producer fork-warm --dir DIR --ring NAME --count N
//       like `fork`, but the parent records before forking, so the forking thread holds a lane: it
//       attaches bot NAME (Bot) and ring NAME.single (Bot, capacity 4096), registers counter
//       "forked_increments", histogram "forked_values" and gauge "forked_level" in each, and in each
//       records 1 ... N, increments N times and sets the gauge to 1; forks; the child records
//       N+1 ... 2N, increments N times and sets -1 in each (into its worker files) and exits; the
//       parent then records 2N+1 ... 3N, increments N times, sets 2, and prints
//       "child STATUS pid PID parent 2N".
//   ringside-test-producer gauge-workers --dir DIR --ring NAME --children C
//       registers gauges "in_flight" (merged by sum), "peak" (max), "low" (min), "queue" (per
//       worker) and "shared" (the value set last), sets each to 1, then forks C children: child k
//       (1 ... C) sets each to 10k (in its worker file) and waits. Prints "children PID..." once
//       all have set theirs; then, for each line "exit K" on its input, has child K exit, reaps it
//       and prints "exited PID"; at the end of its input, the rest exit too.
//   ringside-test-producer worker-bound --dir DIR --ring NAME --count N --max-workers M
//       attaches NAME with max_workers M, registers counter "bound_increments", then forks M+2
//       children in turn, each incrementing it N times (becoming a worker) and waiting: children
//       1 ... M make their files, child M+1 finds every one held and is refused; then child 1 exits
//       and child M+2 continues its file. Prints "children PID..." and exits when they have.
//   ringside-test-producer worker --dir DIR --ring NAME [--add A] [--threads T --value V --sample-every W]
//       a worker of bot NAME (asked for): adds A to counter "worker_total"; T threads record V once
//       each into histogram "worker_values" (sampleEvery W); prints "worker PID" (StateWorkers.swift).
//   ringside-test-producer worker-churn --dir DIR --ring NAME --rate R --seconds S
//       forks R workers a second for S seconds, one at a time, each incrementing "churn_total" and
//       recording into "churn_values" once; prints "workers N" (StateWorkers.swift).
//   ringside-test-producer worker-pool --dir DIR --ring NAME --workers K --count N --rate R --seconds S [--capacity C] [--nice N]
//       keeps K forked workers running for S seconds (or until SIGTERM), each recording 1 ... N into
//       "pool_values" and incrementing "pool_increments" after each, R calls a second, then exiting,
//       another started in its place; prints "attached PID", then "workers S attempts A written W
//       dropped D increments I" over every worker (WorkerPool.swift).
//   ringside-test-producer sched-threads --dir DIR --ring NAME [--burn yes] [--cpu C]
//       threads for the thread sampler (SchedThreads.swift): "burner" spins with --burn (on CPU C),
//       "napper" sleeps 1 ms at a time, "leaver" exits when a line "leave" comes on the input; each records
//       one value into histogram "sched_values" to hold a lane. Prints "ready PID burner TID napper
//       TID leaver TID", then "left TID" once the leaver is gone; exits at the end of its input.
//   ringside-test-producer spin --dir DIR --ring NAME [--cpu C]
//       attaches nothing: pins itself to CPU C, prints "spinning PID" and spins until killed.
//   ringside-test-producer bogus-files --dir DIR --ring PREFIX --count N [--bytes B] [--rate R --total T]
//       files named as rings that no producer wrote (BogusFiles.swift): N files ringside.PREFIX-NNNNNN
//       of B bytes of 0xA5 (a bad magic; 0: empty), "made N"; or, with --rate, files made R a second
//       and each removed once N newer exist, until T were made or SIGTERM, "churning PID" then "churned M".
//   ringside-test-producer span-clock --dir DIR --ring NAME [--select tsc|monotonic]
//       the span clock this process chose (SpanClockMode.swift): prints "clock C start S" and
//       "described TEXT", times 20 ms spans into histogram "clock_span" (ns); with --select, switches
//       the clock while a span is under way, prints "selected C start S" and times one more.
import CAllocationCounter
import CRingside
import Foundation
import Ringside

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("ringside-test-producer: \(message)\n".utf8))
    exit(2)
}

var arguments = Array(CommandLine.arguments.dropFirst())
if arguments == ["first-bot"] {
    do { try firstBot() } catch { fail("\(error)") }
    exit(0)
}
guard let mode = arguments.first,
    [
        "sequence", "hold", "count-allocations", "many-metrics", "blast", "kit", "burst-idle",
        "threads", "short-threads", "short-threads-joined", "tasks", "fork",
        "fork-warm", "fork-pool", "lanes", "short-bots", "wide-series", "scale-series", "gauge-workers", "worker-bound", "sched-threads",
        "spin",
        "span-clock", "worker", "worker-churn", "worker-pool", "bogus-files",
    ].contains(mode)
else {
    fail("usage: sequence|hold|count-allocations|many-metrics --dir DIR --ring NAME --count N")
}
arguments.removeFirst()
var options: [String: String] = [:]
var waitForRoom = false
while let flag = arguments.first {
    arguments.removeFirst()
    if flag == "--wait" {
        waitForRoom = true
        continue
    }
    if flag == "--hold" {
        options["hold"] = "yes"
        continue
    }  // `lanes`: a flag, kept with the options
    guard flag.hasPrefix("--"), let value = arguments.first else { fail("expected --flag VALUE, got \(flag)") }
    arguments.removeFirst()
    options[String(flag.dropFirst(2))] = value
}
guard let ringName = options["ring"] else { fail("--ring is required") }
let count = UInt64(options["count"] ?? "0") ?? 0
let start = UInt64(options["start"] ?? "0") ?? 0
// Every mode drops when a lane is full, as the tests of drops expect, unless `--sample-above P`
// has its lanes sampled past P percent (SAMPLING in ringside.h) while the collector reads weights.
let sampleAbove = Int(options["sample-above"] ?? "100") ?? 100
var ringOptions = Bot.Options(sampleAbovePercent: sampleAbove)
if let capacity = options["capacity"].flatMap(Int.init) { ringOptions.laneCapacity = capacity }
let metricCount = Int(options["metrics"] ?? "0") ?? 0
if metricCount > ringOptions.maxMetrics { ringOptions.maxMetrics = metricCount }

// `bogus-files`: files named as rings that no producer wrote (BogusFiles.swift).
if mode == "bogus-files" {
    bogusFiles(
        directory: options["dir"] ?? "/dev/shm", prefix: ringName, count: Int(count), bytes: Int(options["bytes"] ?? "0") ?? 0,
        rate: Double(options["rate"] ?? "0") ?? 0, total: Int(options["total"] ?? "0") ?? 0)
}

// `sched-threads` and `spin`: the thread sampler's subjects (SchedThreads.swift).
if mode == "spin" { spin(cpu: Int(options["cpu"] ?? "-1") ?? -1) }
if mode == "span-clock" {
    do { try spanClock(ring: ringName, directory: options["dir"], select: options["select"]) } catch { fail("\(error)") }
}
if mode == "sched-threads" {
    do {
        try schedThreads(
            ring: ringName, directory: options["dir"], cpu: Int(options["cpu"] ?? "-1") ?? -1, burn: options["burn"] == "yes")
    } catch {
        fail("\(error)")
    }
}

// `wide-series`: many series of long labels in live bots, to fill the collector's memory budget.
if mode == "wide-series" {
    let rings = Int(options["rings"] ?? "1") ?? 1, labelBytes = Int(options["label-bytes"] ?? "200") ?? 200
    var bots: [Bot] = []
    for index in 0..<rings {
        let bot = try Bot.attach(
            ringName + "-" + String(format: "%02d", index), directory: options["dir"],
            options: .init(laneCapacity: 1024, maxMetrics: 4096))
        for series in 0..<metricCount {
            let name = String(series)
            let pad = String(repeating: "x", count: max(1, labelBytes - name.utf8.count - 20))
            try bot.histogram("wide", unit: .nanoseconds, labels: ["series": name, "pad": pad]).record(UInt64(1_000 + series))
        }
        bots.append(bot)
    }
    FileHandle.standardOutput.write(Data("ready \(getpid())\n".utf8))
    while true { sleep(60) }
}

// `scale-series`: ringside-bench scale's series, short labels, in live bots (a process holds at
// most 64 bots: the benchmark starts as many of these as it needs).
if mode == "scale-series" {
    let total = Int(options["series"] ?? "0") ?? 0, first = Int(options["first"] ?? "0") ?? 0, perBot = max(metricCount, 1)
    var bots: [Bot] = []
    var made = 0
    while made < total {
        let bot = try Bot.attach(
            ringName + String((first + made) / perBot), directory: options["dir"],
            options: .init(laneCapacity: 1 << 13, maxMetrics: perBot))
        for _ in 0..<min(perBot, total - made) {
            let number = first + made
            let symbol = "S" + String(number + 10_000_000).dropFirst()
            switch options["kind"] ?? "histogram" {
            case "counter": try bot.counter("fills", labels: ["symbol": symbol]).increment(by: UInt64(1 + number % 4))
            case "gauge": try bot.gauge("position", labels: ["symbol": symbol]).set(Double(number % 4_000))
            default:
                try bot.histogram("fill_latency", unit: .nanoseconds, labels: ["symbol": symbol]).record(UInt64(1_000 + number % 4_000))
            }
            made += 1
        }
        bots.append(bot)
    }
    FileHandle.standardOutput.write(Data("ready \(getpid())\n".utf8))
    while true { sleep(60) }
}

// `short-bots`: COUNT bots named RING-0000 ..., each attached, given one record, and left (as cron
// jobs are): the process exits holding none, and the collector sees COUNT dead bots.
if mode == "short-bots" {
    for index in 0..<count {
        let bot = try Bot.attach(
            ringName + "-" + String(format: "%04d", index), directory: options["dir"],
            options: .init(laneCapacity: 1024, maxMetrics: 4))
        try bot.histogram("job_seconds").record(index + 1)
    }
    print("bots \(count)")
    exit(0)
}

/// Makes `count` calls of each hot-path operation; returns malloc calls and heap growth.
func countAllocations(_ ring: Bot, count: UInt64) throws -> (calls: UInt64, heapBytes: Int) {
    let histogram = try ring.histogram("latency", unit: .nanoseconds)
    let counter = try ring.counter("orders", labels: ["side": "buy"])
    let sampled = try ring.histogram("sampled", sampleEvery: 10)
    let gauge = try ring.gauge("exposure")
    histogram.record(1)  // warm up: first calls may resolve lazily bound symbols
    let heapBefore = heap_bytes_in_use()
    let callsBefore = allocation_count()
    // A while loop: a debug build's Range<UInt64> iterator allocates, and would be counted.
    var value: UInt64 = 0
    while value < count {
        histogram.record(value)
        counter.increment()
        sampled.record(2)
        gauge.set(Double(value))
        histogram.startTiming().stop()
        value += 1
    }
    let calls = allocation_count() - callsBefore
    return (calls, Int(heap_bytes_in_use()) - Int(heapBefore))
}

if [
    "threads", "short-threads", "short-threads-joined", "tasks", "fork", "fork-warm", "fork-pool", "lanes", "gauge-workers", "worker-bound",
    "worker", "worker-churn", "worker-pool",
].contains(mode) {
    do {
        var botOptions = Bot.Options(sampleAbovePercent: sampleAbove)
        if let capacity = options["capacity"].flatMap(Int.init) { botOptions.laneCapacity = capacity }
        if let threads = options["max-threads"].flatMap(Int.init) { botOptions.maxLanes = threads }
        if let bound = options["max-workers"].flatMap(Int.init) { botOptions.maxWorkers = bound }
        if let fileMode = options["mode"].flatMap({ UInt32($0, radix: 8) }) { botOptions.fileMode = fileMode }
        botOptions.worker = mode == "worker"
        let bot = try Bot.attach(ringName, directory: options["dir"], options: botOptions)
        try runAnyThreadMode(mode, bot: bot, options: options, count: count)
        exit(0)
    } catch {
        fail("\(error)")
    }
}

do {
    let bot = try Bot.attach(ringName, directory: options["dir"], options: ringOptions)
    // This thread's lane now: a full directory is an error here (exit 2), not a run of drops.
    let lane = try bot.claimCurrentThreadLane()
    if mode == "many-metrics" {
        for index in 0..<metricCount {
            let labels = ["series": String(index)]
            switch index % 3 {
            case 0:
                let histogram = try bot.histogram("many_latency", unit: .nanoseconds, labels: labels)
                for value in 0..<count { histogram.record(1_000 + value * 37) }
            case 1:
                let counter = try bot.counter("many_events", labels: labels)
                for _ in 0..<count { counter.increment() }
            default:
                let gauge = try bot.gauge("many_level", labels: labels)
                for value in 0..<count { gauge.set(Double(value)) }
            }
        }
        print("wrote \(lane.recordsWritten) dropped \(lane.recordsDropped)")
        exit(0)
    }
    if mode == "kit" {
        try kit(
            bot, count: count, start: start, step: UInt64(options["step"] ?? "1") ?? 1,
            perSecond: UInt64(options["per-second"] ?? "1000") ?? 1000)
    }
    /// burst-idle's values: spread over 1 ... 1,000,000 in no order, so a sum or a largest that
    /// misses any one of them shows (the tests compute the same: `BurstIdle.value`).
    func burstValue(_ index: UInt64) -> UInt64 { 1 + (index &* 2_654_435_761) % 1_000_000 }
    if mode == "burst-idle" {
        let burst = try bot.histogram("burst", unit: .none)
        FileHandle.standardOutput.write(Data("attached \(getpid())\n".utf8))
        _ = readLine()
        for index in 0..<count { burst.record(burstValue(index)) }
        FileHandle.standardOutput.write(Data("done\n".utf8))
        while true { pause() }  // idle with the bot attached, until killed: its gathered calls are in its cells
    }
    if mode == "blast" {
        try blast(
            bot, seconds: Double(options["seconds"] ?? "10") ?? 10, rate: Double(options["rate"] ?? "0") ?? 0,
            nice: Int32(options["nice"] ?? "0") ?? 0, counting: options["counter"] == "yes", onInput: options["start"] == "on-input")
        exit(0)
    }
    if mode == "count-allocations" {
        let result = try countAllocations(bot, count: count)
        print("allocations \(result.calls) heap_bytes \(result.heapBytes) dropped \(lane.recordsDropped)")
        exit(0)
    }
    let sequence = try bot.histogram("sequence", unit: .none, labels: ["source": "test"])
    let droppedBefore = lane.recordsDropped, writtenBefore = lane.recordsWritten
    for value in start..<(start + count) {
        if waitForRoom { while lane.freeSlots == 0 { usleep(100) } }
        sequence.record(value)
    }
    let dropped = lane.recordsDropped - droppedBefore
    let written = lane.recordsWritten - writtenBefore
    if mode == "hold" {
        FileHandle.standardOutput.write(Data("ready \(getpid())\n".utf8))
        while true { sleep(60) }
    }
    print("wrote \(written) dropped \(dropped)")
} catch {
    fail("\(error)")
}

/// `blast`: records cursor + 1 (and, `counting`, increments "blast_calls") until the time is up or
/// SIGTERM arrives, then prints the counts.
func blast(_ ring: Bot, seconds: Double, rate: Double, nice niceness: Int32, counting: Bool, onInput: Bool) throws {
    if niceness != 0 { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, niceness) }
    // SIGTERM ends the run in order: it stays pending, and the loop looks for it now and then.
    var terminate = sigset_t()
    sigemptyset(&terminate)
    sigaddset(&terminate, SIGTERM)
    sigprocmask(SIG_BLOCK, &terminate, nil)
    let histogram = try ring.histogram("blast", unit: .none, labels: ["source": "test"])
    let calls = counting ? try ring.counter("blast_calls", labels: ["source": "test"]) : nil
    let lane = ring.currentThreadLane
    FileHandle.standardOutput.write(Data("attached \(getpid())\n".utf8))
    if onInput { _ = readLine() }
    let writtenBefore = lane.recordsWritten, droppedBefore = lane.recordsDropped
    let startNanos = rs_clock_precise_ns()
    let endNanos = startNanos + UInt64(seconds * 1e9)
    var attempts: UInt64 = 0
    // Paced: how late the schedule ran at worst (a late batch is followed at once by the ones
    // missed, a burst the lane must hold), so a test can tell the machine's stalls from the drain's.
    var latestNanos: UInt64 = 0
    while true {
        // Full speed: check the clock and signals every 4096 calls; paced: every millisecond's batch.
        let batch: UInt64 = rate > 0 ? max(1, UInt64(rate / 1000)) : 4096
        var index: UInt64 = 0
        if let calls {
            while index < batch {
                histogram.record(lane.recordsWritten + 1)
                calls.increment()
                index += 1
            }
        } else {
            while index < batch {
                histogram.record(lane.recordsWritten + 1)
                index += 1
            }
        }
        attempts += batch
        var pending = sigset_t()
        sigpending(&pending)
        if sigismember(&pending, SIGTERM) == 1 || rs_clock_precise_ns() >= endNanos { break }
        if rate > 0 {
            // Sleep until this batch's due time: `attempts / rate` seconds after the start.
            let due = startNanos + UInt64(Double(attempts) / rate * 1e9)
            let now = rs_clock_precise_ns()
            if due > now {
                usleep(useconds_t(min(due - now, 100_000_000) / 1000))
            } else {
                latestNanos = max(latestNanos, now - due)
            }
        }
    }
    // Wrapping: a file truncated under us reads as zeros, counters included (see `faults`).
    print(
        "attempts \(attempts) written \(lane.recordsWritten &- writtenBefore) "
            + "dropped \(lane.recordsDropped &- droppedBefore) faults \(rs_guard_faults_absorbed()) late \(latestNanos)"
            + (calls == nil ? "" : " increments \(attempts)"))
}

/// `kit`: the operator's-kit tests' bot. Records histogram "order_fill_latency" (ns)
/// {symbol="AAPL"} = START + i * STEP for i in 0..<N (waiting for room), prints "ready PID", then
/// until killed increments counter "orders" {side="buy"} PER_SECOND times a second (in 10 ms
/// bursts) and sets gauge "gross_exposure" to the increments so far.
func kit(_ ring: Bot, count: UInt64, start: UInt64, step: UInt64, perSecond: UInt64) throws -> Never {
    let fill = try ring.histogram(
        "order_fill_latency", unit: .nanoseconds, labels: ["symbol": "AAPL"],
        help: "Order to fill")
    let orders = try ring.counter("orders", labels: ["side": "buy"], help: "Orders sent")
    let exposure = try ring.gauge("gross_exposure", help: "Gross exposure in dollars")
    let lane = ring.currentThreadLane
    var index: UInt64 = 0
    while index < count {
        while lane.freeSlots == 0 { usleep(100) }
        fill.record(start + index * step)
        index += 1
    }
    FileHandle.standardOutput.write(Data("ready \(getpid())\n".utf8))
    let begin = rs_clock_precise_ns()
    var sent: UInt64 = 0
    while true {
        // Catch up to PER_SECOND * elapsed, so a late wake-up does not lower the rate.
        let due = (rs_clock_precise_ns() - begin) * perSecond / 1_000_000_000
        while sent < due {
            while lane.freeSlots == 0 { usleep(100) }
            orders.increment()
            sent += 1
        }
        exposure.set(Double(sent))
        usleep(10_000)
    }
}

/// Thread `thread`'s share in `threads` and `lanes`: records thread*count+1 ... thread*count+count
/// into `values` and increments `increments` `count` times (none when `count` is 0).
@Sendable func recordThreadShare(_ thread: Int, count: UInt64, values: Bot.Histogram, increments: Bot.Counter) {
    let base = UInt64(thread) * count
    var index: UInt64 = 1
    while index <= count {
        values.record(base + index)
        increments.increment()
        index += 1
    }
}

/// The any-thread modes: `threads`, `short-threads`, `tasks` and `fork` (see the top of this file).
func runAnyThreadMode(_ mode: String, bot: Bot, options: [String: String], count: UInt64) throws {
    switch mode {
    case "threads":
        let threads = Int(options["threads"] ?? "1") ?? 1
        let values = try bot.histogram("thread_values", unit: .none, labels: ["source": "test"])
        let increments = try bot.counter("thread_increments", labels: ["source": "test"])
        let done = DispatchGroup(), holding = DispatchGroup()
        let everyoneHolds = DispatchSemaphore(value: 0)
        for thread in 0..<threads {
            done.enter()
            holding.enter()
            let worker = Thread {
                // Every thread holds a lane of its own before any records: a thread that finished
                // first never hands its lane, and what it holds, to one that starts late.
                _ = try? bot.claimCurrentThreadLane()
                holding.leave()
                everyoneHolds.wait()
                recordThreadShare(thread, count: count, values: values, increments: increments)
                bot.releaseCurrentThreadLane()
                done.leave()
            }
            worker.start()
        }
        holding.wait()
        for _ in 0..<threads { everyoneHolds.signal() }
        done.wait()
        let status = try laneTotals(bot)
        print("lanes \(bot.lanesAllocated) written \(status.written) dropped \(status.dropped)")
    case "short-threads":
        let threads = Int(options["threads"] ?? "1") ?? 1
        let parallel = max(1, Int(options["parallel"] ?? "4") ?? 4)
        let values = try bot.histogram("short_values", unit: .none)
        let increments = try bot.counter("short_increments")
        let fdsBefore = entries(in: "/proc/self/fd"), mapsBefore = lines(in: "/proc/self/maps")
        var started = 0
        while started < threads {
            let wave = min(parallel, threads - started)
            let done = DispatchGroup()
            for _ in 0..<wave {
                done.enter()
                let worker = Thread {
                    for value in 1...max(1, count) {
                        values.record(value)
                        increments.increment()
                    }
                    done.leave()
                }
                worker.start()
            }
            done.wait()
            started += wave
        }
        usleep(50_000)  // the last threads' exits (and their lanes' release) finish after they signal
        print(
            "lanes \(bot.lanesAllocated) fds_before \(fdsBefore) fds_after \(entries(in: "/proc/self/fd")) "
                + "maps_before \(mapsBefore) maps_after \(lines(in: "/proc/self/maps"))")
    case "lanes":
        let threads = Int(options["threads"] ?? "1") ?? 1
        let values = try bot.histogram("lane_values", unit: .none, labels: ["source": "test"])
        let increments = try bot.counter("lane_increments", labels: ["source": "test"])
        let level = try bot.gauge("lane_level")
        let finish = DispatchSemaphore(value: 0)  // never signalled: the threads keep their lanes until exit
        for thread in 0..<threads {
            let wrote = DispatchSemaphore(value: 0)
            let worker = Thread {
                recordThreadShare(thread, count: count, values: values, increments: increments)
                level.set(Double(thread))
                wrote.signal()
                finish.wait()
            }
            worker.start()
            wrote.wait()  // the next thread starts once this one holds lane `thread`
        }
        if options["hold"] != nil {
            FileHandle.standardOutput.write(Data("ready \(getpid())\n".utf8))
            while true { sleep(60) }
        }
        let status = try laneTotals(bot)
        print("lanes \(bot.lanesAllocated) written \(status.written) dropped \(status.dropped)")
    case "tasks":
        let tasks = Int(options["tasks"] ?? "100") ?? 100
        let span = try bot.histogram("task_span", unit: .microseconds)
        let finished = DispatchSemaphore(value: 0)
        Task.detached {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<tasks {
                    group.addTask {
                        await span.measure {
                            await Task.yield()
                            try? await Task.sleep(nanoseconds: 1_000_000)
                        }
                    }
                }
            }
            finished.signal()
        }
        finished.wait()
        print("tasks \(tasks) lanes \(bot.lanesAllocated)")
    case "fork-warm":
        try forkWarm(bot, options: options, count: count)
    case "fork-pool":
        try forkPool(bot, options: options, count: count)
    case "worker-bound":
        try workerBound(bot, count: count, bound: Int(options["max-workers"] ?? "2") ?? 2)
    case "gauge-workers":
        try gaugeWorkers(bot, children: Int(options["children"] ?? "2") ?? 2)
    case "short-threads-joined":
        try shortThreadsJoined(bot, options: options, count: count)
    case "worker":
        try stateWorker(bot, options: options)
    case "worker-churn":
        try workerChurn(bot, options: options)
    case "worker-pool":
        try workerPool(bot, options: options, count: count)
    default:  // fork
        let increments = try bot.counter("forked_increments")
        let values = try bot.histogram("forked_values", unit: .none)
        let child = fork()
        if child == 0 {
            let enabledBefore = bot.isEnabled  // its records will be kept, before its file is made
            for value in 1...max(1, count) {
                increments.increment()
                values.record(value)
            }
            _exit(enabledBefore && bot.isEnabled ? 0 : 3)
        }
        var status: Int32 = 0
        waitpid(child, &status, 0)
        for _ in 0..<count { increments.increment() }
        print("child \(status) pid \(child) parent \(count)")
    }
}

/// What the bot's lanes say: records written and dropped, read back through the reader.
func laneTotals(_ bot: Bot) throws -> (written: UInt64, dropped: UInt64) {
    guard let path = bot.path else { return (0, 0) }
    let directory = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
    let status = try RingInspector(bot.name, directory: RingDirectory(directory)).status()
    return (status.writeCursor, status.dropped)
}

func entries(in directory: String) -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: directory).count) ?? -1
}

func lines(in file: String) -> Int {
    (try? String(contentsOfFile: file, encoding: .utf8))?.split(separator: "\n").count ?? -1
}

/// `fork-pool`: children forked from one bot, each its worker (see the top of this file).
func forkPool(_ bot: Bot, options: [String: String], count: UInt64) throws {
    let children = Int(options["children"] ?? "4") ?? 4
    let values = try bot.histogram("pool_values", unit: .none)
    let increments = try bot.counter("pool_increments")
    values.record(count + 1)  // the parent records too, before it forks
    increments.increment()
    var pids: [Int32] = []
    // The child to be killed says when it has recorded a round (its worker file is whole by then).
    var started: [Int32] = [-1, -1]
    guard pipe(&started) == 0 else { fail("pipe failed") }
    for child in 0..<children {
        let pid = fork()
        if pid == 0 {
            if child == 0, options["kill-one"] != nil {
                var value: UInt64 = 0
                while true {  // until killed, giving the lane time to drain now and then
                    value = value % count + 1
                    values.record(value)
                    increments.increment()
                    if value == count {
                        var byte: UInt8 = 1
                        _ = write(started[1], &byte, 1)
                        usleep(1000)
                    }
                }
            }
            for value in 1...max(1, count) {
                values.record(value)
                increments.increment()
            }
            _exit(0)
        }
        pids.append(pid)
    }
    if options["kill-one"] != nil {
        var byte: UInt8 = 0
        guard read(started[0], &byte, 1) == 1 else { fail("the child to kill never started") }
        usleep(200_000)
        kill(pids[0], SIGKILL)
    }
    var statuses: [Int32] = []
    for pid in pids {
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        statuses.append(status)
    }
    print("children \(pids.map(String.init).joined(separator: " ")) statuses \(statuses.map(String.init).joined(separator: " "))")
}

/// `worker-bound`: more forked workers than the bound, one refused, one continuing a gone one's file.
func workerBound(_ bot: Bot, count: UInt64, bound: Int) throws {
    let increments = try bot.counter("bound_increments")
    var ready: [Int32] = [-1, -1]
    guard pipe(&ready) == 0 else { fail("pipe failed") }
    var pids: [Int32] = [], exits: [Int32] = []
    func start() {
        var told: [Int32] = [-1, -1]
        guard pipe(&told) == 0 else { fail("pipe failed") }
        let pid = fork()
        if pid == 0 {
            for _ in 0..<count { increments.increment() }
            var byte: UInt8 = 1
            _ = write(ready[1], &byte, 1)
            _ = read(told[0], &byte, 1)
            _exit(0)
        }
        close(told[0])
        var byte: UInt8 = 0
        guard read(ready[0], &byte, 1) == 1 else { fail("a child never counted") }
        pids.append(pid)
        exits.append(told[1])
    }
    func finish(_ index: Int) {
        var byte: UInt8 = 1
        _ = write(exits[index], &byte, 1)
        var status: Int32 = 0
        waitpid(pids[index], &status, 0)
    }
    for _ in 0...bound { start() }  // the last one finds the bound reached, every worker alive
    finish(0)
    start()  // continues child 1's file
    for index in 1..<pids.count { finish(index) }
    print("children \(pids.map(String.init).joined(separator: " "))")
}

/// `gauge-workers`: forked workers that set gauges of each merge policy, and exit when told.
func gaugeWorkers(_ bot: Bot, children: Int) throws {
    let gauges = [
        try bot.gauge("in_flight", merge: .sum), try bot.gauge("peak", merge: .max), try bot.gauge("low", merge: .min),
        try bot.gauge("queue", merge: .perWorker), try bot.gauge("shared"),
    ]
    for gauge in gauges { gauge.set(1) }
    var ready: [Int32] = [-1, -1]
    guard pipe(&ready) == 0 else { fail("pipe failed") }
    var pids: [Int32] = [], exits: [Int32] = []
    for child in 1...children {
        var told: [Int32] = [-1, -1]
        guard pipe(&told) == 0 else { fail("pipe failed") }
        let pid = fork()
        if pid == 0 {
            // Only the parent holds the write ends of the children's pipes: a child whose parent
            // is killed reads the end of its pipe, and exits rather than outlive the test.
            close(told[1])
            for other in exits { close(other) }
            for gauge in gauges { gauge.set(Double(10 * child)) }
            var byte: UInt8 = 1
            _ = write(ready[1], &byte, 1)
            _ = read(told[0], &byte, 1)  // the parent's byte, or the end of the pipe
            _exit(0)
        }
        close(told[0])
        pids.append(pid)
        exits.append(told[1])
    }
    for _ in pids {
        var byte: UInt8 = 0
        guard read(ready[0], &byte, 1) == 1 else { fail("a child never set its gauges") }
    }
    print("children \(pids.map(String.init).joined(separator: " "))")
    fflush(nil)
    var running = Set(pids.indices)
    while let line = readLine() {
        guard line.hasPrefix("exit "), let k = Int(line.dropFirst(5)), running.contains(k - 1) else { continue }
        var byte: UInt8 = 1
        _ = write(exits[k - 1], &byte, 1)  // a byte: later children hold this pipe's write end too
        var status: Int32 = 0
        waitpid(pids[k - 1], &status, 0)
        running.remove(k - 1)
        print("exited \(pids[k - 1])")
        fflush(nil)
    }
    for index in running {
        var byte: UInt8 = 1
        _ = write(exits[index], &byte, 1)
        var status: Int32 = 0
        waitpid(pids[index], &status, 0)
    }
}

/// `fork-warm`: fork() while the forking thread holds a lane of two bots.
func forkWarm(_ bot: Bot, options: [String: String], count: UInt64) throws {
    let single = try Bot.attach(bot.name + ".single", directory: options["dir"], options: .init(laneCapacity: 4096))
    // The same three metrics in each bot, recorded alike.
    let both = try [bot, single].map { each in
        (
            increments: try each.counter("forked_increments"), values: try each.histogram("forked_values", unit: .none),
            level: try each.gauge("forked_level")
        )
    }
    func round(_ values: ClosedRange<UInt64>, level: Double) {
        for value in values {
            for metrics in both {
                metrics.values.record(value)
                metrics.increments.increment()
            }
        }
        for metrics in both { metrics.level.set(level) }
    }
    let n = max(1, count)
    round(1...n, level: 1)
    let child = fork()
    if child == 0 {
        round((n + 1)...(2 * n), level: -1)
        _exit(0)
    }
    var status: Int32 = 0
    waitpid(child, &status, 0)
    round((2 * n + 1)...(3 * n), level: 2)
    print("child \(status) pid \(child) parent \(2 * n)")
    withExtendedLifetime(single) {}
}

/// What a joined short thread records into: passed to the thread through its argument.
final class ShortThreadWork {
    let values: Bot.Histogram
    let increments: Bot.Counter
    let count: UInt64

    init(values: Bot.Histogram, increments: Bot.Counter, count: UInt64) {
        self.values = values
        self.increments = increments
        self.count = count
    }
}

/// `short-threads-joined`: waves of POSIX threads, each wave joined before the next starts.
func shortThreadsJoined(_ bot: Bot, options: [String: String], count: UInt64) throws {
    let threads = Int(options["threads"] ?? "1") ?? 1
    let parallel = max(1, Int(options["parallel"] ?? "4") ?? 4)
    let work = ShortThreadWork(
        values: try bot.histogram("short_values", unit: .none),
        increments: try bot.counter("short_increments"), count: max(1, count))
    let fdsBefore = entries(in: "/proc/self/fd"), mapsBefore = lines(in: "/proc/self/maps")
    let context = Unmanaged.passRetained(work).toOpaque()
    var started = 0
    while started < threads {
        let wave = min(parallel, threads - started)
        var ids: [pthread_t] = []
        for _ in 0..<wave {
            var id = pthread_t()
            let result = pthread_create(
                &id, nil,
                { argument in
                    let work = Unmanaged<ShortThreadWork>.fromOpaque(argument!).takeUnretainedValue()
                    var value: UInt64 = 1
                    while value <= work.count {
                        work.values.record(value)
                        work.increments.increment()
                        value += 1
                    }
                    return nil
                }, context)
            guard result == 0 else { fail("pthread_create: \(String(cString: strerror(result)))") }
            ids.append(id)
        }
        for id in ids { pthread_join(id, nil) }
        started += wave
    }
    Unmanaged<ShortThreadWork>.fromOpaque(context).release()
    print(
        "lanes \(bot.lanesAllocated) fds_before \(fdsBefore) fds_after \(entries(in: "/proc/self/fd")) "
            + "maps_before \(mapsBefore) maps_after \(lines(in: "/proc/self/maps"))")
}
