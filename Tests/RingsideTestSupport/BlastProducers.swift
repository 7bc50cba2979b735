import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Ringside

/// Starts `ringside-test-producer blast` into `ring` (with `counter`, incrementing counter
/// `blast_calls` with each call too) and waits for its "attached" line.
package func startBlast(
    _ directory: RingDirectory, ring: String, seconds: Double = 3600, rate: Int = 0,
    capacity: Int = 4096, nice: Int = 0, counter: Bool = false
) throws -> ChildProcess {
    let producer = try ChildProcess(
        testProducer: "blast", ring: ring, in: directory,
        ["--seconds", String(seconds), "--rate", String(rate), "--capacity", String(capacity), "--nice", String(nice)]
            + (counter ? ["--counter", "yes"] : []))
    let line = producer.readLine() ?? ""
    guard line.hasPrefix("attached ") else {
        throw TestSupportError("blast into \(ring) did not attach: \(line) \(producer.waitForExit().standardError)")
    }
    return producer
}

/// Stops a blast producer with SIGTERM and returns its counts.
package func stopBlast(_ producer: ChildProcess) throws -> BlastCounts {
    producer.send(SIGTERM)
    let line = producer.readLine()
    let exit = producer.waitForExit()
    guard exit.status == 0, let counts = BlastCounts(line) else {
        throw TestSupportError("blast ended with status \(exit.status), output \(line ?? "none"): \(exit.standardError)")
    }
    return counts
}

/// A JSON number as UInt64 (JSONSerialization gives NSNumber).
package func uint(_ value: Any?) -> UInt64? { (value as? NSNumber)?.uint64Value }
