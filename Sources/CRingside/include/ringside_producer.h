/*
 * ringside_producer.h: a header-only producer API for C and C++ bots, over the format that
 * ringside.h specifies. Attach a ring by name, register metrics, then record, count and set
 * through the same hot path (`rs_producer_write`) the Swift library uses.
 *
 *   #include "ringside_producer.h"      // with -I <ringside>/Sources/CRingside/include
 *
 *   rs_ring ring;
 *   int rc = rs_ring_attach(&ring, "bot-a", NULL);           // /dev/shm/ringside.bot-a
 *   if (rc < 0) { fprintf(stderr, "%s\n", rs_ring_error(&ring)); exit(1); }
 *   const char *labels[] = {"symbol", "AAPL", NULL};         // key, value, ..., NULL
 *   rs_metric fill, orders, exposure;
 *   rs_ring_register(&ring, &fill, "order_fill_latency", RS_KIND_HISTOGRAM, RS_UNIT_NANOSECONDS, labels, "", 1);
 *   rs_ring_register(&ring, &orders, "orders", RS_KIND_COUNTER, RS_UNIT_NONE, NULL, "", 1);
 *   rs_ring_register(&ring, &exposure, "gross_exposure", RS_KIND_GAUGE, RS_UNIT_NONE, NULL, "", 1);
 *   rs_ring_record(&ring, fill, elapsed_ns);      // hot path: no lock, allocation or syscall
 *   rs_ring_count(&ring, orders, 1);
 *   rs_ring_set(&ring, exposure, 1.25e6);
 *   rs_ring_detach(&ring);                        // or just exit: the kernel drops the lock
 *
 * ERRORS: every function that can fail returns 0 or a negative code: -errno for a system call's
 * failure (-ENOSPC: the directory is full; -EACCES: the file belongs to another user; -ELOOP: a
 * symbolic link), or one of RS_E_* below. `rs_strerror(code)` names the code;
 * `rs_ring_error(ring)` is a sentence about the last failure on that ring, naming the ring, e.g.
 * "ring bot-a: another producer is attached (pid 4242); a ring has one producer".
 *
 * RULES (the same as the Swift library's `Ring.attach`; see MappedRingFile.swift):
 * - the file is created O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600 unless asked, and its space reserved
 *   with posix_fallocate, so a full /dev/shm fails at attach and never as SIGBUS later;
 * - the producer takes an open-file-description lock (F_OFD_SETLK) on byte 0; it dies with the
 *   process. After locking, the file must still be the one at the path (same inode), else attach
 *   opens it again;
 * - version 0 (creation never finished) is (re)initialised under the lock, the version stored
 *   last with release ordering; anything else is validated field by field and re-attached with
 *   its records, counters and metrics;
 * - registering a (name, labels) pair already in the registry returns it again; a new entry is
 *   written in full, then published by a release store of metric_count.
 *
 * THREADS: an rs_ring is one producer: use it from one thread at a time (a second thread needs
 * a ring of its own). Only attach, register and detach allocate or make system calls.
 *
 * BUILDING: the header needs Linux and GCC or Clang, C11 or later, or C++11 or later; the suite builds it with gcc -std=gnu11 and g++ -std=c++17. Open file
 * description locks need _GNU_SOURCE for <fcntl.h> to declare F_OFD_SETLK; when it is not
 * defined before the first system header, this header supplies Linux's values (stable ABI since
 * Linux 3.15). Strict modes such as -std=c11 hide posix_fallocate, O_NOFOLLOW and friends:
 * compile with -std=gnu11 (or define _GNU_SOURCE or _DEFAULT_SOURCE before any #include).
 */
#ifndef RINGSIDE_PRODUCER_H
#define RINGSIDE_PRODUCER_H

#include "ringside.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* Linux's values, for a translation unit that included <fcntl.h> without _GNU_SOURCE. */
#ifndef F_OFD_GETLK
#define F_OFD_GETLK 36
#endif
#ifndef F_OFD_SETLK
#define F_OFD_SETLK 37
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Functions of the API that are not the hot path: inlined or not as the compiler sees fit. */
#define RS_API static inline

/* MARK: - Error codes (besides -errno) */

#define RS_E_PRODUCER_ALIVE (-10001) /* another producer holds the ring */
#define RS_E_CORRUPT        (-10002) /* the file is not a valid ring */
#define RS_E_INCOMPATIBLE   (-10003) /* the ring exists with another capacity or registry size */
#define RS_E_INVALID        (-10004) /* a bad ring name, option, metric name, label or help */
#define RS_E_CONFLICT       (-10005) /* the metric exists with another kind, unit or sampling */
#define RS_E_REGISTRY_FULL  (-10006) /* no room for another metric */
#define RS_E_NOT_READY      (-10007) /* the file kept being replaced while attaching */

/** A short name for a code from this API: RS_E_* or -errno. */
RS_API const char *rs_strerror(int code) {
    switch (code) {
    case 0: return "success";
    case RS_E_PRODUCER_ALIVE: return "another producer is attached";
    case RS_E_CORRUPT: return "the file is not a valid ring";
    case RS_E_INCOMPATIBLE: return "the ring exists with another layout";
    case RS_E_INVALID: return "invalid argument";
    case RS_E_CONFLICT: return "the metric exists with another kind, unit or sampling";
    case RS_E_REGISTRY_FULL: return "the metric registry is full";
    case RS_E_NOT_READY: return "the file kept being replaced";
    default: return code < 0 ? strerror(-code) : "unknown error";
    }
}

/* MARK: - Types */

/** How to attach. Zero fields take the defaults; `rs_ring_attach(ring, name, NULL)` takes them all. */
typedef struct {
    const char *directory; /* NULL: $RINGSIDE_DIR, else /dev/shm */
    uint64_t capacity;     /* records, a power of two from 16 to 2^28. 0: 131,072 for a new ring, and
                              whatever an existing ring has (nonzero: an existing ring must match) */
    uint32_t max_metrics;  /* 1 to 4096. 0: 256 for a new ring, whatever an existing ring has */
    mode_t mode;           /* permission bits of a new file. 0: 0600 */
} rs_ring_options;

/** A registered metric: pass it by value to the record functions. */
typedef struct {
    uint32_t index;        /* its registry index */
    uint8_t kind;          /* rs_kind */
    uint8_t sampled;       /* 1 when sample_every > 1 */
} rs_metric;

/** A producer's attachment to one ring. Zero it or let rs_ring_attach fill it. */
typedef struct {
    rs_producer producer;      /* the hot path's state: first, so a record call reaches it directly */
    rs_header *header;         /* the mapped file, or NULL when not attached */
    size_t file_size;
    int fd;
    uint32_t registry_capacity;
    uint32_t *sample_countdown;/* per metric, malloc'd at attach */
    uint32_t *sample_every;
    char name[RS_NAME_LENGTH_MAX + 1];
    char message[1024];        /* the last failure, as a sentence naming the ring */
} rs_ring;

/* MARK: - Internals */

/** Records `code` and a sentence about it in ring->message; returns `code`. */
RS_API int rsp_fail(rs_ring *ring, int code, const char *detail) {
    snprintf(ring->message, sizeof ring->message, "ring %.200s: %.700s", ring->name, detail ? detail : rs_strerror(code));
    return code;
}

RS_API int rsp_fail_errno(rs_ring *ring, int code, const char *operation, const char *path) {
    char detail[700];
    snprintf(detail, sizeof detail, "%.40s %.300s: %.200s (errno %d)", operation, path, strerror(-code), -code);
    return rsp_fail(ring, code, detail);
}

RS_API int rsp_is_identifier(const char *text, size_t length) {
    if (length == 0) return 0;
    for (size_t i = 0; i < length; i++) {
        char c = text[i];
        int letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!letter && !(i > 0 && c >= '0' && c <= '9')) return 0;
    }
    return 1;
}

RS_API int rsp_valid_ring_name(const char *name) {
    size_t length = strlen(name);
    if (length == 0 || length > RS_NAME_LENGTH_MAX) return 0;
    for (size_t i = 0; i < length; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) return 0;
    }
    return strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

/** Takes the OFD write lock on `byte` without waiting: 0, or an errno value. */
RS_API int rsp_lock(int fd, int byte) {
    struct flock lock;
    memset(&lock, 0, sizeof lock);
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    lock.l_start = byte;
    lock.l_len = 1;
    lock.l_pid = 0; /* F_OFD_* require it */
    return fcntl(fd, F_OFD_SETLK, &lock) == 0 ? 0 : errno;
}

/** The layout fields of a new ring. */
RS_API void rsp_initialise(rs_header *h, uint32_t capacity_log2, uint32_t registry_capacity) {
    h->magic = RS_MAGIC;
    h->header_size = RS_HEADER_SIZE;
    h->record_size = RS_RECORD_SIZE;
    h->capacity_log2 = capacity_log2;
    h->registry_capacity = registry_capacity;
    h->registry_entry_size = RS_REGISTRY_ENTRY_SIZE;
    h->registry_offset = RS_HEADER_SIZE;
    h->records_offset = RS_HEADER_SIZE + (uint64_t)registry_capacity * RS_REGISTRY_ENTRY_SIZE;
    h->file_size = h->records_offset + ((uint64_t)1 << capacity_log2) * RS_RECORD_SIZE;
    h->created_realtime_ns = rs_clock_realtime_ns();
    h->created_monotonic_ns = rs_clock_precise_ns();
    /* Release, written last: a reader that sees the version sees the whole layout. */
    rs_store_release_u32(&h->version, RS_FORMAT_VERSION);
}

/** Checks an existing header as the Swift reader does (RingLayout(validating:)); NULL if valid. */
RS_API const char *rsp_layout_problem(const rs_header *h, uint64_t size) {
    if (h->magic != RS_MAGIC) return "bad magic";
    if (h->version != RS_FORMAT_VERSION) return "unsupported format version";
    if (h->header_size != RS_HEADER_SIZE || h->record_size != RS_RECORD_SIZE
        || h->registry_entry_size != RS_REGISTRY_ENTRY_SIZE) return "bad header, record or registry entry size";
    if (h->capacity_log2 < RS_MIN_CAPACITY_LOG2 || h->capacity_log2 > RS_MAX_CAPACITY_LOG2) return "bad capacity_log2";
    if (h->registry_capacity < 1 || h->registry_capacity > RS_MAX_REGISTRY_CAPACITY) return "bad registry_capacity";
    uint64_t records_offset = RS_HEADER_SIZE + (uint64_t)h->registry_capacity * RS_REGISTRY_ENTRY_SIZE;
    uint64_t file_size = records_offset + ((uint64_t)1 << h->capacity_log2) * RS_RECORD_SIZE;
    if (h->registry_offset != RS_HEADER_SIZE || h->records_offset != records_offset || h->file_size != file_size)
        return "bad registry_offset, records_offset or file_size";
    if (size != file_size) return "the file's size differs from its header's file_size";
    return NULL;
}

/** Checks registry entry `index` of an existing ring, enough to reuse it safely. */
RS_API int rsp_entry_is_valid(const rs_registry_entry *e, uint32_t index) {
    return e->index == index && e->kind >= RS_KIND_COUNTER && e->kind <= RS_KIND_HISTOGRAM
        && e->unit <= RS_UNIT_LAST && e->sample_every >= 1 && e->name_length <= RS_NAME_MAX
        && e->labels_length <= RS_LABELS_MAX && e->help_length <= RS_HELP_MAX;
}

RS_API rs_registry_entry *rsp_entry(rs_ring *ring, uint32_t index) {
    return (rs_registry_entry *)((char *)ring->header + RS_HEADER_SIZE + (size_t)index * RS_REGISTRY_ENTRY_SIZE);
}

/** One attempt at attaching: 1 when the path no longer names the file it locked (try again). */
RS_API int rsp_attach_once(rs_ring *ring, const char *path, const rs_ring_options *o) {
    mode_t mode = o->mode ? o->mode : 0600;
    int created = 1;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && errno == EEXIST) {
        created = 0;
        fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) return 1; /* removed between the two opens */
    }
    if (fd < 0) return rsp_fail_errno(ring, -errno, "open", path);
    if (created) fchmod(fd, mode); /* exactly the mode asked for, whatever the umask */

    struct stat opened, at_path;
    if (fstat(fd, &opened) != 0) { int e = -errno; close(fd); return rsp_fail_errno(ring, e, "fstat", path); }
    if (!S_ISREG(opened.st_mode)) { close(fd); return rsp_fail(ring, RS_E_CORRUPT, "the ring's path is not a regular file"); }
    if (opened.st_uid != geteuid()) {
        close(fd);
        char detail[700];
        snprintf(detail, sizeof detail, "%.300s is owned by uid %u, not %u; rings are private to their user",
                 path, (unsigned)opened.st_uid, (unsigned)geteuid());
        return rsp_fail(ring, -EACCES, detail);
    }
    int locked = rsp_lock(fd, RS_LOCK_BYTE_PRODUCER);
    if (locked == EAGAIN || locked == EACCES) {
        int32_t pid = 0;
        if (pread(fd, &pid, sizeof pid, 0xA0) != (ssize_t)sizeof pid) pid = 0;
        close(fd);
        char detail[200];
        snprintf(detail, sizeof detail, "another producer is attached (pid %d); a ring has one producer", (int)pid);
        return rsp_fail(ring, RS_E_PRODUCER_ALIVE, detail);
    }
    if (locked != 0) { close(fd); return rsp_fail_errno(ring, -locked, "lock", path); }
    /* Under the lock the file changes only through us: is it still the one at the path? */
    if (fstat(fd, &opened) != 0 || lstat(path, &at_path) != 0
        || opened.st_ino != at_path.st_ino || opened.st_dev != at_path.st_dev) {
        close(fd);
        return 1;
    }

    rs_header existing;
    memset(&existing, 0, sizeof existing);
    uint64_t size = (uint64_t)opened.st_size;
    int ready = 0;
    if (size >= RS_HEADER_SIZE) {
        if (pread(fd, &existing, sizeof existing, 0) != (ssize_t)sizeof existing) {
            int e = errno ? -errno : -EIO;
            close(fd);
            return rsp_fail_errno(ring, e, "read", path);
        }
        ready = existing.version != 0;
    }
    uint32_t capacity_log2, registry_capacity;
    if (ready) {
        const char *problem = rsp_layout_problem(&existing, size);
        if (problem) {
            close(fd);
            char detail[700];
            snprintf(detail, sizeof detail, "%.300s is corrupt: %.200s", path, problem);
            return rsp_fail(ring, RS_E_CORRUPT, detail);
        }
        capacity_log2 = existing.capacity_log2;
        registry_capacity = existing.registry_capacity;
        if ((o->capacity && o->capacity != ((uint64_t)1 << capacity_log2))
            || (o->max_metrics && o->max_metrics != registry_capacity)) {
            close(fd);
            char detail[300];
            snprintf(detail, sizeof detail, "it holds %llu records and %u metrics; asked for %llu and %u",
                     (unsigned long long)((uint64_t)1 << capacity_log2), (unsigned)registry_capacity,
                     (unsigned long long)o->capacity, (unsigned)o->max_metrics);
            return rsp_fail(ring, RS_E_INCOMPATIBLE, detail);
        }
    } else {
        uint64_t capacity = o->capacity ? o->capacity : ((uint64_t)1 << RS_DEFAULT_CAPACITY_LOG2);
        capacity_log2 = 0;
        while (((uint64_t)1 << capacity_log2) < capacity && capacity_log2 < 63) capacity_log2++;
        registry_capacity = o->max_metrics ? o->max_metrics : RS_DEFAULT_REGISTRY_CAPACITY;
        /* (the options were checked by rs_ring_attach) */
        size = RS_HEADER_SIZE + (uint64_t)registry_capacity * RS_REGISTRY_ENTRY_SIZE
             + ((uint64_t)1 << capacity_log2) * RS_RECORD_SIZE;
        /* Start from zeros (a half-created file may hold anything), then reserve every page now,
           so a full directory fails here and never as SIGBUS later. */
        int result = ftruncate(fd, 0) == 0 ? 0 : errno;
        if (result == 0) result = posix_fallocate(fd, 0, (off_t)size);
        if (result != 0) {
            if (created) unlink(path);
            close(fd);
            if (result == ENOSPC || result == EDQUOT) {
                char detail[700];
                snprintf(detail, sizeof detail, "no space for %llu bytes at %.300s (is /dev/shm full?)",
                         (unsigned long long)size, path);
                return rsp_fail(ring, -ENOSPC, detail);
            }
            return rsp_fail_errno(ring, -result, "reserve space for", path);
        }
    }
    int flags = MAP_SHARED;
#ifdef MAP_POPULATE
    flags |= MAP_POPULATE;
#endif
    void *base = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, flags, fd, 0);
    if (base == MAP_FAILED) { int e = -errno; close(fd); return rsp_fail_errno(ring, e, "mmap", path); }
    ring->header = (rs_header *)base;
    ring->file_size = (size_t)size;
    ring->fd = fd;
    ring->registry_capacity = registry_capacity;
    if (!ready) rsp_initialise(ring->header, capacity_log2, registry_capacity);
    return 0;
}

/** Undoes a partial attach. */
RS_API void rsp_release(rs_ring *ring) {
    if (ring->header) munmap(ring->header, ring->file_size);
    if (ring->fd >= 0) close(ring->fd); /* also releases the lock */
    free(ring->sample_countdown);
    free(ring->sample_every);
    ring->header = NULL;
    ring->fd = -1;
    ring->sample_countdown = NULL;
    ring->sample_every = NULL;
    ring->registry_capacity = 0;
    memset(&ring->producer, 0, sizeof ring->producer);
}

/* MARK: - Attaching */

/**
 * Attaches to the ring `name` as its producer, creating it if it does not exist.
 *
 * - name: 1 to 200 of [A-Za-z0-9._-]; the file is <directory>/ringside.<name>.
 * - options: NULL for the defaults (see rs_ring_options).
 * Returns 0, or a negative code (rs_ring_error(ring) says what happened):
 * RS_E_PRODUCER_ALIVE, RS_E_CORRUPT, RS_E_INCOMPATIBLE, RS_E_INVALID, -ENOSPC, -EACCES, -ELOOP...
 * With RINGSIDE_DISABLED=1 in the environment it attaches nothing and returns 0: every record
 * call then returns at once (registration still checks its arguments).
 */
RS_API int rs_ring_attach(rs_ring *ring, const char *name, const rs_ring_options *options) {
    memset(ring, 0, sizeof *ring);
    ring->fd = -1;
    snprintf(ring->name, sizeof ring->name, "%s", name ? name : "");
    if (!name || !rsp_valid_ring_name(name)) {
        return rsp_fail(ring, RS_E_INVALID, "a ring name is 1 to 200 of [A-Za-z0-9._-]");
    }
    rs_ring_options o;
    memset(&o, 0, sizeof o);
    if (options) o = *options;
    if (o.capacity && (o.capacity < ((uint64_t)1 << RS_MIN_CAPACITY_LOG2) || o.capacity > ((uint64_t)1 << RS_MAX_CAPACITY_LOG2)
                       || (o.capacity & (o.capacity - 1)) != 0)) {
        return rsp_fail(ring, RS_E_INVALID, "capacity must be a power of two from 16 to 268435456 records");
    }
    if (o.max_metrics > RS_MAX_REGISTRY_CAPACITY) {
        return rsp_fail(ring, RS_E_INVALID, "max_metrics must be from 1 to 4096");
    }
    const char *disabled = getenv("RINGSIDE_DISABLED");
    if (disabled && (strcmp(disabled, "1") == 0 || strcasecmp(disabled, "true") == 0 || strcasecmp(disabled, "yes") == 0)) {
        ring->registry_capacity = o.max_metrics ? o.max_metrics : RS_DEFAULT_REGISTRY_CAPACITY;
        return 0; /* disabled: producer.records stays NULL */
    }
    const char *directory = o.directory;
    if (!directory || !*directory) directory = getenv("RINGSIDE_DIR");
    if (!directory || !*directory) directory = "/dev/shm";
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/" RS_FILE_PREFIX "%s", directory, name) >= sizeof path) {
        return rsp_fail(ring, RS_E_INVALID, "the ring's path is too long");
    }
    int result = 1;
    /* A ring removed or replaced between our open and our lock: open again (bounded). */
    for (int attempt = 0; attempt < 8 && result == 1; attempt++) result = rsp_attach_once(ring, path, &o);
    if (result == 1) return rsp_fail(ring, RS_E_NOT_READY, "attach: the file kept being replaced");
    if (result < 0) return result;

    rs_header *h = ring->header;
    uint64_t capacity = (uint64_t)1 << h->capacity_log2;
    /* The registry, as earlier producers left it. */
    uint32_t count = rs_load_acquire_u32(&h->metric_count);
    uint64_t write = rs_load_acquire_u64(&h->write_cursor);
    uint64_t read = rs_load_acquire_u64(&h->read_cursor);
    if (count > ring->registry_capacity || read > write || write - read > capacity) {
        rsp_release(ring);
        return rsp_fail(ring, RS_E_CORRUPT, "the file is corrupt: metric_count or cursors out of range");
    }
    ring->sample_countdown = (uint32_t *)malloc(sizeof(uint32_t) * ring->registry_capacity);
    ring->sample_every = (uint32_t *)malloc(sizeof(uint32_t) * ring->registry_capacity);
    if (!ring->sample_countdown || !ring->sample_every) { rsp_release(ring); return rsp_fail(ring, -ENOMEM, NULL); }
    for (uint32_t i = 0; i < ring->registry_capacity; i++) {
        ring->sample_countdown[i] = 1;
        ring->sample_every[i] = 1;
    }
    for (uint32_t i = 0; i < count; i++) {
        const rs_registry_entry *e = rsp_entry(ring, i);
        if (!rsp_entry_is_valid(e, i)) {
            rsp_release(ring);
            char detail[200];
            snprintf(detail, sizeof detail, "the file is corrupt: registry entry %u is invalid", (unsigned)i);
            return rsp_fail(ring, RS_E_CORRUPT, detail);
        }
        ring->sample_every[i] = e->sample_every;
    }
    rs_producer *p = &ring->producer;
    p->records = (rs_record *)((char *)h + h->records_offset);
    p->write_cursor = &h->write_cursor;
    p->read_cursor = &h->read_cursor;
    p->dropped_total = &h->dropped_total;
    p->heartbeat_ns = &h->heartbeat_ns;
    p->mask = capacity - 1;
    p->next = write;
    p->cached_read = read;
    p->sample_countdown = ring->sample_countdown;
    p->sample_every = ring->sample_every;
    /* Say who we are (relaxed: readers treat these as hints; the lock is the truth). */
    rs_store_relaxed_i32(&h->producer_pid, (int32_t)getpid());
    rs_store_relaxed_u64(&h->producer_start_ns, rs_clock_realtime_ns());
    rs_store_relaxed_u32(&h->producer_attaches, rs_load_relaxed_u32(&h->producer_attaches) + 1);
    rs_store_relaxed_u64(&h->heartbeat_ns, rs_clock_coarse_ns());
    ring->message[0] = 0;
    return 0;
}

/** Unmaps the ring and releases its lock; its records stay for the collector. */
RS_API void rs_ring_detach(rs_ring *ring) { rsp_release(ring); }

/** The last failure on `ring` as a sentence naming the ring ("" after success). */
RS_API const char *rs_ring_error(const rs_ring *ring) { return ring->message; }

/* MARK: - Registration */

/**
 * Registers (or finds again) a metric.
 *
 * - name: [a-zA-Z_][a-zA-Z0-9_]*, at most 104 bytes.
 * - labels: NULL, or key, value, key, value, ..., NULL. Keys as names, not starting with "__";
 *   values without newlines; at most 256 bytes as stored ("key=value" lines sorted by key).
 * - help: NULL or at most 128 bytes.
 * - sample_every: write 1 in N calls (counters and histograms); the collector scales counts by N.
 *   Gauges take 1.
 * Returns 0 and fills `metric`, or RS_E_INVALID, RS_E_CONFLICT (same name and labels with
 * another kind, unit or sampling) or RS_E_REGISTRY_FULL.
 */
RS_API int rs_ring_register(rs_ring *ring, rs_metric *metric, const char *name, rs_kind kind, rs_unit unit,
                            const char *const *labels, const char *help, uint32_t sample_every) {
    memset(metric, 0, sizeof *metric);
    size_t name_length = name ? strlen(name) : 0;
    if (!rsp_is_identifier(name, name_length) || name_length > RS_NAME_MAX) {
        return rsp_fail(ring, RS_E_INVALID, "a metric name matches [a-zA-Z_][a-zA-Z0-9_]* and has at most 104 bytes");
    }
    if (kind < RS_KIND_COUNTER || kind > RS_KIND_HISTOGRAM || (int)unit < 0 || unit > RS_UNIT_LAST) {
        return rsp_fail(ring, RS_E_INVALID, "unknown kind or unit");
    }
    if (kind == RS_KIND_COUNTER) unit = RS_UNIT_NONE; /* counters count: they have no unit */
    if (sample_every < 1 || (kind == RS_KIND_GAUGE && sample_every != 1)) {
        return rsp_fail(ring, RS_E_INVALID, "sample_every must be at least 1 (and 1 for gauges)");
    }
    size_t help_length = help ? strlen(help) : 0;
    if (help_length > RS_HELP_MAX) return rsp_fail(ring, RS_E_INVALID, "the help text has more than 128 bytes");

    /* Labels: validate, sort by key (insertion sort: a handful of pairs), encode. */
    enum { MAX_PAIRS = 64 };
    const char *keys[MAX_PAIRS], *values[MAX_PAIRS];
    size_t pairs = 0;
    for (size_t i = 0; labels && labels[i]; i += 2) {
        if (!labels[i + 1]) return rsp_fail(ring, RS_E_INVALID, "labels come in key, value pairs ending with NULL");
        if (pairs == MAX_PAIRS) return rsp_fail(ring, RS_E_INVALID, "too many labels");
        const char *key = labels[i], *value = labels[i + 1];
        if (!rsp_is_identifier(key, strlen(key)) || strncmp(key, "__", 2) == 0) {
            return rsp_fail(ring, RS_E_INVALID, "a label key matches [a-zA-Z_][a-zA-Z0-9_]* and does not start with \"__\"");
        }
        if (strchr(value, '\n')) return rsp_fail(ring, RS_E_INVALID, "a label value has a newline");
        size_t at = pairs++;
        while (at > 0 && strcmp(keys[at - 1], key) > 0) { keys[at] = keys[at - 1]; values[at] = values[at - 1]; at--; }
        keys[at] = key;
        values[at] = value;
    }
    char encoded[RS_LABELS_MAX];
    size_t labels_length = 0;
    for (size_t i = 0; i < pairs; i++) {
        if (i > 0 && strcmp(keys[i - 1], keys[i]) == 0) return rsp_fail(ring, RS_E_INVALID, "a label key appears twice");
        size_t k = strlen(keys[i]), v = strlen(values[i]);
        size_t need = (i > 0 ? 1 : 0) + k + 1 + v;
        if (labels_length + need > RS_LABELS_MAX) return rsp_fail(ring, RS_E_INVALID, "the labels take more than 256 bytes");
        if (i > 0) encoded[labels_length++] = '\n';
        memcpy(encoded + labels_length, keys[i], k);
        labels_length += k;
        encoded[labels_length++] = '=';
        memcpy(encoded + labels_length, values[i], v);
        labels_length += v;
    }

    if (!ring->header && ring->registry_capacity == 0) {
        return rsp_fail(ring, -EBADF, "the ring is not attached (rs_ring_attach failed, or rs_ring_detach was called)");
    }
    uint32_t count = ring->header ? rs_load_relaxed_u32(&ring->header->metric_count) : 0; /* only we write it */
    for (uint32_t i = 0; i < count; i++) {
        const rs_registry_entry *e = rsp_entry(ring, i);
        if (e->name_length != name_length || memcmp(e->name, name, name_length) != 0
            || e->labels_length != labels_length || memcmp(e->labels, encoded, labels_length) != 0) continue;
        if (e->kind != (uint8_t)kind || e->unit != (uint8_t)unit || e->sample_every != sample_every) {
            return rsp_fail(ring, RS_E_CONFLICT, "the metric exists with another kind, unit or sampling");
        }
        metric->index = i;
        metric->kind = (uint8_t)kind;
        metric->sampled = sample_every > 1;
        return 0;
    }
    if (!ring->header) { /* disabled: a handle that writes nothing */
        metric->kind = (uint8_t)kind;
        return 0;
    }
    if (count >= ring->registry_capacity) return rsp_fail(ring, RS_E_REGISTRY_FULL, NULL);
    rs_registry_entry *e = rsp_entry(ring, count);
    memset(e, 0, sizeof *e);
    e->index = count;
    e->kind = (uint8_t)kind;
    e->unit = (uint8_t)unit;
    e->sample_every = sample_every;
    e->name_length = (uint16_t)name_length;
    e->labels_length = (uint16_t)labels_length;
    e->help_length = (uint16_t)help_length;
    memcpy(e->name, name, name_length);
    memcpy(e->labels, encoded, labels_length);
    if (help_length) memcpy(e->help, help, help_length);
    ring->sample_every[count] = sample_every;
    ring->sample_countdown[count] = 1;
    /* Release: the entry's bytes are visible before the count that publishes it. */
    rs_store_release_u32(&ring->header->metric_count, count + 1);
    metric->index = count;
    metric->kind = (uint8_t)kind;
    metric->sampled = sample_every > 1;
    return 0;
}

/* MARK: - The hot path: no lock, allocation or system call; never blocks */

/**
 * Records an observation of a histogram, in the unit it was registered with. Returns 1 if a
 * record was written, 0 if sampling skipped it, the ring was full (a counted drop), the ring is
 * disabled, or `metric` is not a histogram.
 */
RS_INLINE int rs_ring_record(rs_ring *ring, rs_metric metric, uint64_t value) {
    if (metric.kind != RS_KIND_HISTOGRAM) return 0;
    if (metric.sampled && !rs_producer_sample(&ring->producer, metric.index)) return 0;
    return rs_producer_write(&ring->producer, metric.index, RS_KIND_HISTOGRAM, 0, value);
}

/** Records a duration of a histogram measured with rs_clock_precise_ns, flagged as a span. */
RS_INLINE int rs_ring_record_span(rs_ring *ring, rs_metric metric, uint64_t nanoseconds) {
    if (metric.kind != RS_KIND_HISTOGRAM) return 0;
    if (metric.sampled && !rs_producer_sample(&ring->producer, metric.index)) return 0;
    return rs_producer_write(&ring->producer, metric.index, RS_KIND_HISTOGRAM, RS_FLAG_SPAN, nanoseconds);
}

/** Adds `increment` to a counter (sampled counters write 1 in N calls, scaled back by N). */
RS_INLINE int rs_ring_count(rs_ring *ring, rs_metric metric, uint64_t increment) {
    if (metric.kind != RS_KIND_COUNTER) return 0;
    if (metric.sampled && !rs_producer_sample(&ring->producer, metric.index)) return 0;
    return rs_producer_write(&ring->producer, metric.index, RS_KIND_COUNTER, 0, increment);
}

/** Sets a gauge. */
RS_INLINE int rs_ring_set(rs_ring *ring, rs_metric metric, double value) {
    if (metric.kind != RS_KIND_GAUGE) return 0;
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    return rs_producer_write(&ring->producer, metric.index, RS_KIND_GAUGE, 0, bits);
}

/** Records written into the ring since it was created, by every producer it has had. */
RS_INLINE uint64_t rs_ring_records_written(const rs_ring *ring) {
    return ring->header ? rs_load_acquire_u64(&ring->header->write_cursor) : 0;
}

/** Records dropped because the ring was full, since it was created. */
RS_INLINE uint64_t rs_ring_records_dropped(const rs_ring *ring) {
    return ring->header ? rs_load_relaxed_u64(&ring->header->dropped_total) : 0;
}

#undef RS_API

#ifdef __cplusplus
}
#endif

#endif /* RINGSIDE_PRODUCER_H */
