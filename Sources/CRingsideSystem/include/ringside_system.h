/*
 * ringside_system.h: the system calls RingsideSystem needs that Swift cannot make itself.
 *
 * This module exists for one reason: Swift's Glibc module leaves out what glibc declares only as
 * a variadic function (syscall), not at all (sched_setattr, before glibc 2.41), or in a header
 * the module does not take (malloc.h). Each function here makes one such call and returns 0 or
 * an errno, never -1 with errno set. Nothing else belongs here: every other call is Swift's, in
 * RingsideSystem.
 */
#ifndef RINGSIDE_SYSTEM_H
#define RINGSIDE_SYSTEM_H

#include <stdint.h>
#include <poll.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Asks the scheduler for a time slice of `nanoseconds` for the calling thread, keeping its
 * policy (SCHED_OTHER) and nice value: EEVDF (Linux 6.12 and later) lets a waking thread whose
 * slice is shorter than the running one's take the CPU at once, instead of waiting for that
 * one's slice to end, or the next tick. The kernel keeps it within 0.1 ms and 100 ms; 0 asks
 * for the default again. Needs no privilege. Returns 0, or the errno of `sched_setattr`.
 */
int rss_set_thread_slice(uint64_t nanoseconds);

/**
 * The calling thread's slice as the kernel keeps it (`sched_getattr`'s `sched_runtime`; 0: the
 * default), in `*nanoseconds`. Returns 0, or the errno.
 */
int rss_thread_slice(uint64_t *nanoseconds);

/**
 * Gives the kernel back the heap's whole free pages, in every arena (`malloc_trim(0)`).
 * Returns 1 when some memory was given back, else 0 (as `malloc_trim`; it sets no errno).
 */
int rss_trim_heap(void);

/**
 * Has malloc map every block of `bytes` or more on its own (`mallopt(M_MMAP_THRESHOLD, bytes)`,
 * which also stops it raising that threshold as large blocks are freed). Returns 0, or EINVAL
 * when malloc refused the value.
 */
int rss_map_blocks_on_their_own(int bytes);

/**
 * membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED): before it returns, every running thread of every
 * process registered for it passes a full memory barrier (a thread not running passed one when it
 * was switched out). The doorbell's announcement (DOORBELL in ringside.h). Returns 0, or the errno.
 */
int rss_global_barrier(void);

/**
 * futex_waitv over `count` words (1 to 128): sleeps, if each word still holds its `expected`
 * value, until one is woken or `deadline_ns` (CLOCK_MONOTONIC; 0: none) passes. `shared[i]` 0: a
 * word of this process only (a private futex). Returns the index of the word woken, or -errno:
 * -EAGAIN (a word did not hold its value), -ETIMEDOUT, -EINTR, -EFAULT (a word not mapped),
 * -ENOSYS (a kernel before 5.16).
 */
int rss_futex_waitv(const uint64_t *addresses, const uint32_t *expected, const uint8_t *shared, uint32_t count,
                    uint64_t deadline_ns);

/** A futex word's store and load (release, acquire): Swift has no atomics on a pointer's word. */
static inline void rss_word_store(uint32_t *word, uint32_t value) { __atomic_store_n(word, value, __ATOMIC_RELEASE); }
static inline uint32_t rss_word_load(const uint32_t *word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

/** FUTEX_WAKE of every waiter on `word` (`shared` 0: a private futex). Returns the waiters woken,
    or -errno. */
int rss_futex_wake(uint32_t *word, int shared);

/**
 * poll with a timeout to the nanosecond (`timeout_ns` UINT64_MAX: none), through ppoll (Glibc's
 * Swift module lacks it). Returns the descriptors ready, or -errno (-EINTR: a signal came).
 */
int rss_poll_ns(struct pollfd *fds, uint32_t count, uint64_t timeout_ns);

#ifdef __cplusplus
}
#endif

#endif /* RINGSIDE_SYSTEM_H */
