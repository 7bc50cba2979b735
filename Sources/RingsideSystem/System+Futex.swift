#if canImport(Glibc)
import Glibc
#endif
import CRingsideSystem

extension System {
    /// One word a `futexWait` sleeps on: its address, the value it must still hold for the sleep
    /// to begin, and whether other processes share it (a word in a mapped file).
    package struct FutexWord: Sendable, Equatable {
        package var address: UInt64
        package var expected: UInt32
        package var shared: Bool

        package init(address: UInt64, expected: UInt32, shared: Bool) {
            self.address = address
            self.expected = expected
            self.shared = shared
        }
    }

    /// How a `futexWait` ended.
    package enum FutexWake: Equatable, Sendable {
        /// The word at this index was woken.
        case woken(Int)
        /// A word no longer held its expected value: nothing to wait for.
        case changed
        /// The deadline passed, or a signal came.
        case timedOut
        /// It could not wait (a word not mapped, too many words, a kernel before 5.16).
        case failed(Errno)
    }

    /// The most words one `futexWait` takes (the kernel's `FUTEX_WAITV_MAX`).
    package static let futexWaitMaxWords = 128

    /// Sleeps until one of `words` (1 to `futexWaitMaxWords`) is woken, or `deadlineNanos`
    /// (CLOCK_MONOTONIC; nil: none) passes; not at all if a word no longer holds its expected
    /// value. The corresponding system call is `futex_waitv`.
    package static func futexWait(_ words: [FutexWord], deadlineNanos: UInt64?) -> FutexWake {
        let addresses = words.map(\.address)
        let expected = words.map(\.expected)
        let shared = words.map { UInt8($0.shared ? 1 : 0) }
        let result = rss_futex_waitv(addresses, expected, shared, UInt32(words.count), deadlineNanos ?? 0)
        switch result {
        case 0...: return .woken(Int(result))
        case -EAGAIN: return .changed
        case -ETIMEDOUT, -EINTR: return .timedOut
        default: return .failed(Errno(rawValue: -result))
        }
    }

    /// Wakes every thread sleeping on `word` (of this process only unless `shared`). The
    /// corresponding system call is `futex` (`FUTEX_WAKE`).
    package static func futexWake(_ word: UnsafeMutablePointer<UInt32>, shared: Bool) {
        _ = rss_futex_wake(word, shared ? 1 : 0)
    }

    /// Puts a full memory barrier on every running thread of every process registered for it
    /// (the producers that ring a doorbell: DOORBELL in ringside.h). The corresponding system call
    /// is `membarrier` (`MEMBARRIER_CMD_GLOBAL_EXPEDITED`).
    package static func globalBarrier() throws(Errno) {
        let result = rss_global_barrier()
        if result != 0 { throw Errno(rawValue: result) }
    }
}

/// A futex word of this process's own (a private futex), allocated once, for a thread that sleeps
/// in `System.futexWait` on it among others and is woken by a store and `wake`.
package final class FutexWordOfOurOwn: Sendable {
    // The kernel and the atomic store and load touch the word, never Swift's plain accesses.
    nonisolated(unsafe) private let word: UnsafeMutablePointer<UInt32>

    package init() {
        word = .allocate(capacity: 1)
        word.initialize(to: 0)
    }

    deinit { word.deallocate() }

    package var address: UInt64 { UInt64(UInt(bitPattern: word)) }
    package func store(_ value: UInt32) { rss_word_store(word, value) }
    package func load() -> UInt32 { rss_word_load(word) }
    /// Wakes the threads sleeping on the word.
    package func wake() { System.futexWake(word, shared: false) }
}
