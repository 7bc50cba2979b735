import RingsideSystem
import Synchronization
import RingsideHTTPClient

/// The self-pipe that wakes the event loop from `poll`: `stop()` writes to it, and so does the
/// render worker each time it finishes a response. The loop empties it, then looks at why.
///
/// Safe from any thread. The pipe closes when the last holder lets go (the server, its loop and
/// its workers), so a worker left to finish a long job after `stop` never signals a descriptor
/// closed, or reused by another file.
final class LoopWakeup: Sendable {
    /// The end the loop polls.
    let readFD: Int32
    private let writeFD: Int32
    private let stopRequested = Atomic<Bool>(false)

    init() throws(SyscallError) {
        (readFD, writeFD) = try Syscall.makeWakeup()
    }

    /// Wakes the loop (if it is not awake already: a full pipe is readable enough).
    func signal() {
        Syscall.signalWakeup(writeFD)
    }

    /// Asks the loop to exit at its next wake-up, and wakes it.
    func requestStop() {
        // Releasing: the loop that sees the flag sees everything done before the request.
        stopRequested.store(true, ordering: .releasing)
        signal()
    }

    var isStopRequested: Bool {
        // Acquiring: pairs with the store in `requestStop`.
        stopRequested.load(ordering: .acquiring)
    }

    /// Reads every byte waiting, so the next `poll` sleeps until the next signal.
    func drain() {
        Syscall.drainWakeup(readFD)
    }

    deinit {
        System.close(readFD)
        System.close(writeFD)
    }
}
