import Foundation
import RingsideAggregation
import RingsideSystem

/// What the collector keeps across restarts, in a file beside the rings,
/// `ringside-collector.state`, so that no counter, `_count` or `_sum` goes back when it starts
/// again:
/// - what the workers that are gone left to their bots' series (counter totals, drops), saved as
///   each is folded: a worker's file is removed then (see `RingTracker.retire`), its cells with it;
/// - the all-time histogram of each histogram series of a bot with workers, saved when the
///   collector stops (and kept in memory when the bot's last file goes, for its series when a
///   file of it comes again): drained records are gone from the rings, and the all-time histograms were
///   the collector's alone (a bot of one process starts them again, as before: JSON of every
///   bucket is tens of kilobytes a series, too much to keep for every bot). A collector
///   killed without stopping saves nothing: the next one starts from the histograms of the last
///   stop (a `_count` seen to go back, as after a reset; never counted twice).
///
/// The file is JSON, written whole to a temporary file and renamed over the old one (see
/// `LogDirectory`: in /dev/shm, a sticky directory, nothing planted there is ever followed or
/// written through). It is read once, when the collector starts; one that cannot be read or
/// parsed is said in the log and left alone (its totals are then lost, and the counters they held
/// start again from the live files' cells, as after a reset).
///
/// A worker's file is removed before its totals are saved: a collector killed between the two
/// loses that worker's totals (a counter seen to reset) rather than counting them twice.
///
/// Touched by the drain thread only.
final class CollectorState {
    /// One series' folded figures.
    struct Entry: Codable, Equatable {
        var metric: String
        /// Encoded as in the registry: "key=value" pairs joined by "\n".
        var labels: String
        var total: UInt64
        var dropped: UInt64
    }

    /// One histogram series' all-time histogram.
    struct HistogramEntry: Codable, Equatable {
        var metric: String
        var labels: String
        var histogram: PersistedHistogram
    }

    private struct Document: Codable {
        var version = 1
        var bots: [String: [Entry]]
        var histograms: [String: [HistogramEntry]]?
    }

    /// The file's name in the ring directory.
    static let fileName = "ringside-collector.state"

    private let directory: LogDirectory?
    private let log: CollectorLog
    private var bots: [String: [Entry]] = [:]
    private var histograms: [String: [HistogramEntry]] = [:]
    /// `keepHistograms` changed `histograms` since the file was saved.
    private var histogramsUnsaved = false
    /// What went wrong with the last save, said once until a save works again.
    private var lastError: String?

    /// Reads the file in `ringDirectory` (nothing there: nothing folded yet).
    init(ringDirectory: String, log: CollectorLog) {
        self.log = log
        do {
            directory = try LogDirectory(path: ringDirectory)
        } catch {
            directory = nil
            log("cannot keep the totals of workers that are gone across restarts: \(error)", level: .warn)
            return
        }
        let path = "\(ringDirectory)/\(Self.fileName)"
        do {
            guard let bytes = try directory?.contents(of: Self.fileName) else { return }
            let document = try JSONDecoder().decode(Document.self, from: Data(bytes))
            bots = document.bots
            histograms = document.histograms ?? [:]
            let series = bots.values.reduce(0) { $0 + $1.count }
            let kept = histograms.values.reduce(0) { $0 + $1.count }
            log(
                "read the totals of workers that are gone (\(series) series of \(bots.count) bots) and \(kept) all-time "
                    + "histograms from \(path)")
        } catch {
            log(
                "cannot read \(path) (\(error)); the totals of workers that are gone start again from zero, "
                    + "and the file is replaced at the next save", level: .warn)
        }
    }

    /// What bot `bot`'s workers that are gone left.
    func foldedTotals(for bot: String) -> [Entry] { bots[bot] ?? [] }

    /// The all-time histograms bot `bot`'s series had when the collector last stopped.
    func histograms(for bot: String) -> [HistogramEntry] { histograms[bot] ?? [] }

    /// Keeps the bots' all-time histograms now (those of bots not seen this run as they were),
    /// and saves the file: when the collector stops.
    func setHistograms(_ byBot: [String: [HistogramEntry]]) {
        var updated = histograms
        for (bot, entries) in byBot { updated[bot] = entries.isEmpty ? nil : entries }
        // Nothing to keep: no file for a collector of one-process bots.
        guard updated != histograms || histogramsUnsaved else { return }
        histograms = updated
        histogramsUnsaved = false
        save()
    }

    /// Keeps the all-time histograms of a bot with workers whose last file went (its series go
    /// with it): its series take them when a file of it comes again, and they are saved with the
    /// others when the collector stops.
    func keepHistograms(_ entries: [HistogramEntry], for bot: String) {
        let kept = entries.isEmpty ? nil : entries
        guard histograms[bot] != kept else { return }
        histograms[bot] = kept
        histogramsUnsaved = true
    }

    /// Keeps what `bot`'s gone workers left now, and saves the file.
    func setFoldedTotals(_ entries: [Entry], for bot: String) {
        guard bots[bot] ?? [] != entries else { return }
        bots[bot] = entries.isEmpty ? nil : entries
        save()
    }

    private func save() {
        guard let directory else { return }
        var failure: String?
        do {
            let body = try JSONEncoder().encode(Document(bots: bots, histograms: histograms.isEmpty ? nil : histograms))
            let temporary = try directory.createTemporary(for: Self.fileName)
            do { try System.writeAll(temporary.descriptor, [UInt8](body)) } catch {
                failure = "cannot write \(directory.path(of: temporary.name)): \(error)"
            }
            System.close(temporary.descriptor)
            if failure == nil {
                do { try directory.replace(Self.fileName, with: temporary.name) } catch { failure = "\(error)" }
            }
            if failure != nil { directory.remove(temporary.name) }
        } catch {
            failure = "\(error)"
        }
        if let failure, failure != lastError {
            log("cannot save the totals of workers that are gone: \(failure); a restart would lose them", level: .error)
        }
        if failure == nil, lastError != nil { log("the totals of workers that are gone are saved again") }
        lastError = failure
    }
}
