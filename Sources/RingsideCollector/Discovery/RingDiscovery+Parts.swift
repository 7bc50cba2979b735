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
        var opened: [DiscoveryHandoff.FoundRing] = []
        /// Rings opened, ever.
        var opens: UInt64 = 0
    }

    /// Files found not ready within a second of their making, and since when (looked at every
    /// `beingMadeRetryNanos`, in turn, from `queue`, last at `lastNanos`).
    struct BeingMade {
        var since: [String: UInt64] = [:]
        var queue = NameQueue()
        var lastNanos: UInt64 = 0
    }

    /// Rings found that wait for a descriptor, and whether the log said so (`logged`).
    struct DescriptorWait {
        var names: Set<String> = []
        var logged = false
    }

    /// Names waiting to be looked at (`lstat`, then opened): those events named, and those of the
    /// last listing, in turn; whether events are left to read; and names to look at again at a
    /// time (a refusal that depends on something besides the file).
    struct PendingNames {
        var urgent = NameQueue()
        var listed = NameQueue()
        var eventsLeft = false
        var timed: [String: UInt64] = [:]
    }

    /// The listing under way (the directory read a step at a time, and the names it found);
    /// whether it looks again at files refused before (not when it is the watched directory's
    /// fallback, as any change to them has an event of its own); when the last began, and
    /// whether one was asked for at once (`requested`: events lost, or discovery behind them).
    struct Listing {
        var underWay: (stream: System.DirectoryStream, seen: Set<String>)?
        var looksAtRefused = true
        var lastNanos: UInt64 = 0
        var requested = true
        /// Listings begun, ever.
        var rescans: UInt64 = 0
        /// What is wrong with the directory, said once (and once when it is right again).
        var directoryProblem: String?
        /// The first listing's names not looked at yet (nil once it ended and none is left).
        var start: StartNames? = StartNames()
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
