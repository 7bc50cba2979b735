#if canImport(Glibc)
import Glibc
#endif

/// A value that threads share behind a lock: `withLock` runs its body with the value while no
/// other thread does. The lock is a `pthread_mutex_t`, which ThreadSanitizer sees (it intercepts
/// the pthread calls): the standard library's `Mutex` waits on a futex of its own in code TSan
/// does not see, so every access it guards looked like a race, and a real one would hide among
/// them. The one lock of the package's Swift code (`HouseRulesTests`).
///
/// The lock lives in memory of its own (a `pthread_mutex_t` must not move), made with the value
/// and freed with it. Safe from any thread.
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is touched only under `mutex`.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the value, under the lock; what it returns or throws is this call's.
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
