import CRingside
import Ringside
import RingsideSnapshot
import RingsideSystem

/// The doorbells the drain thread sleeps under (DOORBELL in ringside.h), so that the first record,
/// increment or gauge written after it fell asleep wakes it, instead of its next poll.
///
/// Before a sleep the drain sets the doorbell of each ring whose producer rings (at most
/// `DoorbellWaiter.maxWords`; the others wait for the poll), puts a barrier on every producer
/// thread (`System.globalBarrier`), then looks at every lane again: it sleeps only if none moved,
/// so a record written before the announcement is seen by that look, and one written after it
/// rings. The `DoorbellWaiter` sleeps on the words on a thread of its own and wakes the drain.
/// Touched by the drain thread only.
final class Doorbells {
    private let waiter: DoorbellWaiter
    /// The rings whose doorbells the current sleep set (their consumers keep the words mapped).
    private var armed: [RingConsumer] = []
    /// The watched rings whose producer rings, at most a wait's words, as read at
    /// `ringersReadNanos` from the watch of `ringersGeneration` (see `DrainTiming.doorbellRingersNanos`):
    /// their places in the watch's list, not the consumers, so that a ring the drain lets go of is
    /// not kept open (its file, and the lock the next collector takes, go with its consumer).
    private var ringers: [Int] = []
    private var ringersGeneration = -1
    private var ringersReadNanos: UInt64 = 0
    /// The waiter's wakes as last seen, and when the last one came: a doorbell rung at every
    /// sleep is set again only after `DrainTiming.minimumSleepNanos`, so it costs at most the
    /// passes a busy ring does.
    private var wakesSeen = 0
    private var lastWakeNanos: UInt64 = 0
    /// When the look after an announcement last found a lane moved, or a pass last drained records.
    private var lastRecordsNanos: UInt64 = 0
    /// False once the barrier failed (a kernel without it, or a seccomp filter): the drain polls.
    private var barrierWorks = true
    private(set) var figures = DoorbellFigures()

    /// Where the barrier's failure is said, once.
    private let log: CollectorLog

    init(log: CollectorLog, wakeDrain: @escaping @Sendable () -> Void) {
        self.log = log
        waiter = DoorbellWaiter(wakeDrain: wakeDrain)
    }

    func start() { waiter.start() }
    func stop() { waiter.stop() }

    /// A pass drained records at `now`: the drain is busy, and sets no doorbell for a while.
    func noteDrained(nowNanos now: UInt64) { lastRecordsNanos = now }

    /// Announces the sleep to the producers of the rings `watch` holds. Returns nil when a lane
    /// moved meanwhile (records came as the drain went to sleep: it drains them instead of
    /// sleeping); else the longest the sleep may be (`.max`: as long as the drain's parts ask).
    ///
    /// Only after a quiet spell: within `plannedSleepNanos` (what the drain's parts ask, at most
    /// `DrainTiming.doorbellQuietNanos`, at least `DrainTiming.minimumSleepNanos`) of a ring, a
    /// look that caught records, or a pass that drained some, it sets no doorbell and the sleep
    /// lasts until then at most. So a producer that writes all along is drained at the pace its
    /// lanes ask, as without doorbells, instead of ringing at every sleep (a wake, a barrier and
    /// a futex wait for each of its bursts); a doorbell wakes a drain that found nothing for that long.
    ///
    /// Nor while a lane fills fast (`lanesPaceNanos`, the sleep the lanes' fill asks, below
    /// `DrainTiming.doorbellBusyPaceNanos`): the drain comes back at that pace anyway, and its
    /// records would ring at every sleep.
    func announceSleep(watch: LaneWatch, nowNanos now: UInt64, plannedSleepNanos: UInt64, lanesPaceNanos: UInt64 = .max) -> UInt64? {
        noteWakes(nowNanos: now)
        if lanesPaceNanos < DrainTiming.doorbellBusyPaceNanos { return .max }
        let quiet = max(min(plannedSleepNanos, DrainTiming.doorbellQuietNanos), DrainTiming.minimumSleepNanos)
        let lastActive = max(lastWakeNanos, lastRecordsNanos)
        if lastActive != 0, now &- lastActive < quiet {
            return quiet - (now &- lastActive)
        }
        disarm()  // none set but by this announcement
        let consumers = watch.watchedConsumers
        guard barrierWorks, waiter.isRunning else {
            (figures.watchedRings, figures.polledRings) = (0, consumers.count)
            return .max
        }
        readRingers(watch: watch, nowNanos: now)
        // Within the list whatever watch is passed (the drain passes its one, as it was read from).
        for index in ringers where index < consumers.count {
            consumers[index].armDoorbell()
            armed.append(consumers[index])
        }
        (figures.watchedRings, figures.polledRings) = (armed.count, consumers.count - armed.count)
        guard !armed.isEmpty else { return .max }
        do {
            try System.globalBarrier()
        } catch {
            // Every ring to the poll from now on, and the figures and the log say so.
            log(
                "doorbells off: membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) failed (\(error)); every ring is drained at "
                    + "--poll from now on (ringside_collector_doorbell_rings{by=\"poll\"})", level: .warn)
            barrierWorks = false
            figures.barrierFailed = true
            (figures.watchedRings, figures.polledRings) = (0, consumers.count)
            disarm()
            return .max
        }
        if watch.anyMoved() {
            disarm()
            lastRecordsNanos = now
            figures.caughtByLook += 1
            return nil
        }
        figures.sleeps += 1
        waiter.watch(armed.map(\.doorbellAddress))
        return .max
    }

    /// After a sleep: the waiter lets go of the doorbells, then those still set are cleared, so
    /// that no producer rings a drain awake (and no clearing of the drain's is taken for a ring).
    func wokeUp() {
        guard !armed.isEmpty else { return }
        waiter.watch([])
        disarm()
        noteWakes(nowNanos: rs_clock_precise_ns())
    }

    /// Reads which watched rings' producers ring, when the watch changed or
    /// `DrainTiming.doorbellRingersNanos` passed: each ring's word is a load from its header page.
    private func readRingers(watch: LaneWatch, nowNanos now: UInt64) {
        guard watch.generation != ringersGeneration || now &- ringersReadNanos >= DrainTiming.doorbellRingersNanos else { return }
        ringers.removeAll(keepingCapacity: true)
        // Stop at the most one wait takes.
        for (index, consumer) in watch.watchedConsumers.enumerated() where consumer.ringsDoorbell {
            ringers.append(index)
            if ringers.count == DoorbellWaiter.maxWords { break }
        }
        (ringersGeneration, ringersReadNanos) = (watch.generation, now)
    }

    private func disarm() {
        for consumer in armed { consumer.disarmDoorbell() }
        armed.removeAll(keepingCapacity: true)
    }

    private func noteWakes(nowNanos now: UInt64) {
        let wakes = waiter.wakes
        if wakes != wakesSeen {
            wakesSeen = wakes
            lastWakeNanos = now
            figures.wakes = UInt64(wakes)
        }
    }
}

/// Sleeps on the doorbells the drain set (a futex wait on up to 128 words: its own word, for a new
/// list or `stop`, and 127 doorbells) on a thread of its own (`ringside-bell`), and wakes the drain
/// when a producer rings one. Between the drain thread and its own thread only its `Locked` list
/// and its word cross.
final class DoorbellWaiter: Sendable {
    /// Doorbells one wait takes: the kernel's most words, less the waiter's own.
    static let maxWords = System.futexWaitMaxWords - 1

    private struct Watched {
        var addresses: [UInt64] = []
        var generation: UInt32 = 0
        var wakes = 0
    }

    private let thread = PartThread(name: "ringside-bell")
    private let watched = Locked(Watched())
    /// The waiter's own futex word: the list's generation, bumped by `watch` and `stop`.
    private let word = FutexWordOfOurOwn()
    private let wakeDrain: @Sendable () -> Void

    init(wakeDrain: @escaping @Sendable () -> Void) {
        self.wakeDrain = wakeDrain
    }

    var isRunning: Bool { thread.isRunning }
    /// Sleeps a producer's ring ended, since the start.
    var wakes: Int { watched.withLock { $0.wakes } }

    func start() {
        // A collector that cannot start the thread polls, as with a producer that does not ring.
        _ = thread.start { [self] in run() }
    }

    /// Stops the thread, waiting for it until `deadlineNanos` (nil: however long); returns whether it ended.
    @discardableResult
    func stop(deadlineNanos: UInt64? = nil) -> Bool {
        thread.stop(waking: { bump(nil) }, deadlineNanos: deadlineNanos)
    }

    /// Sleeps on `addresses` (doorbells the drain set) from now, instead of the last list.
    func watch(_ addresses: [UInt64]) { bump(addresses) }

    private func bump(_ addresses: [UInt64]?) {
        watched.withLock { watched in
            if let addresses { watched.addresses = addresses }
            watched.generation &+= 1
            word.store(watched.generation)
        }
        word.wake()
    }

    private func run() {
        while true {
            // The generation first, then whether to stop: `stop` marks the thread stopping before
            // it bumps the word, so a bump this wait does not see ends it (the word changed), and
            // one it saw comes with the mark. Asked the other way round, a stop between the two
            // left the thread waiting on the new generation for ever (a collector that did not
            // stop on SIGTERM, once in a few thousand stops).
            let (addresses, generation) = watched.withLock { ($0.addresses, $0.generation) }
            if thread.isStopping { return }
            var words = [System.FutexWord(address: word.address, expected: generation, shared: false)]
            words += addresses.map { System.FutexWord(address: $0, expected: 1, shared: true) }
            let outcome = System.futexWait(words, deadlineNanos: nil)
            if case .woken(0) = outcome { continue }  // a new list, or stop
            if case .timedOut = outcome { continue }  // a signal
            if case .changed = outcome, word.load() != generation { continue }
            // A doorbell rang (or was cleared before the wait began, or its page is gone): the
            // drain looks. The list is done with: its words are clear until the next sleep.
            watched.withLock { watched in
                guard watched.generation == generation else { return }
                watched.addresses = []
                watched.wakes += 1
            }
            wakeDrain()
        }
    }
}
