#if canImport(Glibc)
import Glibc
#endif
import Ringside

/// What `lstat` says of a directory entry that decides whether it could be read as a ring: which
/// file it is (device, inode), and what moves when anyone writes, grows, cuts, chowns or chmods
/// it (size, modification and status-change times, owner, mode).
struct EntryState: Hashable {
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let modifiedNanos: Int64
    let changedNanos: Int64
    let owner: UInt32
    let mode: UInt32

    init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modifiedNanos = Int64(info.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_mtim.tv_nsec)
        changedNanos = Int64(info.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_ctim.tv_nsec)
        owner = UInt32(info.st_uid)
        mode = UInt32(info.st_mode)
    }

    /// Whether it is the file `identity` names.
    func isFile(_ identity: RingFileIdentity) -> Bool { device == identity.device && inode == identity.inode }
}

/// A `ringside.*` file discovery did not hand to the drain, and why: refused as it was when last
/// looked at (`state`), and not opened again until it changes, or until `retryAtNanos` for a
/// refusal that depends on something besides the file (another consumer holds it, the mapping
/// limits, a system error).
struct RefusedFile {
    var state: EntryState?
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
    func stands(for state: EntryState, nowNanos now: UInt64) -> Bool {
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
