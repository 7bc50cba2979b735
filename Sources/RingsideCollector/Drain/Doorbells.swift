import CRingside
import Ringside
import RingsideSnapshot
import RingsideSystem

/// The doorbells the drain thread sleeps under (DOORBELL in ringside.h), so that the first record,
/// increment or gauge written after it fell asleep wakes it, instead of its next poll.
///
/// Before a sleep the drain sets the doorbell of each ring whose producer rings (127 to a
/// `DoorbellWaiter`, at most `maxWaiters` of them; the others wait for the poll), puts a barrier
/// on every producer thread (`System.globalBarrier`), then looks at every lane again: it sleeps
/// only if none moved, so a record written before the announcement is seen by that look, and one
/// written after it rings. Each waiter sleeps on its words on a thread of its own and wakes the
/// drain. With every ring watched the drain needs no poll: it sleeps up to
/// `DrainTiming.watchedSleepNanos`.
///
/// A doorbell stays set across the drain's wakes while its word holds the 1 (`LaneWatch`'s
/// settled doorbells): no producer wrote to its lanes since, so the next sleep neither sets it
/// again nor looks at them, and needs no barrier when it sets none anew. A producer that writes
/// while the drain is awake takes the 1 and rings as it would during a sleep (one FUTEX_WAKE);
/// the drain's next look finds the word clear and its records. Touched by the drain thread only.
final class Doorbells {
    /// Waiters at most, so rings watched at most: 32 × 127 = 4,064 (their threads sleep in the
    /// kernel, each a stack); the rings past them are drained at the poll.
    static let maxWaiters = 32

    /// The waiters started so far, as many as the most rings a sleep watched needed.
    private var waiters: [DoorbellWaiter] = []
    /// False once a waiter's thread could not be started: no more are tried.
    private var mayAddWaiters = true
    private let wakeDrain: @Sendable () -> Void
    /// The last sleep was announced to the waiters: its wake tells them.
    private var announced = false
    /// When an announcement last set every doorbell anew and looked at every lane, the settled
    /// ones' too (`DrainTiming.settledLookNanos`).
    private var wholeLookNanos: UInt64 = 0
    /// The watched rings whose producer rings, at most what the waiters take, as read at
    /// `ringersReadNanos` from the watch of `ringersGeneration` (see `DrainTiming.doorbellRingersNanos`):
    /// their places in the watch's list, not the consumers, so that a ring the drain lets go of is
    /// not kept open (its file, and the lock the next collector takes, go with its consumer).
    private var ringers: [Int] = []
    private var ringersGeneration = -1
    private var ringersReadNanos: UInt64 = 0
    /// The waiters' wakes as last seen, and when the last one came: a doorbell rung at every
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
        self.wakeDrain = wakeDrain
    }

    /// Starts the first waiter; the others start when the rings that ring need them.
    func start() { _ = addWaiter() }
    func stop() {
        for waiter in waiters { waiter.stop() }
    }

    /// Whether the last sleep announced watched every ring the drain holds (none left to the poll).
    var everyRingWatched: Bool { figures.polledRings == 0 }

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
        // Now and then every lane is looked at, a busy drain's too (it sets none anew meanwhile):
        // unsettled, the doorbells' lanes are looked at each pass until a sleep settles them again.
        if now &- wholeLookNanos >= DrainTiming.settledLookNanos {
            watch.unsettleDoorbells()
            wholeLookNanos = now
        }
        if lanesPaceNanos < DrainTiming.doorbellBusyPaceNanos {
            sleepsWithoutSetting()
            return .max
        }
        let quiet = max(min(plannedSleepNanos, DrainTiming.doorbellQuietNanos), DrainTiming.minimumSleepNanos)
        let lastActive = max(lastWakeNanos, lastRecordsNanos)
        if lastActive != 0, now &- lastActive < quiet {
            sleepsWithoutSetting()
            return quiet - (now &- lastActive)
        }
        let consumers = watch.watchedConsumers.count
        guard barrierWorks, waiters.first?.isRunning == true else {
            watch.disarmDoorbells(all: true)
            (figures.watchedRings, figures.polledRings) = (0, consumers)
            return .max
        }
        readRingers(watch: watch, nowNanos: now)
        // Within the list whatever watch is passed (the drain passes its one, as it was read from).
        let setAnew = watch.armDoorbells(ringers.filter { $0 < consumers })
        var addresses = watch.armedDoorbellAddresses[...]
        (figures.watchedRings, figures.polledRings) = (addresses.count, consumers - addresses.count)
        guard !addresses.isEmpty else { return .max }
        if setAnew > 0 {
            do {
                try System.globalBarrier()
            } catch {
                // Every ring to the poll from now on, and the figures and the log say so.
                log(
                    "doorbells off: membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) failed (\(error)); every ring is drained at "
                        + "--poll from now on (ringside_collector_doorbell_rings{by=\"poll\"})", level: .warn)
                barrierWorks = false
                figures.barrierFailed = true
                (figures.watchedRings, figures.polledRings) = (0, consumers)
                watch.disarmDoorbells(all: true)
                return .max
            }
        }
        // The lanes of the doorbells set anew (and of the rings polled); a settled one's are not
        // looked at: nothing was written to them since the look that settled it.
        if watch.anyMoved() {
            watch.disarmDoorbells()
            lastRecordsNanos = now
            figures.caughtByLook += 1
            return nil
        }
        watch.settleDoorbells()
        figures.sleeps += 1
        announced = true
        // A waiter keeps waiting on an unchanged list from one sleep to the next: only a changed
        // one (rings came or went, or it rang) wakes its thread.
        for waiter in waiters {
            waiter.watch(Array(addresses.prefix(DoorbellWaiter.maxWords)))
            addresses = addresses.dropFirst(DoorbellWaiter.maxWords)
        }
        return .max
    }

    /// The drain sleeps without setting doorbells (busy, or within the quiet spell): those still
    /// set from an earlier sleep (settled) wake it all the same, each once until it is set again.
    /// A producer that writes all along has taken its own, and is drained at its lanes' pace.
    private func sleepsWithoutSetting() {
        guard !waiters.isEmpty else { return }
        for waiter in waiters { waiter.drainSleeps() }
        announced = true
    }

    /// After a sleep: the waiters are told that a doorbell found clear from now on is not a ring
    /// (the drain is awake), and go on waiting on theirs, ready for the next sleep. The doorbells
    /// stay set (see the type's comment).
    func wokeUp() {
        guard announced else { return }
        announced = false
        for waiter in waiters { waiter.drainWoke() }
        noteWakes(nowNanos: rs_clock_precise_ns())
    }

    /// Reads which watched rings' producers ring, when the watch changed or
    /// `DrainTiming.doorbellRingersNanos` passed: each ring's word is a load from its header page.
    private func readRingers(watch: LaneWatch, nowNanos now: UInt64) {
        guard watch.generation != ringersGeneration || now &- ringersReadNanos >= DrainTiming.doorbellRingersNanos else { return }
        ringers.removeAll(keepingCapacity: true)
        for index in watch.watchedConsumers.indices where watch.ringsDoorbell(at: index) {
            // A waiter more for every 127, while one may be started; the rest to the poll.
            if ringers.count == waiters.count * DoorbellWaiter.maxWords, !addWaiter() { break }
            ringers.append(index)
        }
        (ringersGeneration, ringersReadNanos) = (watch.generation, now)
    }

    /// Starts one more waiter; false at `maxWaiters`, or once a thread could not be started.
    private func addWaiter() -> Bool {
        guard mayAddWaiters, waiters.count < Self.maxWaiters else { return false }
        let waiter = DoorbellWaiter(wakeDrain: wakeDrain)
        guard waiter.start() else {
            mayAddWaiters = false
            return false
        }
        waiters.append(waiter)
        return true
    }

    private func noteWakes(nowNanos now: UInt64) {
        let wakes = waiters.reduce(0) { $0 + $1.wakes }
        if wakes != wakesSeen {
            wakesSeen = wakes
            lastWakeNanos = now
            figures.wakes = UInt64(wakes)
        }
    }
}

/// Sleeps on doorbells the drain set (a futex wait on up to 128 words: its own word, for a new
/// list or `stop`, and 127 doorbells) on a thread of its own (`ringside-bell`), and wakes the drain
/// when a producer rings one while the drain sleeps. A wait on a list goes on across the drain's
/// sleeps while the list stays the same (a clear word wakes no one), so sleeps over the same rings
/// wake no thread. Between the drain thread and its own thread only its `Locked` state and its
/// word cross.
final class DoorbellWaiter: Sendable {
    /// Doorbells one wait takes: the kernel's most words, less the waiter's own.
    static let maxWords = System.futexWaitMaxWords - 1

    private struct Watched {
        var addresses: [UInt64] = []
        var generation: UInt32 = 0
        /// The drain sleeps under the doorbells (from `watch` until `drainWoke`): only then is a
        /// doorbell found clear a ring, not the drain's own clearing.
        var drainAsleep = false
        /// The thread waits on `addresses` (or is about to): a `watch` of the same list need not wake it.
        var waitingOnList = false
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

    /// Whether the thread started: a collector that cannot start one polls the rings it would
    /// have watched, as with a producer that does not ring.
    func start() -> Bool {
        if case .success = thread.start({ [self] in run() }) { return true }
        return false
    }

    /// Stops the thread, waiting for it until `deadlineNanos` (nil: however long); returns whether it ended.
    @discardableResult
    func stop(deadlineNanos: UInt64? = nil) -> Bool {
        thread.stop(waking: { bump(nil) }, deadlineNanos: deadlineNanos)
    }

    /// The drain sleeps under `addresses` (doorbells it set) from now. The thread is woken to take
    /// them up unless it already waits on that list (or on its own word alone, for an empty one).
    func watch(_ addresses: [UInt64]) {
        let same = watched.withLock { watched in
            watched.drainAsleep = true
            return watched.addresses == addresses && (watched.waitingOnList || addresses.isEmpty)
        }
        if !same { bump(addresses) }
    }

    /// The drain woke: doorbells it clears from now on are not rings. The thread is left waiting.
    func drainWoke() { watched.withLock { $0.drainAsleep = false } }

    /// The drain sleeps on the list the thread already has (it set no doorbell anew): a doorbell
    /// found clear from now on is a ring. The thread is woken to wait on its list only if it does
    /// not already (it waited on its own word while the drain was awake).
    func drainSleeps() {
        let idle = watched.withLock { watched in
            watched.drainAsleep = true
            return !watched.waitingOnList && !watched.addresses.isEmpty
        }
        if idle { bump(nil) }
    }

    /// Takes `addresses` (nil: the same), bumps the generation and wakes the thread.
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
            let (addresses, generation) = watched.withLock { watched in
                // While the drain is awake its doorbells are clear: only the thread's own word.
                watched.waitingOnList = watched.drainAsleep && !watched.addresses.isEmpty
                return (watched.waitingOnList ? watched.addresses : [], watched.generation)
            }
            if thread.isStopping { return }
            var words = [System.FutexWord(address: word.address, expected: generation, shared: false)]
            words += addresses.map { System.FutexWord(address: $0, expected: 1, shared: true) }
            let outcome = System.futexWait(words, deadlineNanos: nil)
            let rang = watched.withLock { watched in
                watched.waitingOnList = false
                if case .woken(0) = outcome { return false }  // a new list, or stop
                if case .timedOut = outcome { return false }  // a signal
                if case .changed = outcome, word.load() != generation { return false }
                // A doorbell rang (or was clear when the wait began, or its page is gone). Only
                // while the drain sleeps is that a ring: else the drain cleared it, awake. The
                // list is done with: its rung word stays clear until the drain sets it again.
                guard watched.drainAsleep, !addresses.isEmpty else { return false }
                watched.addresses = []
                watched.wakes += 1
                return true
            }
            if rang { wakeDrain() }
        }
    }
}
