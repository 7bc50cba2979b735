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
//   ringside-test-producer blast --dir DIR --ring NAME --seconds S [--rate R] [--capacity C] [--nice N]
//       prints "attached PID", then records into histogram "blast" {source="test"} for S seconds
//       (or until SIGTERM) at full speed, or R records a second, dropping when the ring is full.
//       Each record's value is its cursor + 1, so values count 1, 2, 3 ... across producers that
//       re-attach the ring. Prints "attempts A written W dropped D faults F": calls made, what
//       the ring's own counters moved by, and SIGBUS faults the guard absorbed in this process.
//   ringside-test-producer kit --dir DIR --ring NAME --count N [--start S] [--step T] [--per-second R]
//       records histogram order_fill_latency (ns) = S, S+T, ... (N values), prints "ready PID",
//       then counts "orders" R times a second and sets "gross_exposure" until killed.
import CAllocationCounter
import CRingside
import Foundation
import Ringside

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("ringside-test-producer: \(message)\n".utf8))
    exit(2)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let mode = arguments.first, ["sequence", "hold", "count-allocations", "many-metrics", "blast", "kit"].contains(mode) else {
    fail("usage: sequence|hold|count-allocations|many-metrics --dir DIR --ring NAME --count N")
}
arguments.removeFirst()
var options: [String: String] = [:]
var waitForRoom = false
while let flag = arguments.first {
    arguments.removeFirst()
    if flag == "--wait" { waitForRoom = true; continue }
    guard flag.hasPrefix("--"), let value = arguments.first else { fail("expected --flag VALUE, got \(flag)") }
    arguments.removeFirst()
    options[String(flag.dropFirst(2))] = value
}
guard let ringName = options["ring"] else { fail("--ring is required") }
let count = UInt64(options["count"] ?? "0") ?? 0
let start = UInt64(options["start"] ?? "0") ?? 0
var ringOptions = Ring.Options()
if let capacity = options["capacity"].flatMap(Int.init) { ringOptions.capacity = capacity }
let metricCount = Int(options["metrics"] ?? "0") ?? 0
if metricCount > ringOptions.maxMetrics { ringOptions.maxMetrics = metricCount }

/// Makes `count` calls of each hot-path operation; returns malloc calls and heap growth.
func countAllocations(_ ring: Ring, count: UInt64) throws -> (calls: UInt64, heapBytes: Int) {
    let histogram = try ring.histogram("latency", unit: .nanoseconds)
    let counter = try ring.counter("orders", labels: ["side": "buy"])
    let sampled = try ring.counter("sampled", sampleEvery: 10)
    let gauge = try ring.gauge("exposure")
    histogram.record(1) // warm up: first calls may resolve lazily bound symbols
    let heapBefore = heap_bytes_in_use()
    let callsBefore = allocation_count()
    // A while loop: a debug build's Range<UInt64> iterator allocates, and would be counted.
    var value: UInt64 = 0
    while value < count {
        histogram.record(value)
        counter.increment()
        sampled.increment(by: 2)
        gauge.set(Double(value))
        histogram.stop(histogram.start())
        value += 1
    }
    let calls = allocation_count() - callsBefore
    return (calls, Int(heap_bytes_in_use()) - Int(heapBefore))
}

do {
    let ring = try Ring.attach(ringName, directory: options["dir"], options: ringOptions)
    if mode == "many-metrics" {
        for index in 0..<metricCount {
            let labels = ["series": String(index)]
            switch index % 3 {
            case 0:
                let histogram = try ring.histogram("many_latency", unit: .nanoseconds, labels: labels)
                for value in 0..<count { histogram.record(1_000 + value * 37) }
            case 1:
                let counter = try ring.counter("many_events", labels: labels)
                for _ in 0..<count { counter.increment() }
            default:
                let gauge = try ring.gauge("many_level", labels: labels)
                for value in 0..<count { gauge.set(Double(value)) }
            }
        }
        print("wrote \(ring.recordsWritten) dropped \(ring.recordsDropped)")
        exit(0)
    }
    if mode == "kit" {
        try kit(ring, count: count, start: start, step: UInt64(options["step"] ?? "1") ?? 1,
                perSecond: UInt64(options["per-second"] ?? "1000") ?? 1000)
    }
    if mode == "blast" {
        try blast(ring, seconds: Double(options["seconds"] ?? "10") ?? 10, rate: Double(options["rate"] ?? "0") ?? 0,
                  nice: Int32(options["nice"] ?? "0") ?? 0)
        exit(0)
    }
    if mode == "count-allocations" {
        let result = try countAllocations(ring, count: count)
        print("allocations \(result.calls) heap_bytes \(result.heapBytes) dropped \(ring.recordsDropped)")
        exit(0)
    }
    let sequence = try ring.histogram("sequence", unit: .none, labels: ["source": "test"])
    let droppedBefore = ring.recordsDropped, writtenBefore = ring.recordsWritten
    for value in start..<(start + count) {
        if waitForRoom { while ring.freeSlots == 0 { usleep(100) } }
        sequence.record(value)
    }
    let dropped = ring.recordsDropped - droppedBefore
    let written = ring.recordsWritten - writtenBefore
    if mode == "hold" {
        FileHandle.standardOutput.write(Data("ready \(getpid())\n".utf8))
        while true { sleep(60) }
    }
    print("wrote \(written) dropped \(dropped)")
} catch {
    fail("\(error)")
}

/// `blast`: records cursor + 1 until the time is up or SIGTERM arrives, then prints the counts.
func blast(_ ring: Ring, seconds: Double, rate: Double, nice niceness: Int32) throws {
    if niceness != 0 { _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, niceness) }
    // SIGTERM ends the run in order: it stays pending, and the loop looks for it now and then.
    var terminate = sigset_t()
    sigemptyset(&terminate)
    sigaddset(&terminate, SIGTERM)
    sigprocmask(SIG_BLOCK, &terminate, nil)
    let histogram = try ring.histogram("blast", unit: .none, labels: ["source": "test"])
    FileHandle.standardOutput.write(Data("attached \(getpid())\n".utf8))
    let writtenBefore = ring.recordsWritten, droppedBefore = ring.recordsDropped
    let startNanos = rs_clock_precise_ns()
    let endNanos = startNanos + UInt64(seconds * 1e9)
    var attempts: UInt64 = 0
    while true {
        // Full speed: check the clock and signals every 4096 calls; paced: every millisecond's batch.
        let batch: UInt64 = rate > 0 ? max(1, UInt64(rate / 1000)) : 4096
        var index: UInt64 = 0
        while index < batch {
            histogram.record(ring.recordsWritten + 1)
            index += 1
        }
        attempts += batch
        var pending = sigset_t()
        sigpending(&pending)
        if sigismember(&pending, SIGTERM) == 1 || rs_clock_precise_ns() >= endNanos { break }
        if rate > 0 {
            // Sleep until this batch's due time: `attempts / rate` seconds after the start.
            let due = startNanos + UInt64(Double(attempts) / rate * 1e9)
            let now = rs_clock_precise_ns()
            if due > now { usleep(useconds_t(min(due - now, 100_000_000) / 1000)) }
        }
    }
    // Wrapping: a file truncated under us reads as zeros, counters included (see `faults`).
    print("attempts \(attempts) written \(ring.recordsWritten &- writtenBefore) "
        + "dropped \(ring.recordsDropped &- droppedBefore) faults \(rs_guard_faults_absorbed())")
}

/// `kit`: the operator's-kit tests' bot. Records histogram "order_fill_latency" (ns)
/// {symbol="AAPL"} = START + i * STEP for i in 0..<N (waiting for room), prints "ready PID", then
/// until killed increments counter "orders" {side="buy"} PER_SECOND times a second (in 10 ms
/// bursts) and sets gauge "gross_exposure" to the increments so far.
func kit(_ ring: Ring, count: UInt64, start: UInt64, step: UInt64, perSecond: UInt64) throws -> Never {
    let fill = try ring.histogram("order_fill_latency", unit: .nanoseconds, labels: ["symbol": "AAPL"],
                                  help: "Order to fill")
    let orders = try ring.counter("orders", labels: ["side": "buy"], help: "Orders sent")
    let exposure = try ring.gauge("gross_exposure", help: "Gross exposure in dollars")
    var index: UInt64 = 0
    while index < count {
        while ring.freeSlots == 0 { usleep(100) }
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
            while ring.freeSlots == 0 { usleep(100) }
            orders.increment()
            sent += 1
        }
        exposure.set(Double(sent))
        usleep(10_000)
    }
}
