#if canImport(Glibc)
import Glibc
#endif
import RingsideSystem

/// One `/proc` file of another process or thread, read whole at each look: through a descriptor
/// kept open between looks, or opened for the look when no more may be kept.
///
/// A kept descriptor is read with `pread` at offset 0, and the kernel writes the text afresh for
/// the task it was opened on: it costs a fifth of an open, read and close, and a thread or
/// process that exits reads as gone from then on (`ESRCH`), even once its id is reused.
struct ProcFile {
    let path: String
    private(set) var descriptor: Int32 = -1

    var isKept: Bool { descriptor >= 0 }

    init(_ path: String) { self.path = path }

    enum Outcome: Equatable {
        /// The file's bytes, at the start of the buffer.
        case read(Int)
        /// The task exited (or never was): ENOENT, ESRCH.
        case gone
        /// It could not be read (EACCES, a file larger than the buffer, ...): what, for people.
        case failed(String)
    }

    /// Reads the file into `buffer`; with `keep`, its descriptor stays open for the next look,
    /// else it is closed after this one (one kept before is given back).
    mutating func read(into buffer: UnsafeMutableRawBufferPointer, keep: Bool) -> Outcome {
        if descriptor < 0 {
            do { descriptor = try System.open(path, O_RDONLY | O_CLOEXEC) } catch { return Self.outcome(of: error) }
        }
        let outcome = Self.read(descriptor, into: buffer, path: path)
        if !keep || outcome == .gone { close() }  // a thread gone is gone for good: its descriptor is of no more use
        return outcome
    }

    mutating func close() {
        guard descriptor >= 0 else { return }
        System.close(descriptor)
        descriptor = -1
    }

    private static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String) -> Outcome {
        let count: Int
        do { count = try System.pread(fd, into: buffer, at: 0) } catch { return outcome(of: error) }
        // A full buffer may be a cut: the texts read here are a few hundred bytes to 1.5 KB.
        guard count < buffer.count else { return .failed("\(path): longer than \(buffer.count) bytes") }
        return .read(count)
    }

    private static func outcome(of error: Errno) -> Outcome {
        error == .noSuchFileOrDirectory || error == .noSuchProcess ? .gone : .failed("\(error)")
    }
}

/// How many descriptors a process has open: the size the kernel gives its `/proc/PID/fd`
/// (Linux 6.2 and later: one `fstat` of a kept descriptor, whatever the count), else its entries
/// counted. Nil when they may not be counted: another user's process, or one gone.
struct OpenDescriptorCount {
    let path: String
    private(set) var descriptor: Int32 = -1

    var isKept: Bool { descriptor >= 0 }

    init(pid: Int32) { path = "/proc/\(pid)/fd" }

    mutating func count(keep: Bool) -> Int? {
        if descriptor < 0 {
            guard let opened = try? System.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) else { return nil }
            if !keep {
                defer { System.close(opened) }
                return Self.count(opened, path: path)
            }
            descriptor = opened
        }
        return Self.count(descriptor, path: path)
    }

    mutating func close() {
        guard descriptor >= 0 else { return }
        System.close(descriptor)
        descriptor = -1
    }

    private static func count(_ fd: Int32, path: String) -> Int? {
        guard let info = try? System.fstat(fd) else { return nil }
        // Older kernels say 0 here; a process holding a ring has its file open, so 0 is never a count.
        if info.st_size > 0 { return Int(info.st_size) }
        return (try? System.directoryEntries(path)).map { names in names.count { Int32($0) != nil } }
    }
}
