// What the format needs beyond inline code: a writer's view wired to its lane, a write's slow path
// (adaptive sampling: SAMPLING in ringside.h), and the locks (fcntl is variadic, which Swift
// cannot call, so the OFD locks live here).
#define _GNU_SOURCE
#include "ringside.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

/* Whether the file's consumer reads weighted records: it stored its pid in both fields. */
static int rs_consumer_reads_weights(const rs_header *h) {
    /* Relaxed: two pids a consumer stores once; one seen without the other only means "not yet". */
    int32_t pid = rs_load_relaxed_i32(&h->consumer_pid);
    return pid != 0 && rs_load_relaxed_i32(&h->weights_reader_pid) == pid;
}

/**
 * Keeps the consumer's cursor `read` for the fast path, whose one test is whether the lane looks
 * full by it: as read when the lane never samples (or its consumer does not weigh); set back by the
 * room above the threshold while it may start sampling, so that the test fails at `above`; and,
 * while it samples, so that it fails at every call (each then looks at the lane).
 */
static void rs_producer_keep_read(rs_producer *p, uint64_t read) {
    const rs_sampling *s = p->sampling;
    uint64_t capacity = p->mask + 1;
    if (s == NULL || !s->weighs) {
        p->cached_read = read;
    } else if (s->level > 0 || s->open > 0) {
        p->cached_read = p->next - capacity;
    } else {
        p->cached_read = read - (capacity - s->above); /* modulo 2^64, as every cursor difference */
    }
}

void rs_producer_init(rs_producer *p, rs_lane_header *lane, uint32_t lane_records_offset, uint32_t capacity_log2,
                      rs_metric_cell *shared, uint32_t *sample_countdown, const uint32_t *sample_every,
                      rs_sampling *sampling) {
    char *base = (char *)lane;
    p->records = (rs_record *)(base + lane_records_offset);
    p->write_cursor = &lane->write_cursor;
    p->read_cursor = &lane->read_cursor;
    p->dropped_total = &lane->dropped_total;
    p->heartbeat_ns = &lane->heartbeat_ns;
    p->cells = (uint64_t *)(base + RS_LANE_HEADER_SIZE); /* the lane's cells follow its header */
    p->shared = shared;
    p->mask = ((uint64_t)1 << capacity_log2) - 1;
    /* Relaxed: only the attached process writes the cursor, and the lane's last writer released
       it under the bot's mutex (or was another process, gone before we took the lock). */
    p->next = rs_load_relaxed_u64(&lane->write_cursor);
    p->sample_countdown = sample_countdown;
    p->sample_every = sample_every;
    p->sampling = sampling;
    if (sampling != NULL) {
        sampling->level = 0;
        sampling->weighs = 1; /* until a look says otherwise: the first one comes at the threshold */
    }
    /* Acquire: the consumer finished with the slots below its cursor before storing it. */
    rs_producer_keep_read(p, rs_load_acquire_u64(&lane->read_cursor));
}

/* MARK: - Sampling (SAMPLING in ringside.h) */

/** L for a lane holding `fill` records. */
static uint32_t rs_sampling_level(const rs_sampling *s, uint64_t fill) {
    if (fill < s->above) return 0;
    uint64_t level = 1 + ((fill - s->above) >> s->step_log2);
    return level < RS_WEIGHT_LOG2_MAX ? (uint32_t)level : RS_WEIGHT_LOG2_MAX;
}

/** Whether the call that makes its group `calls` long closes it at level `level`. */
static int rs_sampling_closes(uint32_t calls, uint32_t level) {
    return calls >= (UINT32_C(1) << level) && (calls & (calls - 1)) == 0;
}

/** Adds a call to its metric's open group: it is sampled out (0: nothing written). */
static int rs_sampling_join(rs_sampling *s, uint32_t metric, uint64_t value) {
    uint32_t calls = s->calls[metric];
    if (calls == 0) {
        s->open++;
        if (metric >= s->open_below) s->open_below = metric + 1;
    }
    s->calls[metric] = calls + 1;
    s->latest[metric] = value;
    return 0;
}

/** Counts `weight` records of `metric` dropped from the lane (the holder's own fields). */
static int rs_producer_drop(rs_producer *p, uint32_t metric, uint64_t weight) {
    /* Only this lane's owner writes these, so a relaxed load and store is exact. */
    rs_store_relaxed_u64(p->dropped_total, rs_load_relaxed_u64(p->dropped_total) + weight);
    rs_store_relaxed_u64(&p->cells[metric], rs_load_relaxed_u64(&p->cells[metric]) + weight);
    return 0;
}

/** Writes every open group (`keep`; a record per bit of its calls, its latest value) where the lane
    has room by the consumer's cursor `read`, and counts the rest dropped by their weight; then
    publishes what it wrote. */
static void rs_sampling_flush(rs_producer *p, rs_sampling *s, uint64_t read, uint64_t timestamp_ns, int keep) {
    uint64_t cursor = p->next;
    for (uint32_t metric = 0; metric < s->open_below && s->open > 0; metric++) {
        uint32_t calls = s->calls[metric];
        if (calls == 0) continue;
        s->calls[metric] = 0;
        s->open--;
        while (calls != 0) {
            uint32_t k = 31u - (uint32_t)__builtin_clz(calls); /* the largest weight first */
            calls -= UINT32_C(1) << k;
            if (keep && cursor - read <= p->mask) {
                rs_producer_fill(&p->records[cursor & p->mask], cursor, metric, RS_KIND_HISTOGRAM,
                                 (uint8_t)(k << RS_FLAG_WEIGHT_SHIFT), s->latest[metric], timestamp_ns, 0);
                cursor++;
            } else {
                rs_producer_drop(p, metric, UINT64_C(1) << k);
            }
        }
    }
    s->open_below = 0;
    if (cursor != p->next) {
        p->next = cursor;
        /* Release: the records' bytes are visible before the cursor that publishes them. */
        rs_store_release_u64(p->write_cursor, cursor);
        rs_store_relaxed_u64(p->heartbeat_ns, timestamp_ns);
    }
}

/** Sets the lane's level from the consumer's cursor `read` (closing its groups when it falls to
    0), as the consumer's word allows. */
static void rs_sampling_look(rs_producer *p, rs_sampling *s, uint64_t read, uint64_t timestamp_ns) {
    s->weighs = rs_consumer_reads_weights(s->header);
    s->level = s->weighs ? rs_sampling_level(s, p->next - read) : 0;
    if (s->level == 0 && s->open > 0) rs_sampling_flush(p, s, read, timestamp_ns, (int)s->weighs);
}

int rs_producer_write_slow(rs_producer *p, uint32_t metric, uint8_t kind, uint8_t flags, uint64_t value,
                           uint64_t timestamp_ns, const char *exemplar, uint32_t length) {
    /* Acquire: the consumer finished reading the slots below its cursor before storing it. Every
       call past the fast path reads it (the consumer's lines change once a drain, so the loads
       mostly hit the cache): the level follows the fill call by call. */
    uint64_t read = rs_load_acquire_u64(p->read_cursor);
    rs_sampling *s = p->sampling;
    if (s != NULL) rs_sampling_look(p, s, read, timestamp_ns);
    uint32_t k = 0;
    if (s != NULL && kind == RS_KIND_HISTOGRAM && s->level > 0) {
        uint32_t calls = s->calls[metric] + 1;
        if (!rs_sampling_closes(calls, s->level)) {
            rs_producer_keep_read(p, read);
            return rs_sampling_join(s, metric, value);
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
    if (written) {
        uint8_t weighted = (uint8_t)(flags | (exemplar != NULL ? RS_FLAG_EXEMPLAR : 0) | k << RS_FLAG_WEIGHT_SHIFT);
        rs_producer_fill(&p->records[cursor & p->mask], cursor, metric, kind, weighted, value, timestamp_ns,
                         (uint16_t)(exemplar != NULL ? length : 0));
        if (exemplar != NULL) rs_producer_fill_exemplar(p, cursor, metric, exemplar, length);
        p->next = cursor + 1 + extra;
        /* Release: the records' bytes are visible before the cursor that publishes them. */
        rs_store_release_u64(p->write_cursor, cursor + 1 + extra);
        rs_store_relaxed_u64(p->heartbeat_ns, timestamp_ns);
    } else {
        rs_producer_drop(p, metric, UINT64_C(1) << k);
    }
    rs_producer_keep_read(p, read);
    return written;
}

void rs_producer_close_groups(rs_producer *p) {
    rs_sampling *s = p->sampling;
    if (s == NULL || p->records == NULL || s->open == 0) return;
    /* Acquire: the consumer finished reading the slots below its cursor before storing it. */
    uint64_t read = rs_load_acquire_u64(p->read_cursor);
    s->weighs = rs_consumer_reads_weights(s->header);
    rs_sampling_flush(p, s, read, rs_clock_coarse_ns(), (int)s->weighs);
    s->level = 0;
    rs_producer_keep_read(p, read);
}

void rs_producer_abandon_groups(rs_producer *p) {
    rs_sampling *s = p->sampling;
    if (s == NULL || s->open == 0) return;
    for (uint32_t metric = 0; metric < s->open_below; metric++) {
        if (s->calls[metric] == 0) continue;
        /* An atomic add: other threads without a lane may be adding to it. */
        if (p->shared != NULL) rs_add_relaxed_u64(&p->shared[metric].unlaned, s->calls[metric]);
        s->calls[metric] = 0;
    }
    s->open = 0;
    s->open_below = 0;
    s->level = 0;
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
