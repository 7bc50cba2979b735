/* The calls ringside_system.h declares: see there why they are C. */
#define _GNU_SOURCE
#include "ringside_system.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <malloc.h>
#include <poll.h>
#include <time.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__linux__)

/* The kernel's struct sched_attr, as of its first version (48 bytes; later fields are optional,
   sized by `size`). Declared here: glibc 2.41's <sched.h> and <linux/sched/types.h> both define it. */
struct rss_sched_attr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
};

static int rss_get_attr(struct rss_sched_attr *attr) {
    memset(attr, 0, sizeof *attr);
    if (syscall(SYS_sched_getattr, 0, attr, (unsigned)sizeof *attr, 0u) != 0) return errno;
    return 0;
}

int rss_set_thread_slice(uint64_t nanoseconds) {
    struct rss_sched_attr attr;
    int result = rss_get_attr(&attr);
    if (result != 0) return result;
    attr.size = sizeof attr;
    attr.sched_flags = 0;
    attr.sched_runtime = nanoseconds; /* a fair task's slice (EEVDF); its policy and nice kept */
    if (syscall(SYS_sched_setattr, 0, &attr, 0u) != 0) return errno;
    return 0;
}

int rss_global_barrier(void) {
    return syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0 ? 0 : errno;
}

int rss_futex_waitv(const uint64_t *addresses, const uint32_t *expected, const uint8_t *shared, uint32_t count,
                    uint64_t deadline_ns) {
    if (count == 0 || count > FUTEX_WAITV_MAX) return -EINVAL;
    struct futex_waitv waits[FUTEX_WAITV_MAX];
    memset(waits, 0, sizeof waits);
    for (uint32_t i = 0; i < count; i++) {
        waits[i].val = expected[i];
        waits[i].uaddr = addresses[i];
        waits[i].flags = FUTEX_32 | (shared[i] ? 0 : FUTEX_PRIVATE_FLAG);
    }
    struct timespec deadline = {(time_t)(deadline_ns / 1000000000u), (long)(deadline_ns % 1000000000u)};
    long woken = syscall(SYS_futex_waitv, waits, count, 0u, deadline_ns != 0 ? &deadline : NULL, CLOCK_MONOTONIC);
    return woken >= 0 ? (int)woken : -errno;
}

int rss_futex_wake(uint32_t *word, int shared) {
    long woken = syscall(SYS_futex, word, shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    return woken >= 0 ? (int)woken : -errno;
}

int rss_thread_slice(uint64_t *nanoseconds) {
    struct rss_sched_attr attr;
    int result = rss_get_attr(&attr);
    if (result != 0) return result;
    *nanoseconds = attr.sched_runtime;
    return 0;
}

#else

int rss_set_thread_slice(uint64_t nanoseconds) {
    (void)nanoseconds;
    return ENOSYS;
}

int rss_thread_slice(uint64_t *nanoseconds) {
    *nanoseconds = 0;
    return ENOSYS;
}

int rss_global_barrier(void) { return ENOSYS; }

int rss_futex_waitv(const uint64_t *addresses, const uint32_t *expected, const uint8_t *shared, uint32_t count,
                    uint64_t deadline_ns) {
    (void)addresses, (void)expected, (void)shared, (void)count, (void)deadline_ns;
    return -ENOSYS;
}

int rss_futex_wake(uint32_t *word, int shared) {
    (void)word, (void)shared;
    return -ENOSYS;
}

#endif

int rss_poll_ns(struct pollfd *fds, uint32_t count, uint64_t timeout_ns) {
    struct timespec timeout = {(time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u)};
    int ready = ppoll(fds, count, timeout_ns == UINT64_MAX ? NULL : &timeout, NULL);
    return ready >= 0 ? ready : -errno;
}

int rss_trim_heap(void) { return malloc_trim(0); }

int rss_map_blocks_on_their_own(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes) == 1 ? 0 : EINVAL; }
