import Foundation
#if canImport(Glibc)
import Glibc
#endif
import CRingside
@testable import RingsideCollector
import RingsideTestSupport
import Testing

/// The drain thread's sleep (`DrainWakeup`): events about files it does not hold never end it,
/// a signal always does, even when it arrives together with such events. Before, a signal read
/// with an unrelated event was lost, and the drain slept its whole poll: a bot attaching as the
/// collector started (its file's events and discovery's signal at once) lost 250 to 600 of its
/// first records at 50,000 a second into 4,096 slots.
@Suite("The drain's wakeup: other files' events never end its sleep, a signal always does")
struct DrainWakeupTests {
    @Test("a signal that arrives with events about another file ends the sleep")
    func signalWithUnrelatedEvents() throws {
        try withRingDirectory { directory in
            let wakeup = DrainWakeup()
            #expect(wakeup.watch.watch(directory.path))
            // Both wait before the sleep begins: one poll sees them together.
            let path = directory.path + "/ringside.other"
            let fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
            try #require(fd >= 0)
            close(fd)
            wakeup.signal()
            let start = rs_clock_precise_ns()
            let touched = wakeup.wait(timeoutNanos: 30_000_000_000) { _ in false }
            let waited = Double(rs_clock_precise_ns() - start) / 1e9
            #expect(!touched, "no held file was touched")
            #expect(waited < 10, "the signal ended the sleep (slept \(waited) s of 30)")
        }
    }

    @Test("events about another file alone do not end the sleep; a held file's do")
    func unrelatedEventsAlone() throws {
        try withRingDirectory { directory in
            let wakeup = DrainWakeup()
            #expect(wakeup.watch.watch(directory.path))
            let other = open(directory.path + "/ringside.other", O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
            try #require(other >= 0)
            close(other)
            let start = rs_clock_precise_ns()
            #expect(!wakeup.wait(timeoutNanos: 200_000_000) { $0 == "held" })
            #expect(rs_clock_precise_ns() - start >= 200_000_000, "slept the whole time")
            let held = open(directory.path + "/ringside.held", O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
            try #require(held >= 0)
            close(held)
            #expect(wakeup.wait(timeoutNanos: 30_000_000_000) { $0 == "held" }, "the held file's open and close")
            #expect(wakeup.takeTouched().events["held"] != nil)
        }
    }
}
