import Foundation
import Ringside
import RingsideAggregation
import RingsideSnapshot
import RingsideSystem

/// What the collector keeps across restarts, in files beside the rings (`StateFiles`), so that no
/// counter, `_count` or `_sum` goes back when it starts again:
/// - what the workers that are gone left to their bots' series (counter totals, drops), written
///   as each is folded: a worker's file is removed then (see `RingTracker.retire`), its cells with it;
/// - the all-time histogram of each histogram series of a bot with workers, saved when the
///   collector stops (and kept when the bot's last file goes, for its series when a file of it
///   comes again): drained records are gone from the rings, and the all-time histograms were the
///   collector's alone (a bot of one process starts them again, as before: JSON of every bucket
///   is tens of kilobytes a series, too much to keep for every bot). A collector killed without
///   stopping keeps the histograms of its last stop (a `_count` seen to go back, as after a
///   reset; never counted twice).
///
/// A fold costs one line appended to a journal, on the drain thread, before the worker's file is
/// removed; the line counts only once the file is gone (it names the file), so a collector killed
/// between the two neither loses the worker's totals nor counts them twice, and a fold's cost
/// does not grow with the state. Snapshots of the whole state are written by a thread of its own
/// (`StateSaver`) each megabyte of journal and at the stop. A fold that cannot be written (a full
/// disk) leaves the worker's file where it is, its totals in it; a snapshot that cannot be saved
/// under its name is saved under another; each failure is counted and said
/// (`ringside_collector_state_save_failures_total`). The state is read once, at start, each file
/// within `--state-max-bytes`; bots gone longer than `--state-expiry` lose their figures.
///
/// It never writes what it would refuse to read: a journal takes a new file before a line would
/// take it past a megabyte (the bound is one at least), the bots' figures are kept within the bound
/// (`StateRoom`: a fold that would push them past it is refused, its worker's file kept, its totals
/// in it, counted in `ringside_collector_state_folds_refused_total`), and a snapshot holds the
/// all-time histograms that fit beside them, the others left out and counted
/// (`ringside_collector_state_histograms_shed`).
///
/// It also holds the directory's lock (`DirectoryLock`): whatever folds a directory's workers
/// writes its state, and two would overwrite each other's totals, so a second collector is refused.
///
/// Touched by the drain thread only (and by the thread that stops the collector, after it).
final class CollectorState {
    /// One series' folded figures.
    struct Entry: Codable, Equatable, Sendable {
        var metric: String
        /// Encoded as in the registry: "key=value" pairs joined by "\n".
        var labels: String
        var total: UInt64
        var dropped: UInt64
    }

    /// One histogram series' all-time histogram.
    struct HistogramEntry: Codable, Equatable, Sendable {
        var metric: String
        var labels: String
        var histogram: PersistedHistogram
        /// A signed histogram's values below zero (`histogram` holds the rest); nil for the others.
        var negative: PersistedHistogram? = nil
    }

    /// The snapshot's usual name in the ring directory.
    static let fileName = StateFiles.primaryName
    /// A journal this long is followed by a new one, and a snapshot supersedes it.
    static let journalBytes = 1 << 20

    private let ringDirectory: RingDirectory
    /// The bound, and what the bots' figures take of it.
    private var room: StateRoom
    private let expirySeconds: UInt64?
    private let log: CollectorLog
    private var directory: LogDirectory?
    private var lock: DirectoryLock?
    private var saver: StateSaver?
    /// The bots' figures and histograms as saved: what a bot's series start from when its first file comes.
    private var content = StateContent()
    private var journal: StateJournal?
    private var nextGeneration: UInt64 = 1
    /// Something changed this run that the last snapshot, at the stop, must keep.
    private var changed = false
    private var closed = false
    /// What the log last said of the directory and of the journal, so each problem is logged once.
    private var lastLoggedOpenProblem: String?
    private var lastLoggedJournalProblem: String?
    private let encoder = JSONEncoder()

    /// Opens the state in `options.directory`: takes its lock and reads its files. A directory
    /// that is not there yet is opened when it comes (`open`).
    /// - Throws: `DirectoryLock.Refusal.held` when another collector holds the directory.
    init(options: CollectorOptions, log: CollectorLog) throws(DirectoryLock.Refusal) {
        ringDirectory = options.directory
        room = StateRoom(limit: options.stateMaxBytes)
        expirySeconds = options.stateExpirySeconds
        self.log = log
        try open()
    }

    deinit {
        saver?.finish()
        lock?.release()
    }

    /// Whether the state is open: its directory's lock taken and its files read.
    var isOpen: Bool { saver != nil }

    /// Opens the directory, takes its lock and reads the state, if that is not done yet; a
    /// directory missing or unsafe is said once (its workers then keep their files, and their
    /// totals in them). Returns whether the state is open.
    /// - Throws: `DirectoryLock.Refusal.held` when another collector holds the directory.
    @discardableResult
    func open() throws(DirectoryLock.Refusal) -> Bool {
        guard saver == nil, !closed else { return saver != nil }
        let directory: LogDirectory
        do { directory = try LogDirectory(path: ringDirectory.path) } catch {
            let problem = "\(error)"
            if problem != lastLoggedOpenProblem {
                log(
                    "cannot keep the totals of workers that are gone across restarts: \(problem); the files of workers that are "
                        + "gone are kept meanwhile, their totals in them", level: .warn)
                lastLoggedOpenProblem = problem
            }
            return false
        }
        do { lock = try DirectoryLock(in: directory) } catch {
            if case .held = error { throw error }
            log(
                "\(error); this collector runs without its lock: a second collector on \(directory.path) would not be refused",
                level: .error)
        }
        read(directory)
        return true
    }

    /// Reads the files and starts the saver.
    private func read(_ directory: LogDirectory) {
        let loaded = StateFiles.load(
            from: directory, rings: ringDirectory, limit: room.limit, expirySeconds: expirySeconds, nowSeconds: UInt64(time(nil)))
        for (name, problem) in loaded.unreadable.sorted(by: { $0.key < $1.key }) {
            log(
                "cannot read the collector's state \(directory.path(of: name)): \(problem); the totals it holds are not counted "
                    + "(the file is left as it is; counted in ringside_collector_state_read_failures)", level: .error)
        }
        if !loaded.files.isEmpty {
            log(
                "read the totals of workers that are gone (\(loaded.series) series of \(loaded.content.bots.count) bots) and "
                    + "\(loaded.histograms) all-time histograms from \(loaded.files.count) state files in \(directory.path)")
        }
        if !loaded.expired.isEmpty {
            log("the figures of \(loaded.expired.count) bots gone for more than \(expirySeconds ?? 0) s (--state-expiry) are dropped")
        }
        content = loaded.content
        room.measure(content)
        if room.isOver {
            log(
                "the figures of the \(content.bots.count) bots read from the collector's state take \(room.bytes) bytes, more than "
                    + "the \(room.limit) a collector reads (--state-max-bytes): the files read are kept as they are and no snapshot "
                    + "is written until bots expire or the bound is raised; folds that add series are refused meanwhile",
                level: .error)
        }
        nextGeneration = loaded.nextGeneration
        var stats = CollectorStateStats()
        stats.readFailures = loaded.unreadable.count
        stats.bytesLimit = UInt64(room.limit)
        stats.bots = content.botNames.count
        stats.botsExpired = UInt64(loaded.expired.count)
        let saver = StateSaver(
            directory: directory, content: content, files: loaded.files, unreadable: Set(loaded.unreadable.keys), limit: room.limit,
            expirySeconds: expirySeconds, log: log, stats: stats)
        saver.start()
        // What was read, in one snapshot (its files then go), on the saver's thread.
        if !loaded.files.isEmpty || !loaded.expired.isEmpty { saver.post(.snapshot(generation: nextGeneration)) }
        self.directory = directory
        self.saver = saver
    }

    /// What the state went through (nil while it is not open).
    var stats: CollectorStateStats? {
        guard var stats = saver?.stats else { return nil }
        stats.totalsBytes = UInt64(room.bytes)
        stats.foldsRefused = room.refused
        return stats
    }

    // MARK: - Bots

    /// What bot `bot`'s workers that are gone left.
    func foldedTotals(for bot: String) -> [Entry] {
        forgetExpired()
        return content.bots[bot] ?? []
    }

    /// The all-time histograms bot `bot`'s series had when the collector last stopped.
    func histograms(for bot: String) -> [HistogramEntry] {
        forgetExpired()
        return content.histograms[bot] ?? []
    }

    /// A bot's first file came: its figures do not expire while a file of it is here.
    func botCame(_ bot: String) { saver?.post(.came(bot: bot)) }

    /// A bot's last file went; its figures expire `--state-expiry` from now.
    func botWent(_ bot: String) { saver?.post(.went(bot: bot)) }

    /// Drops what the saver found expired.
    private func forgetExpired() {
        guard let saver else { return }
        for bot in saver.takeExpired() {
            _ = room.grew(by: -content.totalsBytes(of: bot))
            content.bots[bot] = nil
            content.histograms[bot] = nil
        }
    }

    // MARK: - Folds

    /// Writes the fold of a worker in the journal, before its file is removed: `entries` are its
    /// bot's series' figures with the worker folded in (those it counted toward). The line counts
    /// only once the file (`worker`, `identity`) is gone. A fold that would take the bots' figures
    /// past the bound is refused (see `StateRoom`).
    /// - Returns: whether it is written; a worker whose fold is not keeps its file, and its totals in it.
    func recordFold(_ entries: [Entry], bot: String, worker: String, identity: RingFileIdentity) -> Bool {
        guard let directory, let saver, !closed else { return false }
        let growth = content.growth(applying: entries, for: bot)
        guard room.fits(growth: growth) else {
            return refuse(worker, of: bot, "the figures of the state's bots would take \(room.bytes + growth) bytes")
        }
        let fold = StateFiles.Fold(bot: bot, entries: entries, worker: worker, device: identity.device, inode: identity.inode)
        var line = [UInt8]((try? encoder.encode(fold)) ?? Data())
        guard !line.isEmpty else { return false }
        line.append(UInt8(ascii: "\n"))
        guard StateJournal.headerBytes(generation: StateFiles.maxGeneration) + line.count <= room.limit else {
            return refuse(worker, of: bot, "its fold alone is a line of \(line.count) bytes")
        }
        do {
            // A new journal before this one would pass a megabyte (the least bound): a collector reads every one back.
            let full = journal.map { $0.folds > 0 && $0.bytes + line.count > Self.journalBytes } ?? false
            if journal == nil || journal?.isBroken == true || full { try startJournal(in: directory, saver: saver) }
            guard let journal else { return false }
            try journal.append(line, path: directory.path(of: journal.name))
        } catch {
            let problem = "\(error)"
            saver.noteJournal(failure: problem)
            if problem != lastLoggedJournalProblem {
                log(
                    "cannot write the fold of worker \(worker) in the collector's state: \(problem); its file is kept, its totals in it, "
                        + "and folded once a fold can be written (counted in ringside_collector_state_save_failures_total)",
                    level: .error)
                lastLoggedJournalProblem = problem
            }
            return false
        }
        if lastLoggedJournalProblem != nil {
            saver.noteJournal(failure: nil)
            log("the collector's state takes folds again")
            lastLoggedJournalProblem = nil
        }
        return true
    }

    /// Refuses the fold of `worker` for room (`why`: what it would take): counted, said once
    /// until folds fit again; returns false.
    private func refuse(_ worker: String, of bot: String, _ why: String) -> Bool {
        guard room.refuse() else { return false }
        log(
            "cannot fold worker \(worker) of bot \(bot) into the collector's state: \(why), more than the \(room.limit) a collector "
                + "reads (--state-max-bytes); its file is kept, its totals in it, and folded once there is room (raise "
                + "--state-max-bytes, or shorten --state-expiry; counted in ringside_collector_state_folds_refused_total)",
            level: .error)
        return false
    }

    /// The fold `recordFold` wrote took (its worker's file is gone): `entries` are the bot's figures now.
    func folded(_ entries: [Entry], bot: String) {
        let growth = content.growth(applying: entries, for: bot)
        content.apply(entries, for: bot)
        if room.grew(by: growth) { log("the collector's state has room for folds again") }
        changed = true
        saver?.post(.folded(bot: bot, entries: entries))
    }

    /// Starts journal `nextGeneration`; a snapshot will cover the ones before it.
    private func startJournal(in directory: LogDirectory, saver: StateSaver) throws(LogDirectoryError) {
        let next = try StateJournal(in: directory, generation: nextGeneration)
        nextGeneration += 1
        saver.post(.journal(name: next.name, generation: next.generation))
        if let previous = journal {
            previous.close()
            saver.post(.snapshot(generation: next.generation))
        }
        journal = next
    }

    // MARK: - Histograms

    /// Keeps the all-time histograms of a bot with workers whose last file went (its series go
    /// with it): its series take them when a file of it comes again, and they are saved with the
    /// others when the collector stops (or a snapshot is written before).
    func keepHistograms(_ entries: [HistogramEntry], for bot: String) {
        let kept = entries.isEmpty ? nil : entries
        guard content.histograms[bot] != kept else { return }
        content.histograms[bot] = kept
        changed = true
        saver?.post(.histograms(bot: bot, entries: entries))
    }

    /// Saves everything, with the bots' all-time histograms now (those of bots not seen this run
    /// as they were), and lets go of the directory's lock: when the collector stops. Waits for
    /// the snapshot.
    func close(histograms byBot: [String: [HistogramEntry]]) {
        guard !closed else { return }
        for (bot, entries) in byBot.sorted(by: { $0.key < $1.key }) { keepHistograms(entries, for: bot) }
        closed = true
        journal?.close()
        if let saver {
            // Nothing to keep: no file for a collector of one-process bots.
            if changed || journal != nil { saver.post(.snapshot(generation: nextGeneration)) }
            saver.finish()
        }
        lock?.release()
    }
}
