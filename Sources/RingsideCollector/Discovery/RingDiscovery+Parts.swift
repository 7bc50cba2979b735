import Ringside
import RingsideSystem

/// Discovery's state, in parts by what each is for.
extension RingDiscovery {
    /// Which files discovery takes: the names given with `--ring` (none: every ring of the
    /// directory), the owners `--allow-uid` allows, and how many rings may be open.
    struct Takes {
        let named: Set<String>
        let allowedOwners: Set<UInt32>
        let ringLimit: Int
    }

    /// The names the drain holds, with the file each was when opened; the rings opened this
    /// round, handed to the drain at its end, once what the round refused is published (a
    /// snapshot that shows them shows those too).
    struct Handed {
        var held: [String: RingFileIdentity] = [:]
        private(set) var opened: [DiscoveryHandoff.FoundRing] = []
        /// Rings opened, ever.
        private(set) var opens: UInt64 = 0

        /// A ring opened this round (`ring`, its file `identity`): the name is the drain's now.
        mutating func opened(_ ring: DiscoveryHandoff.FoundRing, identity: RingFileIdentity) {
            held[ring.consumer.name] = identity
            opened.append(ring)
        }

        /// An open is tried.
        mutating func opening() { opens += 1 }

        /// Marks the ring opened `index`th this round as holding its bot at the start (see
        /// `DiscoveryHandoff.heldAtStart`).
        mutating func holdAtStart(_ index: Int, _ holds: Bool) { opened[index].holdsAtStart = holds }

        /// The rings opened this round, to hand to the drain; none after.
        mutating func takeOpened() -> [DiscoveryHandoff.FoundRing] {
            defer { opened.removeAll() }
            return opened
        }
    }

    /// Files found not ready within a second of their making, and since when (looked at every
    /// `beingMadeRetryNanos`, in turn, from `queue`, last at `lastNanos`).
    struct BeingMade {
        private(set) var since: [String: UInt64] = [:]
        private var queue = NameQueue()
        private var lastNanos: UInt64 = 0

        /// `name` is being made since `time`: looked at again shortly.
        mutating func note(_ name: String, since time: UInt64) {
            since[name] = time
            queue.push(name)
        }

        /// `name` is no longer being made (ready, refused for good, or gone).
        mutating func done(_ name: String) { since[name] = nil }

        /// The names due to be looked at again (every `beingMadeRetryNanos`, at most
        /// `beingMadePerRound` a round unless `whole`).
        mutating func takeDue(nowNanos now: UInt64, whole: Bool) -> [String] {
            guard !queue.isEmpty, whole || now &- lastNanos >= RingDiscovery.beingMadeRetryNanos else { return [] }
            lastNanos = now
            var due: [String] = []
            while whole || due.count < RingDiscovery.beingMadePerRound, let name = queue.pop() { due.append(name) }
            return due
        }

        /// When the next names are due (nil: none waits).
        var nextNanos: UInt64? { queue.isEmpty ? nil : lastNanos &+ RingDiscovery.beingMadeRetryNanos }
    }

    /// Rings found that wait for a descriptor, and whether the log said so (`logged`).
    struct DescriptorWait {
        private(set) var names: Set<String> = []
        var logged = false

        /// `name` waits; returns whether it did not already.
        mutating func wait(_ name: String) -> Bool { names.insert(name).inserted }

        /// `name` waits no more; returns whether it did.
        mutating func end(_ name: String) -> Bool { names.remove(name) != nil }
    }

    /// Names waiting to be looked at (`lstat`, then opened): those events named, and those of the
    /// last listing, in turn; whether events are left to read; and names to look at again at a
    /// time (a refusal that depends on something besides the file).
    struct PendingNames {
        var urgent = NameQueue()
        var listed = NameQueue()
        var eventsLeft = false
        private(set) var timed: [String: UInt64] = [:]

        /// `name` is to be looked at again at `time` (0: not at a time).
        mutating func lookAgain(_ name: String, at time: UInt64) { timed[name] = time == 0 ? nil : time }

        /// The names whose time came are urgent now.
        mutating func releaseTimed(nowNanos now: UInt64) {
            for (name, time) in timed where time <= now {
                timed[name] = nil
                urgent.push(name)
            }
        }

        /// The next name to look at: those events named and those listed in turn (`turn`: how
        /// many were taken this round), so that a flood of events does not keep a listing's names
        /// (a bot among them) waiting, nor a long listing a new bot's event.
        mutating func next(turn: Int) -> String? {
            turn % 2 == 0 ? urgent.pop() ?? listed.pop() : listed.pop() ?? urgent.pop()
        }
    }

    /// The listing under way (the directory read a step at a time, and the names it found);
    /// whether it looks again at files refused before (not when it is the watched directory's
    /// fallback, as any change to them has an event of its own); when the last began, and
    /// whether one was asked for at once (`requested`: events lost, or discovery behind them).
    struct Listing {
        var underWay: (stream: System.DirectoryStream, seen: Set<String>)?
        private(set) var looksAtRefused = true
        private(set) var lastNanos: UInt64 = 0
        var requested = true
        /// Listings begun, ever.
        private(set) var rescans: UInt64 = 0
        /// What is wrong with the directory, said once (and once when it is right again).
        private(set) var directoryProblem: String?
        /// The first listing's names not looked at yet (nil once it ended and none is left).
        var start: StartNames? = StartNames()

        /// A listing begins at `now` (`watching`: the directory is watched, so refused files
        /// have events of their own unless events were lost).
        mutating func begin(nowNanos now: UInt64, watching: Bool) {
            looksAtRefused = requested || !watching
            lastNanos = now
            requested = false
            rescans += 1
            underWay = nil
        }

        /// What is wrong with the directory now; returns whether that changed (to be said).
        mutating func found(directoryProblem problem: String?) -> Bool {
            defer { directoryProblem = problem }
            return problem != directoryProblem
        }
    }

    /// The names the collector's first listing found that discovery has not looked at yet: their
    /// bots are not shown until each is taken up by the drain or refused (see
    /// `DiscoveryHandoff.heldAtStart`); and what changed of them since the last round's end.
    struct StartNames {
        var names: Set<String> = []
        /// The listing ended: rings found since hold no bot (unless the listing found them).
        var listed = false
        var change = DiscoveryHandoff.StartChange()

        /// The listing found `name` (not handed over already: a ring handed during the listing holds its bot).
        mutating func found(_ name: String) {
            guard names.insert(name).inserted else { return }
            change.found.append(WorkerRing.botName(ofRing: name))
        }
    }
}
