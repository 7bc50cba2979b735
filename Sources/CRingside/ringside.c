// What the format needs beyond inline code: a writer's view wired to its lane, a write's slow path
// (adaptive sampling: SAMPLING AND GATHERING in ringside.h), and the locks (fcntl is variadic, which Swift
// cannot call, so the OFD locks live here).
#define _GNU_SOURCE
#include "ringside.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

/* Whether the file's consumer reads gather cells: it stored its pid in both fields. */
static int rs_consumer_reads_weights(const rs_header *h) {
    /* Relaxed: two pids a consumer stores once; one seen without the other only means "not yet". */
    int32_t pid = rs_load_relaxed_i32(&h->consumer_pid);
    return pid != 0 && rs_load_relaxed_i32(&h->weights_reader_pid) == pid;
}

/**
 * Keeps the consumer's cursor `read` for the fast path, whose one test is whether the lane looks
 * full by it: as read when the lane never samples (or its consumer does not read gather cells);
 * while it samples, set back so that the test fails at every call; otherwise set back so that it
 * fails at the lane's next look: at `above`, then every 1/64 of the lane and at capacity - R.
 * Never later than `read` itself: the fast path must not pass the real room.
 */
static void rs_producer_keep_read(rs_producer *p, uint64_t read) {
    const rs_sampling *s = p->sampling;
    uint64_t capacity = p->mask + 1;
    if (s == NULL || !s->weighs) {
        p->cached_read = read;
        return;
    }
    if (s->level > 0) {
        p->cached_read = p->next - capacity;
        return;
    }
    uint64_t fill = p->next - read; /* modulo 2^64, as every cursor difference */
    uint64_t until; /* records until the next look */
    if (fill > capacity) {
        until = 0; /* a cursor no consumer could have stored: look at every call */
    } else if (fill < s->above) {
        until = s->above - fill;
    } else {
        uint64_t start = capacity - s->reserve;
        until = capacity >> RS_LOOK_FRACTION_LOG2;
        if (fill < start && start - fill < until) until = start - fill;
        if (until > capacity - fill) until = capacity - fill;
    }
    p->cached_read = p->next + until - capacity;
}

void rs_producer_init(rs_producer *p, rs_lane_header *lane, uint32_t lane_gather_offset, uint32_t lane_records_offset,
                      uint32_t capacity_log2, rs_metric_cell *shared, uint32_t *sample_countdown,
                      const uint32_t *sample_every, rs_sampling *sampling, uint32_t *doorbell) {
    /* A word no one sets: a process that does not ring pays the same load, never a ring. */
    static uint32_t never_rung = 0;
    char *base = (char *)lane;
    p->records = (rs_record *)(base + lane_records_offset);
    p->write_cursor = &lane->write_cursor;
    p->read_cursor = &lane->read_cursor;
    p->dropped_total = &lane->dropped_total;
    p->heartbeat_ns = &lane->heartbeat_ns;
    p->cell_writes = &lane->cell_writes;
    p->cells = (uint64_t *)(base + RS_LANE_HEADER_SIZE); /* the lane's cells follow its header */
    p->gather = (rs_gather_cell *)(base + lane_gather_offset);
    p->shared = shared;
    p->mask = ((uint64_t)1 << capacity_log2) - 1;
    /* Relaxed: only the attached process writes the cursor, and the lane's last writer released
       it under the bot's mutex (or was another process, gone before we took the lock). */
    p->next = rs_load_relaxed_u64(&lane->write_cursor);
    p->sample_countdown = sample_countdown;
    p->sample_every = sample_every;
    p->sampling = sampling;
    p->doorbell = doorbell != NULL ? doorbell : &never_rung;
    if (sampling != NULL) {
        sampling->level = 0;
        sampling->look_ns = 0;
        sampling->weighs = 1; /* until a look says otherwise: the first one comes at `above` */
    }
    /* Acquire: the consumer finished with the slots below its cursor before storing it. */
    rs_producer_keep_read(p, rs_load_acquire_u64(&lane->read_cursor));
}

/* MARK: - The doorbell (DOORBELL in ringside.h) */

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

void rs_producer_ring(rs_producer *p) {
    /* Of the threads that find the word set, the one that takes the 1 makes the call. */
    if (__atomic_exchange_n(p->doorbell, 0u, __ATOMIC_RELAXED) == 0) return;
    /* Not private: the consumer waits on the file's page. A wake never waits, and its error (a
       word no one waits on any longer) changes nothing. */
    (void)syscall(SYS_futex, p->doorbell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* MARK: - Sampling (SAMPLING in ringside.h) */

/** Forgets every metric's calls since its last record: they are counted in the gather cells, and
    the next record of each carries no weight. */
static void rs_sampling_reset(rs_sampling *s) {
    if (s->open > 0) memset(s->calls, 0, (size_t)s->open_below * sizeof *s->calls);
    s->open = 0;
    s->open_below = 0;
}

/** Measures R (CLOCK_MONOTONIC): what the lane gained over the last whole drain interval of its
    consumer, or since the last interval began if that is more; at least 1/64 of the lane, at most
    1/32 of the lane (16 records at the least, and the room above `above` at the most). Over a whole interval, a thread that shares its core and a consumer's
    drains both show, as they would not over the few microseconds between two looks. */
static void rs_sampling_measure(rs_sampling *s, uint64_t fill, uint64_t capacity) {
    uint64_t now = rs_clock_precise_ns();
    uint64_t least = capacity >> RS_LOOK_FRACTION_LOG2, most = capacity >> RS_RESERVE_FRACTION_LOG2;
    if (least < RS_RESERVE_MIN) least = RS_RESERVE_MIN; /* two records a level, in the smallest lanes */
    if (most < RS_RESERVE_MIN) most = RS_RESERVE_MIN;
    if (most > capacity - s->above) most = capacity - s->above;
    if (least > most) least = most;
    if (s->look_ns == 0 || now < s->look_ns) {
        s->look_fill = fill;
        s->look_ns = now;
        s->interval_gain = 0;
    }
    /* Relaxed: a figure the consumer sets at attach; any value it stored serves. */
    uint64_t interval = rs_load_relaxed_u64(&s->header->drain_interval_ns);
    if (interval == 0) interval = RS_DEFAULT_DRAIN_INTERVAL_NS;
    uint64_t gain = fill > s->look_fill ? fill - s->look_fill : 0, elapsed = now - s->look_ns;
    if (elapsed >= interval) {
        /* A whole interval (or more, while the lane was below `above` or the thread idle): its gain. */
        s->interval_gain = (uint64_t)((double)gain * (double)interval / (double)elapsed);
        s->look_fill = fill;
        s->look_ns = now;
        gain = 0;
    }
    uint64_t reserve = gain > s->interval_gain ? gain : s->interval_gain;
    s->reserve = reserve > most ? most : reserve < least ? least : reserve;
    s->step_log2 = 0;
    while ((s->reserve / 8) >> (s->step_log2 + 1)) s->step_log2++; /* an eighth, as a power of two */
}

/** L for a lane holding `fill` records. */
static uint32_t rs_sampling_level(const rs_sampling *s, uint64_t fill, uint64_t capacity) {
    uint64_t start = capacity - s->reserve;
    if (fill < start) return 0;
    if (fill >= capacity) return RS_WEIGHT_LOG2_MAX; /* full: a call written now could only be dropped */
    uint64_t level = 1 + ((fill - start) >> s->step_log2);
    return level < RS_WEIGHT_LOG2_MAX ? (uint32_t)level : RS_WEIGHT_LOG2_MAX;
}

/** Sets the lane's level from the consumer's cursor `read`, as the consumer's word allows (read
    at each look at level 0): past `above`, such a look measures R again. */
static void rs_sampling_look(rs_producer *p, rs_sampling *s, uint64_t read) {
    uint64_t capacity = p->mask + 1, fill = p->next - read;
    if (s->level > 0 && fill <= capacity && fill >= capacity - s->reserve) {
        /* Sampling still: the level follows the fill; the consumer's word was read as it began. */
        s->level = rs_sampling_level(s, fill, capacity);
        return;
    }
    s->weighs = rs_consumer_reads_weights(s->header);
    uint32_t level = 0;
    if (!s->weighs || fill > capacity) {
        s->look_ns = 0;
    } else if (fill < s->above) {
        s->look_ns = 0; /* the next rate is measured from the next look past `above` */
    } else {
        if (s->level == 0) rs_sampling_measure(s, fill, capacity);
        level = rs_sampling_level(s, fill, capacity);
    }
    if (level == 0 && s->open > 0) rs_sampling_reset(s);
    s->level = level;
}

/** Whether the call that makes its metric's calls `calls` is written at level `level`. */
static int rs_sampling_writes(uint32_t calls, uint32_t level) {
    return calls >= (UINT32_C(1) << level) && (calls & (calls - 1)) == 0;
}

/** Gathers a call (see SAMPLING): counted in its metric's gather cell, no record written. */
static int rs_sampling_gather(rs_producer *p, rs_sampling *s, uint32_t metric, uint64_t value) {
    if (s->calls[metric]++ == 0) {
        s->open++;
        if (metric >= s->open_below) s->open_below = metric + 1;
    }
    rs_gather_cell *cell = &p->gather[metric];
    /* Only this lane's holder writes these (but `max`, which the consumer takes): relaxed loads
       and stores are exact. */
    rs_store_relaxed_u64(&cell->sum, rs_load_relaxed_u64(&cell->sum) + value);
    rs_store_relaxed_u64(&cell->latest, value);
    rs_raise_relaxed_u64(&cell->max, value);
    /* Release: a reader that sees the count (acquire) sees the value stored before it. */
    rs_store_release_u64(&cell->calls, rs_load_relaxed_u64(&cell->calls) + 1);
    uint64_t *gathered = &((rs_lane_header *)(void *)p->write_cursor)->gathered; /* the cursor opens the lane's header */
    rs_store_release_u64(gathered, rs_load_relaxed_u64(gathered) + 1);
    return 0;
}

/** Counts a record of `metric` dropped from the lane, with a histogram's value (the holder's own fields). */
static int rs_producer_drop(rs_producer *p, uint32_t metric, uint8_t kind, uint64_t value) {
    /* Only this lane's owner writes these, so a relaxed load and store is exact. */
    rs_store_relaxed_u64(p->dropped_total, rs_load_relaxed_u64(p->dropped_total) + 1);
    rs_store_relaxed_u64(&p->cells[metric], rs_load_relaxed_u64(&p->cells[metric]) + 1);
    if (kind == RS_KIND_HISTOGRAM) {
        rs_gather_cell *cell = &p->gather[metric];
        rs_store_relaxed_u64(&cell->dropped_sum, rs_load_relaxed_u64(&cell->dropped_sum) + value);
        if (value > rs_load_relaxed_u64(&cell->dropped_max)) rs_store_relaxed_u64(&cell->dropped_max, value);
    }
    return 0;
}

/** The slow path past its common case (ringside.h's rs_producer_write_slow): a look at the lane,
    then a call sampled, written, or dropped. */
static __attribute__((noinline)) int rs_producer_write_looked(rs_producer *p, uint32_t metric, uint8_t kind, uint8_t flags,
                                                             uint64_t value, uint64_t timestamp_ns, const char *exemplar,
                                                             uint32_t length, uint64_t read) {
    rs_sampling *s = p->sampling;
    if (s != NULL) rs_sampling_look(p, s, read);
    uint32_t k = 0;
    if (s != NULL && kind == RS_KIND_HISTOGRAM && s->level > 0) {
        uint32_t calls = s->calls[metric] + 1;
        if (!rs_sampling_writes(calls, s->level)) {
            rs_sampling_gather(p, s, metric, value);
            rs_producer_keep_read(p, read);
            return 0;
        }
        k = 31u - (uint32_t)__builtin_clz(calls);
        if (calls > 1) {
            s->calls[metric] = 0;
            s->open--;
        }
    }
    uint64_t extra = exemplar != NULL ? rs_exemplar_records(length) : 0;
    uint64_t cursor = p->next;
    int written = cursor + extra - read <= p->mask;
    if (timestamp_ns == RS_TIMESTAMP_NOW) timestamp_ns = rs_clock_coarse_ns();
    if (written) {
        uint8_t weighted = (uint8_t)(flags | (exemplar != NULL ? RS_FLAG_EXEMPLAR : 0) | k << RS_FLAG_WEIGHT_SHIFT);
        rs_producer_fill(&p->records[cursor & p->mask], cursor, metric, kind, weighted, value, timestamp_ns,
                         (uint16_t)(exemplar != NULL ? length : 0));
        if (exemplar != NULL) rs_producer_fill_exemplar(p, cursor, metric, exemplar, length);
        p->next = cursor + 1 + extra;
        /* Release: the records' bytes are visible before the cursor that publishes them. */
        rs_store_release_u64(p->write_cursor, cursor + 1 + extra);
        rs_store_relaxed_u64(p->heartbeat_ns, timestamp_ns);
        rs_producer_check_doorbell(p);
    } else {
        rs_producer_drop(p, metric, kind, value);
    }
    rs_producer_keep_read(p, read);
    return written;
}

int rs_producer_write_slow(rs_producer *p, uint32_t metric, uint8_t kind, uint8_t flags, uint64_t value,
                           uint64_t timestamp_ns, const char *exemplar, uint32_t length) {
    /* Acquire: the consumer finished reading the slots below its cursor before storing it. Every
       call past the fast path reads it (the consumer's lines change once a drain, so the loads
       mostly hit the cache): while sampling, the level follows the fill call by call. */
    uint64_t read = rs_load_acquire_u64(p->read_cursor);
    rs_sampling *s = p->sampling;
    /* The sampled path's common case, kept small: a histogram's call gathered in a lane that stays
       in its sampling band (the rest, and every write, take the general path). */
    if (s != NULL && s->level > 0 && kind == RS_KIND_HISTOGRAM) {
        uint64_t capacity = p->mask + 1, fill = p->next - read;
        if (fill <= capacity && fill >= capacity - s->reserve) {
            uint32_t level = rs_sampling_level(s, fill, capacity);
            if (!rs_sampling_writes(s->calls[metric] + 1, level)) {
                s->level = level;
                return rs_sampling_gather(p, s, metric, value); /* the kept cursor stays: every call looks */
            }
        }
    }
    return rs_producer_write_looked(p, metric, kind, flags, value, timestamp_ns, exemplar, length, read);
}

int rs_producer_write_sampled_at(rs_producer *p, uint32_t metric, uint8_t flags, uint64_t value, uint64_t timestamp_ns,
                                 uint32_t level) {
    rs_sampling *s = p->sampling;
    if (timestamp_ns == RS_TIMESTAMP_NOW) timestamp_ns = rs_clock_coarse_ns();
    if (level == 0 || s == NULL || p->records == NULL || !rs_consumer_reads_weights(s->header)) {
        return rs_producer_write_at(p, metric, RS_KIND_HISTOGRAM, flags, value, timestamp_ns);
    }
    if (level > RS_WEIGHT_LOG2_MAX) level = RS_WEIGHT_LOG2_MAX;
    /* The metric's calls on this lane since its last record, as adaptive sampling counts them (no
       look at the lane here: at its level 0 a look would start every metric's count again). */
    uint32_t calls = s->calls[metric] + 1;
    if (!rs_sampling_writes(calls, level)) return rs_sampling_gather(p, s, metric, value);
    uint32_t k = 31u - (uint32_t)__builtin_clz(calls);
    if (calls > 1) {
        s->calls[metric] = 0;
        s->open--;
    }
    return rs_producer_write_at(p, metric, RS_KIND_HISTOGRAM, (uint8_t)(flags | k << RS_FLAG_WEIGHT_SHIFT), value, timestamp_ns);
}

void rs_producer_end_sampling(rs_producer *p) {
    rs_sampling *s = p->sampling;
    if (s == NULL) return;
    rs_sampling_reset(s);
    s->level = 0;
    s->look_ns = 0;
}

/* MARK: - Locks */

static void rs_byte_range(struct flock *lock, short type, int byte) {
    memset(lock, 0, sizeof *lock);
    lock->l_type = type;
    lock->l_whence = SEEK_SET;
    lock->l_start = byte;
    lock->l_len = 1;
    lock->l_pid = 0; /* required by F_OFD_* */
}

int rs_lock_byte(int fd, int byte) {
    struct flock lock;
    rs_byte_range(&lock, F_WRLCK, byte);
    return fcntl(fd, F_OFD_SETLK, &lock) == 0 ? 0 : errno;
}

int rs_lock_byte_is_held(int fd, int byte) {
    struct flock lock;
    rs_byte_range(&lock, F_WRLCK, byte);
    if (fcntl(fd, F_OFD_GETLK, &lock) != 0) return -errno;
    return lock.l_type == F_UNLCK ? 0 : 1;
}

// MARK: - The SIGBUS guard (see ringside.h)

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

enum { RS_SLOT_FREE = 0, RS_SLOT_CLAIMED = 1, RS_SLOT_ACTIVE = 2 };

typedef struct {
    int state;       // RS_SLOT_*: base and size are meaningful while ACTIVE
    int truncated;   // set by the handler, read by the mapping's owner
    uintptr_t base;
    size_t size;
} rs_guard_slot;

// The table, a chunk at a time: a chunk's pointer is published once (release) and never changes
// again, so the handler walks the chunks without a lock.
static rs_guard_slot *rs_guard_chunks[RS_GUARD_CHUNKS];
static pthread_mutex_t rs_guard_grow_lock = PTHREAD_MUTEX_INITIALIZER;
static int rs_guard_high_water;          // slots below it may be active: the handler scans no further
static int rs_guard_free_hint;           // no free slot lies below it, as far as registrations know
static uint64_t rs_guard_faults;
static uintptr_t rs_guard_page_size;
static struct sigaction rs_guard_previous; // the SIGBUS disposition before ours
static pthread_once_t rs_guard_once = PTHREAD_ONCE_INIT;
static int rs_guard_installed;

/** Slot `index`, or NULL when its chunk is not mapped yet. */
static rs_guard_slot *rs_guard_slot_at(int index) {
    // Acquire pairs with the grower's release: the chunk's zeroed slots are visible.
    rs_guard_slot *chunk = __atomic_load_n(&rs_guard_chunks[index / RS_GUARD_CHUNK_SLOTS], __ATOMIC_ACQUIRE);
    return chunk ? &chunk[index % RS_GUARD_CHUNK_SLOTS] : NULL;
}

static void rs_guard_handler(int signo, siginfo_t *info, void *context) {
    (void)signo;
    (void)context;
    int saved_errno = errno;
    // si_code > 0: the kernel raised it for an access; <= 0: another process sent it.
    if (info->si_code > 0) {
        uintptr_t address = (uintptr_t)info->si_addr;
        int limit = __atomic_load_n(&rs_guard_high_water, __ATOMIC_ACQUIRE);
        for (int i = 0; i < limit; i++) {
            rs_guard_slot *slot = rs_guard_slot_at(i);
            if (slot == NULL) { i += RS_GUARD_CHUNK_SLOTS - 1 - i % RS_GUARD_CHUNK_SLOTS; continue; }
            // Acquire pairs with the registration's release: base and size are the ones published.
            if (__atomic_load_n(&slot->state, __ATOMIC_ACQUIRE) != RS_SLOT_ACTIVE) continue;
            uintptr_t base = __atomic_load_n(&slot->base, __ATOMIC_RELAXED);
            size_t size = __atomic_load_n(&slot->size, __ATOMIC_RELAXED);
            if (address < base || address - base >= size) continue;
            void *page = (void *)(address & ~(rs_guard_page_size - 1));
            // mmap is a plain system call here; it replaces only the faulting page of our range.
            void *zero = mmap(page, rs_guard_page_size, PROT_READ | PROT_WRITE,
                              MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (zero == MAP_FAILED) break;
            __atomic_store_n(&slot->truncated, 1, __ATOMIC_RELEASE);
            __atomic_fetch_add(&rs_guard_faults, 1, __ATOMIC_RELAXED);
            errno = saved_errno;
            return; // the access is retried and now reads the zero page
        }
    }
    // Not ours: put back what was there before and let the signal be delivered to it. A fault
    // recurs when we return; a signal sent by someone is sent again (it is blocked until then).
    sigaction(SIGBUS, &rs_guard_previous, NULL);
    if (info->si_code <= 0) raise(SIGBUS);
    errno = saved_errno;
}

static void rs_guard_install(void) {
    long page = sysconf(_SC_PAGESIZE);
    rs_guard_page_size = page > 0 ? (uintptr_t)page : 4096;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = rs_guard_handler;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    rs_guard_installed = sigaction(SIGBUS, &action, &rs_guard_previous) == 0;
}

/** Maps chunk `chunk` if no one has; returns whether it is mapped. */
static int rs_guard_grow(int chunk) {
    pthread_mutex_lock(&rs_guard_grow_lock);
    int mapped = __atomic_load_n(&rs_guard_chunks[chunk], __ATOMIC_ACQUIRE) != NULL;
    if (!mapped) {
        // Anonymous pages arrive zeroed: every slot FREE.
        void *slots = mmap(NULL, RS_GUARD_CHUNK_SLOTS * sizeof(rs_guard_slot), PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (slots != MAP_FAILED) {
            // Release: a reader that sees the pointer sees the zeroed slots.
            __atomic_store_n(&rs_guard_chunks[chunk], (rs_guard_slot *)slots, __ATOMIC_RELEASE);
            mapped = 1;
        }
    }
    pthread_mutex_unlock(&rs_guard_grow_lock);
    return mapped;
}

/** Claims a free slot from `start` up to `end`, mapping chunks as needed; -1 if none. */
static int rs_guard_claim(int start, int end) {
    for (int i = start; i < end; i++) {
        rs_guard_slot *slot = rs_guard_slot_at(i);
        if (slot == NULL) {
            if (!rs_guard_grow(i / RS_GUARD_CHUNK_SLOTS)) return -1;
            slot = rs_guard_slot_at(i);
        }
        int expected = RS_SLOT_FREE;
        if (__atomic_compare_exchange_n(&slot->state, &expected, RS_SLOT_CLAIMED, 0,
                                        __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return i;
    }
    return -1;
}

int rs_guard_register(const void *base, size_t size) {
    pthread_once(&rs_guard_once, rs_guard_install);
    if (!rs_guard_installed || base == NULL || size == 0) return -1;
    // From the hint (below it every slot was taken when last looked), then the rest: thousands of
    // registrations do not each walk the slots in use.
    int hint = __atomic_load_n(&rs_guard_free_hint, __ATOMIC_RELAXED);
    int i = rs_guard_claim(hint, RS_GUARD_SLOTS);
    if (i < 0) i = rs_guard_claim(0, hint);
    if (i < 0) return -1;
    __atomic_store_n(&rs_guard_free_hint, i + 1, __ATOMIC_RELAXED); // a race costs a longer walk, never a slot
    rs_guard_slot *slot = rs_guard_slot_at(i);
    __atomic_store_n(&slot->base, (uintptr_t)base, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->size, size, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->truncated, 0, __ATOMIC_RELAXED);
    // Raise the high-water mark before activating, so the handler's scan reaches the slot.
    int high = __atomic_load_n(&rs_guard_high_water, __ATOMIC_RELAXED);
    while (high < i + 1 && !__atomic_compare_exchange_n(&rs_guard_high_water, &high, i + 1, 1,
                                                         __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {}
    // Release: a handler that sees ACTIVE sees this range's base and size.
    __atomic_store_n(&slot->state, RS_SLOT_ACTIVE, __ATOMIC_RELEASE);
    return i;
}

void rs_guard_unregister(int slot) {
    if (slot < 0 || slot >= RS_GUARD_SLOTS) return;
    rs_guard_slot *entry = rs_guard_slot_at(slot);
    if (entry == NULL) return;
    // Release: the owner's accesses to the range happen before the slot can be reused.
    __atomic_store_n(&entry->state, RS_SLOT_FREE, __ATOMIC_RELEASE);
    int hint = __atomic_load_n(&rs_guard_free_hint, __ATOMIC_RELAXED);
    while (slot < hint && !__atomic_compare_exchange_n(&rs_guard_free_hint, &hint, slot, 1,
                                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}

int rs_guard_was_truncated(int slot) {
    if (slot < 0 || slot >= RS_GUARD_SLOTS) return 0;
    rs_guard_slot *entry = rs_guard_slot_at(slot);
    // Acquire pairs with the handler's release store.
    return entry ? __atomic_load_n(&entry->truncated, __ATOMIC_ACQUIRE) : 0;
}

uint64_t rs_guard_faults_absorbed(void) {
    return __atomic_load_n(&rs_guard_faults, __ATOMIC_RELAXED);
}

// MARK: - The span clock (see THE SPAN CLOCK in ringside.h)

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

/* What every span reads, on lines of its own; only the thread holding rs_span_clock_busy writes it. */
rs_span_clock_state rs_span_clock_shared __attribute__((aligned(128)));

/* 1 while a thread takes an anchor and publishes it: the one writer. Apart from what spans read. */
static uint32_t rs_span_clock_busy __attribute__((aligned(128)));
static pthread_once_t rs_span_clock_once = PTHREAD_ONCE_INIT;
static int rs_span_clock_tsc_usable;     /* written once, in rs_span_clock_choose */
static int rs_span_clock_asked_monotonic; /* RINGSIDE_SPAN_CLOCK=monotonic: written once */
static int rs_span_clock_selected;       /* 1 once rs_span_clock_select chose (relaxed) */
static char rs_span_clock_why[256];      /* why the TSC is usable, or is not: written once */

/** An anchor: a TSC reading and CLOCK_MONOTONIC at that instant, within width / 2 ns. */
typedef struct {
    uint64_t tsc;
    uint64_t ns;
    uint64_t width;
} rs_anchor;

/** The TSC read in order: after what precedes it, before what follows (the anchors' brackets). */
static uint64_t rs_tsc_ordered(void) {
#if defined(__x86_64__)
    __builtin_ia32_lfence();
    uint64_t tsc = __builtin_ia32_rdtsc();
    __builtin_ia32_lfence();
    return tsc;
#else
    return 0;
#endif
}

/** The narrowest of `tries` brackets, each a TSC read between two CLOCK_MONOTONIC reads. */
static rs_anchor rs_span_clock_anchor(int tries) {
    rs_anchor best = {0, 0, UINT64_MAX};
    for (int i = 0; i < tries; i++) {
        uint64_t before = rs_clock_precise_ns();
        uint64_t tsc = rs_tsc_ordered();
        uint64_t after = rs_clock_precise_ns();
        if (after >= before && after - before < best.width) {
            best.tsc = tsc;
            best.ns = before + (after - before) / 2;
            best.width = after - before;
        }
    }
    return best;
}

/** An anchor within RS_SPAN_CLOCK_ANCHOR_MAX_NS, trying up to `rounds` rounds of `tries` brackets
    (a thread preempted mid-bracket widens it); width UINT64_MAX when none was narrow enough. */
static rs_anchor rs_span_clock_narrow_anchor(int rounds, int tries) {
    rs_anchor anchor = {0, 0, UINT64_MAX};
    for (int round = 0; round < rounds && anchor.width > RS_SPAN_CLOCK_ANCHOR_MAX_NS; round++) {
        anchor = rs_span_clock_anchor(tries);
    }
    if (anchor.width > RS_SPAN_CLOCK_ANCHOR_MAX_NS) anchor.width = UINT64_MAX;
    return anchor;
}

/** TSC ticks in `ns` nanoseconds at `mult`. */
static uint64_t rs_ns_to_tsc(uint64_t ns, uint64_t mult) {
    return (uint64_t)(((unsigned __int128)ns << 32) / mult);
}

/** The calibration after `c` with the new anchor `a`: the rate over the interval between them,
    and a refresh 4 intervals on (at most RS_SPAN_CLOCK_REFRESH_NS). */
static rs_tsc_calibration rs_span_clock_next(const rs_tsc_calibration *c, rs_anchor a) {
    rs_tsc_calibration next = *c;
    next.tsc = a.tsc;
    next.ns = a.ns;
    next.width_ns = a.width;
    next.anchors = c->anchors + 1;
    if (a.tsc > c->tsc && a.ns > c->ns) {
        uint64_t ticks = a.tsc - c->tsc;
        unsigned __int128 mult = ((unsigned __int128)(a.ns - c->ns) << 32) / ticks;
        /* More than 1 % from the last rate is no drift (NTP slews by 0.05 % at most): the machine
           slept, or the TSC was reset. The anchor is taken, the rate kept. */
        unsigned __int128 drift = c->mult / 100;
        if (mult != 0 && (c->mult == 0 || (mult + drift >= c->mult && mult <= c->mult + drift))) {
            next.mult = (uint64_t)mult;
        }
        uint64_t most = rs_ns_to_tsc(RS_SPAN_CLOCK_REFRESH_NS, next.mult);
        next.refresh = ticks < most / 4 ? 4 * ticks : most;
    } else {
        /* The TSC or the clock went back (a reset TSC): anchor again within a millisecond. */
        next.refresh = next.mult != 0 ? rs_ns_to_tsc(1000000, next.mult) : 0;
    }
    return next;
}

/** Publishes `next` through the latch: readers move to the other copy before each copy changes.
    The caller holds rs_span_clock_busy. */
static void rs_span_clock_publish(const rs_tsc_calibration *next) {
    rs_span_clock_state *s = &rs_span_clock_shared;
    uint32_t sequence = rs_load_relaxed_u32(&s->sequence); /* only the writer stores it */
    for (int step = 0; step < 2; step++) {
        sequence++;
        /* Release: the last copy written is whole before readers are sent to it. */
        rs_store_release_u32(&s->sequence, sequence);
        /* Release fence: the count moves before this copy's stores (a reader that sees one of them
           sees the count move when it reads it again). */
        __atomic_thread_fence(__ATOMIC_RELEASE);
        rs_tsc_calibration *c = &s->copy[(sequence + 1) & 1];
        rs_store_relaxed_u64(&c->tsc, next->tsc);
        rs_store_relaxed_u64(&c->ns, next->ns);
        rs_store_relaxed_u64(&c->mult, next->mult);
        rs_store_relaxed_u64(&c->refresh, next->refresh);
        rs_store_relaxed_u64(&c->anchors, next->anchors);
        rs_store_relaxed_u64(&c->width_ns, next->width_ns);
    }
}

void rs_span_clock_calibration(rs_tsc_calibration *out) {
    const rs_span_clock_state *s = &rs_span_clock_shared;
    for (;;) {
        /* Acquire, then an acquire fence before reading the count again: the latch's reader. */
        uint32_t sequence = rs_load_acquire_u32(&s->sequence);
        const rs_tsc_calibration *c = &s->copy[sequence & 1];
        out->tsc = rs_load_relaxed_u64(&c->tsc);
        out->ns = rs_load_relaxed_u64(&c->ns);
        out->mult = rs_load_relaxed_u64(&c->mult);
        out->refresh = rs_load_relaxed_u64(&c->refresh);
        out->anchors = rs_load_relaxed_u64(&c->anchors);
        out->width_ns = rs_load_relaxed_u64(&c->width_ns);
        rs_fence_acquire();
        if (sequence == rs_load_relaxed_u32(&s->sequence)) return;
    }
}

/** Takes the writer's flag without waiting; 1 if taken. */
static int rs_span_clock_try_busy(void) {
    uint32_t expected = 0;
    if (rs_load_relaxed_u32(&rs_span_clock_busy) != 0) return 0;
    /* Acquire: the last writer's stores are visible to this one. */
    return __atomic_compare_exchange_n(&rs_span_clock_busy, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static void rs_span_clock_release_busy(void) {
    /* Release: this writer's stores are visible to the next. */
    __atomic_store_n(&rs_span_clock_busy, 0, __ATOMIC_RELEASE);
}

/** The first calibration: two anchors a millisecond apart (or more: a longer sleep only helps).
    1 when published; else 0 with the reason in `why`. The caller holds rs_span_clock_busy. */
static int rs_span_clock_calibrate(char *why, size_t size) {
    rs_anchor first = rs_span_clock_narrow_anchor(64, 16);
    if (first.width == UINT64_MAX) {
        snprintf(why, size, "no anchor of the TSC to CLOCK_MONOTONIC within %u ns in 64 tries", RS_SPAN_CLOCK_ANCHOR_MAX_NS);
        return 0;
    }
    struct timespec pause = {0, 1000000};
    while (rs_clock_precise_ns() - first.ns < 1000000) {
        nanosleep(&pause, NULL); /* EINTR only shortens it: the loop sleeps again */
    }
    rs_anchor second = rs_span_clock_narrow_anchor(64, 16);
    rs_tsc_calibration zero;
    memset(&zero, 0, sizeof zero);
    zero.tsc = first.tsc;
    zero.ns = first.ns;
    zero.anchors = 1;
    zero.width_ns = first.width;
    rs_tsc_calibration calibrated = rs_span_clock_next(&zero, second);
    /* 0.1 to 100 GHz, else no TSC of this world: mult is ns per tick times 2^32. */
    uint64_t ns_per_tick_min = (UINT64_C(1) << 32) / 100, ns_per_tick_max = (UINT64_C(1) << 32) * 10;
    if (second.width == UINT64_MAX || calibrated.mult < ns_per_tick_min || calibrated.mult > ns_per_tick_max) {
        snprintf(why, size, "the TSC's rate against CLOCK_MONOTONIC could not be measured");
        return 0;
    }
    rs_span_clock_publish(&calibrated);
    return 1;
}

/** 1 if the TSC may time spans (see THE SPAN CLOCK); else 0 with the reason in `why`. */
static int rs_span_clock_check_tsc(char *why, size_t size) {
#if defined(__x86_64__)
    unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) || eax < 0x80000007u
        || !__get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx) || (edx & (1u << 8)) == 0) {
        snprintf(why, size, "the CPU has no invariant TSC (CPUID 0x80000007 EDX bit 8)");
        return 0;
    }
    const char *path = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
    char source[64] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t length = fd >= 0 ? read(fd, source, sizeof source - 1) : -1;
    int failure = length < 0 ? errno : 0;
    if (fd >= 0) close(fd);
    if (length < 0) {
        snprintf(why, size, "%s is unreadable: %s (errno: %d)", path, strerror(failure), failure);
        return 0;
    }
    source[length] = 0;
    source[strcspn(source, "\n")] = 0;
    if (strcmp(source, "tsc") != 0) {
        snprintf(why, size, "the kernel's clocksource is %s, not tsc", source);
        return 0;
    }
    if (rs_clock_tsc() >= (UINT64_C(1) << 62)) {
        snprintf(why, size, "the TSC reads past 2^62");
        return 0;
    }
    snprintf(why, size, "invariant TSC, clocksource tsc");
    return 1;
#else
    snprintf(why, size, "not x86-64 (no TSC)");
    return 0;
#endif
}

/** In a fork() child: a publish the fork cut short is finished from the copy readers use, so the
    child's first writer starts from a whole latch. The child has this one thread. */
static void rs_span_clock_forked(void) {
    if (rs_load_relaxed_u32(&rs_span_clock_busy) == 0) return;
    rs_span_clock_state *s = &rs_span_clock_shared;
    uint32_t sequence = rs_load_relaxed_u32(&s->sequence);
    s->copy[(sequence & 1) ^ 1] = s->copy[sequence & 1];
    if (sequence & 1) rs_store_relaxed_u32(&s->sequence, sequence + 1);
    rs_store_relaxed_u32(&rs_span_clock_busy, 0);
}

static void rs_span_clock_choose(void) {
    char why[sizeof rs_span_clock_why];
    int usable = rs_span_clock_check_tsc(why, sizeof why);
    const char *asked = getenv("RINGSIDE_SPAN_CLOCK");
    int wanted = 1; /* the TSC if usable: unset, "auto" or "tsc" */
    if (asked != NULL && strcmp(asked, "monotonic") == 0) {
        wanted = 0;
    } else if (asked != NULL && asked[0] != 0 && strcmp(asked, "auto") != 0 && strcmp(asked, "tsc") != 0) {
        fprintf(stderr, "ringside: RINGSIDE_SPAN_CLOCK=%s is none of auto, tsc, monotonic: taken as auto\n", asked);
    }
    if (usable && wanted) {
        rs_span_clock_try_busy(); /* no other writer before the clock is chosen: it is free */
        usable = rs_span_clock_calibrate(why, sizeof why);
        rs_span_clock_release_busy();
    }
    if (asked != NULL && strcmp(asked, "tsc") == 0 && !usable) {
        fprintf(stderr, "ringside: RINGSIDE_SPAN_CLOCK=tsc, but %s: spans use CLOCK_MONOTONIC\n", why);
    }
    rs_span_clock_tsc_usable = usable;
    rs_span_clock_asked_monotonic = !wanted;
    memcpy(rs_span_clock_why, why, sizeof why);
    pthread_atfork(NULL, NULL, rs_span_clock_forked);
    /* Release: a span that starts on the TSC finds the calibration published above. */
    rs_store_release_u32(&rs_span_clock_shared.clock, usable && wanted ? RS_SPAN_CLOCK_TSC : RS_SPAN_CLOCK_MONOTONIC);
}

void rs_span_clock_init(void) { pthread_once(&rs_span_clock_once, rs_span_clock_choose); }

uint32_t rs_span_clock(void) {
    rs_span_clock_init();
    return rs_load_acquire_u32(&rs_span_clock_shared.clock);
}

uint64_t rs_span_clock_start_slow(void) {
    if (rs_span_clock() == RS_SPAN_CLOCK_TSC) return rs_clock_tsc() | RS_SPAN_TSC_BIT;
    return rs_clock_precise_ns();
}

/** Takes a new anchor if the calibration is still due one, unless another thread is at it. */
static void rs_span_clock_refresh(uint64_t now) {
    if (!rs_span_clock_try_busy()) return;
    rs_tsc_calibration c;
    rs_span_clock_calibration(&c);
    /* Signed: an anchor later than `now` (another thread's, just taken) is not due. */
    if (c.mult != 0 && (int64_t)(now - c.tsc) >= (int64_t)c.refresh) {
        rs_anchor anchor = rs_span_clock_narrow_anchor(1, 8); /* about 0.5 us, once a second */
        /* None narrow enough (this thread was preempted): the next span's end tries again. */
        if (anchor.width != UINT64_MAX) {
            rs_tsc_calibration next = rs_span_clock_next(&c, anchor);
            rs_span_clock_publish(&next);
        }
    }
    rs_span_clock_release_busy();
}

rs_span_time rs_span_clock_end_slow(uint64_t start, uint64_t now) {
    rs_tsc_calibration c;
    rs_span_clock_calibration(&c);
    if (c.mult == 0) { /* a start on the TSC before any calibration: one made up by its caller */
        rs_span_clock_init();
        rs_span_clock_calibration(&c);
    }
    rs_span_time time = {0, 0};
    if (c.mult == 0) {
        time.end_ns = rs_clock_precise_ns();
        return time;
    }
    if ((int64_t)(now - c.tsc) >= (int64_t)c.refresh) {
        rs_span_clock_refresh(now);
        rs_span_clock_calibration(&c);
    }
    uint64_t begun = start & ~RS_SPAN_TSC_BIT;
    time.elapsed_ns = now > begun ? rs_tsc_to_ns(now - begun, c.mult) : 0;
    time.end_ns = now >= c.tsc ? c.ns + rs_tsc_to_ns(now - c.tsc, c.mult) : c.ns - rs_tsc_to_ns(c.tsc - now, c.mult);
    return time;
}

int rs_span_clock_select(uint32_t clock) {
    rs_span_clock_init();
    if (clock == RS_SPAN_CLOCK_TSC) {
        if (!rs_span_clock_tsc_usable) return -1;
        rs_tsc_calibration c;
        rs_span_clock_calibration(&c);
        if (c.mult == 0) { /* RINGSIDE_SPAN_CLOCK=monotonic left it uncalibrated */
            while (!rs_span_clock_try_busy()) sched_yield();
            rs_span_clock_calibration(&c);
            char why[sizeof rs_span_clock_why];
            int calibrated = c.mult != 0 || rs_span_clock_calibrate(why, sizeof why);
            rs_span_clock_release_busy();
            if (!calibrated) return -1;
        }
    } else if (clock != RS_SPAN_CLOCK_MONOTONIC) {
        return -1;
    }
    __atomic_store_n(&rs_span_clock_selected, 1, __ATOMIC_RELAXED);
    /* Release: a span that starts on the TSC finds the calibration published. */
    rs_store_release_u32(&rs_span_clock_shared.clock, clock);
    return 0;
}

int rs_span_clock_describe(char *buffer, size_t size) {
    uint32_t clock = rs_span_clock();
    int selected = __atomic_load_n(&rs_span_clock_selected, __ATOMIC_RELAXED);
    if (clock != RS_SPAN_CLOCK_TSC) {
        const char *why = selected                         ? "chosen by rs_span_clock_select"
                          : rs_span_clock_asked_monotonic ? "RINGSIDE_SPAN_CLOCK=monotonic"
                                                          : rs_span_clock_why;
        return snprintf(buffer, size, "monotonic: %s", why);
    }
    rs_tsc_calibration c;
    rs_span_clock_calibration(&c);
    double ghz = c.mult != 0 ? 4294967296.0 / (double)c.mult : 0;
    return snprintf(buffer, size, "tsc: %s%s; %.4f GHz, %llu anchors, the last within %llu ns", rs_span_clock_why,
                    selected ? " (chosen by rs_span_clock_select)" : "", ghz, (unsigned long long)c.anchors,
                    (unsigned long long)(c.width_ns / 2));
}
