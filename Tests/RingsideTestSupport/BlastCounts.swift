/// What `ringside-test-producer blast` prints when it stops.
package struct BlastCounts: Equatable, CustomStringConvertible {
    package var attempts: UInt64
    package var written: UInt64
    package var dropped: UInt64
    package var faults: UInt64
    /// How late a paced producer's schedule ran at worst, in nanoseconds: it then wrote the
    /// records it was behind by at once.
    package var lateNanos: UInt64
    /// The increments of counter `blast_calls`, one a call (`--counter yes`); nil without it.
    package var increments: UInt64?

    /// Parses "attempts A written W dropped D faults F late L", and " increments I" after it
    /// with `--counter yes`.
    package init?(_ line: String?) {
        let words = (line ?? "").split(separator: " ")
        guard words.count == 10 || words.count == 12, words[0] == "attempts", words[2] == "written", words[4] == "dropped",
            words[6] == "faults", words[8] == "late", let attempts = UInt64(words[1]), let written = UInt64(words[3]),
            let dropped = UInt64(words[5]), let faults = UInt64(words[7]), let late = UInt64(words[9])
        else { return nil }
        (self.attempts, self.written, self.dropped, self.faults, self.lateNanos) = (attempts, written, dropped, faults, late)
        if words.count == 12 {
            guard words[10] == "increments", let increments = UInt64(words[11]) else { return nil }
            self.increments = increments
        }
    }

    /// Whether a paced producer of `rate` records a second stalled (the machine did not run it)
    /// long enough to write half a lane of `capacity` at once: drops after that are the
    /// machine's, whatever the collector does, and a test does not count them against it.
    package func producerStalled(rate: Double, capacity: Int) -> Bool {
        Double(lateNanos) / 1e9 * rate >= Double(capacity) / 2
    }

    package var description: String {
        "attempts \(attempts) written \(written) dropped \(dropped) faults \(faults) late \(Double(lateNanos) / 1e6) ms"
            + (increments.map { " increments \($0)" } ?? "")
    }
}
