import Dispatch
import Foundation
import RingsideSystem
import Synchronization

/// The thread of one of the collector's parts (the drain, discovery, the thread sampler): it
/// runs the part's loop until `stop`, which ends its pauses at once and waits for it to finish.
// @unchecked: `isRunning` is touched by the thread that starts and stops it only; the rest is
// synchronized.
final class PartThread: @unchecked Sendable {
    private let stopRequested = Atomic<Bool>(false)
    private let pauses = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private(set) var isRunning = false
    /// What `start` says when the part is started twice.
    private let part: String

    init(part: String) { self.part = part }

    /// Whether `stop` was called: the loop ends.
    var isStopping: Bool { stopRequested.load(ordering: .acquiring) }

    /// Starts a thread named `name` (for top -H and /proc/PID/task/TID/comm) that runs `body`,
    /// which loops until `isStopping`.
    func start(name: String, _ body: @escaping @Sendable () -> Void) {
        precondition(!isRunning, "\(part) is already running")
        isRunning = true
        let thread = Thread { [self] in
            try? System.setThreadName(name)
            body()
            finished.signal()
        }
        thread.start()
    }

    /// Waits `nanos`, or until `stop` is called.
    func pause(nanos: UInt64) { _ = pauses.wait(timeout: .now() + .nanoseconds(Int(clamping: nanos))) }

    /// Has the loop end, calls `wake` (to end a wait of the part's own), and waits for the thread to finish.
    func stop(waking wake: () -> Void = {}) {
        guard isRunning else { return }
        stopRequested.store(true, ordering: .releasing)
        wake()
        pauses.signal()
        finished.wait()
        isRunning = false
    }
}
