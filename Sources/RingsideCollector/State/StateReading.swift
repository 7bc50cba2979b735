#if canImport(Glibc)
import Glibc
#endif
import Ringside
import RingsideAggregation

/// The state's files in a directory read as the collector reads them at start (`StateFiles.load`,
/// no bot expiring), and what was read written back as a snapshot as the saver writes it
/// (`StateSnapshotWriter`): for the state's fuzz target (Tests/RingsideFuzzTargets), which has
/// only files, and checks that the collector reads back whatever it writes.
package struct StateReading {
    let content: StateContent
    /// Files that could not be read, by name, and why.
    package let unreadable: [String: String]
    /// The generation the next journal would take.
    package let nextGeneration: UInt64

    /// Series of folded figures and all-time histograms read.
    package var series: Int { content.bots.values.reduce(0) { $0 + $1.count } }
    package var histograms: Int { content.histograms.values.reduce(0) { $0 + $1.count } }

    /// Every all-time histogram read, its values from 0 and (a signed series') below 0, as a bot's
    /// series are given them (`BotAggregator.seedHistograms`).
    package var persistedHistograms: [(histogram: PersistedHistogram, negative: PersistedHistogram?)] {
        content.histograms.values.flatMap { $0.map { ($0.histogram, $0.negative) } }
    }

    /// Reads the state files in `directory` (each within `limit` bytes).
    /// - Throws: why the directory cannot be read at all, in words.
    package init(directory: String, limit: Int) throws(StateReadingError) {
        let opened: LogDirectory
        do { opened = try LogDirectory(path: directory) } catch { throw StateReadingError(description: "\(error)") }
        let loaded = StateFiles.load(
            from: opened, rings: RingDirectory(directory), limit: limit, expirySeconds: nil, nowSeconds: UInt64(time(nil)))
        content = loaded.content
        unreadable = loaded.unreadable
        nextGeneration = loaded.nextGeneration
    }

    /// What a snapshot written holds: its bytes, and whether it left anything out for room.
    package struct WrittenSnapshot {
        package let bytes: Int
        /// Whether the bots' figures fit within the bound (nothing was written when they did not).
        package let fits: Bool
        /// All-time histograms left out for room.
        package let shed: Int
    }

    /// Writes what was read as the snapshot `name` of `generation` in `directory`, as the saver
    /// does, within `limit` bytes.
    package func writeSnapshot(directory: String, name: String, generation: UInt64, limit: Int) throws(StateReadingError) -> WrittenSnapshot
    {
        let opened: LogDirectory
        let descriptor: Int32
        do {
            opened = try LogDirectory(path: directory)
            descriptor = try opened.create(name, access: O_WRONLY | O_TRUNC)
        } catch {
            throw StateReadingError(description: "\(error)")
        }
        defer { close(descriptor) }
        var writer = StateSnapshotWriter(descriptor: descriptor, limit: limit)
        do { try writer.write(content, generation: generation, present: []) } catch {
            throw StateReadingError(description: "cannot write \(opened.path(of: name)): \(error)")
        }
        return WrittenSnapshot(bytes: writer.bytes, fits: writer.written.fits, shed: writer.written.shed)
    }

    /// Whether `other` holds the same figures, histograms and dates.
    package func holdsTheSame(as other: StateReading) -> Bool { content == other.content }
}

/// Why a state directory cannot be read or written, in words.
package struct StateReadingError: Error, Equatable, CustomStringConvertible {
    package let description: String
}
