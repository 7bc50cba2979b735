import RingsideSystem
import Dispatch
import Synchronization
import RingsideHTTPClient

/// A thread of its own that does the server's costly work off the event loop, one job at a time,
/// in the order they came: rendering pages (the render worker, which runs `handler`) and checking
/// passwords with bcrypt (the password worker, with a web configuration's users).
///
/// The loop hands it jobs (`submit`) and, when the wake-up pipe says so, takes back what it
/// did (`takeAnswers`). So the loop keeps answering cheap routes and reading and writing every
/// other connection while a page is rendered or a password hashed. One render worker, so at most
/// one page is rendered at a time: a page of 100,000 series can take hundreds of MB, and two at
/// once would take twice that. One password worker, so a flood of wrong passwords costs one core
/// at most and delays no page. The loop bounds how many jobs wait for each.
///
/// `submit` and `takeAnswers` are the loop's; `start` and `stop` are the server's. All are safe
/// across threads. `stop` waits for a job under way until a deadline, then leaves the thread to
/// finish it alone: a stop never waits on a long render or a costly hash.
final class Worker<Input: Sendable, Output: Sendable>: Sendable {
    /// A job, and the loop's ticket to match its answer to its connection.
    struct Job: Sendable {
        var ticket: UInt64
        var input: Input
    }

    struct Answer: Sendable {
        var ticket: UInt64
        var output: Output
    }

    private struct State {
        var jobs: [Job] = []
        var answers: [Answer] = []
        var stopping = false
    }

    private let work: @Sendable (Input) -> Output
    private let wakeup: LoopWakeup
    private let state = Locked(State())
    /// One signal per job submitted, and one for `stop`.
    private let jobsWaiting = DispatchSemaphore(value: 0)
    private let thread: PartThread

    /// A worker whose thread is named `name` (`top -H`).
    init(name: String, work: @escaping @Sendable (Input) -> Output, wakeup: LoopWakeup) {
        thread = PartThread(name: name)
        self.work = work
        self.wakeup = wakeup
    }

    /// Starts the thread, `niceIncrement` below the caller's priority.
    func start(niceIncrement: Int32) -> Result<Void, SyscallError> {
        thread.start(niceIncrement: niceIncrement) { [self] in run() }.mapError { SyscallError(call: "pthread_create", errno: $0) }
    }

    func submit(_ job: Job) {
        state.withLock { $0.jobs.append(job) }
        jobsWaiting.signal()
    }

    /// The answers finished since the last call, in the order they were finished.
    func takeAnswers() -> [Answer] {
        state.withLock { state in
            defer { state.answers.removeAll() }
            return state.answers
        }
    }

    /// Ends the thread once the job it is doing (if any) is done, and waits for it until
    /// `deadline`; past it, the thread is left to finish and end alone (detached), its answer
    /// dropped. Jobs still queued are dropped. Idempotent.
    func stop(deadlineNanos: UInt64? = nil) {
        state.withLock { $0.stopping = true }
        thread.stop(waking: { _ = jobsWaiting.signal() }, deadlineNanos: deadlineNanos)
    }

    private func run() {
        while true {
            jobsWaiting.wait()
            let next = state.withLock { state -> Job?? in
                if state.stopping { return .none }
                return .some(state.jobs.isEmpty ? nil : state.jobs.removeFirst())
            }
            guard let job = next else {
                return
            }
            guard let job else { continue }
            let output = work(job.input)
            state.withLock { $0.answers.append(Answer(ticket: job.ticket, output: output)) }
            wakeup.signal()
        }
    }
}
