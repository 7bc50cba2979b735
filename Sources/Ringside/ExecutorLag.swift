/// How late Swift concurrency runs what is due: a probe task sleeps until a due time, and each time
/// it wakes records how much later than due it ran, into the histogram `swift_executor_lag`
/// (nanoseconds, labelled `executor`). One record per probe, from a task that otherwise sleeps.
///
/// A task that blocks its executor (a synchronous wait, a long computation without a suspension)
/// delays every job queued behind it, and the probe with them: a block of T delays the probe due
/// during it by up to T, so the largest lag it shows lies between T - interval and T.
///
/// What it measures depends on where the probe runs:
/// - on the global concurrent executor (the default): whether its threads are free. Its pool has
///   a thread per CPU; when every one is blocked, libdispatch adds a thread once a second (its
///   workqueue monitor), so there a stall shows as at most about a second of lag;
/// - on an actor (`on:`): whether that actor is free. An actor runs one job at a time, so a
///   job that holds it for T shows as T.
///
/// The lag also holds the timer's own latency: tens to hundreds of microseconds on an idle
/// machine (docs/swift-api.md).
public struct ExecutorLagProbe: Sendable {
    private let task: Task<Void, Never>

    init(task: Task<Void, Never>) { self.task = task }

    /// Stops the probe: it records at most the probe under way. The probe keeps its bot attached
    /// until it has stopped.
    public func stop() { task.cancel() }

    /// Returns once the probe has stopped (after `stop()`): it records nothing more.
    public func waitUntilStopped() async { await task.value }
}

extension Bot {
    /// The histogram an executor lag probe records into.
    public static let executorLagMetric = "swift_executor_lag"

    /// Starts a probe of how late Swift concurrency runs what is due (see `ExecutorLagProbe`):
    /// every `interval`, one record of the lag into `swift_executor_lag{executor=name}`.
    ///
    /// - Parameters:
    ///   - interval: between one probe's run and the next's due time; at least 1 ms.
    ///   - name: the `executor` label, to tell probes apart (two probes of one name share a series).
    ///   - actor: the actor whose executor to probe; nil for the global concurrent executor.
    /// - Throws: `RingError.invalidMetric` for an interval under 1 ms or a bad name, and what
    ///   registering the histogram throws.
    public func instrumentExecutorLag(
        every interval: Duration = .milliseconds(100), name: String = "global", on actor: (any Actor)? = nil
    ) throws(RingError) -> ExecutorLagProbe {
        guard interval >= .milliseconds(1) else {
            throw RingError.invalidMetric(
                ring: self.name, metric: Self.executorLagMetric, reason: "the probe's interval must be at least 1 ms, not \(interval)")
        }
        let histogram = try histogram(
            Self.executorLagMetric, unit: .nanoseconds, labels: ["executor": name],
            help: "How late Swift concurrency ran a probe task, against the time it was due")
        let task = Task.detached {
            if let actor {
                await Self.probe(histogram, every: interval, isolation: actor)
            } else {
                await Self.probe(histogram, every: interval, isolation: nil)
            }
        }
        return ExecutorLagProbe(task: task)
    }

    /// The probe's loop, run on `isolation`'s executor (the global one for nil) until cancelled.
    private static func probe(_ histogram: Histogram, every interval: Duration, isolation: isolated (any Actor)?) async {
        let clock = ContinuousClock()
        var due = clock.now.advanced(by: interval)
        while true {
            do {
                try await Task.sleep(until: due, clock: clock)
            } catch {
                return  // cancelled: stopped
            }
            let now = clock.now
            histogram.record(now - due)  // a negative duration records 0
            due = now.advanced(by: interval)
        }
    }
}
