#if canImport(Glibc)
import Glibc
#endif

/// The one way the package runs a long-lived thread (each of the collector's parts, the HTTP
/// server's loop and workers): a POSIX thread named for `top -H` and /proc/PID/task/TID/comm,
/// optionally niced below its starter, whose loop runs until `isStopping`, whose pauses `wake`
/// and `stop` end at once, and which `stop` joins, or leaves to end alone past a deadline.
/// docs/development.md's thread diagram lists them.
package final class PartThread: @unchecked Sendable {
    // @unchecked: `state` is touched under `mutex` only.
    private struct State {
        var started = false
        var stopping = false
        /// Wakes given and not yet taken by a pause.
        var wakes = 0
        var finished = false
        var thread: pthread_t?
    }

    /// Its name, at most 15 bytes (the kernel's limit).
    package let name: String
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Signalled at each wake, at `stop`, and when the thread finishes.
    private let changed: UnsafeMutablePointer<pthread_cond_t>
    private var state = State()

    package init(name: String) {
        precondition(name.utf8.count <= 15, "a thread's name takes 15 bytes at most: \(name)")
        self.name = name
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        changed = .allocate(capacity: 1)
        changed.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)  // deadlines on the clock that never jumps
        pthread_cond_init(changed, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(changed)
        changed.deinitialize(count: 1)
        changed.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    private func locked<Result>(_ body: (inout State) -> Result) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body(&state)
    }

    /// Whether it was started and has not been stopped.
    package var isRunning: Bool { locked { $0.started && $0.thread != nil } }

    /// Whether `stop` was called: the loop ends.
    package var isStopping: Bool { locked { $0.stopping } }

    /// Starts the thread, which names itself, lowers its priority by `niceIncrement` (0: the
    /// starter's; on Linux a nice value is a thread's own), and runs `body`, a loop that ends once
    /// `isStopping`. Starting it twice is a programming error.
    package func start(niceIncrement: Int32 = 0, _ body: sending @escaping () -> Void) -> Result<Void, Errno> {
        precondition(!locked { $0.started }, "\(name) is already running")
        final class Start {
            let run: () -> Void
            init(_ run: @escaping () -> Void) { self.run = run }
        }
        let start = Start { [self] in
            try? System.setThreadName(name)
            if niceIncrement > 0 {
                let which = __priority_which_t(PRIO_PROCESS.rawValue)
                if let nice = try? System.getpriority(which, 0) { try? System.setpriority(which, 0, min(19, nice + niceIncrement)) }
            }
            body()
            locked { $0.finished = true }
            pthread_cond_broadcast(changed)
        }
        let context = Unmanaged.passRetained(start).toOpaque()
        var thread = pthread_t()
        let code = pthread_create(
            &thread, nil,
            { raw in
                Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue().run()
                return nil
            }, context)
        guard code == 0 else {
            Unmanaged<Start>.fromOpaque(context).release()
            return .failure(Errno(rawValue: code))
        }
        locked {
            $0.started = true
            $0.thread = thread
        }
        return .success(())
    }

    /// `start`, for a part that cannot run without its thread: a thread the system refuses
    /// (EAGAIN: RLIMIT_NPROC or the kernel's threads-max reached) stops the process with the
    /// reason, as Foundation's `Thread` does.
    package func startOrExit(niceIncrement: Int32 = 0, _ body: sending @escaping () -> Void) {
        if case .failure(let error) = start(niceIncrement: niceIncrement, body) {
            fatalError("cannot start the thread \(name): pthread_create: \(error)")
        }
    }

    /// Runs `body` once on a short-lived thread named `name`, never joined: it ends alone (the
    /// heap trim, which must never hold up the thread that asked for it).
    package static func runDetached(name: String, _ body: sending @escaping () -> Void) -> Result<Void, Errno> {
        let part = PartThread(name: name)
        return part.start(body).map {
            guard
                let thread = part.locked({ state -> pthread_t? in
                    defer { state.thread = nil }
                    return state.thread
                })
            else { return }
            pthread_detach(thread)
        }
    }

    /// Waits `nanos` (`.max`: until woken), or until `wake` or `stop`; a wake given while the
    /// loop was busy ends the next pause at once.
    package func pause(nanos: UInt64) {
        let deadline = nanos == .max ? nil : System.monotonicNanos() &+ nanos
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while state.wakes == 0 && !state.stopping && !wait(until: deadline) {}
        state.wakes = 0
    }

    /// Ends the loop's pause, or its next one.
    package func wake() {
        locked { $0.wakes += 1 }
        pthread_cond_broadcast(changed)
    }

    /// Has the loop end: marks it stopping, calls `wake` (to end a wait of the part's own), ends
    /// its pause, and waits for the thread until `deadlineNanos` (CLOCK_MONOTONIC; nil: however
    /// long). Past the deadline the thread is left to end alone (detached). Returns whether it
    /// ended. Idempotent; never from the thread itself.
    @discardableResult
    package func stop(waking wake: () -> Void = {}, deadlineNanos: UInt64? = nil) -> Bool {
        guard let thread = locked({ $0.thread }) else { return true }
        locked { $0.stopping = true }
        wake()
        pthread_cond_broadcast(changed)
        pthread_mutex_lock(mutex)
        var timedOut = false
        while !state.finished && !timedOut { timedOut = wait(until: deadlineNanos) }
        let finished = state.finished
        state.thread = nil
        pthread_mutex_unlock(mutex)
        if finished { pthread_join(thread, nil) } else { pthread_detach(thread) }
        return finished
    }

    /// Waits until the loop has ended of its own accord (its part told it to, not `stop`), or
    /// until `deadlineNanos` (CLOCK_MONOTONIC); returns whether it ended. `stop` then joins it.
    package func awaitEnd(untilNanos deadlineNanos: UInt64) -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        var timedOut = false
        while !state.finished && !timedOut { timedOut = wait(until: deadlineNanos) }
        return state.finished
    }

    /// Waits on `changed` (the mutex held) until `deadline` (nil: woken); returns whether the deadline passed.
    private func wait(until deadline: UInt64?) -> Bool {
        guard let deadline else {
            pthread_cond_wait(changed, mutex)
            return false
        }
        guard deadline > System.monotonicNanos() else { return true }
        var time = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        return pthread_cond_timedwait(changed, mutex, &time) == ETIMEDOUT
    }
}
