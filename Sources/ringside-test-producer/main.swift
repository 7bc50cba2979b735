// A producer process for the test suite: writes known records into a ring, or holds a ring
// as its producer until killed. Not for users: see ringside-emit for scripts.
//
//   ringside-test-producer sequence --dir DIR --ring NAME --count N [--start S] [--capacity C] [--wait]
//       registers histogram "sequence" {source="test"}, writes S, S+1, ... S+N-1 to the
//       histogram (waiting for room with --wait, else dropping when full), prints
//       "wrote W dropped D" and exits.
//   ringside-test-producer hold --dir DIR --ring NAME --count N
//       writes N records like `sequence`, prints "ready PID", then sleeps until killed.
import Foundation
import Ringside

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("ringside-test-producer: \(message)\n".utf8))
    exit(2)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let mode = arguments.first, ["sequence", "hold"].contains(mode) else { fail("usage: sequence|hold --dir DIR --ring NAME --count N") }
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

do {
    let ring = try Ring.attach(ringName, directory: options["dir"], options: ringOptions)
    let sequence = try ring.histogram("sequence", unit: .none, labels: ["source": "test"])
    let droppedBefore = ring.recordsDropped
    var written: UInt64 = 0
    for value in start..<(start + count) {
        if waitForRoom { while ring.freeSlots == 0 { usleep(100) } }
        sequence.record(value)
        written += 1
    }
    let dropped = ring.recordsDropped - droppedBefore
    if mode == "hold" {
        FileHandle.standardOutput.write(Data("ready \(getpid())\n".utf8))
        while true { sleep(60) }
    }
    print("wrote \(written - dropped) dropped \(dropped)")
} catch {
    fail("\(error)")
}
