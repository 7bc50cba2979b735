import RingsideSystem
import Ringside
import RingsideSnapshot
import Synchronization

/// What crosses between discovery's thread and the drain thread, under one lock, each way in
/// order: the rings discovery opened, for the drain to adopt, and the names it holds whose files
/// were removed or replaced; the rings the drain let go of, and why. Beside them, what discovery
/// shows (the files it refused, its figures), which the snapshot takes as it is; and which bots
/// are not shown yet, their files found at the start not all taken up (`heldAtStart`).
final class DiscoveryHandoff: Sendable {
    /// A ring discovery opened. Its consumer is not `Sendable` (one thread drains a bot): it is
    /// handed over whole and never touched by discovery again.
    struct FoundRing: @unchecked Sendable {
        let consumer: RingConsumer
        /// Why the drain skipped it the last time, if it did: what the log said of it (it says it once).
        let loggedProblem: String?
        /// Found by the collector's first listing (or while it ran): its bot is not shown until
        /// the drain takes it (see `heldAtStart`).
        var holdsAtStart = false
    }

    /// What changed of the first listing's names in a round of discovery (see `heldAtStart`):
    /// the bots of names it found, and of those it looked at and did not hand over (refused,
    /// gone, waiting for a descriptor, handed already); whether the listing ended.
    struct StartChange: Sendable {
        var found: [String] = []
        var settled: [String] = []
        var listed = false

        var isEmpty: Bool { found.isEmpty && settled.isEmpty && !listed }
    }

    /// The bots not to show yet (`heldAtStart`).
    enum HeldBots: Equatable {
        case none
        /// The first listing is under way: any bot may have files not found yet.
        case all
        case bots(Set<String>)

        func holds(_ bot: String) -> Bool {
            switch self {
            case .none: false
            case .all: true
            case .bots(let bots): bots.contains(bot)
            }
        }
    }

    /// A ring the drain no longer holds: its file (`identity`) was removed, replaced or retired,
    /// or the ring could not be read (`problem`, tried again after `DrainTiming.unreadableRetryNanos`).
    struct LetGo: Sendable {
        let name: String
        var identity: RingFileIdentity?
        var problem: String?
        var retryNanos: UInt64 = 0
    }

    /// Discovery's figures and the rings it shows as skipped.
    struct Shown: Sendable {
        /// The files refused that are worth showing (not empty or being made) and those waiting for
        /// a descriptor, as skipped rings, in name order, `shownLimit` at most.
        var skipped: [RingSnapshot] = []
        /// `ringside.*` files found and not read: refused (empty, being made, another user's, not
        /// a regular file, invalid) or waiting for a descriptor.
        var filesRefused = 0
        /// Of those, waiting for a descriptor (the open-file limit less the HTTP reserve).
        var waitingForDescriptors = 0
        /// Whole listings of the directory, and files opened to be looked at (a refused file is
        /// opened again only when it changes), since the start.
        var rescans: UInt64 = 0
        var opens: UInt64 = 0
    }

    /// The most files shown as skipped rings: each is a series on `/metrics` and an entry of
    /// `/health`; the rest are counted in `filesRefused`.
    static let shownLimit = 1_000

    private struct Queues {
        var found: [FoundRing] = []
        var changed: [String] = []
        var letGo: [LetGo] = []
        /// Each bot's files of the first listing not taken up (found, or handed and not taken
        /// yet), and whether the listing ended.
        var heldAtStart: [String: Int] = [:]
        var startListed = false
    }
    private let queues = Locked(Queues())
    private let shownState = Locked(Shown())
    /// Rings the drain holds open, as of its last pass, and the rings found not yet adopted:
    /// discovery opens no more than the descriptor budget leaves.
    private let ringsOpen = Atomic<Int>(0)
    private let skippedChanged = Atomic<Bool>(false)
    private let inFlight = Atomic<Int>(0)
    /// Every file of the first listing was taken up or refused: no bot is held any more.
    private let startSettled = Atomic<Bool>(false)
    private let wakeDrainThread: @Sendable () -> Void
    private let wakeDiscoveryThread: @Sendable () -> Void

    /// - Parameters:
    ///   - wakeDrain: ends the drain thread's sleep (it has rings to adopt).
    ///   - wakeDiscovery: ends discovery's sleep (the drain let go of rings, or descriptors came free).
    init(wakeDrain: @escaping @Sendable () -> Void, wakeDiscovery: @escaping @Sendable () -> Void) {
        wakeDrainThread = wakeDrain
        wakeDiscoveryThread = wakeDiscovery
    }

    // MARK: - Discovery's side

    /// Hands rings over to the drain, and wakes it; takes what changed of the first listing's names.
    func post(found rings: [FoundRing], start: StartChange = StartChange()) {
        guard !rings.isEmpty || !start.isEmpty else { return }
        inFlight.add(rings.count, ordering: .relaxed)
        queues.withLock { queues in
            queues.found += rings
            for bot in start.found { queues.heldAtStart[bot, default: 0] += 1 }
            for bot in start.settled { settle(bot, in: &queues) }
            if start.listed { queues.startListed = true }
            if queues.startListed, queues.heldAtStart.isEmpty { startSettled.store(true, ordering: .releasing) }
        }
        if !rings.isEmpty { wakeDrainThread() }
    }

    /// One of `bot`'s files of the first listing is taken up or refused.
    private func settle(_ bot: String, in queues: inout Queues) {
        guard let held = queues.heldAtStart[bot] else { return }
        queues.heldAtStart[bot] = held > 1 ? held - 1 : nil
    }

    /// Tells the drain that the file under `name`, a ring it holds, was removed or replaced, and wakes it.
    func post(changed name: String) {
        queues.withLock { $0.changed.append(name) }
        wakeDrainThread()
    }

    /// The rings the drain let go of since the last call, in order.
    func takeLetGo() -> [LetGo] {
        queues.withLock { queues in
            defer { queues.letGo.removeAll() }
            return queues.letGo
        }
    }

    /// Descriptors rings take or are about to: those the drain holds and those found, not adopted yet.
    var descriptorsInUse: Int { ringsOpen.load(ordering: .relaxed) + inFlight.load(ordering: .relaxed) }

    /// Replaces what discovery shows; with `skippedChanged`, the drain is woken to publish a
    /// snapshot that shows them.
    func publish(_ shown: Shown, skippedChanged: Bool) {
        var replaced = shown
        shownState.withLock { swap(&$0, &replaced) }
        if skippedChanged {
            self.skippedChanged.store(true, ordering: .releasing)
            wakeDrainThread()
        }
    }

    // MARK: - The drain's side

    /// Up to `limit` rings found, in order, and the names of held rings whose files changed (once
    /// every ring found before is taken: a file replaced may be that of a ring still to adopt).
    func take(foundUpTo limit: Int) -> (found: [FoundRing], changed: [String]) {
        let taken = queues.withLock { queues -> (found: [FoundRing], changed: [String]) in
            let found = Array(queues.found.prefix(limit))
            queues.found.removeFirst(found.count)
            for ring in found where ring.holdsAtStart { settle(WorkerRing.botName(ofRing: ring.consumer.name), in: &queues) }
            if queues.startListed, queues.heldAtStart.isEmpty { startSettled.store(true, ordering: .releasing) }
            guard queues.found.isEmpty else { return (found, []) }
            defer { queues.changed.removeAll() }
            return (found, queues.changed)
        }
        inFlight.subtract(taken.found.count, ordering: .relaxed)
        return taken
    }

    /// Tells discovery that the drain let go of a ring (it is woken with the pass's end, see `wakeDiscovery`).
    func post(letGo: LetGo) { queues.withLock { $0.letGo.append(letGo) } }

    /// The rings the drain holds open now.
    func setRingsOpen(_ count: Int) { ringsOpen.store(count, ordering: .relaxed) }

    /// Rings found that the drain has not adopted yet.
    var foundWaiting: Int { inFlight.load(ordering: .relaxed) }

    /// Ends discovery's sleep: rings were let go of, or descriptors came free.
    func wakeDiscovery() { wakeDiscoveryThread() }

    /// Whether rings the drain let go of wait for discovery.
    var hasLetGo: Bool { queues.withLock { !$0.letGo.isEmpty } }

    /// The bots not to show yet: every bot while the collector's first listing is under way, then
    /// those with a file it found that the drain has not taken up (nor discovery refused). A
    /// bot's totals are its folded figures and its files' cells: shown before every file of it
    /// there at the start is taken up, a counter would read lower than the collector before a
    /// restart showed it (a reset, to Prometheus). Called by the drain thread when it publishes.
    func heldAtStart() -> HeldBots {
        if startSettled.load(ordering: .acquiring) { return .none }
        return queues.withLock { queues in
            guard queues.startListed else { return .all }
            return queues.heldAtStart.isEmpty ? .none : .bots(Set(queues.heldAtStart.keys))
        }
    }

    /// What discovery shows now.
    var shown: Shown { shownState.withLock { $0 } }

    /// Whether the skipped rings discovery shows changed since the last call.
    func takeSkippedChanged() -> Bool { skippedChanged.exchange(false, ordering: .acquiring) }
}
