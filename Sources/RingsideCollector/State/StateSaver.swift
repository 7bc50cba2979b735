#if canImport(Glibc)
import Glibc
#endif
import CRingside
import Dispatch
import Foundation
import RingsideSnapshot
import RingsideSystem
import Synchronization

/// Writes the state's snapshots on a thread of its own (see `CollectorState`, `StateFiles`): the
/// drain thread tells it each fold and what else changed, and it keeps the whole state. When the
/// drain thread starts a new journal (each megabyte), and when the collector stops, it writes a
/// snapshot of everything (to a temporary file, `fsync`, renamed into place) and removes the
/// files that snapshot supersedes; the drain thread never waits for it, however large the state.
/// Its thread runs at the drain thread's priority (see `start`).
///
/// A snapshot that cannot be saved as `ringside-collector.state` (something planted there, a file
/// left unread) is saved under another name, `ringside-collector.<random>.state`, and the failure
/// counted and said; one that cannot be saved at all (a full disk) is tried again every 10 s,
/// while the journals keep every fold. Bots gone for longer than `--state-expiry` lose their
/// figures when a snapshot is written. A snapshot holds every bot's figures and the all-time
/// histograms that fit beside them within `--state-max-bytes` (`StateSnapshotWriter`): what a
/// collector reads back, always.
// @unchecked: `work` is the saver thread's alone (or the caller's of `finish`, once the thread
// has ended: the join orders them); the drain thread reaches it only through `shared`.
final class StateSaver: @unchecked Sendable {
    /// What the drain thread tells it.
    enum Message: Sendable {
        case folded(bot: String, entries: [CollectorState.Entry])
        case histograms(bot: String, entries: [CollectorState.HistogramEntry])
        /// A bot's first file came, or its last went: its expiry counts from then.
        case came(bot: String)
        case went(bot: String)
        /// The drain thread started a journal.
        case journal(name: String, generation: UInt64)
        /// Write a snapshot covering the journals before `generation`.
        case snapshot(generation: UInt64)
    }

    /// How long a snapshot that could not be saved waits before the next try.
    static let retryNanos: UInt64 = 10_000_000_000
    /// How often, with no snapshot meanwhile, the state is looked at for bots to expire.
    static let expiryCheckNanos: UInt64 = 3_600_000_000_000

    private struct Shared {
        var inbox: [Message] = []
        var stopping = false
        var stats = CollectorStateStats()
        /// Bots expired since the drain thread last asked.
        var expired: [String] = []
        var journalFailing = false
        var snapshotFailing = false
    }

    /// What only the saver's thread touches.
    private struct Work {
        var content: StateContent
        var present: Set<String> = []
        /// The state's files, by name, with their generations.
        var files: [String: UInt64]
        /// Files left unread at start: never written over.
        let unreadable: Set<String>
        /// The snapshot wanted, when it may be tried, and when bots were last checked for expiry.
        var schedule = SnapshotSchedule()
        /// What the log last said of a failure (to save under the primary name; to save at all),
        /// so each is logged once until it changes.
        var lastLoggedPrimaryProblem: String?
        var lastLoggedFailure: String?
        /// The all-time histograms the log last said a snapshot left out for room.
        var lastLoggedShed = 0
    }

    private let directory: LogDirectory
    private let log: CollectorLog
    private let limit: Int
    private let expirySeconds: UInt64?
    private let shared = Locked(Shared())
    private var work: Work
    private let thread = PartThread(name: "ringside-state")

    /// A saver of `content`, read from `files` at start (`unreadable`: those left unread).
    init(
        directory: LogDirectory, content: StateContent, files: [String: UInt64], unreadable: Set<String>, limit: Int,
        expirySeconds: UInt64?, log: CollectorLog, stats: CollectorStateStats
    ) {
        self.directory = directory
        self.log = log
        self.limit = limit
        self.expirySeconds = expirySeconds
        work = Work(content: content, files: files, unreadable: unreadable)
        shared.withLock { $0.stats = stats }
    }

    // MARK: - The drain thread's side

    /// Tells it `message`; never waits for a save.
    func post(_ message: Message) {
        shared.withLock { $0.inbox.append(message) }
        thread.wake()
    }

    /// Counts a journal line that could not be written (`failure`), or says one was (nil).
    func noteJournal(failure: String?) {
        shared.withLock { shared in
            if failure != nil { shared.stats.saveFailures += 1 }
            shared.journalFailing = failure != nil
            shared.stats.failing = shared.journalFailing || shared.snapshotFailing
        }
    }

    /// What it did so far.
    var stats: CollectorStateStats { shared.withLock { $0.stats } }

    /// The bots whose figures expired since the last call.
    func takeExpired() -> [String] {
        shared.withLock { shared in
            defer { shared.expired.removeAll() }
            return shared.expired
        }
    }

    /// Starts its thread.
    func start() {
        thread.startOrExit { [self] in
            // At the drain thread's priority, not below it as the HTTP threads are: a snapshot
            // maps and unmaps memory and creates and renames files in the ring directory, and a
            // niced saver preempted while it held the kernel's locks for them stalled the drain
            // thread behind it (a neighbour at 20,000 records a second dropped 14,000 to 20,000
            // records in 2 of 7 starts beside 16 MB of state; 0 in 9 at the same priority).
            while let wait = turn(nowNanos: rs_clock_precise_ns()) {
                thread.pause(nanos: wait)
            }
        }
    }

    /// Stops its thread once it has taken every message (a snapshot asked for is tried once
    /// more, at once), and waits for it.
    func finish() {
        thread.stop(waking: { shared.withLock { $0.stopping = true } })
    }

    // MARK: - Its thread

    /// Takes the messages, writes a snapshot if one is due; returns how long to wait for the
    /// next message (nil: stop).
    private func turn(nowNanos now: UInt64) -> UInt64? {
        let (messages, stopping) = shared.withLock { shared in
            defer { shared.inbox.removeAll(keepingCapacity: true) }
            return (shared.inbox, shared.stopping)
        }
        for message in messages { take(message) }
        if !stopping, work.schedule.expiryCheckIsDue(nowNanos: now) {
            // A collector with few folds writes few snapshots: bots gone long enough expire all the same.
            var content = work.content
            if !content.expire(nowSeconds: UInt64(time(nil)), afterSeconds: expirySeconds, present: work.present).isEmpty {
                work.schedule.want(work.files.values.max() ?? 1)  // the newest journal is read after it, as ever
            }
        }
        if let generation = work.schedule.due(nowNanos: now, stopping: stopping) {
            work.schedule.tried(saved: writeSnapshot(generation: generation), nowNanos: now)
        }
        if stopping { return nil }
        return work.schedule.waitNanos(nowNanos: rs_clock_precise_ns())
    }

    private func take(_ message: Message) {
        let now = UInt64(time(nil))
        switch message {
        case let .folded(bot, entries):
            work.content.apply(entries, for: bot)
        case let .histograms(bot, entries):
            work.content.histograms[bot] = entries.isEmpty ? nil : entries
        case let .came(bot):
            work.present.insert(bot)
            work.content.seen[bot] = now
        case let .went(bot):
            work.present.remove(bot)
            work.content.seen[bot] = now
        case let .journal(name, generation):
            work.files[name] = generation
        case let .snapshot(generation):
            work.schedule.want(generation)
        }
    }

    /// Writes a snapshot of everything, covering the journals before `generation`, and removes
    /// the files it supersedes. Returns whether it was saved.
    private func writeSnapshot(generation: UInt64) -> Bool {
        work.schedule.checkedExpiry(nowNanos: rs_clock_precise_ns())
        let expired = work.content.expire(nowSeconds: UInt64(time(nil)), afterSeconds: expirySeconds, present: work.present)
        if !expired.isEmpty {
            log(
                "the figures of \(expired.count) bots gone for more than \(expirySeconds ?? 0) s (--state-expiry) are dropped from the "
                    + "state: \(expired.prefix(10).joined(separator: ", "))\(expired.count > 10 ? ", ..." : "")")
        }
        let temporary: (name: String, descriptor: Int32)
        do { temporary = try directory.createTemporary(for: StateFiles.primaryName) } catch {
            return failed("\(error)", expired: expired)
        }
        var writer = StateSnapshotWriter(descriptor: temporary.descriptor, limit: limit)
        var problem: String?
        do { try writer.write(work.content, generation: generation, present: work.present) } catch {
            problem = "cannot write \(directory.path(of: temporary.name)): \(error)"
        }
        if problem == nil, !writer.written.fits || writer.bytes > limit {
            problem =
                "the figures of its \(work.content.bots.count) bots take \(StateSnapshotWriter.frameBytes + work.content.totalsBytes) "
                + "bytes, more than the \(limit) a collector reads (--state-max-bytes): it is not saved, and the files it would "
                + "supersede are kept (raise --state-max-bytes, or shorten --state-expiry)"
        }
        if problem == nil {
            do { try System.fsync(temporary.descriptor) } catch { problem = "cannot fsync \(directory.path(of: temporary.name)): \(error)" }
        }
        System.close(temporary.descriptor)
        if let problem {
            directory.remove(temporary.name)
            return failed(problem, expired: expired)
        }
        let placed = place(temporary.name)
        guard let saved = placed.name else {
            directory.remove(temporary.name)
            return failed(placed.problem ?? "cannot save the state under any name", expired: expired)
        }
        // Superseded: every other snapshot, and the journals before this one's generation.
        for (name, fileGeneration) in work.files
        where name != saved && !work.unreadable.contains(name)
            && (name.hasSuffix(StateFiles.snapshotSuffix) || fileGeneration < generation)
        {
            directory.removeOwn(name)
            work.files[name] = nil
        }
        work.files[saved] = generation
        if work.lastLoggedFailure != nil { log("the collector's state is saved again (\(directory.path(of: saved)))") }
        work.lastLoggedFailure = nil
        sayShed(writer.written)
        shared.withLock { shared in
            shared.expired += expired
            shared.stats.botsExpired += UInt64(expired.count)
            shared.stats.bots = work.content.botNames.count
            shared.stats.bytes = UInt64(writer.bytes)
            shared.stats.histogramsShed = writer.written.shed
            shared.stats.lastSaveRealtimeNanos = rs_clock_realtime_ns()
            shared.snapshotFailing = false
            shared.stats.failing = shared.journalFailing
        }
        return true
    }

    /// Renames `temporary` to `ringside-collector.state`, or, when that name cannot take it, to a
    /// new name of its own (the failure counted and said). Returns the name it took, or why none.
    private func place(_ temporary: String) -> (name: String?, problem: String?) {
        let primary = StateFiles.primaryName
        var reason: String
        if work.unreadable.contains(primary) {
            // Left unread at start (too large, or not a snapshot): the operator's to look at, never written over.
            reason = "\(directory.path(of: primary)) could not be read at start and is left as it was"
        } else {
            do {
                try directory.replace(primary, with: temporary)
                return (primary, nil)
            } catch {
                reason = "\(error)"
                shared.withLock { $0.stats.saveFailures += 1 }
            }
        }
        let alternate = StateFiles.randomName(suffix: StateFiles.snapshotSuffix)
        do { try directory.replace(alternate, with: temporary) } catch {
            return (nil, "cannot save it as \(directory.path(of: primary)) (\(reason)) nor as \(directory.path(of: alternate)) (\(error))")
        }
        if work.lastLoggedPrimaryProblem != reason {
            log(
                "cannot save the collector's state as \(directory.path(of: primary)): \(reason); saved as "
                    + "\(directory.path(of: alternate)) instead, which the next collector reads (counted in "
                    + "ringside_collector_state_save_failures_total)", level: .warn)
            work.lastLoggedPrimaryProblem = reason
        }
        return (alternate, nil)
    }

    /// Says what a snapshot saved left out, when that changed.
    private func sayShed(_ written: StateSnapshotWriter.Written) {
        guard written.shed != work.lastLoggedShed else { return }
        if written.shed == 0 {
            log("the collector's state holds every all-time histogram again")
        } else {
            log(
                "the collector's state leaves out the all-time histograms of \(written.shed) series of \(written.shedBots) bots for "
                    + "room (--state-max-bytes \(limit); every bot's figures are kept): their _count and _sum start again if the "
                    + "collector restarts (raise --state-max-bytes, or shorten --state-expiry; counted in "
                    + "ringside_collector_state_histograms_shed)", level: .warn)
        }
        work.lastLoggedShed = written.shed
    }

    /// Says a snapshot that could not be saved (once per cause), counts it, and returns false.
    private func failed(_ problem: String, expired: [String]) -> Bool {
        if problem != work.lastLoggedFailure {
            log(
                "cannot save the collector's state: \(problem); tried again every \(Self.retryNanos / 1_000_000_000) s (the journals "
                    + "keep every fold meanwhile; counted in ringside_collector_state_save_failures_total)", level: .error)
            work.lastLoggedFailure = problem
        }
        shared.withLock { shared in
            shared.expired += expired
            shared.stats.botsExpired += UInt64(expired.count)
            shared.stats.saveFailures += 1
            shared.snapshotFailing = true
            shared.stats.failing = true
        }
        return false
    }
}

/// When the saver writes a snapshot: the generation wanted (a snapshot covers the journals
/// before it), when a failed one may be tried again, and when bots were last checked for expiry
/// (a snapshot checks too).
struct SnapshotSchedule {
    private var wanted: UInt64?
    private var retryAtNanos: UInt64 = 0
    private var expiryCheckedNanos: UInt64 = rs_clock_precise_ns()

    /// A snapshot covering the journals before `generation` is wanted, now.
    mutating func want(_ generation: UInt64) {
        wanted = max(wanted ?? 0, generation)
        retryAtNanos = 0
    }

    /// Whether bots are due to be checked for expiry with no snapshot wanted (then noted as checked).
    mutating func expiryCheckIsDue(nowNanos now: UInt64) -> Bool {
        guard wanted == nil, now &- expiryCheckedNanos >= StateSaver.expiryCheckNanos else { return false }
        expiryCheckedNanos = now
        return true
    }

    mutating func checkedExpiry(nowNanos now: UInt64) { expiryCheckedNanos = now }

    /// The generation to write now, if a snapshot is wanted and may be tried (at once when stopping).
    func due(nowNanos now: UInt64, stopping: Bool) -> UInt64? {
        guard let wanted, stopping || now >= retryAtNanos else { return nil }
        return wanted
    }

    /// A snapshot was tried: done when `saved`, else tried again after `StateSaver.retryNanos`.
    mutating func tried(saved: Bool, nowNanos now: UInt64) {
        if saved { wanted = nil } else { retryAtNanos = now &+ StateSaver.retryNanos }
    }

    /// How long the saver may wait: until the next expiry check, or the next try of a wanted snapshot.
    func waitNanos(nowNanos now: UInt64) -> UInt64 {
        let expiryCheck = expiryCheckedNanos &+ StateSaver.expiryCheckNanos
        return min(expiryCheck &- min(expiryCheck, now), wanted == nil ? .max : retryAtNanos &- min(retryAtNanos, now))
    }
}
