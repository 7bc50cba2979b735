#if canImport(Glibc)
import Glibc
#endif
import RingsideSystem

/// The journal the drain thread appends each fold to (see `StateFiles`): one `write` of one line
/// a fold, whatever the state holds besides, so a fold's cost does not grow with history.
///
/// The line is in the kernel once `write` returns, so a collector killed after it loses nothing;
/// no `fsync`: the rings themselves live in memory (`/dev/shm`), and a machine that goes down
/// takes them along. A line that could not be written whole is cut off again (`ftruncate`), so
/// the next one starts on a line of its own; a journal that cannot even be cut is given up.
///
/// Touched by the drain thread only.
final class StateJournal {
    let name: String
    let generation: UInt64
    private var descriptor: Int32
    /// Bytes written whole: where the next line starts.
    private(set) var bytes: Int
    /// Lines written after the header.
    private(set) var folds = 0

    /// Creates a new journal of `generation` in `directory`, its header line written.
    init(in directory: LogDirectory, generation: UInt64) throws(LogDirectoryError) {
        let name = StateFiles.randomName(suffix: StateFiles.journalSuffix)
        self.name = name
        self.generation = generation
        descriptor = try directory.create(name)
        bytes = 0
        do { try append(Self.header(generation: generation), path: directory.path(of: name)) } catch {
            System.close(descriptor)
            directory.remove(name)
            throw error
        }
        folds = 0  // the header is none
    }

    /// A journal's first line: `{"journal":GENERATION}`.
    static func header(generation: UInt64) -> [UInt8] { Array("{\"journal\":\(generation)}\n".utf8) }

    /// What the first line of a journal of `generation` takes.
    static func headerBytes(generation: UInt64) -> Int { header(generation: generation).count }

    deinit { close() }

    /// Whether it was given up (a line could not be cut off again).
    var isBroken: Bool { descriptor < 0 }

    /// Appends `line` (ending in a newline).
    /// - Throws: ``LogDirectoryError/failed(action:errno:)`` when it cannot be written whole (a
    ///   full disk): what was written of it is cut off again.
    func append(_ line: [UInt8], path: String) throws(LogDirectoryError) {
        guard descriptor >= 0 else {
            throw .failed(action: "write \(path): it was given up after a failed write", errno: Errno(rawValue: EBADF))
        }
        do { try System.writeAll(descriptor, line) } catch {
            do { try System.ftruncate(descriptor, bytes) } catch { close() }  // a torn line would spoil the next
            throw .failed(action: "write \(path)", errno: error)
        }
        bytes += line.count
        folds += 1
    }

    /// Closes it: it stays in the directory until a snapshot supersedes it.
    func close() {
        guard descriptor >= 0 else { return }
        System.close(descriptor)
        descriptor = -1
    }
}
