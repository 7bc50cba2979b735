import RingsideSystem
import RingsideHTTPClient

/// What the event loop does, and says, when `accept` finds no descriptor free (`EMFILE`,
/// `ENFILE`).
///
/// The remedies, in the loop's order: close the connection idle longest, so the newcomer takes its
/// descriptor; with nothing idle, close the spare descriptor this type holds (`/dev/null`), accept
/// the newcomer on it, answer 503 and close, and take the spare again; when even the spare could
/// not be taken again (another thread got the descriptor first), stop accepting for 100 ms. Each
/// empties the listening socket or sets it aside, so the level-triggered `poll` never spins on
/// it, and no client waits in the kernel's queue for a descriptor that will not come.
///
/// Logged once when a shortage begins, once when it first needs each further remedy, and once
/// when accepts have needed none for `quietMillis`. Owned by the server thread.
struct DescriptorShortage {
    enum Remedy: Hashable {
        case evictedIdle, refused, paused
    }

    /// Accepts needing no remedy for this long end a shortage, so a limit hovering at the edge
    /// logs two lines, not two a second.
    static let quietMillis: Int64 = 5_000

    private var spareFD: Int32 = -1
    /// When the current shortage began (nil: none), and when a remedy was last needed.
    private var startedAt: Int64?
    private var lastAt: Int64 = 0
    private var counts: [Remedy: Int] = [:]

    /// Holds the spare if it is not held; false when no descriptor is free for it.
    mutating func holdSpare() -> Bool {
        if spareFD < 0 { spareFD = Syscall.openSpareDescriptor() }
        return spareFD >= 0
    }

    /// Closes the spare, so the next descriptor opened (the newcomer's) can take its number.
    mutating func releaseSpare() {
        guard spareFD >= 0 else { return }
        System.close(spareFD)
        spareFD = -1
    }

    /// Counts a remedy and logs what is new about it. `code` is the errno `accept` gave.
    mutating func needed(_ remedy: Remedy, code: Errno, now: Int64, log: HTTPServerLog) {
        lastAt = now
        counts[remedy, default: 0] += 1
        if startedAt == nil {
            startedAt = now
            log(
                "HTTP accept: out of file descriptors (\(code)); raise the open-file limit "
                    + "(ulimit -n, LimitNOFILE=). Meanwhile each newcomer takes the descriptor of the connection idle longest",
                true)
        }
        guard counts[remedy] == 1 else { return }
        switch remedy {
        case .evictedIdle:
            break  // said when the shortage began
        case .refused:
            log(
                "HTTP accept: out of file descriptors and no connection is idle: newcomers get 503 (retry) "
                    + "until descriptors are free", true)
        case .paused:
            log(
                "HTTP accept: out of file descriptors, no connection idle and no spare descriptor: "
                    + "accepting paused 100 ms at a time", true)
        }
    }

    /// An accept that needed no remedy: ends a shortage that has been quiet long enough.
    mutating func acceptedFreely(now: Int64, log: HTTPServerLog) {
        guard startedAt != nil, now - lastAt >= Self.quietMillis else { return }
        log(
            "HTTP accept: file descriptors available again (meanwhile \(counts[.evictedIdle, default: 0]) idle "
                + "connections were closed for newcomers, \(counts[.refused, default: 0]) newcomers refused with 503)", false)
        startedAt = nil
        counts = [:]
    }
}
