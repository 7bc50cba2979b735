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
import CAllocationCounter
import Foundation
import Ringside

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("ringside-test-producer: \(message)\n".utf8))
    exit(2)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let mode = arguments.first, ["sequence", "hold", "count-allocations", "many-metrics"].contains(mode) else {
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
