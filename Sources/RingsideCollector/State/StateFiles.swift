import Foundation
import Ringside
import RingsideAggregation

/// The state's files in the ring directory (see `CollectorState`), what each holds, and how they
/// are read at start.
///
/// - Snapshots: `ringside-collector.state`, or `ringside-collector.<random>.state` when that name
///   cannot be written (something planted there, a file left unread): JSON, everything the state
///   held when it was written, as of the journals before its `generation`.
/// - Journals: `ringside-collector.<random>.journal`, appended to by the drain thread at each fold,
///   one JSON object a line after a header line `{"journal":GENERATION}`.
///
/// At start the snapshot of the highest generation is read, then every journal of that
/// generation or later, in order, each fold replacing its series' figures (so a fold read twice,
/// from a snapshot and a journal, counts once). Every file is read with a bound
/// (`--state-max-bytes`): a larger one is refused by its size, unread, and said; it is left where
/// it is, for the operator (and never written over). Files of other users, links, FIFOs are
/// never opened (`LogDirectory`).
enum StateFiles {
    static let prefix = "ringside-collector"
    static let primaryName = "ringside-collector.state"
    static let snapshotSuffix = ".state"
    static let journalSuffix = ".journal"

    /// A snapshot: version 1 (before journals: no generation, no dates) or 2.
    struct Snapshot: Codable {
        var version = 2
        /// Covers the journals before this generation (0 in version 1).
        var generation: UInt64?
        var bots: [String: [CollectorState.Entry]]
        var histograms: [String: [CollectorState.HistogramEntry]]?
        /// When each bot was last seen, in Unix seconds.
        var seen: [String: UInt64]?

        init(_ content: StateContent, generation: UInt64) {
            self.generation = generation
            bots = content.bots
            histograms = content.histograms.isEmpty ? nil : content.histograms
            seen = content.seen.isEmpty ? nil : content.seen
        }

        /// What it holds, each bot's figures in order (as the file may not have them).
        var content: StateContent {
            StateContent(bots: bots, histograms: histograms ?? [:], seen: seen ?? [:]).normalized()
        }
    }

    /// A journal's first line.
    struct JournalHeader: Codable {
        var journal: UInt64
    }

    /// A journal's line: `bot`'s figures after a fold, for the series the folded worker counted
    /// toward. Written before the worker's file is removed: it counts only once that file is gone
    /// (`worker`, `device`, `inode`: the file), so a collector killed between the two neither loses
    /// the worker's totals nor counts them twice.
    struct Fold: Codable {
        var bot: String
        var entries: [CollectorState.Entry]
        var worker: String?
        var device: UInt64?
        var inode: UInt64?
    }

    /// The highest generation read: a collector starts one journal a megabyte of folds, so a
    /// file that claims more was not written by one (and a next generation must not overflow).
    static let maxGeneration: UInt64 = 1 << 62

    /// Whether `name` is a snapshot's or a journal's (not a temporary, not the lock).
    static func isStateFile(_ name: String) -> Bool {
        name.hasPrefix(prefix) && (name.hasSuffix(snapshotSuffix) || name.hasSuffix(journalSuffix))
    }

    /// A new name beside the others that no one can guess: `ringside-collector.<random>SUFFIX`.
    static func randomName(suffix: String) -> String {
        var random = SystemRandomNumberGenerator()
        return "\(prefix).\(String(random.next() as UInt64, radix: 16))\(suffix)"
    }

    /// What the files held at start.
    struct Loaded {
        var content = StateContent()
        /// The next journal's generation (past every one read).
        var nextGeneration: UInt64 = 1
        /// The files read, by name, with their generations: superseded once a snapshot of a later
        /// generation is saved.
        var files: [String: UInt64] = [:]
        /// Files that could not be read, left as they are (never written over), and why.
        var unreadable: [String: String] = [:]
        /// Bots whose figures expired at start.
        var expired: [String] = []
        /// Series of figures and all-time histograms read.
        var series = 0
        var histograms = 0
    }

    /// Reads the state in `directory` (`ringDirectory`, the same, for the rings' identities).
    /// - Parameters:
    ///   - limit: the most bytes read of one file.
    ///   - expirySeconds: a bot whose files have all been gone this long loses its figures (nil: never).
    static func load(
        from directory: LogDirectory, rings ringDirectory: RingDirectory, limit: Int, expirySeconds: UInt64?, nowSeconds: UInt64
    ) -> Loaded {
        var loaded = Loaded()
        let names: [String]
        do { names = try directory.names(prefix: prefix) } catch {
            loaded.unreadable[directory.path] = "\(error)"
            return loaded
        }
        // Temporaries of a save a crash cut short.
        for name in names where name.hasPrefix(prefix) && name.contains(".tmp.") { directory.removeOwn(name) }
        let decoder = JSONDecoder()
        var best: (name: String, generation: UInt64, content: StateContent)?
        var journals: [(name: String, generation: UInt64, lines: ArraySlice<ArraySlice<UInt8>>)] = []
        for name in names.sorted() where isStateFile(name) {
            let bytes: [UInt8]
            do {
                guard let read = try directory.contents(of: name, limit: limit) else { continue }
                bytes = read
            } catch {
                if case .notOurs = error { continue }  // another user's, or a link: not ours to read
                loaded.unreadable[name] = "\(error)"
                continue
            }
            if name.hasSuffix(snapshotSuffix) {
                do {
                    let snapshot = try decoder.decode(Snapshot.self, from: Data(bytes))
                    let generation = snapshot.generation ?? 0
                    guard generation <= maxGeneration else {
                        loaded.unreadable[name] = "\(directory.path(of: name)) claims generation \(generation): not one a collector writes"
                        continue
                    }
                    loaded.files[name] = generation
                    if best == nil || generation > best!.generation || (generation == best!.generation && name == primaryName) {
                        best = (name, generation, snapshot.content)
                    }
                } catch {
                    loaded.unreadable[name] = "\(directory.path(of: name)) is not a state snapshot: \(error)"
                }
                continue
            }
            let lines = bytes.split(separator: UInt8(ascii: "\n"))[...]
            guard let first = lines.first, let header = try? decoder.decode(JournalHeader.self, from: Data(first)),
                header.journal <= maxGeneration
            else {
                loaded.unreadable[name] = "\(directory.path(of: name)) is not a state journal: its first line is not {\"journal\":N}"
                continue
            }
            loaded.files[name] = header.journal
            journals.append((name, header.journal, lines.dropFirst()))
        }
        let base = best?.generation ?? 0
        if let best { loaded.content = best.content }
        for journal in journals.sorted(by: { $0.generation < $1.generation }) where journal.generation >= base {
            var skipped = 0
            for line in journal.lines {
                guard let fold = try? decoder.decode(Fold.self, from: Data(line)) else {
                    skipped += 1  // a line a crash cut short: the fold's file was not removed
                    continue
                }
                if isLive(fold, in: ringDirectory) { continue }
                loaded.content.apply(fold.entries, for: fold.bot)
            }
            if skipped > 0 { loaded.unreadable[journal.name] = "\(skipped) lines of \(directory.path(of: journal.name)) are not folds" }
        }
        loaded.nextGeneration = max(base, loaded.files.values.max() ?? 0) + 1
        // Bots with a file in the directory are seen now; the others keep their dates, none later than now.
        for (bot, seconds) in loaded.content.seen where seconds > nowSeconds { loaded.content.seen[bot] = nowSeconds }
        let present = Set(ringDirectory.ringNames().map { WorkerRing.botName(ofRing: $0) })
        loaded.expired = loaded.content.expire(nowSeconds: nowSeconds, afterSeconds: expirySeconds, present: present)
        loaded.series = loaded.content.bots.values.reduce(0) { $0 + $1.count }
        loaded.histograms = loaded.content.histograms.values.reduce(0) { $0 + $1.count }
        return loaded
    }

    /// Whether a fold's worker file is still there (the collector stopped between the fold's line
    /// and the file's removal): its totals are then the file's, counted when it is attached.
    private static func isLive(_ fold: Fold, in ringDirectory: RingDirectory) -> Bool {
        guard let worker = fold.worker, WorkerRing(worker) != nil, let device = fold.device, let inode = fold.inode,
            let identity = ringDirectory.fileIdentity(of: worker)
        else { return false }
        return identity.device == device && identity.inode == inode
    }
}
