/*
 * ringside.h: the Ringside shared-memory ring, format version 1.
 *
 * This header exists for one reason: it is the specification of the file a producer (a trading
 * bot) and a consumer (the collector, the dump tool) share, with the atomics and clocks the
 * format needs and the producer's hot path. A C or C++ bot that includes it writes the same
 * rings as the Swift library. Everything is an offset from the start of the file, never a pointer.
 *
 * THE FILE  (all integers little-endian, the host's order on every supported platform)
 *
 *   /dev/shm/ringside.<name>        (directory overridable by RINGSIDE_DIR), mode 0600
 *
 *   offset 0           header page, RS_HEADER_SIZE (4096) bytes:
 *     0x000  layout    written once, before `version`; never changes afterwards
 *     0x080  producer  line: written only by the producer        (128 bytes, own cache lines)
 *     0x100  consumer  line: written only by the consumer        (128 bytes, own cache lines)
 *   registry_offset    registry_capacity entries of RS_REGISTRY_ENTRY_SIZE (512) bytes
 *   records_offset     capacity records of RS_RECORD_SIZE (32) bytes, capacity a power of two
 *   file_size          == records_offset + capacity * 32
 *
 * READY: the creator writes the layout, then stores `version` with release ordering. A reader
 * that loads a non-zero `version` (acquire) sees the whole layout. Version 0 means "being
 * created": readers skip the file and look again later.
 *
 * CURSORS: `write_cursor` and `read_cursor` are free-running 64-bit counts (never wrapped); the
 * record at cursor c lives in slot c & (capacity - 1). Records in [read_cursor, write_cursor)
 * are published and not yet consumed. The producer never writes slot c while
 * c - read_cursor >= capacity: a full ring drops the new record and counts it in
 * `dropped_total`; it never blocks and never overwrites. Hence, exactly:
 *     records written   == write_cursor
 *     records attempted == write_cursor + dropped_total   (after sampling)
 *     records in ring   == write_cursor - read_cursor
 *
 * OWNERSHIP AND LIVENESS: one producer and one consumer at a time, each holding an open file
 * description lock (fcntl F_OFD_SETLK, exclusive) on one byte of the file: byte
 * RS_LOCK_BYTE_PRODUCER (0) for the producer, RS_LOCK_BYTE_CONSUMER (1) for the consumer. The
 * kernel drops the lock when the process dies, so "the producer byte is locked" is also the
 * liveness signal (producer_pid says who; heartbeat_ns says when it last wrote).
 *
 * CLOCKS: record timestamps are CLOCK_MONOTONIC nanoseconds, read with CLOCK_MONOTONIC_COARSE
 * (same origin; a span's record carries the precise end time it measured) (about 5 ns a read against
 * 34 ns for CLOCK_MONOTONIC on our reference machine, with a resolution of a few milliseconds:
 * ample to place a record in a one-second window). rdtsc (18 ns) is faster than CLOCK_MONOTONIC
 * but needs calibration and does not exist on arm64, so it is not part of the format. Spans
 * (durations) use CLOCK_MONOTONIC, the precise clock. Both clocks count from the same origin
 * (boot), so a consumer compares them with its own reading of CLOCK_MONOTONIC.
 * `created_realtime_ns` and `created_monotonic_ns` let a reader turn a record's timestamp into
 * wall time: wall = created_realtime_ns + (timestamp_ns - created_monotonic_ns).
 *
 * REGISTRY: the producer writes entry n in full, then stores `metric_count` = n + 1 with
 * release ordering; entries below `metric_count` never change again. A record names its metric
 * by index; a reader that loads `metric_count` (acquire) after `write_cursor` sees the metric of
 * every record it can read. Strings are UTF-8, not NUL-terminated, with explicit lengths:
 *   name    [a-zA-Z_][a-zA-Z0-9_]*, 1 to RS_NAME_MAX bytes
 *   labels  "key=value" pairs sorted by key and joined by '\n'; keys as names, values any
 *           UTF-8 without '\n' or NUL; at most RS_LABELS_MAX bytes in all
 *   help    any UTF-8 without NUL, at most RS_HELP_MAX bytes
 * (name, labels) identifies a metric: a producer that attaches again reuses matching entries.
 *
 * Nothing read from the file is trusted by a consumer: every size, cursor, index, length and
 * string is checked before use.
 */
#ifndef RINGSIDE_H
#define RINGSIDE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RS_INLINE static inline __attribute__((always_inline))

/* C11 spells it _Static_assert, C++11 static_assert: the layout checks hold in both. */
#ifdef __cplusplus
#define RS_STATIC_ASSERT(condition, message) static_assert(condition, message)
#else
#define RS_STATIC_ASSERT(condition, message) _Static_assert(condition, message)
#endif

/* MARK: - Constants */

/** "RINGSIDE" read as a little-endian 64-bit integer. */
#define RS_MAGIC 0x45444953474E4952ULL
#define RS_FORMAT_VERSION 1u

#define RS_HEADER_SIZE 4096u
#define RS_RECORD_SIZE 32u
#define RS_REGISTRY_ENTRY_SIZE 512u

#define RS_NAME_MAX 104u
#define RS_LABELS_MAX 256u
#define RS_HELP_MAX 128u

/** 128K records, 4 MiB of records: the seeds' size. */
#define RS_DEFAULT_CAPACITY_LOG2 17u
#define RS_MIN_CAPACITY_LOG2 4u
#define RS_MAX_CAPACITY_LOG2 28u
#define RS_DEFAULT_REGISTRY_CAPACITY 256u
#define RS_MAX_REGISTRY_CAPACITY 4096u

#define RS_LOCK_BYTE_PRODUCER 0
#define RS_LOCK_BYTE_CONSUMER 1

/** File name prefix: ring "bot-a" lives in "<dir>/ringside.bot-a". */
#define RS_FILE_PREFIX "ringside."
#define RS_NAME_LENGTH_MAX 200u

/** Metric kinds, as stored in the registry and in each record. */
typedef enum {
    RS_KIND_COUNTER = 1,   /* value: an increment (unsigned) */
    RS_KIND_GAUGE = 2,     /* value: the bits of an IEEE 754 double */
    RS_KIND_HISTOGRAM = 3, /* value: an observation in the metric's unit (unsigned) */
} rs_kind;

/** Units of a metric's values. */
typedef enum {
    RS_UNIT_NONE = 0,
    RS_UNIT_NANOSECONDS = 1,
    RS_UNIT_MICROSECONDS = 2,
    RS_UNIT_MILLISECONDS = 3,
    RS_UNIT_SECONDS = 4,
    RS_UNIT_BYTES = 5,
} rs_unit;
#define RS_UNIT_LAST RS_UNIT_BYTES

/** Record flags. */
#define RS_FLAG_SPAN 0x01u /* the value is a duration measured with the precise clock */

/* MARK: - Layout */

/** The header page's first 384 bytes; the rest of the page is zero. */
typedef struct {
    /* 0x000: layout, written by the creator before `version` */
    uint64_t magic;                /* 0x000 RS_MAGIC */
    uint32_t version;              /* 0x008 RS_FORMAT_VERSION, stored last (release) */
    uint32_t header_size;          /* 0x00C RS_HEADER_SIZE */
    uint32_t record_size;          /* 0x010 RS_RECORD_SIZE */
    uint32_t capacity_log2;        /* 0x014 capacity == 1 << capacity_log2 records */
    uint32_t registry_capacity;    /* 0x018 entries in the registry */
    uint32_t registry_entry_size;  /* 0x01C RS_REGISTRY_ENTRY_SIZE */
    uint64_t registry_offset;      /* 0x020 == header_size */
    uint64_t records_offset;       /* 0x028 == registry_offset + registry size */
    uint64_t file_size;            /* 0x030 == records_offset + capacity * record_size */
    uint64_t created_realtime_ns;  /* 0x038 CLOCK_REALTIME at creation */
    uint64_t created_monotonic_ns; /* 0x040 CLOCK_MONOTONIC at creation */
    uint8_t layout_reserved[0x80 - 0x48];

    /* 0x080: the producer's line */
    uint64_t write_cursor;         /* 0x080 records published, ever (release store) */
    uint64_t dropped_total;        /* 0x088 records dropped because the ring was full */
    uint64_t heartbeat_ns;         /* 0x090 CLOCK_MONOTONIC_COARSE of the last write or attach */
    uint64_t producer_start_ns;    /* 0x098 CLOCK_REALTIME when the producer attached */
    int32_t producer_pid;          /* 0x0A0 pid of the producer that attached last */
    uint32_t metric_count;         /* 0x0A4 registry entries published (release store) */
    uint32_t producer_attaches;    /* 0x0A8 how many times a producer attached */
    uint8_t producer_reserved[0x100 - 0xAC];

    /* 0x100: the consumer's line */
    uint64_t read_cursor;          /* 0x100 records consumed, ever (release store) */
    int32_t consumer_pid;          /* 0x108 pid of the consumer that attached last */
    uint32_t consumer_reserved0;   /* 0x10C */
    uint64_t consumer_heartbeat_ns;/* 0x110 CLOCK_MONOTONIC_COARSE of the last drain */
    uint8_t consumer_reserved[0x180 - 0x118];
} rs_header;

/** One registry entry (512 bytes). */
typedef struct {
    uint32_t index;         /* 0x000 this entry's position in the registry */
    uint8_t kind;           /* 0x004 rs_kind */
    uint8_t unit;           /* 0x005 rs_unit */
    uint16_t reserved0;     /* 0x006 */
    uint32_t sample_every;  /* 0x008 1 in N calls is written (1: every call); counts scale by N */
    uint16_t name_length;   /* 0x00C */
    uint16_t labels_length; /* 0x00E */
    uint16_t help_length;   /* 0x010 */
    uint8_t reserved1[0x18 - 0x12];
    char name[RS_NAME_MAX];     /* 0x018 */
    char labels[RS_LABELS_MAX]; /* 0x080 */
    char help[RS_HELP_MAX];     /* 0x180 */
} rs_registry_entry;

/** One record (32 bytes). */
typedef struct {
    uint64_t timestamp_ns; /* 0x00 CLOCK_MONOTONIC ns when written (coarse clock; a span's end time) */
    uint64_t value;        /* 0x08 counter increment, gauge double bits, or observation */
    uint64_t sequence;     /* 0x10 the record's cursor: lets a reader check slot and record agree */
    uint32_t metric;       /* 0x18 registry index */
    uint8_t kind;          /* 0x1C rs_kind, equal to the registry's */
    uint8_t flags;         /* 0x1D RS_FLAG_* */
    uint16_t reserved;     /* 0x1E zero */
} rs_record;

RS_STATIC_ASSERT(sizeof(rs_header) == 0x180, "rs_header is 384 bytes");
RS_STATIC_ASSERT(offsetof(rs_header, version) == 0x008, "version at 0x008");
RS_STATIC_ASSERT(offsetof(rs_header, file_size) == 0x030, "file_size at 0x030");
RS_STATIC_ASSERT(offsetof(rs_header, write_cursor) == 0x080, "producer line at 0x080");
RS_STATIC_ASSERT(offsetof(rs_header, metric_count) == 0x0A4, "metric_count at 0x0A4");
RS_STATIC_ASSERT(offsetof(rs_header, read_cursor) == 0x100, "consumer line at 0x100");
RS_STATIC_ASSERT(sizeof(rs_registry_entry) == RS_REGISTRY_ENTRY_SIZE, "registry entry is 512 bytes");
RS_STATIC_ASSERT(offsetof(rs_registry_entry, name) == 0x018, "name at 0x018");
RS_STATIC_ASSERT(offsetof(rs_registry_entry, labels) == 0x080, "labels at 0x080");
RS_STATIC_ASSERT(offsetof(rs_registry_entry, help) == 0x180, "help at 0x180");
RS_STATIC_ASSERT(sizeof(rs_record) == RS_RECORD_SIZE, "a record is 32 bytes");

/* MARK: - Atomics on shared memory */

/* Acquire pairs with the other side's release store: what was written before it is visible. */
RS_INLINE uint64_t rs_load_acquire_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
RS_INLINE uint32_t rs_load_acquire_u32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
RS_INLINE uint64_t rs_load_relaxed_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
RS_INLINE uint32_t rs_load_relaxed_u32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
RS_INLINE int32_t rs_load_relaxed_i32(const int32_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
RS_INLINE void rs_store_release_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
RS_INLINE void rs_store_release_u32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
RS_INLINE void rs_store_relaxed_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
RS_INLINE void rs_store_relaxed_u32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
RS_INLINE void rs_store_relaxed_i32(int32_t *p, int32_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
/** Orders the plain loads before it ahead of the loads after it (a seqlock reader's fence). */
RS_INLINE void rs_fence_acquire(void) { __atomic_thread_fence(__ATOMIC_ACQUIRE); }

/* MARK: - Clocks */

/** CLOCK_MONOTONIC_COARSE in nanoseconds: the records' timestamps. */
RS_INLINE uint64_t rs_clock_coarse_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/** CLOCK_MONOTONIC in nanoseconds: the precise clock, for spans. */
RS_INLINE uint64_t rs_clock_precise_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/** CLOCK_REALTIME in nanoseconds: wall time, for humans. */
RS_INLINE uint64_t rs_clock_realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/* MARK: - The producer's hot path */

/**
 * The producer's private state (in its own memory, not in the file). A producer that holds the
 * producer lock fills it from the mapped file; `records == NULL` means telemetry is disabled.
 */
typedef struct {
    rs_record *records;          /* the file's record slots, or NULL when disabled */
    uint64_t *write_cursor;      /* &header->write_cursor */
    const uint64_t *read_cursor; /* &header->read_cursor */
    uint64_t *dropped_total;     /* &header->dropped_total */
    uint64_t *heartbeat_ns;      /* &header->heartbeat_ns */
    uint64_t mask;               /* capacity - 1 */
    uint64_t next;               /* the next cursor to publish (== *write_cursor) */
    uint64_t cached_read;        /* the consumer's cursor as last seen: re-read only when full */
    uint32_t *sample_countdown;  /* per metric: calls left before the next written one */
    const uint32_t *sample_every;/* per metric: the registry's sample_every */
} rs_producer;

/**
 * Writes one record stamped `timestamp_ns` (CLOCK_MONOTONIC nanoseconds), or counts a drop when
 * the ring is full. Never blocks, allocates or makes a system call. Returns 1 if written. Only
 * the one producer that holds the producer lock may call it. A span passes the end time it
 * already read with the precise clock, saving a clock read.
 */
RS_INLINE int rs_producer_write_at(rs_producer *p, uint32_t metric, uint8_t kind, uint8_t flags,
                                   uint64_t value, uint64_t timestamp_ns) {
    if (__builtin_expect(p->records == NULL, 0)) return 0;
    uint64_t cursor = p->next;
    if (__builtin_expect(cursor - p->cached_read > p->mask, 0)) {
        /* Acquire: the consumer finished reading the slots below its cursor before storing it. */
        p->cached_read = rs_load_acquire_u64(p->read_cursor);
        if (cursor - p->cached_read > p->mask) {
            /* Only this producer writes the counter, so a relaxed load and store is exact. */
            rs_store_relaxed_u64(p->dropped_total, rs_load_relaxed_u64(p->dropped_total) + 1);
            return 0;
        }
    }
    rs_record *r = &p->records[cursor & p->mask];
    r->timestamp_ns = timestamp_ns;
    r->value = value;
    r->sequence = cursor;
    r->metric = metric;
    r->kind = kind;
    r->flags = flags;
    r->reserved = 0;
    p->next = cursor + 1;
    /* Release: the record's bytes are visible before the cursor that publishes them. */
    rs_store_release_u64(p->write_cursor, cursor + 1);
    rs_store_relaxed_u64(p->heartbeat_ns, timestamp_ns);
    return 1;
}

/** `rs_producer_write_at` stamped with the coarse clock: the usual way to write a record. */
RS_INLINE int rs_producer_write(rs_producer *p, uint32_t metric, uint8_t kind, uint8_t flags,
                                uint64_t value) {
    if (__builtin_expect(p->records == NULL, 0)) return 0; /* disabled: not even a clock read */
    return rs_producer_write_at(p, metric, kind, flags, value, rs_clock_coarse_ns());
}

/**
 * Applies a metric's "1 in N" sampling: returns 1 when this call is the one of N to write.
 * Metrics registered with N == 1 always return 1.
 */
RS_INLINE int rs_producer_sample(rs_producer *p, uint32_t metric) {
    uint32_t left = p->sample_countdown[metric];
    if (__builtin_expect(left <= 1, 1)) {
        p->sample_countdown[metric] = p->sample_every[metric];
        return 1;
    }
    p->sample_countdown[metric] = left - 1;
    return 0;
}

/* MARK: - Locks (ringside.c) */

/**
 * Takes the open-file-description write lock on one byte without waiting.
 * Returns 0 on success, or an errno value (EAGAIN/EACCES: another holder).
 */
int rs_lock_byte(int fd, int byte);

/**
 * Reports whether some open file description holds a lock on the byte: 1 held, 0 free,
 * or -errno on failure. A process's own lock conflicts too (OFD locks are per description).
 */
int rs_lock_byte_is_held(int fd, int byte);

/* MARK: - The SIGBUS guard (ringside.c) */

/*
 * A mapped ring file that another process truncates (or that shrinks under us) turns every
 * access to the pages past its new end into SIGBUS, which would kill a collector, a tool or a
 * bot. The guard prevents that. Each mapping registers its range in a fixed-size lock-free
 * table of RS_GUARD_SLOTS {base, size} slots (a full table leaves the mapping unguarded: the
 * caller still checks the file's size). The first registration installs, once per process, a
 * SIGBUS handler (sigaction, SA_SIGINFO). On a fault whose si_addr lies in a registered range,
 * the handler maps a private anonymous zero page over the faulting page (mmap MAP_FIXED |
 * MAP_PRIVATE | MAP_ANONYMOUS, read-write), marks the slot truncated and returns: the access
 * is retried and reads zeros (a producer's stores land in the private page, harmlessly). The
 * owner of the mapping then sees rs_guard_was_truncated() and reports the ring as truncated;
 * unmapping the range removes the zero pages with it. Any other SIGBUS (outside every range,
 * or sent with kill) restores the handler that was there before ours and is delivered again,
 * so a real fault still crashes as it would have. C bots may use the same calls.
 */
#define RS_GUARD_SLOTS 4096

/**
 * Registers a mapped range with the guard, installing the handler on first use.
 * Returns the slot (>= 0) to pass to the calls below, or -1 when the table is full or the
 * handler could not be installed (the range is then unguarded). Thread-safe.
 */
int rs_guard_register(const void *base, size_t size);

/** Removes a range registered with rs_guard_register; call it before munmap. Thread-safe. */
void rs_guard_unregister(int slot);

/** 1 if the guard absorbed a fault in the slot's range since it was registered, else 0. */
int rs_guard_was_truncated(int slot);

/** Faults the guard has absorbed in this process, in every range: for tests and diagnostics. */
uint64_t rs_guard_faults_absorbed(void);

#ifdef __cplusplus
}
#endif

#endif /* RINGSIDE_H */
