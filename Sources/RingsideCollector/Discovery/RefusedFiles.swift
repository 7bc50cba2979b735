#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideSystem

extension FileVersion {
    /// Whether the directory entry `lstat` saw is the file `identity` names.
    func isFile(_ identity: RingFileIdentity) -> Bool { device == identity.device && inode == identity.inode }
}

/// A `ringside.*` file discovery did not hand to the drain, and why: refused as it was when last
/// looked at (`state`), and not opened again until it changes, or until `retryAtNanos` for a
/// refusal that depends on something besides the file (another consumer holds it, the mapping
/// limits, a system error).
struct RefusedFile {
    var state: FileVersion?
    /// Why, when an open (or the drain) said it; nil when `lstat` did (empty, another user's, not
    /// a regular file): the words are made again from `state` when shown, so 100,000 such files
    /// keep no text.
    var problem: String?
    /// Not shown as a skipped ring: empty, or being made (its producer has not finished it).
    var quiet: Bool
    /// When to look again even if it did not change (0: only when it changes).
    var retryAtNanos: UInt64

    /// Whether a look at `state` at `now` needs no open: the file is as it was refused, and no
    /// retry is due.
    func stands(for state: FileVersion, nowNanos now: UInt64) -> Bool {
        self.state == state && (retryAtNanos == 0 || now < retryAtNanos)
    }

    /// Whether it says what `other` said (the log says each problem of a file once).
    func saysTheSame(as other: RefusedFile) -> Bool {
        guard quiet == other.quiet else { return false }
        if problem != nil || other.problem != nil { return problem == other.problem }
        guard let state, let before = other.state else { return false }
        return state.mode & UInt32(S_IFMT) == before.mode & UInt32(S_IFMT) && state.owner == before.owner
    }
}

/// Names to look at, first in first out, each at most once in the queue.
struct NameQueue {
    private var names: [String] = []
    private var head = 0
    /// The names queued: a name in `names` but not here was removed (and is passed over).
    private var queued: Set<String> = []

    var isEmpty: Bool { queued.isEmpty }
    var count: Int { queued.count }

    mutating func push(_ name: String) {
        guard queued.insert(name).inserted else { return }
        names.append(name)
    }

    /// Takes `name` out of the queue (its file is gone: nothing to look at).
    mutating func remove(_ name: String) {
        queued.remove(name)
        if queued.isEmpty { removeAll() }
    }

    mutating func pop() -> String? {
        while head < names.count {
            let name = names[head]
            head += 1
            if head == names.count {
                names.removeAll(keepingCapacity: names.count <= 4_096)
                head = 0
            } else if head >= 4_096, head * 2 >= names.count {
                names.removeFirst(head)  // what was taken, once it is half the array
                head = 0
            }
            if queued.remove(name) != nil { return name }  // else removed: passed over
        }
        return nil
    }

    mutating func removeAll() {
        names.removeAll()
        head = 0
        queued.removeAll()
    }
}
