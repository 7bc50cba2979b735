/*
 * ringside_producer.c: the producer API that ringside_producer.h declares, over the format that
 * ringside.h specifies. Read those two first: this file follows their rules and names.
 *
 * WHAT LIVES WHERE
 * - The process: a table of RS_MAX_BOTS_PER_PROCESS slots {bot, generation} under one mutex
 *   (`rsp_mutex`), a generation counter that never repeats, a pthread key whose destructor
 *   retires an exiting thread's lanes, and fork handlers. Attach and detach run under that
 *   mutex, so neither a thread's exit nor a fork() ever sees a bot half attached or half gone.
 * - A bot (`rsp_bot`, whose first member is the public `rs_bot`): its file descriptor (holding the
 *   producer lock), the header part of the file mapped once, each lane mapped on its own, and the
 *   writers' views (`rs_producer`) of every lane. `bot->mutex` serialises registration, lane
 *   claims and releases.
 * - A thread: `rs_thread_lanes[slot]` = {the bot's generation, its producer}. A generation that
 *   is not the bot's (zero, an earlier bot in the slot, or the parent's in a forked child)
 *   sends the hot path to rs_bot_claim_lane.
 *
 * LOCK ORDER: rsp_mutex before any bot's mutex. Claims, releases by the thread itself and
 * registration take the bot's mutex alone; thread exit, detach and fork take rsp_mutex first.
 */
#define _GNU_SOURCE
#include "ringside_producer.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

RS_THREAD_LOCAL rs_thread_lane rs_thread_lanes[RS_MAX_BOTS_PER_PROCESS];

/* MARK: - Private state */

/** lane_held values. */
enum { RSP_FREE = 0, RSP_HELD_BY_THREAD = 1, RSP_HELD_EXCLUSIVE = 2 };

/** Returned by one attach attempt when the path names another file now: open it again. */
enum { RSP_AGAIN = 1, RSP_ATTEMPTS = 8 };

/** A forked child's parent's views (see rsp_become_worker), kept unused so that a producer the
    parent handed out stays callable in the child (it writes nothing there), and freed with the
    bot's own views at detach: one set per fork the bot went through. */
typedef struct rsp_kept_views {
    struct rsp_kept_views *next;
    rs_lane_producer *producers;
    uint32_t *sample_countdown, *lane_held, *sample_every, *registry_index;
    rs_lane_header **lanes;
    int *lane_guards;
    rs_sampling **samplings;
    uint32_t max_lanes;
} rsp_kept_views;

/** A bot as this file knows it: the public part first, so an rs_bot * is an rsp_bot *. */
typedef struct {
    rs_bot bot;
    rs_geometry geometry;       /* validated at attach: every offset used comes from here */
    int header_guard;           /* the header mapping's SIGBUS guard slot, or -1 */
    int *lane_guards;           /* max_lanes guard slots, -1 when unmapped or unguarded */
    uint32_t countdown_stride;  /* entries per sample_countdown row (128-byte rows) */
    rs_sampling **samplings;    /* max_lanes: each lane's adaptive sampling, made at its first
                                   hand-over (NULL until then, and when the bot never samples) */
    uint32_t sample_above_percent; /* the attach's option (0: the default; 100: never), kept for a
                                   forked child's worker file */
    uint32_t disabled_metrics;  /* a disabled bot's registrations, for their indices */
    uint32_t *registry_index;   /* registration's lookup of a metric by name and labels: entry index + 1
                                   (0: free) in open addressing, twice the registry's capacity; made at
                                   the first registration (NULL until then, or out of memory: every
                                   entry is compared then) */
    uint32_t registry_index_mask; /* its slots, less one (a power of two) */
    uint32_t registry_indexed;  /* the entries [0, registry_indexed) it holds */
    int forked;                 /* 1 in a forked child until it writes a worker file of its own
                                   (at its first record): the mapped file was the parent's */
    int said_no_worker;         /* the child could not make its worker file, and said why on stderr */
    dev_t file_dev;             /* the attached file, as fstat saw it: a forked child reads the */
    ino_t file_ino;             /*   registry of this very file, not one put at its path since */
    mode_t file_mode;           /* its permission bits, for a worker file a forked child makes */
    uint32_t max_workers;       /* the attach's bound on worker files (0: the default), for a forked child's */
    int said_why_laneless;      /* the "no lane could be added" message went to stderr */
    rsp_kept_views *kept_views; /* the views of the processes this one was forked from */
    int rings_doorbell;         /* this process registered for the consumer's barrier: its lanes ring
                                   the file's doorbell (see DOORBELL) */
    uint32_t lanes_mapped;      /* lanes this process mapped: the file's count at attach, plus those
                                   it added. Any process of the user can write the file's count, so
                                   every loop over lanes uses this one (stored with release, under
                                   bot->mutex; loaded with acquire by rs_bot_lanes_allocated). */
    char directory[4096];
} rsp_bot;

static rsp_bot *rsp_of(rs_bot *bot) { return (rsp_bot *)bot; }

typedef struct {
    rs_bot *bot;                /* NULL: free */
    uint64_t generation;
} rsp_slot;

static pthread_mutex_t rsp_mutex = PTHREAD_MUTEX_INITIALIZER;
static rsp_slot rsp_slots[RS_MAX_BOTS_PER_PROCESS];
static uint64_t rsp_next_generation = 1; /* under rsp_mutex; 0 means "no lane" in a thread's table */
static pthread_once_t rsp_once = PTHREAD_ONCE_INIT;
static pthread_key_t rsp_thread_key;
static int rsp_thread_key_created;

static void rsp_thread_exit(void *unused);
static void rsp_fork_prepare(void);
static void rsp_fork_parent(void);
static void rsp_fork_child(void);
static int rsp_become_worker(rsp_bot *b, rs_error *error);

static void rsp_init_process(void) {
    rsp_thread_key_created = pthread_key_create(&rsp_thread_key, rsp_thread_exit) == 0;
    pthread_atfork(rsp_fork_prepare, rsp_fork_parent, rsp_fork_child);
}

static int32_t rsp_gettid(void) { return (int32_t)syscall(SYS_gettid); }

/** The length of `name`'s first `max` bytes or fewer, cut at a UTF-8 character's boundary. */
static size_t rsp_utf8_prefix(const char *name, size_t length, size_t max) {
    if (length <= max) return length;
    size_t cut = max;
    while (cut > 0 && ((unsigned char)name[cut] & 0xC0) == 0x80) cut--; /* not inside a character */
    return cut;
}

/** Writes `name` (`length` bytes; cut to RS_THREAD_NAME_MAX) into a lane's thread_name, NUL-padded. */
static void rsp_write_thread_name(rs_lane_header *header, const char *name, size_t length) {
    char padded[RS_THREAD_NAME_MAX];
    memset(padded, 0, sizeof padded);
    memcpy(padded, name, rsp_utf8_prefix(name, length, sizeof padded));
    memcpy(header->thread_name, padded, sizeof padded);
}

/** The calling thread's name as the kernel has it (pthread_setname_np, or the program's). */
static void rsp_write_own_thread_name(rs_lane_header *header) {
    char name[16] = {0}; /* the kernel's TASK_COMM_LEN */
    if (pthread_getname_np(pthread_self(), name, sizeof name) != 0) name[0] = 0;
    rsp_write_thread_name(header, name, strnlen(name, sizeof name));
}

/* MARK: - Errors */

const char *rs_strerror(int code) {
    switch (code) {
    case 0: return "success";
    case RS_E_PRODUCER_ALIVE: return "another process holds the bot";
    case RS_E_CORRUPT: return "the file is not a valid bot file";
    case RS_E_INCOMPATIBLE: return "the file exists with another layout or format version";
    case RS_E_INVALID: return "invalid argument";
    case RS_E_CONFLICT: return "the metric exists with another kind, unit or sampling";
    case RS_E_REGISTRY_FULL: return "the metric registry is full";
    case RS_E_NOT_READY: return "the file kept being replaced";
    case RS_E_TOO_MANY_BOTS: return "the process holds too many bots";
    case RS_E_NO_LANE: return "every lane is taken";
    case RS_E_FORKED: return "this forked child could not make its worker file of the bot";
    case RS_E_NO_INODES: return "no file can be created in the ring directory (no free inodes)";
    case RS_E_TOO_MANY_WORKERS: return "the bot has as many worker files as its bound, each held by a live worker";
    default: return code < 0 ? strerror(-code) : "unknown error";
    }
}

static void rsp_clear_error(rs_error *error) {
    if (error == NULL) return;
    error->code = 0;
    error->pid = 0;
    error->uid = 0;
    error->message[0] = 0;
}

/** Fills *error with `code` and "bot NAME: " followed by the formatted sentence; returns `code`. */
__attribute__((format(printf, 4, 5)))
static int rsp_fail(rs_error *error, const char *bot, int code, const char *format, ...) {
    if (error == NULL) return code;
    error->code = code;
    int used = snprintf(error->message, sizeof error->message, "bot %.200s: ", bot ? bot : "?");
    if (used < 0 || (size_t)used >= sizeof error->message) return code;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(error->message + used, sizeof error->message - (size_t)used, format, arguments);
    va_end(arguments);
    return code;
}

/** A system call's failure: "OPERATION PATH: strerror (errno N)"; `code` is -errno. */
static int rsp_fail_system(rs_error *error, const char *bot, int code, const char *operation, const char *path) {
    return rsp_fail(error, bot, code, "%s %.700s: %s (errno %d)", operation, path, strerror(-code), -code);
}

/* MARK: - Files of the bot's directory */

/** The flags of every open of a path in the bot's directory, besides the access mode: never follow
    a link, never wait (a FIFO or a device planted at a bot's name opens at once, to be refused by
    its type), never make a terminal the process's controlling one. O_NONBLOCK changes nothing on
    a regular file. */
#define RSP_OPEN_FLAGS (O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)

/** What a file of `mode` is, for a person: "a FIFO (named pipe)", "a directory", ... */
static const char *rsp_file_kind(mode_t mode) {
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFLNK: return "a symbolic link";
    case S_IFIFO: return "a FIFO (named pipe)";
    case S_IFDIR: return "a directory";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    default: return "a file of an unknown type";
    }
}

/** Fails with RS_E_CORRUPT for `path`, which is not a regular file (`st`, its fstat or lstat): its
    type and owner, in error->uid too. */
static int rsp_fail_not_regular(rs_error *error, const char *bot, const char *path, const struct stat *st) {
    if (error) error->uid = (uint32_t)st->st_uid;
    return rsp_fail(error, bot, RS_E_CORRUPT, "%.700s is %s owned by uid %u, not a regular file of uid %u; a bot opens "
                    "only regular files of its own user (have it removed, or attach another name)", path,
                    rsp_file_kind(st->st_mode), (unsigned)st->st_uid, (unsigned)geteuid());
}

/* MARK: - Names, labels and registry entries */

static int rsp_is_identifier(const char *text, size_t length) {
    if (text == NULL || length == 0) return 0;
    for (size_t i = 0; i < length; i++) {
        char c = text[i];
        int letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!letter && !(i > 0 && c >= '0' && c <= '9')) return 0;
    }
    return 1;
}

static int rsp_valid_bot_name(const char *name) {
    size_t length = strlen(name);
    if (length == 0 || length > RS_NAME_LENGTH_MAX) return 0;
    for (size_t i = 0; i < length; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        if (!ok) return 0;
    }
    return strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

/** Byte order of two keys, as the encoding sorts them: <0, 0 or >0. */
static int rsp_compare_keys(const char *a, size_t a_length, const char *b, size_t b_length) {
    int order = memcmp(a, b, a_length < b_length ? a_length : b_length);
    if (order != 0) return order;
    return a_length < b_length ? -1 : a_length > b_length ? 1 : 0;
}

/** Checks labels as stored ("key=value" lines sorted strictly by key). 1 if valid, else 0 and why. */
static int rsp_labels_valid(const char *labels, size_t length, char *why, size_t why_size) {
    if (length > RS_LABELS_MAX) {
        snprintf(why, why_size, "the labels take %zu bytes, more than %u", length, RS_LABELS_MAX);
        return 0;
    }
    if (length == 0) return 1;
    if (labels == NULL) {
        snprintf(why, why_size, "the labels are NULL, with a length of %zu", length);
        return 0;
    }
    if (memchr(labels, 0, length) != NULL) {
        snprintf(why, why_size, "the labels hold a NUL byte");
        return 0;
    }
    const char *previous = NULL;
    size_t previous_length = 0, at = 0;
    for (;;) {
        const char *line = labels + at;
        const char *end = (const char *)memchr(line, '\n', length - at);
        size_t line_length = end ? (size_t)(end - line) : length - at;
        const char *equals = (const char *)memchr(line, '=', line_length);
        if (equals == NULL) {
            snprintf(why, why_size, "label \"%.*s\" is not key=value", (int)line_length, line);
            return 0;
        }
        size_t key_length = (size_t)(equals - line);
        if (!rsp_is_identifier(line, key_length)) {
            snprintf(why, why_size, "label key \"%.*s\" does not match [a-zA-Z_][a-zA-Z0-9_]*", (int)key_length, line);
            return 0;
        }
        if (key_length >= 2 && line[0] == '_' && line[1] == '_') {
            snprintf(why, why_size, "label key \"%.*s\" starts with \"__\", which Prometheus reserves", (int)key_length, line);
            return 0;
        }
        if (previous != NULL && rsp_compare_keys(previous, previous_length, line, key_length) >= 0) {
            snprintf(why, why_size, "label keys are not sorted strictly: \"%.*s\" comes after \"%.*s\"",
                     (int)key_length, line, (int)previous_length, previous);
            return 0;
        }
        previous = line;
        previous_length = key_length;
        if (end == NULL) return 1;
        at += line_length + 1; /* a trailing '\n' leaves an empty line, refused above */
    }
}

static const char *rsp_kind_name(unsigned kind) {
    switch (kind) {
    case RS_KIND_COUNTER: return "a counter";
    case RS_KIND_GAUGE: return "a gauge";
    case RS_KIND_HISTOGRAM: return "a histogram";
    default: return "an unknown kind";
    }
}

/** Checks registry entry `index` of an existing file, as a reader would. 1 if valid, else 0 and why. */
static int rsp_entry_valid(const rs_registry_entry *e, uint32_t index, char *why, size_t why_size) {
    if (e->index != index) { snprintf(why, why_size, "its index field says %u", (unsigned)e->index); return 0; }
    if (e->kind < RS_KIND_COUNTER || e->kind > RS_KIND_HISTOGRAM) { snprintf(why, why_size, "unknown kind %u", e->kind); return 0; }
    if (e->unit > RS_UNIT_LAST) { snprintf(why, why_size, "unknown unit %u", e->unit); return 0; }
    if (e->sample_every < 1) { snprintf(why, why_size, "sample_every is 0"); return 0; }
    if (e->gauge_merge >= RS_MERGE_POLICIES || (e->kind != RS_KIND_GAUGE && e->gauge_merge != RS_MERGE_LAST)) {
        snprintf(why, why_size, "gauge merge policy %u on %s", e->gauge_merge, rsp_kind_name(e->kind));
        return 0;
    }
    if (e->form > RS_FORM_SIGNED || (e->form == RS_FORM_SIGNED && e->kind != RS_KIND_HISTOGRAM)) {
        snprintf(why, why_size, "value form %u on %s", e->form, rsp_kind_name(e->kind));
        return 0;
    }
    if (e->scale < RS_SCALE_MIN || e->scale > RS_SCALE_MAX || (e->kind == RS_KIND_GAUGE && e->scale != 0)) {
        snprintf(why, why_size, "scale %d on %s", (int)e->scale, rsp_kind_name(e->kind));
        return 0;
    }
    if (e->name_length > RS_NAME_MAX || !rsp_is_identifier(e->name, e->name_length)) {
        snprintf(why, why_size, "its name is not an identifier of 1 to %u bytes", RS_NAME_MAX);
        return 0;
    }
    if (e->labels_length > RS_LABELS_MAX || !rsp_labels_valid(e->labels, e->labels_length, why, why_size)) {
        if (e->labels_length > RS_LABELS_MAX) snprintf(why, why_size, "labels length %u", (unsigned)e->labels_length);
        return 0;
    }
    if (e->help_length > RS_HELP_MAX || memchr(e->help, 0, e->help_length) != NULL) {
        snprintf(why, why_size, "its help is longer than %u bytes or holds a NUL", RS_HELP_MAX);
        return 0;
    }
    return 1;
}

static const char *rsp_unit_name(unsigned unit) {
    static const char *const names[] = {"none", "ns", "us", "ms", "s", "bytes"};
    return unit <= RS_UNIT_LAST ? names[unit] : "unknown";
}

static const char *rsp_merge_name(unsigned merge) {
    static const char *const names[] = {"the last set", "sum", "max", "min", "per worker"};
    return merge < RS_MERGE_POLICIES ? names[merge] : "an unknown policy";
}

/** Whether encoded labels ("key=value" lines) have the key `key`. */
static int rsp_has_label_key(const char *labels, size_t length, const char *key) {
    size_t key_length = strlen(key);
    for (size_t at = 0; at < length;) {
        const char *line = labels + at;
        const char *end = memchr(line, '\n', length - at);
        size_t line_length = end ? (size_t)(end - line) : length - at;
        if (line_length > key_length && line[key_length] == '=' && memcmp(line, key, key_length) == 0) return 1;
        at += line_length + 1;
    }
    return 0;
}

static uint32_t rsp_ns_per_unit(unsigned unit) {
    switch (unit) {
    case RS_UNIT_NANOSECONDS: return 1;
    case RS_UNIT_MICROSECONDS: return 1000;
    case RS_UNIT_MILLISECONDS: return 1000000;
    case RS_UNIT_SECONDS: return 1000000000;
    default: return 1;
    }
}

/* MARK: - Layout */

/** Checks an existing header's layout line against the format and rs_geometry_of.
    Returns 0, RS_E_INCOMPATIBLE (another format version) or RS_E_CORRUPT, with why. */
static int rsp_layout_check(const rs_header *h, char *why, size_t why_size) {
    if (h->magic != RS_MAGIC) {
        snprintf(why, why_size, "bad magic 0x%016llx (not a Ringside file)", (unsigned long long)h->magic);
        return RS_E_CORRUPT;
    }
    if (h->version < RS_FORMAT_VERSION_MIN || h->version > RS_FORMAT_VERSION) {
        snprintf(why, why_size, "it is format version %u%s; this library reads and writes versions %u and %u (a lane per "
                 "thread, gather cells): remove the file, or attach with recreate to replace it", (unsigned)h->version,
                 h->version == 1 ? " (one ring per file, before lanes)"
                 : h->version == 2 ? " (before gather cells)" : "", RS_FORMAT_VERSION_MIN, RS_FORMAT_VERSION);
        return RS_E_INCOMPATIBLE;
    }
    if (h->capacity_log2 < RS_MIN_CAPACITY_LOG2 || h->capacity_log2 > RS_MAX_CAPACITY_LOG2) {
        snprintf(why, why_size, "capacity_log2 is %u, not %u to %u", (unsigned)h->capacity_log2, RS_MIN_CAPACITY_LOG2, RS_MAX_CAPACITY_LOG2);
        return RS_E_CORRUPT;
    }
    if (h->registry_capacity < 1 || h->registry_capacity > RS_MAX_REGISTRY_CAPACITY) {
        snprintf(why, why_size, "registry_capacity is %u, not 1 to %u", (unsigned)h->registry_capacity, RS_MAX_REGISTRY_CAPACITY);
        return RS_E_CORRUPT;
    }
    if (h->max_lanes < 1 || h->max_lanes > RS_MAX_LANES) {
        snprintf(why, why_size, "max_lanes is %u, not 1 to %u", (unsigned)h->max_lanes, RS_MAX_LANES);
        return RS_E_CORRUPT;
    }
    rs_geometry g = rs_geometry_of(h->capacity_log2, h->registry_capacity);
    const struct { const char *field; uint64_t value, expected; } fields[] = {
        {"header_size", h->header_size, RS_HEADER_SIZE},
        {"record_size", h->record_size, RS_RECORD_SIZE},
        {"registry_entry_size", h->registry_entry_size, RS_REGISTRY_ENTRY_SIZE},
        {"metric_cell_size", h->metric_cell_size, RS_METRIC_CELL_SIZE},
        {"lane_header_size", h->lane_header_size, RS_LANE_HEADER_SIZE},
        {"registry_offset", h->registry_offset, g.registry_offset},
        {"cells_offset", h->cells_offset, g.cells_offset},
        {"lanes_offset", h->lanes_offset, g.lanes_offset},
        {"lane_size", h->lane_size, g.lane_size},
        {"lane_records_offset", h->lane_records_offset, g.lane_records_offset},
        {"lane_gather_offset", h->lane_gather_offset, g.lane_gather_offset},
        {"gather_cell_size", h->gather_cell_size, RS_GATHER_CELL_SIZE},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (fields[i].value != fields[i].expected) {
            snprintf(why, why_size, "%s is %llu, expected %llu", fields[i].field,
                     (unsigned long long)fields[i].value, (unsigned long long)fields[i].expected);
            return RS_E_CORRUPT;
        }
    }
    return 0;
}

/** The options' nonzero choices must be what an existing file holds. */
static int rsp_options_match(const rs_header *h, const rs_bot_options *o) {
    return (o->lane_capacity == 0 || o->lane_capacity == ((uint64_t)1 << h->capacity_log2))
        && (o->max_metrics == 0 || o->max_metrics == h->registry_capacity)
        && (o->max_lanes == 0 || o->max_lanes == h->max_lanes);
}

/** "4096" or "any", for a message. */
static const char *rsp_asked(uint64_t value, char *buffer, size_t size) {
    if (value == 0) return "any";
    snprintf(buffer, size, "%llu", (unsigned long long)value);
    return buffer;
}

static uint32_t rsp_log2(uint64_t power_of_two) {
    uint32_t log2 = 0;
    while (((uint64_t)1 << log2) < power_of_two && log2 < 63) log2++;
    return log2;
}

static rs_metric_cell *rsp_metric_cells(rsp_bot *b) {
    return (rs_metric_cell *)((char *)b->bot.header + b->geometry.cells_offset);
}

static rs_registry_entry *rsp_entry(rsp_bot *b, uint32_t index) {
    return (rs_registry_entry *)((char *)b->bot.header + b->geometry.registry_offset + (size_t)index * RS_REGISTRY_ENTRY_SIZE);
}

static uint64_t rsp_lane_offset(const rsp_bot *b, uint32_t lane) {
    return b->geometry.lanes_offset + (uint64_t)lane * b->geometry.lane_size;
}

static uint32_t *rsp_countdown_row(rsp_bot *b, uint32_t row) {
    return b->bot.sample_countdown + (size_t)row * b->countdown_stride;
}

/* MARK: - The process-private arrays */

/** Allocates the views of `max_lanes` lanes and `registry_capacity` metrics (no file access). */
static int rsp_allocate_views(rsp_bot *b, uint32_t registry_capacity, uint32_t max_lanes) {
    rs_bot *bot = &b->bot;
    bot->registry_capacity = registry_capacity;
    bot->max_lanes = max_lanes;
    b->countdown_stride = (registry_capacity + 31u) & ~31u; /* 32 entries: 128 bytes */
    size_t lanes = max_lanes ? max_lanes : 1;
    size_t rows = (size_t)max_lanes + 2; /* the lanes', then laneless's, then disabled's */
    void *producers = NULL, *countdown = NULL;
    if (posix_memalign(&producers, 128, lanes * sizeof(rs_lane_producer)) != 0) producers = NULL;
    if (posix_memalign(&countdown, 128, rows * b->countdown_stride * sizeof(uint32_t)) != 0) countdown = NULL;
    bot->producers = (rs_lane_producer *)producers;
    bot->sample_countdown = (uint32_t *)countdown;
    bot->lanes = (rs_lane_header **)calloc(lanes, sizeof(rs_lane_header *));
    bot->lane_held = (uint32_t *)calloc(lanes, sizeof(uint32_t));
    bot->sample_every = (uint32_t *)malloc(registry_capacity * sizeof(uint32_t));
    b->lane_guards = (int *)malloc(lanes * sizeof(int));
    b->samplings = (rs_sampling **)calloc(lanes, sizeof(rs_sampling *));
    if (!bot->producers || !bot->sample_countdown || !bot->lanes || !bot->lane_held || !bot->sample_every || !b->lane_guards
        || !b->samplings) {
        return -ENOMEM;
    }
    memset(bot->producers, 0, lanes * sizeof(rs_lane_producer));
    for (size_t i = 0; i < rows * b->countdown_stride; i++) bot->sample_countdown[i] = 1;
    for (uint32_t i = 0; i < registry_capacity; i++) bot->sample_every[i] = 1;
    for (size_t i = 0; i < lanes; i++) b->lane_guards[i] = -1;
    return 0;
}

/** This process's views of the bot, as a kept list's entry holds them (its `next` NULL). */
static rsp_kept_views rsp_views_of(const rsp_bot *b) {
    const rs_bot *bot = &b->bot;
    return (rsp_kept_views){NULL, bot->producers, bot->sample_countdown, bot->lane_held, bot->sample_every,
                            b->registry_index, bot->lanes, b->lane_guards, b->samplings, bot->max_lanes};
}

/** Lets go of the views without freeing them (a forked child keeps its parent's, see rsp_become_worker). */
static void rsp_forget_views(rsp_bot *b) {
    rs_bot *bot = &b->bot;
    bot->producers = NULL;
    bot->sample_countdown = NULL;
    bot->lanes = NULL;
    bot->lane_held = NULL;
    bot->sample_every = NULL;
    b->lane_guards = NULL;
    b->samplings = NULL;
    b->registry_index = NULL;
    b->registry_index_mask = 0;
    b->registry_indexed = 0;
}

/** Keeps the views as the parent's in a forked child (see rsp_kept_views), then lets go of them. */
static void rsp_keep_views(rsp_bot *b) {
    rsp_kept_views *kept = (rsp_kept_views *)malloc(sizeof *kept);
    if (kept != NULL) { /* out of memory: they stay allocated, unreachable, as before there was a list */
        *kept = rsp_views_of(b);
        kept->next = b->kept_views;
        b->kept_views = kept;
    }
    rsp_forget_views(b);
}

/** Frees what `views` holds (not `views` itself). */
static void rsp_free_held_views(const rsp_kept_views *views) {
    free(views->producers);
    free(views->sample_countdown);
    free(views->lanes);
    free(views->lane_held);
    free(views->sample_every);
    free(views->lane_guards);
    for (uint32_t lane = 0; views->samplings != NULL && lane < views->max_lanes; lane++) free(views->samplings[lane]);
    free(views->samplings);
    free(views->registry_index);
}

static void rsp_free_views(rsp_bot *b) {
    rsp_kept_views own = rsp_views_of(b);
    rsp_free_held_views(&own);
    rsp_forget_views(b);
    while (b->kept_views != NULL) {
        rsp_kept_views *kept = b->kept_views;
        b->kept_views = kept->next;
        rsp_free_held_views(kept);
        free(kept);
    }
}

/** The laneless and disabled producers: no records; laneless counts into the metric cells. */
static void rsp_build_laneless(rsp_bot *b) {
    rs_bot *bot = &b->bot;
    memset(&bot->laneless, 0, sizeof bot->laneless);
    memset(&bot->disabled, 0, sizeof bot->disabled);
    bot->laneless.shared = bot->header ? rsp_metric_cells(b) : NULL;
    /* Laneless threads share one countdown row, unlocked: under contention a few more (or
       fewer) than 1 in N of their calls pass it. They only ever count drops into `unlaned`, so
       that count alone is approximate for a sampled histogram; counters are never sampled. */
    bot->laneless.sample_countdown = rsp_countdown_row(b, bot->max_lanes);
    bot->laneless.sample_every = bot->sample_every;
    bot->disabled.sample_countdown = rsp_countdown_row(b, bot->max_lanes + 1);
    bot->disabled.sample_every = bot->sample_every;
}

/* MARK: - Mappings and lanes */

/** Reserves [offset, offset + size) of the file: 0, or an errno value (a signal does not count). */
static int rsp_reserve(int fd, uint64_t offset, uint64_t size) {
    int result;
    do result = posix_fallocate(fd, (off_t)offset, (off_t)size); while (result == EINTR);
    return result;
}

/** Maps [offset, offset + size) of the file shared, pages populated, and guards it from SIGBUS. */
static void *rsp_map(int fd, uint64_t offset, uint64_t size, int *guard) {
    void *base = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, (off_t)offset);
    if (base == MAP_FAILED) return NULL;
    *guard = rs_guard_register(base, (size_t)size);
    return base;
}

static void rsp_unmap(void *base, uint64_t size, int *guard) {
    if (base == NULL) return;
    rs_guard_unregister(*guard); /* first: the range must not be claimed once it is unmapped */
    *guard = -1;
    munmap(base, (size_t)size);
}

static void rsp_unmap_all(rsp_bot *b) {
    rs_bot *bot = &b->bot;
    for (uint32_t i = 0; bot->lanes != NULL && b->lane_guards != NULL && i < bot->max_lanes; i++) {
        rsp_unmap(bot->lanes[i], b->geometry.lane_size, &b->lane_guards[i]);
        bot->lanes[i] = NULL;
    }
    rsp_unmap(bot->header, bot->header_mapping_size, &b->header_guard);
    bot->header = NULL;
}

static int rsp_map_lane(rsp_bot *b, int fd, uint32_t lane) {
    void *base = rsp_map(fd, rsp_lane_offset(b, lane), b->geometry.lane_size, &b->lane_guards[lane]);
    if (base == NULL) return -errno;
    b->bot.lanes[lane] = (rs_lane_header *)base;
    return 0;
}

/** The records in a lane from which its histograms are sampled (see SAMPLING), by the attach's
    option: 0 when it never samples. */
static uint32_t rsp_sample_above(const rsp_bot *b) {
    uint32_t percent = b->sample_above_percent ? b->sample_above_percent : RS_DEFAULT_SAMPLE_ABOVE_PERCENT;
    if (percent >= 100) return 0;
    uint64_t above = ((uint64_t)percent << b->bot.capacity_log2) / 100;
    return above > 0 ? (uint32_t)above : 1;
}

/** Lane `lane`'s adaptive sampling, made at its first hand-over: NULL when the bot never samples,
    or when there is no memory for it (the lane then drops when full, as without sampling). */
static rs_sampling *rsp_lane_sampling(rsp_bot *b, uint32_t lane) {
    uint32_t above = rsp_sample_above(b);
    if (above == 0) return NULL;
    if (b->samplings[lane] == NULL) {
        /* One block: the struct, then each metric's calls since its last record. */
        size_t metrics = b->bot.registry_capacity;
        rs_sampling *s = (rs_sampling *)calloc(1, sizeof *s + metrics * sizeof(uint32_t));
        if (s == NULL) return NULL;
        s->calls = (uint32_t *)(s + 1);
        s->header = b->bot.header;
        s->above = above;
        b->samplings[lane] = s;
    }
    return b->samplings[lane];
}

/** Gives lane `lane` to the caller (`how`: a thread, or an exclusive user). Under bot->mutex. */
static void rsp_hand_over_locked(rsp_bot *b, uint32_t lane, uint32_t how) {
    rs_lane_header *header = b->bot.lanes[lane];
    /* The lane's writer's view, with the lane's own countdown row and sampling. */
    rs_producer_init(&b->bot.producers[lane].producer, header, b->geometry.lane_gather_offset, b->geometry.lane_records_offset,
                     b->bot.capacity_log2, rsp_metric_cells(b), rsp_countdown_row(b, lane), b->bot.sample_every,
                     rsp_lane_sampling(b, lane), b->rings_doorbell ? &b->bot.header->doorbell : NULL);
    b->bot.lane_held[lane] = how;
    uint64_t now = rs_clock_coarse_ns();
    /* Relaxed: these are the process's to write, under this mutex; `state` publishes them. */
    rs_store_relaxed_u32(&header->claims, rs_load_relaxed_u32(&header->claims) + 1);
    rs_store_relaxed_i32(&header->owner_tid, rsp_gettid());
    rsp_write_own_thread_name(header);
    rs_store_relaxed_u64(&header->heartbeat_ns, now);
    /* Release: a reader that sees ACTIVE sees the owner, its name and claim count stored before it. */
    rs_store_release_u32(&header->state, RS_LANE_ACTIVE);
    rs_store_relaxed_u64(&b->bot.header->heartbeat_ns, now); /* relaxed: a hint for readers */
}

/** Marks lane `lane` free in the process and retired in the file. Under bot->mutex (or the lock alone at attach). */
static void rsp_retire_locked(rsp_bot *b, uint32_t lane) {
    rs_lane_header *header = b->bot.lanes[lane];
    b->bot.lane_held[lane] = RSP_FREE;
    rs_store_relaxed_i32(&header->owner_tid, 0); /* relaxed: `state` below publishes it */
    /* Release: a reader that sees RETIRED sees every record and cell the last holder wrote. */
    rs_store_release_u32(&header->state, RS_LANE_RETIRED);
}

/** Says once per bot, on stderr, why a thread records without a lane. */
static void rsp_say_laneless(rsp_bot *b, uint32_t lane, int code) {
    if (b->said_why_laneless) return;
    b->said_why_laneless = 1;
    if (code == -ENOSPC || code == -EDQUOT) {
        fprintf(stderr, "ringside: bot %s: no space for lane %u (%llu bytes) in %s (is %s full?): a thread "
                "without a lane keeps its counts and gauges, and counts its records as dropped\n",
                b->bot.name, (unsigned)lane, (unsigned long long)b->geometry.lane_size, b->bot.path, b->directory);
    } else {
        fprintf(stderr, "ringside: bot %s: lane %u could not be added to %s: %s (errno %d): a thread without a lane "
                "keeps its counts and gauges, and counts its records as dropped\n",
                b->bot.name, (unsigned)lane, b->bot.path, strerror(-code), -code);
    }
}

/** Appends lane `lane` (== lanes_allocated) to the file: 0, or -errno. Under bot->mutex. */
static int rsp_add_lane_locked(rsp_bot *b, uint32_t lane) {
    /* Reserve the lane's pages first, so a full directory is an error now and never a SIGBUS. */
    int result = rsp_reserve(b->bot.fd, rsp_lane_offset(b, lane), b->geometry.lane_size);
    if (result != 0) return -result;
    result = rsp_map_lane(b, b->bot.fd, lane);
    if (result != 0) return result;
    /* A process that died while adding this lane may have written its header or cells. */
    memset(b->bot.lanes[lane], 0, b->geometry.lane_records_offset); /* header, cells and gather cells */
    /* Release: a reader that sees the new count sees the lane's pages and its zeroed header. */
    rs_store_release_u32(&b->bot.header->lanes_allocated, lane + 1);
    rs_store_release_u32(&b->lanes_mapped, lane + 1); /* release: the lane is mapped and zeroed */
    return 0;
}

/** Takes the lowest free lane, adding one if none is free: its index, RS_E_NO_LANE when every
    lane is held, or -errno when a lane could not be added. Under bot->mutex. */
static int rsp_take_lane_locked(rsp_bot *b, uint32_t how) {
    rs_bot *bot = &b->bot;
    uint32_t allocated = b->lanes_mapped; /* ours, under this mutex */
    for (uint32_t lane = 0; lane < allocated; lane++) {
        if (bot->lane_held[lane] == RSP_FREE) {
            rsp_hand_over_locked(b, lane, how);
            return (int)lane;
        }
    }
    if (allocated < bot->max_lanes) {
        int result = rsp_add_lane_locked(b, allocated);
        if (result != 0) {
            rsp_say_laneless(b, allocated, result);
            return result;
        }
        rsp_hand_over_locked(b, allocated, how);
        return (int)allocated;
    }
    /* Relaxed: a statistic only this process writes, under this mutex. */
    rs_store_relaxed_u64(&bot->header->lanes_exhausted, rs_load_relaxed_u64(&bot->header->lanes_exhausted) + 1);
    return RS_E_NO_LANE;
}

/** The lane whose view `p` is, or -1 (laneless, disabled, or another bot's). */
static int rsp_lane_of(rsp_bot *b, const rs_producer *p) {
    uintptr_t first = (uintptr_t)b->bot.producers, at = (uintptr_t)p;
    if (first == 0 || at < first) return -1;
    uintptr_t lane = (at - first) / sizeof(rs_lane_producer);
    if (lane >= b->bot.max_lanes || &b->bot.producers[lane].producer != p) return -1;
    return (int)lane;
}

/** Retires the lane a thread's table entry holds, if it is a lane this thread holds, after ending
    its sampling (the thread is the lane's holder). Under bot->mutex. */
static void rsp_release_entry_locked(rsp_bot *b, const rs_producer *p) {
    int lane = rsp_lane_of(b, p);
    if (lane >= 0 && b->bot.lane_held[lane] == RSP_HELD_BY_THREAD) {
        rs_producer_end_sampling(&b->bot.producers[lane].producer);
        rsp_retire_locked(b, (uint32_t)lane);
    }
}

/* MARK: - Attaching */

/** Opens (or creates) the file and takes the producer lock: 0, RSP_AGAIN, or a negative code. */
static int rsp_open_and_lock(rsp_bot *b, mode_t mode, int *fd_out, int *created_out, uint64_t *size_out, rs_error *error) {
    const char *path = b->bot.path, *name = b->bot.name;
    int created = 1;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | RSP_OPEN_FLAGS, mode);
    if (fd < 0 && errno == EEXIST) {
        created = 0;
        fd = open(path, O_RDWR | RSP_OPEN_FLAGS);
        if (fd < 0 && errno == ENOENT) return RSP_AGAIN; /* removed between the two opens */
    }
    if (fd < 0 && errno == ELOOP) return rsp_fail(error, name, -ELOOP, "%.700s is a symbolic link; Ringside never follows links", path);
    /* A directory (EISDIR, opened to write), a socket or a device without a driver (ENXIO, ENODEV): said as what it is. */
    struct stat opened, at_path;
    if (fd < 0 && (errno == EISDIR || errno == ENXIO || errno == ENODEV) && lstat(path, &at_path) == 0 && !S_ISREG(at_path.st_mode)) {
        return rsp_fail_not_regular(error, name, path, &at_path);
    }
    /* Creating the file failed for want of room: with no byte reserved yet, that is the file
       system's inodes (or a quota), not the ring's size. */
    if (fd < 0 && created && (errno == ENOSPC || errno == EDQUOT)) {
        return rsp_fail(error, name, RS_E_NO_INODES, "cannot create %.700s: %.700s has no free inodes (or a quota is "
                        "reached; df -i says which)", path, b->directory);
    }
    if (fd < 0) return rsp_fail_system(error, name, -errno, "open", path);
    if (created) fchmod(fd, mode); /* exactly the mode asked for, whatever the umask */

    if (fstat(fd, &opened) != 0) {
        int code = -errno;
        close(fd);
        return rsp_fail_system(error, name, code, "fstat", path);
    }
    if (!S_ISREG(opened.st_mode)) {
        close(fd);
        return rsp_fail_not_regular(error, name, path, &opened);
    }
    if (opened.st_uid != geteuid()) {
        close(fd);
        if (error) error->uid = (uint32_t)opened.st_uid;
        return rsp_fail(error, name, -EACCES, "%.700s is owned by uid %u, not %u; bot files are private to their user",
                        path, (unsigned)opened.st_uid, (unsigned)geteuid());
    }
    int locked = rs_lock_byte(fd, RS_LOCK_BYTE_PRODUCER);
    if (locked == EAGAIN || locked == EACCES) {
        rs_header copy;
        memset(&copy, 0, sizeof copy);
        int32_t pid = 0;
        if (pread(fd, &copy, sizeof copy, 0) == (ssize_t)sizeof copy) {
            /* Format version 1 kept the pid at 0xA0. */
            if (copy.version == 1) memcpy(&pid, (const char *)&copy + 0xA0, sizeof pid);
            else pid = copy.producer_pid;
        }
        close(fd);
        if (error) error->pid = pid;
        return rsp_fail(error, name, RS_E_PRODUCER_ALIVE, "another producer is attached (pid %d); a bot has one process, or "
                         "several as its workers (attach with the worker option)", (int)pid);
    }
    if (locked != 0) {
        close(fd);
        return rsp_fail_system(error, name, -locked, "lock", path);
    }
    /* Under the lock the file changes only through us: is it still the one at the path? */
    if (fstat(fd, &opened) != 0 || lstat(path, &at_path) != 0 || opened.st_ino != at_path.st_ino || opened.st_dev != at_path.st_dev) {
        close(fd);
        return RSP_AGAIN;
    }
    *fd_out = fd;
    *created_out = created;
    *size_out = (uint64_t)opened.st_size;
    return 0;
}

/**
 * Registers the process for the consumer's barrier (DOORBELL in ringside.h), once per process (a
 * forked child, a process of its own, registers again): 1 when its producers may ring.
 */
static int rsp_register_for_doorbell(void) {
    static int32_t registered_pid = 0; /* threads may attach at once: registering twice is harmless */
    int32_t pid = (int32_t)getpid();
    if (__atomic_load_n(&registered_pid, __ATOMIC_ACQUIRE) == pid) return 1;
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) != 0) return 0;
    __atomic_store_n(&registered_pid, pid, __ATOMIC_RELEASE);
    return 1;
}

/** Writes the producer line of a freshly attached file and builds the lane-less producers. */
static void rsp_start(rsp_bot *b) {
    rs_header *h = b->bot.header;
    b->rings_doorbell = rsp_register_for_doorbell();
    rs_store_relaxed_u32(&h->rings_doorbell, (uint32_t)b->rings_doorbell);
    /* Relaxed: readers treat these as hints; the lock is the truth. */
    rs_store_relaxed_i32(&h->producer_pid, (int32_t)getpid());
    rs_store_relaxed_u64(&h->producer_start_ns, rs_clock_realtime_ns());
    rs_store_relaxed_u32(&h->producer_attaches, rs_load_relaxed_u32(&h->producer_attaches) + 1);
    rs_store_relaxed_u64(&h->heartbeat_ns, rs_clock_coarse_ns());
    rs_store_relaxed_u32(&h->sample_above, rsp_sample_above(b));
    rsp_build_laneless(b);
}

static int rsp_set_shape(rsp_bot *b, uint32_t capacity_log2, uint32_t registry_capacity, uint32_t max_lanes, rs_error *error) {
    b->bot.capacity_log2 = capacity_log2;
    b->geometry = rs_geometry_of(capacity_log2, registry_capacity);
    b->bot.header_mapping_size = (size_t)b->geometry.lanes_offset;
    if (rsp_allocate_views(b, registry_capacity, max_lanes) != 0) {
        return rsp_fail(error, b->bot.name, -ENOMEM, "out of memory for the views of %u lanes", (unsigned)max_lanes);
    }
    return 0;
}

static int rsp_map_header(rsp_bot *b, int fd, rs_error *error) {
    void *base = rsp_map(fd, 0, b->geometry.lanes_offset, &b->header_guard);
    if (base == NULL) return rsp_fail_system(error, b->bot.name, -errno, "mmap", b->bot.path);
    b->bot.header = (rs_header *)base;
    return 0;
}

/** A new file, or one whose creation never finished (version 0): lay it out under the lock. */
static int rsp_create(rsp_bot *b, int fd, const rs_bot_options *o, int created, rs_error *error) {
    uint32_t capacity_log2 = o->lane_capacity ? rsp_log2(o->lane_capacity) : RS_DEFAULT_LANE_CAPACITY_LOG2;
    uint32_t registry_capacity = o->max_metrics ? o->max_metrics : RS_DEFAULT_REGISTRY_CAPACITY;
    uint32_t max_lanes = o->max_lanes ? o->max_lanes : RS_DEFAULT_MAX_LANES;
    int rc = rsp_set_shape(b, capacity_log2, registry_capacity, max_lanes, error);
    if (rc != 0) return rc;
    uint64_t size = b->geometry.lanes_offset;
    /* Start from zeros (a half-created file may hold anything), then reserve the header part
       now, so a full directory fails here and never as SIGBUS later. */
    int result = ftruncate(fd, 0) == 0 ? 0 : errno;
    if (result == 0) result = rsp_reserve(fd, 0, size);
    if (result == ENOSPC || result == EDQUOT) {
        rc = rsp_fail(error, b->bot.name, -ENOSPC, "no space for %llu bytes at %.700s (is %.700s full?)",
                      (unsigned long long)size, b->bot.path, b->directory);
    } else if (result != 0) {
        rc = rsp_fail_system(error, b->bot.name, -result, "reserve space for", b->bot.path);
    } else {
        rc = rsp_map_header(b, fd, error);
    }
    if (rc != 0) {
        if (created) unlink(b->bot.path); /* ours, and we still hold its lock */
        return rc;
    }
    rs_header *h = b->bot.header;
    h->magic = RS_MAGIC;
    h->header_size = RS_HEADER_SIZE;
    h->record_size = RS_RECORD_SIZE;
    h->capacity_log2 = capacity_log2;
    h->registry_capacity = registry_capacity;
    h->registry_entry_size = RS_REGISTRY_ENTRY_SIZE;
    h->registry_offset = b->geometry.registry_offset;
    h->cells_offset = b->geometry.cells_offset;
    h->lanes_offset = b->geometry.lanes_offset;
    h->created_realtime_ns = rs_clock_realtime_ns();
    h->created_monotonic_ns = rs_clock_precise_ns();
    h->lane_size = b->geometry.lane_size;
    h->lane_records_offset = b->geometry.lane_records_offset;
    h->max_lanes = max_lanes;
    h->metric_cell_size = RS_METRIC_CELL_SIZE;
    h->lane_header_size = RS_LANE_HEADER_SIZE;
    h->lane_gather_offset = b->geometry.lane_gather_offset;
    h->gather_cell_size = RS_GATHER_CELL_SIZE;
    /* Release, written last: a reader that sees the version sees the whole layout. */
    rs_store_release_u32(&h->version, RS_FORMAT_VERSION_MIN); /* 4 at its first signed or scaled metric */
    rsp_start(b);
    return 0;
}

/** Checks metric_count and every published entry; copies their sampling. */
static int rsp_check_registry(rsp_bot *b, rs_error *error) {
    uint32_t count = rs_load_acquire_u32(&b->bot.header->metric_count); /* acquire: the entries below it */
    if (count > b->bot.registry_capacity) {
        return rsp_fail(error, b->bot.name, RS_E_CORRUPT, "%.700s is corrupt: metric_count %u exceeds registry_capacity %u",
                        b->bot.path, (unsigned)count, (unsigned)b->bot.registry_capacity);
    }
    for (uint32_t i = 0; i < count; i++) {
        const rs_registry_entry *e = rsp_entry(b, i);
        char why[400];
        if (!rsp_entry_valid(e, i, why, sizeof why)) {
            return rsp_fail(error, b->bot.name, RS_E_CORRUPT, "%.600s is corrupt: registry entry %u: %s", b->bot.path, (unsigned)i, why);
        }
        b->bot.sample_every[i] = e->sample_every;
    }
    return 0;
}

/** Maps every allocated lane and checks its cursors. */
static int rsp_map_lanes(rsp_bot *b, int fd, uint64_t file_size, rs_error *error) {
    rs_bot *bot = &b->bot;
    uint32_t allocated = rs_load_acquire_u32(&bot->header->lanes_allocated); /* acquire: the lanes' headers */
    if (allocated > bot->max_lanes) {
        return rsp_fail(error, bot->name, RS_E_CORRUPT, "%.700s is corrupt: lanes_allocated %u exceeds max_lanes %u",
                        bot->path, (unsigned)allocated, (unsigned)bot->max_lanes);
    }
    uint64_t needed = rsp_lane_offset(b, allocated);
    if (file_size < needed) {
        return rsp_fail(error, bot->name, RS_E_CORRUPT, "%.700s is corrupt: it has %llu bytes, but its %u lanes need %llu",
                        bot->path, (unsigned long long)file_size, (unsigned)allocated, (unsigned long long)needed);
    }
    uint64_t capacity = (uint64_t)1 << bot->capacity_log2;
    for (uint32_t lane = 0; lane < allocated; lane++) {
        int rc = rsp_map_lane(b, fd, lane);
        if (rc != 0) return rsp_fail_system(error, bot->name, rc, "mmap a lane of", bot->path);
        uint64_t write = rs_load_acquire_u64(&bot->lanes[lane]->write_cursor); /* acquire: pairs with the writer's release */
        uint64_t read = rs_load_acquire_u64(&bot->lanes[lane]->read_cursor);   /* acquire: pairs with the consumer's release */
        if (read > write) {
            return rsp_fail(error, bot->name, RS_E_CORRUPT, "%.700s is corrupt: lane %u's read_cursor %llu is past its write_cursor %llu",
                            bot->path, (unsigned)lane, (unsigned long long)read, (unsigned long long)write);
        }
        if (write - read > capacity) {
            return rsp_fail(error, bot->name, RS_E_CORRUPT, "%.700s is corrupt: lane %u's cursors (read %llu, write %llu) hold more "
                            "records than its capacity of %llu", bot->path, (unsigned)lane, (unsigned long long)read,
                            (unsigned long long)write, (unsigned long long)capacity);
        }
    }
    rs_store_release_u32(&b->lanes_mapped, allocated); /* release: each lane is mapped */
    return 0;
}

/** An existing file: validate it field by field, then take it over with its lanes retired. */
static int rsp_adopt(rsp_bot *b, int fd, const rs_header *copy, uint64_t size, const rs_bot_options *o, rs_error *error) {
    const char *name = b->bot.name, *path = b->bot.path;
    char why[600];
    int rc = rsp_layout_check(copy, why, sizeof why);
    if (rc == RS_E_INCOMPATIBLE) return rsp_fail(error, name, rc, "%.300s: %s", path, why);
    if (rc != 0) return rsp_fail(error, name, rc, "%.300s is corrupt: %s", path, why);
    rs_geometry g = rs_geometry_of(copy->capacity_log2, copy->registry_capacity);
    if (size < g.lanes_offset) {
        return rsp_fail(error, name, RS_E_CORRUPT, "%.700s is corrupt: it has %llu bytes, less than the %llu before its lanes",
                        path, (unsigned long long)size, (unsigned long long)g.lanes_offset);
    }
    if (!rsp_options_match(copy, o)) {
        char a[24], m[24], l[24];
        return rsp_fail(error, name, RS_E_INCOMPATIBLE, "%.600s holds lanes of %llu records, %u metrics and %u lanes; asked for "
                        "lanes of %s records, %s metrics and %s lanes (attach with recreate to replace it, losing its contents)",
                        path, (unsigned long long)((uint64_t)1 << copy->capacity_log2), (unsigned)copy->registry_capacity,
                        (unsigned)copy->max_lanes, rsp_asked(o->lane_capacity, a, sizeof a),
                        rsp_asked(o->max_metrics, m, sizeof m), rsp_asked(o->max_lanes, l, sizeof l));
    }
    rc = rsp_set_shape(b, copy->capacity_log2, copy->registry_capacity, copy->max_lanes, error);
    if (rc == 0) rc = rsp_map_header(b, fd, error);
    if (rc == 0) rc = rsp_check_registry(b, error);
    if (rc == 0) rc = rsp_map_lanes(b, fd, size, error);
    if (rc != 0) return rc;
    /* Valid: only now is anything written. The process that held the lanes is gone (it held the lock). */
    for (uint32_t lane = 0; lane < b->lanes_mapped; lane++) rsp_retire_locked(b, lane);
    rsp_start(b);
    return 0;
}

/** One attempt: 0, RSP_AGAIN (open the path again), or a negative code. */
static int rsp_attach_once(rsp_bot *b, const rs_bot_options *o, rs_error *error) {
    int fd = -1, created = 0;
    uint64_t size = 0;
    int rc = rsp_open_and_lock(b, o->mode ? o->mode : 0600, &fd, &created, &size, error);
    if (rc != 0) return rc;
    rs_header copy;
    memset(&copy, 0, sizeof copy);
    if (size >= RS_HEADER_SIZE && pread(fd, &copy, sizeof copy, 0) != (ssize_t)sizeof copy) {
        rc = rsp_fail_system(error, b->bot.name, errno ? -errno : -EIO, "read", b->bot.path);
    } else if (size < RS_HEADER_SIZE || copy.version == 0) {
        rc = rsp_create(b, fd, o, created, error);
    } else {
        rc = rsp_adopt(b, fd, &copy, size, o, error);
    }
    struct stat attached;
    if (rc == 0 && fstat(fd, &attached) == 0) {
        b->bot.fd = fd;
        b->file_dev = attached.st_dev;
        b->file_ino = attached.st_ino;
        b->file_mode = attached.st_mode & 0777;
        return 0;
    }
    if (rc == 0) rc = rsp_fail_system(error, b->bot.name, -errno, "fstat", b->bot.path);
    rsp_unmap_all(b);
    rsp_free_views(b);
    if ((rc == RS_E_INCOMPATIBLE || rc == RS_E_CORRUPT) && o->recreate) {
        /* Asked to replace it: we hold its lock and it is still the file at the path. */
        if (unlink(b->bot.path) == 0 || errno == ENOENT) rc = RSP_AGAIN;
    }
    close(fd);
    return rc;
}

static int rsp_check_options(const char *name, const rs_bot_options *o, rs_error *error) {
    uint64_t capacity = o->lane_capacity;
    if (capacity && (capacity < ((uint64_t)1 << RS_MIN_CAPACITY_LOG2) || capacity > ((uint64_t)1 << RS_MAX_CAPACITY_LOG2)
                     || (capacity & (capacity - 1)) != 0)) {
        return rsp_fail(error, name, RS_E_INVALID, "lane_capacity %llu must be a power of two from %llu to %llu records",
                        (unsigned long long)capacity, (unsigned long long)1 << RS_MIN_CAPACITY_LOG2,
                        (unsigned long long)1 << RS_MAX_CAPACITY_LOG2);
    }
    if (o->max_metrics > RS_MAX_REGISTRY_CAPACITY) {
        return rsp_fail(error, name, RS_E_INVALID, "max_metrics %u must be from 1 to %u", (unsigned)o->max_metrics, RS_MAX_REGISTRY_CAPACITY);
    }
    if (o->max_lanes > RS_MAX_LANES) {
        return rsp_fail(error, name, RS_E_INVALID, "max_lanes %u must be from 1 to %u", (unsigned)o->max_lanes, RS_MAX_LANES);
    }
    if (o->max_workers > RS_MAX_WORKERS) {
        return rsp_fail(error, name, RS_E_INVALID, "max_workers %u must be from 1 to %u", (unsigned)o->max_workers, RS_MAX_WORKERS);
    }
    if (o->sample_above_percent > 100) {
        return rsp_fail(error, name, RS_E_INVALID, "sample_above_percent %u must be from 1 to 100 (100: never sample; 0 for "
                        "the default, %u)", (unsigned)o->sample_above_percent, RS_DEFAULT_SAMPLE_ABOVE_PERCENT);
    }
    if (o->mode & ~(mode_t)0777) {
        return rsp_fail(error, name, RS_E_INVALID, "mode 0%o has bits other than permissions", (unsigned)o->mode);
    }
    return 0;
}

static int rsp_disabled_by_environment(void) {
    const char *value = getenv("RINGSIDE_DISABLED");
    return value && (strcmp(value, "1") == 0 || strcasecmp(value, "true") == 0 || strcasecmp(value, "yes") == 0);
}

/** Attaches the file at b->bot.path, retrying while it is replaced under us. */
static int rsp_attach_file(rsp_bot *b, const rs_bot_options *o, rs_error *error) {
    for (int attempt = 0; attempt < RSP_ATTEMPTS; attempt++) {
        int rc = rsp_attach_once(b, o, error);
        if (rc != RSP_AGAIN) return rc;
    }
    return rsp_fail(error, b->bot.name, RS_E_NOT_READY, "%.700s kept being replaced while attaching (%d attempts)",
                    b->bot.path, RSP_ATTEMPTS);
}

/** `<directory>/ringside.<name>`, or a worker's `<directory>/ringside.<name>@<pid>` (with `.<suffix>`
    when `suffix` is not 0: see WORKERS); 0 if too long. */
static int rsp_file_path(char *path, size_t size, const char *directory, const char *name, int32_t worker_pid,
                         uint32_t suffix) {
    int length = suffix ? snprintf(path, size, "%s/" RS_FILE_PREFIX "%s" RS_WORKER_SEPARATOR "%d" RS_WORKER_SUFFIX_SEPARATOR "%u",
                                   directory, name, (int)worker_pid, (unsigned)suffix)
                 : worker_pid ? snprintf(path, size, "%s/" RS_FILE_PREFIX "%s" RS_WORKER_SEPARATOR "%d", directory, name, (int)worker_pid)
                              : snprintf(path, size, "%s/" RS_FILE_PREFIX "%s", directory, name);
    return length >= 0 && (size_t)length < size;
}

/** The number of 1 to 10 digits at `*text` (no leading 0, at most `most`), advancing past them; 0 if none. */
static uint64_t rsp_read_number(const char **text, uint64_t most) {
    const char *start = *text;
    if (*start < '1' || *start > '9') return 0;
    uint64_t value = 0;
    const char *c = start;
    for (; *c >= '0' && *c <= '9'; c++) {
        if (c - start >= 10) return 0;
        value = value * 10 + (uint64_t)(*c - '0');
    }
    *text = c;
    return value <= most ? value : 0;
}

/** The pid a directory entry names if it is a worker file of bot `name` (`ringside.<name>@<pid>`
    or `ringside.<name>@<pid>.<n>`), else 0. */
static int32_t rsp_worker_pid_of_entry(const char *entry, const char *name) {
    size_t prefix = strlen(RS_FILE_PREFIX), length = strlen(name);
    if (strncmp(entry, RS_FILE_PREFIX, prefix) != 0 || strncmp(entry + prefix, name, length) != 0) return 0;
    const char *at = entry + prefix + length;
    if (*at++ != RS_WORKER_SEPARATOR[0]) return 0;
    uint64_t pid = rsp_read_number(&at, INT32_MAX);
    if (pid == 0) return 0;
    if (*at == RS_WORKER_SUFFIX_SEPARATOR[0]) {
        at++;
        if (rsp_read_number(&at, UINT32_MAX) == 0) return 0;
    }
    return *at == 0 ? (int32_t)pid : 0;
}

/** Whether directory entry `entry` is a regular file of this process's user (never following a link). */
static int rsp_entry_is_ours(DIR *dir, const char *entry) {
    struct stat st;
    return fstatat(dirfd(dir), entry, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
}

/** A random worker suffix, 1 to 4294967295: unpredictable to another user (getrandom), else the
    clock's and the pid's bits, which still differ from one try to the next. */
static uint32_t rsp_random_suffix(void) {
    uint32_t value = 0;
    if (syscall(SYS_getrandom, &value, sizeof value, 0) != (long)sizeof value) {
        value = (uint32_t)(rs_clock_precise_ns() * UINT64_C(0x9E3779B97F4A7C15) >> 32) ^ (uint32_t)getpid();
    }
    return value == 0 ? 1 : value;
}

/** Whether an attach's failure `rc` means the name is unusable to us (another user's file, a link,
    one held by a live process, one we cannot take over), so that another name may serve. */
static int rsp_name_is_unusable(int rc) {
    return rc == RS_E_PRODUCER_ALIVE || rc == -EACCES || rc == -EPERM || rc == -ELOOP || rc == -EISDIR || rc == -ENXIO || rc == RS_E_CORRUPT
        || rc == RS_E_INCOMPATIBLE || rc == RS_E_NOT_READY;
}

/** Adds 1 to the bot's file's `workers_refused`, if the file is there and whole: 1 if counted. */
static int rsp_count_refused_worker(const rsp_bot *b) {
    char path[sizeof b->bot.path];
    if (!rsp_file_path(path, sizeof path, b->directory, b->bot.name, 0, 0)) return 0;
    int fd = open(path, O_RDWR | RSP_OPEN_FLAGS);
    if (fd < 0) return 0;
    struct stat st;
    int counted = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_size >= RS_HEADER_SIZE) {
        rs_header *h = (rs_header *)mmap(NULL, RS_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (h != MAP_FAILED) {
            uint32_t version = rs_load_acquire_u32(&h->version);
            if (h->magic == RS_MAGIC && version >= RS_FORMAT_VERSION_MIN && version <= RS_FORMAT_VERSION) {
                __atomic_fetch_add(&h->workers_refused, 1, __ATOMIC_RELAXED);
                counted = 1;
            }
            munmap(h, RS_HEADER_SIZE);
        }
    }
    close(fd);
    return counted;
}

/**
 * Attaches this process's worker file (b->bot.path, `<name>@<pid>`) within the bound (see WORKERS):
 * while the directory holds fewer than max_workers worker files of the bot of this user (its own
 * aside), its own, or when that name is unusable (another user's file planted there, say) one of
 * RS_WORKER_NAME_ATTEMPTS random `<name>@<pid>.<n>`; past the bound, or when none of them serves,
 * the file of a worker of this user that is gone, whose totals it continues (b->bot.path names it
 * then); when every one is held, RS_E_TOO_MANY_WORKERS, counted in the bot's file.
 */
static int rsp_attach_worker_file(rsp_bot *b, const rs_bot_options *o, rs_error *error) {
    uint32_t bound = o->max_workers ? o->max_workers : RS_DEFAULT_MAX_WORKERS;
    int32_t self = (int32_t)getpid();
    DIR *dir = opendir(b->directory);
    if (dir == NULL) return rsp_attach_file(b, o, error); /* the attach says what is wrong with it */
    uint32_t others = 0;
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
        int32_t pid = rsp_worker_pid_of_entry(entry->d_name, b->bot.name);
        if (pid != 0 && pid != self && rsp_entry_is_ours(dir, entry->d_name)) others++;
    }
    char own[sizeof b->bot.path];
    snprintf(own, sizeof own, "%s", b->bot.path);
    if (others < bound) {
        int rc = rsp_attach_file(b, o, error);
        for (uint32_t attempt = 0; rsp_name_is_unusable(rc) && attempt < RS_WORKER_NAME_ATTEMPTS; attempt++) {
            if (!rsp_file_path(b->bot.path, sizeof b->bot.path, b->directory, b->bot.name, self, rsp_random_suffix())) break;
            rc = rsp_attach_file(b, o, error);
        }
        /* Every name unusable (held by another live process, say): continue a gone worker's
           file instead, as past the bound. */
        if (!rsp_name_is_unusable(rc)) {
            closedir(dir);
            if (rc != 0) snprintf(b->bot.path, sizeof b->bot.path, "%s", own);
            return rc;
        }
    }
    rewinddir(dir);
    int rc = RS_E_TOO_MANY_WORKERS;
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
        int32_t pid = rsp_worker_pid_of_entry(entry->d_name, b->bot.name);
        /* A file is its worker's while that process lives, even before it holds the lock (between
           creating the file and locking it): only a gone worker's file of this user is continued. */
        if (pid == 0 || pid == self || kill(pid, 0) == 0 || errno == EPERM || !rsp_entry_is_ours(dir, entry->d_name)) continue;
        int length = snprintf(b->bot.path, sizeof b->bot.path, "%s/%s", b->directory, entry->d_name);
        if (length < 0 || (size_t)length >= sizeof b->bot.path) continue;
        rs_error ignored;
        if ((rc = rsp_attach_file(b, o, &ignored)) == 0) break; /* a gone worker's file: ours now */
        rc = RS_E_TOO_MANY_WORKERS;                            /* held, or not one to continue: the next */
    }
    closedir(dir);
    if (rc == 0) return 0;
    snprintf(b->bot.path, sizeof b->bot.path, "%s", own);
    int counted = rsp_count_refused_worker(b);
    const char *counted_why = counted ? "; counted in the bot's file (workers_refused)" : "; not counted: the bot's own file is missing";
    if (others < bound) {
        return rsp_fail(error, b->bot.name, RS_E_TOO_MANY_WORKERS, "its worker file %.600s and %u other names were unusable, and "
                        "no gone worker's file is free to continue%s", own, RS_WORKER_NAME_ATTEMPTS, counted_why);
    }
    return rsp_fail(error, b->bot.name, RS_E_TOO_MANY_WORKERS, "the bot has %u worker files (max_workers), each held by a live "
                    "worker%s", (unsigned)others, counted_why);
}

/** A bot that maps nothing: records return at once, registration still checks its arguments. */
static int rsp_set_up_disabled(rsp_bot *b, const rs_bot_options *o, rs_error *error) {
    uint32_t registry_capacity = o->max_metrics ? o->max_metrics : RS_DEFAULT_REGISTRY_CAPACITY;
    if (rsp_allocate_views(b, registry_capacity, 0) != 0) return rsp_fail(error, b->bot.name, -ENOMEM, "out of memory");
    rsp_build_laneless(b);
    b->bot.path[0] = 0;
    return 0;
}

static int rsp_free_slot_locked(void) {
    for (int slot = 0; slot < RS_MAX_BOTS_PER_PROCESS; slot++) {
        if (rsp_slots[slot].bot == NULL) return slot;
    }
    return -1;
}

/**
 * Each slot's bot, allocated at the slot's first attach and kept for the process's life, for the
 * slot's next attachment: a span handle that does not keep its bot attached (Swift's Timing) may
 * read `generation` after rs_bot_detach, and finds the bot's memory there, never freed memory.
 * At most RS_MAX_BOTS_PER_PROCESS of them, under rsp_mutex.
 */
static rsp_bot *rsp_bot_memory[RS_MAX_BOTS_PER_PROCESS];

/** The generation of a slot's bot while nothing is attached in it: never a thread's, nor a span's. */
#define RSP_NO_ATTACHMENT UINT64_MAX

/** Lets go of everything the bot holds and leaves its memory blank for the slot's next attach. */
static void rsp_retire_memory(rsp_bot *b) {
    rsp_unmap_all(b);
    rsp_free_views(b);
    pthread_mutex_destroy(&b->bot.mutex);
    memset(b, 0, sizeof *b);
    b->bot.generation = RSP_NO_ATTACHMENT;
}

/** The free slot's bot memory, blank, its mutex ready (under rsp_mutex); NULL when out of memory. */
static rsp_bot *rsp_memory_for_slot_locked(int slot) {
    if (rsp_bot_memory[slot] == NULL) {
        rsp_bot *b = (rsp_bot *)calloc(1, sizeof *b);
        if (b == NULL) return NULL;
        b->bot.generation = RSP_NO_ATTACHMENT;
        rsp_bot_memory[slot] = b;
    }
    rsp_bot *b = rsp_bot_memory[slot];
    pthread_mutex_init(&b->bot.mutex, NULL);
    b->bot.fd = -1;
    b->header_guard = -1;
    return b;
}

int rs_bot_attach(rs_bot **out, const char *name, const rs_bot_options *options, rs_error *error) {
    rsp_clear_error(error);
    if (out) *out = NULL;
    if (name == NULL || !rsp_valid_bot_name(name)) {
        return rsp_fail(error, name ? name : "(null)", RS_E_INVALID, "a bot name is 1 to %u of [A-Za-z0-9._-], not . or ..", RS_NAME_LENGTH_MAX);
    }
    if (out == NULL) return rsp_fail(error, name, RS_E_INVALID, "rs_bot_attach needs somewhere to store the bot");
    rs_bot_options o;
    memset(&o, 0, sizeof o);
    if (options) o = *options;
    int rc = rsp_check_options(name, &o, error);
    if (rc != 0) return rc;
    pthread_once(&rsp_once, rsp_init_process);
    rs_span_clock_init(); /* once a process, outside the mutex: it sleeps a millisecond */

    const char *directory = o.directory;
    if (!directory || !*directory) directory = getenv("RINGSIDE_DIR");
    if (!directory || !*directory) directory = "/dev/shm";
    char path[sizeof ((rs_bot *)0)->path];
    if (!rsp_file_path(path, sizeof path, directory, name, o.worker ? (int32_t)getpid() : 0, 0)) {
        return rsp_fail(error, name, RS_E_INVALID, "the bot's path in %.300s is longer than %zu bytes", directory, sizeof path - 1);
    }

    /* Under the process's mutex: a fork() or a thread's exit never sees a bot half attached. */
    pthread_mutex_lock(&rsp_mutex);
    int slot = rsp_free_slot_locked();
    rsp_bot *b = slot < 0 ? NULL : rsp_memory_for_slot_locked(slot);
    if (slot < 0) {
        rc = rsp_fail(error, name, RS_E_TOO_MANY_BOTS, "the process already holds %d bots; detach one first", RS_MAX_BOTS_PER_PROCESS);
    } else if (b == NULL) {
        rc = rsp_fail(error, name, -ENOMEM, "out of memory");
    } else {
        b->bot.owner_pid = (int32_t)getpid();
        snprintf(b->bot.name, sizeof b->bot.name, "%s", name);
        snprintf(b->bot.path, sizeof b->bot.path, "%s", path);
        snprintf(b->directory, sizeof b->directory, "%s", directory);
        b->max_workers = o.max_workers;
        b->sample_above_percent = o.sample_above_percent;
        if (o.disabled || rsp_disabled_by_environment()) {
            rc = rsp_set_up_disabled(b, &o, error);
        } else {
            rc = o.worker ? rsp_attach_worker_file(b, &o, error) : rsp_attach_file(b, &o, error);
            b->bot.enabled = rc == 0;
        }
        if (rc == 0) {
            b->bot.slot = (uint32_t)slot;
            b->bot.generation = rsp_next_generation++;
            rsp_slots[slot].bot = &b->bot;
            rsp_slots[slot].generation = b->bot.generation;
        } else {
            rsp_retire_memory(b);
        }
    }
    pthread_mutex_unlock(&rsp_mutex);
    if (rc != 0) return rc;
    rsp_clear_error(error);
    *out = &b->bot;
    return 0;
}

void rs_bot_detach(rs_bot *bot) {
    if (bot == NULL) return;
    rsp_bot *b = rsp_of(bot);
    pthread_mutex_lock(&rsp_mutex);
    if (bot->generation == RSP_NO_ATTACHMENT) { /* detached already */
        pthread_mutex_unlock(&rsp_mutex);
        return;
    }
    if (bot->slot < RS_MAX_BOTS_PER_PROCESS && rsp_slots[bot->slot].bot == bot) {
        rsp_slots[bot->slot].bot = NULL; /* thread exits and forks no longer find it */
        rsp_slots[bot->slot].generation = 0;
    }
    if (bot->enabled && !b->forked) {
        /* Every lane is retired with the process's hold on the file (readers see it at once); what
           its sampling gathered is in its gather cells already (no thread records meanwhile). */
        pthread_mutex_lock(&bot->mutex);
        for (uint32_t lane = 0; lane < b->lanes_mapped; lane++) {
            rs_producer_end_sampling(&bot->producers[lane].producer);
            rsp_retire_locked(b, lane);
        }
        pthread_mutex_unlock(&bot->mutex);
    }
    /* Unmapped and closed under the process's mutex, so a fork() either disowns them or never
       sees them (a child's copy of a mapping would hold the producer lock as the fd would). */
    rsp_unmap_all(b);
    if (bot->fd >= 0) close(bot->fd); /* with the mappings gone, this releases the producer lock */
    bot->fd = -1;
    rs_thread_lane *entry = &rs_thread_lanes[bot->slot % RS_MAX_BOTS_PER_PROCESS];
    if (entry->generation == bot->generation) {
        entry->generation = 0;
        entry->producer = NULL;
    }
    rsp_retire_memory(b); /* under the mutex: the slot's next attach reuses the memory */
    pthread_mutex_unlock(&rsp_mutex);
}

/* MARK: - Registration */

/** A registration's arguments, lengths explicit. */
typedef struct {
    const char *name;
    size_t name_length;
    unsigned kind, unit;
    const char *labels;
    size_t labels_length;
    const char *help;
    size_t help_length;
    uint32_t sample_every;
    unsigned gauge_merge;
    rs_values values;
} rsp_request;

/** "{key=value,key=value}", or "" without labels, for messages. */
static const char *rsp_labels_for_message(const rsp_request *r, char *buffer, size_t size) {
    if (r->labels_length == 0 || size < 3) return "";
    size_t n = r->labels_length < size - 3 ? r->labels_length : size - 3;
    buffer[0] = '{';
    for (size_t i = 0; i < n; i++) buffer[i + 1] = r->labels[i] == '\n' ? ',' : r->labels[i];
    buffer[n + 1] = '}';
    buffer[n + 2] = 0;
    return buffer;
}

static int rsp_check_request(rsp_bot *b, rsp_request *r, rs_error *error) {
    const char *bot = b->bot.name;
    int name_length = (int)(r->name_length < 120 ? r->name_length : 120);
    if (!rsp_is_identifier(r->name, r->name_length) || r->name_length > RS_NAME_MAX) {
        return rsp_fail(error, bot, RS_E_INVALID, "metric name \"%.*s\" must match [a-zA-Z_][a-zA-Z0-9_]* and have at most %u bytes",
                        r->name ? name_length : 0, r->name ? r->name : "", RS_NAME_MAX);
    }
    if (r->kind < RS_KIND_COUNTER || r->kind > RS_KIND_HISTOGRAM) {
        return rsp_fail(error, bot, RS_E_INVALID, "metric %.*s: unknown kind %u", name_length, r->name, r->kind);
    }
    if (r->unit > RS_UNIT_LAST) return rsp_fail(error, bot, RS_E_INVALID, "metric %.*s: unknown unit %u", name_length, r->name, r->unit);
    if (r->kind == RS_KIND_COUNTER) r->unit = RS_UNIT_NONE; /* counters count: they have no unit */
    if (r->sample_every < 1) {
        return rsp_fail(error, bot, RS_E_INVALID, "metric %.*s: sample_every must be at least 1", name_length, r->name);
    }
    if (r->kind == RS_KIND_COUNTER && r->sample_every != 1) {
        return rsp_fail(error, bot, RS_E_INVALID, "metric %.*s: counters are exact: sample_every must be 1", name_length, r->name);
    }
    if (r->kind == RS_KIND_GAUGE && r->sample_every != 1) {
        return rsp_fail(error, bot, RS_E_INVALID, "metric %.*s: a gauge keeps its last value: sample_every must be 1", name_length, r->name);
    }
    if (r->values.form > RS_FORM_SIGNED) {
        return rsp_fail(error, bot, RS_E_INVALID, "metric %.*s: unknown value form %u", name_length, r->name, (unsigned)r->values.form);
    }
    if (r->values.form == RS_FORM_SIGNED && r->kind != RS_KIND_HISTOGRAM) {
        return rsp_fail(error, bot, RS_E_INVALID, "metric %.*s: only a histogram takes signed values (a counter never goes back; "
                        "a gauge is a double)", name_length, r->name);
    }
    if (r->values.scale < RS_SCALE_MIN || r->values.scale > RS_SCALE_MAX) {
        return rsp_fail(error, bot, RS_E_INVALID, "metric %.*s: scale %d is not from %d to %d", name_length, r->name,
                        (int)r->values.scale, RS_SCALE_MIN, RS_SCALE_MAX);
    }
    if (r->kind == RS_KIND_GAUGE && r->values.scale != 0) {
        return rsp_fail(error, bot, RS_E_INVALID, "metric %.*s: a gauge is a double: it takes no scale", name_length, r->name);
    }
    if (r->gauge_merge >= RS_MERGE_POLICIES) {
        return rsp_fail(error, bot, RS_E_INVALID, "metric %.*s: unknown gauge merge policy %u", name_length, r->name, r->gauge_merge);
    }
    if (r->kind != RS_KIND_GAUGE && r->gauge_merge != RS_MERGE_LAST) {
        return rsp_fail(error, bot, RS_E_INVALID, "metric %.*s: only a gauge has a merge policy", name_length, r->name);
    }
    if (r->gauge_merge == RS_MERGE_PER_WORKER && rsp_has_label_key(r->labels, r->labels_length, "pid")) {
        return rsp_fail(error, bot, RS_E_INVALID, "metric %.*s: a per-worker gauge is labelled pid by the collector: "
                        "it cannot have a label named pid", name_length, r->name);
    }
    if (r->help_length > RS_HELP_MAX || (r->help_length > 0 && (r->help == NULL || memchr(r->help, 0, r->help_length) != NULL))) {
        return rsp_fail(error, bot, RS_E_INVALID, "metric %.*s: the help text must be at most %u bytes, without NUL",
                        name_length, r->name, RS_HELP_MAX);
    }
    char why[400];
    if (!rsp_labels_valid(r->labels, r->labels_length, why, sizeof why)) {
        return rsp_fail(error, bot, RS_E_INVALID, "metric %.*s: %s", name_length, r->name, why);
    }
    return 0;
}

/** 10^n, exactly where a double holds it (n from -36 to 36). */
static double rsp_power_of_ten(int n) {
    double power = 1;
    for (int i = 0; i < (n < 0 ? -n : n); i++) power *= 10;
    return n < 0 ? 1 / power : power;
}

static void rsp_fill_metric(rs_metric *metric, uint32_t index, const rsp_request *r) {
    memset(metric, 0, sizeof *metric);
    metric->index = index;
    metric->kind = r->values.form == RS_FORM_SIGNED ? (uint8_t)RS_METRIC_SIGNED_HISTOGRAM : (uint8_t)r->kind;
    metric->sampled = r->sample_every > 1;
    metric->scale = r->values.scale;
    metric->ns_per_unit = rsp_ns_per_unit(r->unit);
    metric->steps_per_unit = rsp_power_of_ten(-r->values.scale);
}

/** A file is made format 3, which producers of 0.4 read too (Python's pure backend, Rust's
    crate), and becomes format 4 just before its first entry that format 3 cannot say (signed or
    scaled values) is published: the layout is the same, and a reader that cannot read 4 then
    refuses the file rather than misread it. */
static void rsp_upgrade_for_entry(rs_bot *bot, const rs_registry_entry *e) {
    if ((e->form != 0 || e->scale != 0) && rs_load_relaxed_u32(&bot->header->version) < RS_FORMAT_VERSION) {
        rs_store_release_u32(&bot->header->version, RS_FORMAT_VERSION);
    }
}

static int rsp_same_identity(const rs_registry_entry *e, const rsp_request *r) {
    return e->name_length == r->name_length && memcmp(e->name, r->name, r->name_length) == 0
        && e->labels_length == r->labels_length && (r->labels_length == 0 || memcmp(e->labels, r->labels, r->labels_length) == 0);
}

/** The control word of the metric named as `e` in the bot's own file (see CONTROL), and that
    file's `bot_control`, ORed together: what a worker file's new metric starts with. 0 when the
    file is missing, not this user's, or does not hold together (a worker starts as registered). */
static uint32_t rsp_bot_file_control(const rsp_bot *b, const rs_registry_entry *e) {
    char path[sizeof b->bot.path];
    if (!rsp_file_path(path, sizeof path, b->directory, b->bot.name, 0, 0)) return 0;
    int fd = open(path, O_RDONLY | RSP_OPEN_FLAGS);
    if (fd < 0) return 0;
    uint32_t control = 0;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_size >= RS_HEADER_SIZE) {
        const rs_header *h = (const rs_header *)mmap(NULL, RS_HEADER_SIZE, PROT_READ, MAP_SHARED, fd, 0);
        if (h != MAP_FAILED) {
            uint32_t version = rs_load_acquire_u32(&h->version);
            uint32_t capacity = h->registry_capacity, count = rs_load_acquire_u32(&h->metric_count);
            uint64_t cells = h->cells_offset, registry = h->registry_offset;
            uint64_t end = cells + (uint64_t)capacity * RS_METRIC_CELL_SIZE;
            int whole = h->magic == RS_MAGIC && version >= RS_FORMAT_VERSION_MIN && version <= RS_FORMAT_VERSION
                && h->registry_entry_size == RS_REGISTRY_ENTRY_SIZE && h->metric_cell_size == RS_METRIC_CELL_SIZE
                && count <= capacity && registry >= RS_HEADER_SIZE && registry + (uint64_t)capacity * RS_REGISTRY_ENTRY_SIZE <= cells
                && end <= (uint64_t)st.st_size;
            control = whole ? rs_load_relaxed_u32(&h->bot_control) & RS_CONTROL_BOT_OFF : 0;
            munmap((void *)(uintptr_t)h, RS_HEADER_SIZE);
            const unsigned char *file = whole ? (const unsigned char *)mmap(NULL, end, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
            if (file != MAP_FAILED) {
                for (uint32_t i = 0; i < count; i++) {
                    const rs_registry_entry *other = (const rs_registry_entry *)(const void *)(file + registry + (uint64_t)i * RS_REGISTRY_ENTRY_SIZE);
                    if (other->name_length == e->name_length && other->labels_length == e->labels_length
                        && other->name_length <= RS_NAME_MAX && other->labels_length <= RS_LABELS_MAX
                        && memcmp(other->name, e->name, e->name_length) == 0 && memcmp(other->labels, e->labels, e->labels_length) == 0) {
                        const rs_metric_cell *cell = (const rs_metric_cell *)(const void *)(file + cells + (uint64_t)i * RS_METRIC_CELL_SIZE);
                        control |= rs_load_relaxed_u32(&cell->control);
                        break;
                    }
                }
                munmap((void *)(uintptr_t)file, end);
            }
        }
    }
    close(fd);
    return control;
}

/** Entries [first, count) were just published: each takes the operator's switches that apply to
    it (see CONTROL): the bot's off switch, and in a worker file the bot file's word of the same
    metric. The fence pairs with the tool's, between its store of `bot_control` and its read of
    `metric_count`: of the two, one sees the other. */
static void rsp_take_control(rsp_bot *b, uint32_t first, uint32_t count) {
    if (first >= count) return;
    rs_bot *bot = &b->bot;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    uint32_t bot_off = rs_load_relaxed_u32(&bot->header->bot_control) & RS_CONTROL_BOT_OFF;
    char own[sizeof bot->path];
    int worker = rsp_file_path(own, sizeof own, b->directory, bot->name, 0, 0) && strcmp(own, bot->path) != 0;
    for (uint32_t i = first; i < count; i++) {
        uint32_t control = bot_off | (worker ? rsp_bot_file_control(b, rsp_entry(b, i)) : 0);
        if (control != 0) __atomic_fetch_or(&rsp_metric_cells(b)[i].control, control, __ATOMIC_RELAXED);
    }
}

/** FNV-1a of a metric's identity: its name, a byte no name holds, its encoded labels. */
static uint32_t rsp_identity_hash(const char *name, size_t name_length, const char *labels, size_t labels_length) {
    uint64_t hash = 14695981039346656037ull;
    for (size_t i = 0; i < name_length; i++) hash = (hash ^ (uint8_t)name[i]) * 1099511628211ull;
    hash = (hash ^ 0xffu) * 1099511628211ull;
    for (size_t i = 0; i < labels_length; i++) hash = (hash ^ (uint8_t)labels[i]) * 1099511628211ull;
    return (uint32_t)(hash ^ (hash >> 32));
}

/** Puts entry `index` in the registry index (which has a free slot: it has twice the capacity).
    An entry whose lengths another process made invalid since it was checked is left out: no
    request, its lengths checked, can match it, and hashing it would read past it. */
static void rsp_index_entry(rsp_bot *b, uint32_t index) {
    const rs_registry_entry *e = rsp_entry(b, index);
    if (e->name_length > RS_NAME_MAX || e->labels_length > RS_LABELS_MAX) return;
    uint32_t slot = rsp_identity_hash(e->name, e->name_length, e->labels, e->labels_length) & b->registry_index_mask;
    while (b->registry_index[slot] != 0) slot = (slot + 1) & b->registry_index_mask;
    b->registry_index[slot] = index + 1;
}

/** Brings the registry index up to the `count` published entries, making it at the first call:
    a bot of thousands of metrics registers each in constant time, not by comparing every entry
    (4,000 metrics took 8 million comparisons). Returns 0 when it could not be made (out of
    memory): the caller compares every entry. Under bot->mutex. */
static int rsp_index_registry_locked(rsp_bot *b, uint32_t count) {
    if (b->registry_index == NULL) {
        uint32_t slots = 16;
        while (slots < 2 * b->bot.registry_capacity) slots <<= 1;
        b->registry_index = (uint32_t *)calloc(slots, sizeof(uint32_t));
        if (b->registry_index == NULL) return 0;
        b->registry_index_mask = slots - 1;
        b->registry_indexed = 0;
    }
    if (b->registry_indexed > count) { /* a registry other than the one indexed: start again */
        memset(b->registry_index, 0, ((size_t)b->registry_index_mask + 1) * sizeof(uint32_t));
        b->registry_indexed = 0;
    }
    for (; b->registry_indexed < count; b->registry_indexed++) rsp_index_entry(b, b->registry_indexed);
    return 1;
}

/** The published entry of (name, labels), or -1. Under bot->mutex. */
static int64_t rsp_find_locked(rsp_bot *b, const rsp_request *r, uint32_t count) {
    if (rsp_index_registry_locked(b, count)) {
        uint32_t slot = rsp_identity_hash(r->name, r->name_length, r->labels, r->labels_length) & b->registry_index_mask;
        for (; b->registry_index[slot] != 0; slot = (slot + 1) & b->registry_index_mask) {
            uint32_t index = b->registry_index[slot] - 1;
            if (rsp_same_identity(rsp_entry(b, index), r)) return index;
        }
        return -1;
    }
    for (uint32_t i = 0; i < count; i++) {
        if (rsp_same_identity(rsp_entry(b, i), r)) return i;
    }
    return -1;
}

/** Finds (name, labels) among the published entries, or appends it. Under bot->mutex. */
static int rsp_find_or_add_locked(rsp_bot *b, const rsp_request *r, rs_metric *metric, rs_error *error) {
    rs_bot *bot = &b->bot;
    uint32_t count = rs_load_relaxed_u32(&bot->header->metric_count); /* relaxed: only we write it, under this mutex */
    int64_t found = rsp_find_locked(b, r, count);
    if (found >= 0) {
        uint32_t i = (uint32_t)found;
        const rs_registry_entry *e = rsp_entry(b, i);
        if (e->kind != r->kind || e->unit != r->unit || e->sample_every != r->sample_every) {
            char labels[RS_LABELS_MAX + 3];
            return rsp_fail(error, bot->name, RS_E_CONFLICT, "metric %.*s%s is already registered as %s in %s sampled 1 in %u; "
                            "asked for %s in %s sampled 1 in %u", (int)r->name_length, r->name,
                            rsp_labels_for_message(r, labels, sizeof labels), rsp_kind_name(e->kind), rsp_unit_name(e->unit),
                            (unsigned)e->sample_every, rsp_kind_name(r->kind), rsp_unit_name(r->unit), (unsigned)r->sample_every);
        }
        if (e->form != r->values.form || e->scale != r->values.scale) {
            char labels[RS_LABELS_MAX + 3];
            return rsp_fail(error, bot->name, RS_E_CONFLICT, "metric %.*s%s is already registered with %s values in steps of "
                            "1e%d; asked for %s values in steps of 1e%d", (int)r->name_length, r->name,
                            rsp_labels_for_message(r, labels, sizeof labels), e->form == RS_FORM_SIGNED ? "signed" : "unsigned",
                            (int)e->scale, r->values.form == RS_FORM_SIGNED ? "signed" : "unsigned", (int)r->values.scale);
        }
        if (e->gauge_merge != r->gauge_merge) {
            char labels[RS_LABELS_MAX + 3];
            return rsp_fail(error, bot->name, RS_E_CONFLICT, "gauge %.*s%s is already registered merging its workers by %s; "
                            "asked for %s", (int)r->name_length, r->name, rsp_labels_for_message(r, labels, sizeof labels),
                            rsp_merge_name(e->gauge_merge), rsp_merge_name(r->gauge_merge));
        }
        /* A retired entry registered again is live again (see RETIRING A SERIES in ringside.h). */
        uint32_t retired = rs_load_relaxed_u32(&rsp_entry(b, i)->retired); /* relaxed: only we write it, under this mutex */
        if (retired & 1u) rs_store_release_u32(&rsp_entry(b, i)->retired, retired + 1u);
        rsp_fill_metric(metric, i, r);
        return 0;
    }
    if (count >= bot->registry_capacity) {
        return rsp_fail(error, bot->name, RS_E_REGISTRY_FULL, "metric %.*s: the registry is full (%u metrics); a bot file made "
                        "with a larger max_metrics holds more", (int)r->name_length, r->name, (unsigned)bot->registry_capacity);
    }
    rs_registry_entry *e = rsp_entry(b, count);
    memset(e, 0, sizeof *e);
    e->index = count;
    e->kind = (uint8_t)r->kind;
    e->unit = (uint8_t)r->unit;
    e->gauge_merge = (uint8_t)r->gauge_merge;
    e->form = r->values.form;
    e->scale = r->values.scale;
    e->sample_every = r->sample_every;
    e->name_length = (uint16_t)r->name_length;
    e->labels_length = (uint16_t)r->labels_length;
    e->help_length = (uint16_t)r->help_length;
    memcpy(e->name, r->name, r->name_length);
    if (r->labels_length) memcpy(e->labels, r->labels, r->labels_length);
    if (r->help_length) memcpy(e->help, r->help, r->help_length);
    bot->sample_every[count] = r->sample_every;
    rsp_upgrade_for_entry(bot, e);
    /* Release: the entry's bytes are visible before the count that publishes it. */
    rs_store_release_u32(&bot->header->metric_count, count + 1);
    if (b->registry_index != NULL && b->registry_indexed == count) rsp_index_entry(b, b->registry_indexed++);
    rsp_take_control(b, count, count + 1);
    rsp_fill_metric(metric, count, r);
    return 0;
}

int rs_bot_register_encoded(rs_bot *bot, rs_metric *metric, const char *name, size_t name_length,
                            rs_kind kind, rs_unit unit, rs_values values, const char *labels, size_t labels_length,
                            const char *help, size_t help_length, uint32_t sample_every, rs_gauge_merge merge,
                            rs_error *error) {
    rsp_clear_error(error);
    if (metric) memset(metric, 0, sizeof *metric);
    if (bot == NULL || metric == NULL) {
        return rsp_fail(error, bot ? bot->name : "(null)", RS_E_INVALID, "rs_bot_register needs a bot and a metric to fill");
    }
    rsp_bot *b = rsp_of(bot);
    rsp_request r = {name, name_length, (unsigned)kind, (unsigned)unit, labels, labels_length, help, help_length, sample_every,
                     (unsigned)merge, values};
    int rc = rsp_check_request(b, &r, error);
    if (rc != 0) return rc;
    if (__atomic_load_n(&b->forked, __ATOMIC_ACQUIRE) && (rc = rsp_become_worker(b, error)) != 0) return rc;
    pthread_mutex_lock(&bot->mutex);
    if (bot->enabled) {
        rc = rsp_find_or_add_locked(b, &r, metric, error);
    } else {
        /* Disabled: a handle below the registry's capacity, so record calls stay harmless. */
        rsp_fill_metric(metric, b->disabled_metrics++ % bot->registry_capacity, &r);
    }
    pthread_mutex_unlock(&bot->mutex);
    return rc;
}

/** Encodes key/value pairs as stored: sorted by key, "key=value" joined by '\n'. */
static int rsp_encode_labels(rs_bot *bot, const char *metric, const char *const *labels, char *encoded,
                             size_t *length, rs_error *error) {
    enum { MAX_PAIRS = RS_LABELS_MAX / 2 }; /* a pair takes at least "k=" */
    const char *keys[MAX_PAIRS], *values[MAX_PAIRS];
    size_t pairs = 0;
    const char *name = metric ? metric : "";
    *length = 0;
    for (size_t i = 0; labels && labels[i]; i += 2) {
        const char *key = labels[i], *value = labels[i + 1];
        if (value == NULL) {
            return rsp_fail(error, bot->name, RS_E_INVALID, "metric %.120s: labels come in key, value pairs ending with NULL; "
                            "label key %.120s has no value", name, key);
        }
        if (pairs == MAX_PAIRS) return rsp_fail(error, bot->name, RS_E_INVALID, "metric %.120s: the labels take more than %u bytes", name, RS_LABELS_MAX);
        size_t key_length = strlen(key);
        if (!rsp_is_identifier(key, key_length) || (key[0] == '_' && key[1] == '_')) {
            return rsp_fail(error, bot->name, RS_E_INVALID, "metric %.120s: label key \"%.120s\" must match [a-zA-Z_][a-zA-Z0-9_]* "
                            "and not start with \"__\"", name, key);
        }
        if (strchr(value, '\n')) {
            return rsp_fail(error, bot->name, RS_E_INVALID, "metric %.120s: the value of label %.120s has a newline", name, key);
        }
        size_t at = pairs++;
        while (at > 0 && strcmp(keys[at - 1], key) > 0) { /* insertion sort: a handful of pairs */
            keys[at] = keys[at - 1];
            values[at] = values[at - 1];
            at--;
        }
        keys[at] = key;
        values[at] = value;
    }
    for (size_t i = 0; i < pairs; i++) {
        if (i > 0 && strcmp(keys[i - 1], keys[i]) == 0) {
            return rsp_fail(error, bot->name, RS_E_INVALID, "metric %.120s: label key %.120s appears twice", name, keys[i]);
        }
        size_t k = strlen(keys[i]), v = strlen(values[i]);
        if (*length + (i > 0) + k + 1 + v > RS_LABELS_MAX) {
            return rsp_fail(error, bot->name, RS_E_INVALID, "metric %.120s: the labels take more than %u bytes", name, RS_LABELS_MAX);
        }
        if (i > 0) encoded[(*length)++] = '\n';
        memcpy(encoded + *length, keys[i], k);
        *length += k;
        encoded[(*length)++] = '=';
        memcpy(encoded + *length, values[i], v);
        *length += v;
    }
    return 0;
}

/** Registers through rs_bot_register_encoded, the labels encoded first. */
static int rsp_register(rs_bot *bot, rs_metric *metric, const char *name, rs_kind kind, rs_unit unit, rs_values values,
                        const char *const *labels, const char *help, uint32_t sample_every, rs_gauge_merge merge,
                        rs_error *error) {
    rsp_clear_error(error);
    if (metric) memset(metric, 0, sizeof *metric);
    if (bot == NULL || metric == NULL) {
        return rsp_fail(error, bot ? bot->name : "(null)", RS_E_INVALID, "rs_bot_register needs a bot and a metric to fill");
    }
    char encoded[RS_LABELS_MAX];
    size_t length = 0;
    int rc = rsp_encode_labels(bot, name, labels, encoded, &length, error);
    if (rc != 0) return rc;
    return rs_bot_register_encoded(bot, metric, name, name ? strlen(name) : 0, kind, unit, values, encoded, length,
                                   help, help ? strlen(help) : 0, sample_every, merge, error);
}

int rs_bot_register(rs_bot *bot, rs_metric *metric, const char *name, rs_kind kind, rs_unit unit,
                    const char *const *labels, const char *help, uint32_t sample_every, rs_error *error) {
    return rsp_register(bot, metric, name, kind, unit, (rs_values){0, 0}, labels, help, sample_every, RS_MERGE_LAST, error);
}

int rs_bot_register_values(rs_bot *bot, rs_metric *metric, const char *name, rs_kind kind, rs_unit unit, rs_values values,
                           const char *const *labels, const char *help, uint32_t sample_every, rs_error *error) {
    return rsp_register(bot, metric, name, kind, unit, values, labels, help, sample_every, RS_MERGE_LAST, error);
}

int rs_bot_register_gauge(rs_bot *bot, rs_metric *metric, const char *name, rs_unit unit, const char *const *labels,
                          const char *help, rs_gauge_merge merge, rs_error *error) {
    return rsp_register(bot, metric, name, RS_KIND_GAUGE, unit, (rs_values){0, 0}, labels, help, 1, merge, error);
}

int rs_bot_retire(rs_bot *bot, rs_metric metric, rs_error *error) {
    rsp_clear_error(error);
    if (bot == NULL) return rsp_fail(error, "(null)", RS_E_INVALID, "rs_bot_retire needs a bot");
    rsp_bot *b = rsp_of(bot);
    int rc = 0;
    if (__atomic_load_n(&b->forked, __ATOMIC_ACQUIRE) && (rc = rsp_become_worker(b, error)) != 0) return rc;
    pthread_mutex_lock(&bot->mutex);
    if (!bot->enabled) {
        pthread_mutex_unlock(&bot->mutex);
        return 0; /* nothing is written: nothing to retire */
    }
    uint32_t count = rs_load_relaxed_u32(&bot->header->metric_count); /* relaxed: only we write it, under this mutex */
    if (metric.index >= count) {
        pthread_mutex_unlock(&bot->mutex);
        return rsp_fail(error, bot->name, RS_E_INVALID, "rs_bot_retire: metric index %u is not registered (%u are)",
                        (unsigned)metric.index, (unsigned)count);
    }
    rs_registry_entry *e = rsp_entry(b, metric.index);
    uint32_t retired = rs_load_relaxed_u32(&e->retired);
    if (!(retired & 1u)) {
        /* A gauge's value is not one set since: stored before the word that says it is retired. */
        if (e->kind == RS_KIND_GAUGE) __atomic_store_n(&rsp_metric_cells(b)[metric.index].gauge_set, 0, __ATOMIC_RELAXED);
        rs_store_release_u32(&e->retired, retired + 1u);
    }
    pthread_mutex_unlock(&bot->mutex);
    return 0;
}

int rs_bot_is_retired(const rs_bot *bot, rs_metric metric) {
    const rs_registry_entry *e = rs_bot_registry_entry(bot, metric.index);
    return e != NULL && (rs_load_acquire_u32(&e->retired) & 1u) != 0;
}

uint32_t rs_bot_metric_count(const rs_bot *bot) {
    if (bot == NULL || bot->header == NULL) return 0;
    return rs_load_acquire_u32(&bot->header->metric_count); /* acquire: the entries below it are complete */
}

const rs_registry_entry *rs_bot_registry_entry(const rs_bot *bot, uint32_t index) {
    if (index >= rs_bot_metric_count(bot)) return NULL;
    return rsp_entry(rsp_of((rs_bot *)bot), index);
}

/* MARK: - Lanes */

/** Makes sure this thread's exit runs rsp_thread_exit (pthread destructors need a non-NULL value). */
static void rsp_watch_thread_exit(void) {
    if (rsp_thread_key_created && pthread_getspecific(rsp_thread_key) == NULL) {
        pthread_setspecific(rsp_thread_key, (void *)1);
    }
}

rs_producer *rs_bot_claim_lane(rs_bot *bot) {
    rs_thread_lane *entry = &rs_thread_lanes[bot->slot];
    if (entry->generation == bot->generation) return entry->producer; /* claimed already */
    rs_producer *producer = &bot->disabled;
    if (__atomic_load_n(&rsp_of(bot)->forked, __ATOMIC_ACQUIRE)) (void)rsp_become_worker(rsp_of(bot), NULL);
    if (bot->enabled) {
        rsp_bot *b = rsp_of(bot);
        pthread_mutex_lock(&bot->mutex);
        int lane = rsp_take_lane_locked(b, RSP_HELD_BY_THREAD);
        pthread_mutex_unlock(&bot->mutex);
        if (lane >= 0) {
            rsp_watch_thread_exit();
            producer = &bot->producers[lane].producer;
        } else {
            /* No lane: this thread stays laneless until it exits or calls rs_bot_release_thread_lane. */
            producer = &bot->laneless;
        }
    }
    entry->generation = bot->generation;
    entry->producer = producer;
    return producer;
}

/** An exemplar refused: its reason in *error (no bot's name: the check knows of none). */
static int rsp_exemplar_fail(rs_error *error, const char *format, ...) {
    if (error == NULL) return RS_E_INVALID;
    error->code = RS_E_INVALID;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(error->message, sizeof error->message, format, arguments);
    va_end(arguments);
    return RS_E_INVALID;
}

int rs_exemplar_check(const char *exemplar, size_t length, rs_error *error) {
    if (exemplar == NULL || length == 0 || length > RS_EXEMPLAR_MAX) {
        return rsp_exemplar_fail(error, "an exemplar has 1 to %u bytes, not %zu", RS_EXEMPLAR_MAX,
                        exemplar == NULL ? (size_t)0 : length);
    }
    size_t keys[RS_EXEMPLAR_MAX / 2], key_lengths[RS_EXEMPLAR_MAX / 2], pairs = 0;
    size_t at = 0;
    while (at < length) {
        /* A key: a name, then '='. */
        size_t start = at;
        while (at < length && exemplar[at] != '=' && exemplar[at] != '\n') {
            unsigned char c = (unsigned char)exemplar[at];
            int letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
            if (!letter && !(at > start && c >= '0' && c <= '9')) {
                return rsp_exemplar_fail(error, "an exemplar's key is a name ([a-zA-Z_][a-zA-Z0-9_]*): byte %zu", at);
            }
            at++;
        }
        if (at == start || at == length || exemplar[at] != '=') {
            return rsp_exemplar_fail(error, "an exemplar is key=value pairs joined by newlines: byte %zu", at);
        }
        for (size_t k = 0; k < pairs; k++) {
            if (key_lengths[k] == at - start && memcmp(exemplar + keys[k], exemplar + start, at - start) == 0) {
                return rsp_exemplar_fail(error, "an exemplar's key %.*s is given twice", (int)(at - start),
                                exemplar + start);
            }
        }
        keys[pairs] = start;
        key_lengths[pairs++] = at - start;
        /* A value: anything but NUL, up to '\n' or the end. */
        for (at++; at < length && exemplar[at] != '\n'; at++) {
            if (exemplar[at] == 0) return rsp_exemplar_fail(error, "an exemplar's value holds a NUL (byte %zu)", at);
        }
        if (at < length && ++at == length) {
            return rsp_exemplar_fail(error, "an exemplar ends with a newline");
        }
    }
    return 0;
}

/* MARK: - Values a metric cannot hold */

/** Counts a value that did not fit in metric `index`'s cell (see VALUES in ringside.h). */
static void rsp_count_clamped(rs_bot *bot, uint32_t index) {
    /* The calling thread's lane first, as any record: a forked child becomes a worker there, and
       counts in its own file rather than in none. */
    rs_producer *p = rs_bot_producer(bot);
    /* Off (see CONTROL): the call counts nothing, a clamp neither. */
    if (rs_producer_control(p, index) & (RS_CONTROL_OFF | RS_CONTROL_BOT_OFF)) return;
    if (!bot->enabled || bot->header == NULL || index >= bot->registry_capacity) return;
    __atomic_fetch_add(&rsp_metric_cells(rsp_of(bot))[index].clamped, 1, __ATOMIC_RELAXED);
}

/** `ns` in steps of 10^scale of a unit of `ns_per_unit` nanoseconds, truncated, saturating. */
static uint64_t rsp_steps_of_ns(int scale, uint32_t ns_per_unit, uint64_t ns) {
    /* Exact in 128 bits: ns < 2^64 times 10^18 < 2^60 stays below 2^124. */
    unsigned __int128 numerator = ns, denominator = ns_per_unit ? ns_per_unit : 1;
    for (int i = 0; i < -scale; i++) numerator *= 10;
    for (int i = 0; i < scale; i++) denominator *= 10;
    unsigned __int128 steps = numerator / denominator;
    return steps > UINT64_MAX ? UINT64_MAX : (uint64_t)steps;
}

uint64_t rs_metric_steps_of_ns(rs_metric metric, uint64_t ns) {
    return rsp_steps_of_ns(metric.scale, metric.ns_per_unit, ns);
}

/** A histogram's record of `value` (as stored) the way the inline record functions make it, for
    the cold paths that know the metric by its index: the operator's control, then the
    registered sampling (a metric registered with 1 in 1 always passes it). */
static int rsp_record_stored(rs_bot *bot, uint32_t index, uint64_t value, uint8_t flags, uint64_t timestamp_ns) {
    rs_producer *p = rs_bot_producer(bot);
    uint32_t control = rs_producer_control(p, index);
    if (control != 0) return rs_bot_record_controlled(bot, index, value, flags, timestamp_ns, control);
    if (!rs_producer_sample(p, index)) return 0;
    if (timestamp_ns == RS_TIMESTAMP_NOW) return rs_producer_write(p, index, RS_KIND_HISTOGRAM, flags, value);
    return rs_producer_write_at(p, index, RS_KIND_HISTOGRAM, flags, value, timestamp_ns);
}

int rs_bot_record_span_slow(rs_bot *bot, uint32_t metric, int8_t scale, uint32_t ns_per_unit, uint64_t start) {
    rs_span_time time = rs_span_clock_end(start);
    uint64_t value = scale != 0 ? rsp_steps_of_ns(scale, ns_per_unit, time.elapsed_ns)
                                : time.elapsed_ns / (ns_per_unit > 1 ? ns_per_unit : 1);
    return rsp_record_stored(bot, metric, value, RS_FLAG_SPAN, time.end_ns);
}

int rs_bot_record_controlled(rs_bot *bot, uint32_t metric, uint64_t value, uint8_t flags, uint64_t timestamp_ns,
                             uint32_t control) {
    if (control & (RS_CONTROL_OFF | RS_CONTROL_BOT_OFF)) return 0;
    rs_producer *p = rs_bot_producer(bot);
    if (!rs_producer_sample(p, metric)) return 0; /* the registered 1 in N first, weighed by the reader */
    return rs_producer_write_sampled_at(p, metric, flags, value, timestamp_ns, control & RS_CONTROL_SAMPLE);
}

int rs_bot_record_unrepresentable(rs_bot *bot, uint32_t metric, uint8_t kind, double value) {
    if (kind != RS_KIND_HISTOGRAM && kind != RS_METRIC_SIGNED_HISTOGRAM) return 0;
    rsp_count_clamped(bot, metric);
    if (value != value) return 0; /* NaN: no value to record */
    if (kind == RS_METRIC_SIGNED_HISTOGRAM) {
        int64_t end = value < 0 ? -INT64_MAX : INT64_MAX;
        return rsp_record_stored(bot, metric, (uint64_t)end ^ RS_OFFSET_BINARY_BIAS, 0, RS_TIMESTAMP_NOW);
    }
    return rsp_record_stored(bot, metric, value < 0 ? 0 : UINT64_MAX, 0, RS_TIMESTAMP_NOW);
}

void rs_bot_count_refused_exemplar(rs_bot *bot, uint32_t index) {
    rs_producer *p = rs_bot_producer(bot);
    /* Off (see CONTROL): the call counts nothing, a refusal neither. */
    if (rs_producer_control(p, index) & (RS_CONTROL_OFF | RS_CONTROL_BOT_OFF)) return;
    if (!bot->enabled || bot->header == NULL || index >= bot->registry_capacity) return;
    __atomic_fetch_add(&rsp_metric_cells(rsp_of(bot))[index].exemplars_refused, 1, __ATOMIC_RELAXED);
}

int rs_bot_record_refusing_exemplar(rs_bot *bot, rs_metric metric, uint64_t value) {
    if (metric.kind != RS_KIND_HISTOGRAM && metric.kind != RS_METRIC_SIGNED_HISTOGRAM) return 0;
    rs_bot_count_refused_exemplar(bot, metric.index);
    if (metric.kind == RS_METRIC_SIGNED_HISTOGRAM) return rs_bot_record_signed(bot, metric, value > INT64_MAX ? INT64_MAX : (int64_t)value);
    return rs_bot_record(bot, metric, value);
}

void rs_bot_count_unrepresentable(rs_bot *bot, uint32_t metric, double increment) {
    rsp_count_clamped(bot, metric);
    if (!(increment > 0)) return; /* NaN and below 0: nothing added */
    rs_producer *p = rs_bot_producer(bot);
    if (rs_producer_control(p, metric) & (RS_CONTROL_OFF | RS_CONTROL_BOT_OFF)) return;
    rs_producer_count(p, metric, UINT64_MAX);
}

int rs_bot_name_thread(rs_bot *bot, const char *name, size_t length) {
    if (bot == NULL || name == NULL || memchr(name, 0, length) != NULL) return RS_E_INVALID;
    rs_producer *producer = rs_bot_producer(bot);
    rs_lane_producer *views = bot->producers;
    if (!bot->enabled || views == NULL) return 0;
    /* The calling thread's lane is the one whose view it was handed, if any. */
    uintptr_t at = (uintptr_t)producer, first = (uintptr_t)views;
    if (at < first || at >= first + (uintptr_t)bot->max_lanes * sizeof *views) return 0; /* laneless */
    uint32_t lane = (uint32_t)((at - first) / sizeof *views);
    if (bot->lanes[lane] != NULL) rsp_write_thread_name(bot->lanes[lane], name, length);
    return 0;
}

void rs_bot_release_thread_lane(rs_bot *bot) {
    if (bot == NULL) return;
    rs_thread_lane *entry = &rs_thread_lanes[bot->slot];
    if (entry->generation != bot->generation) return;
    if (bot->enabled) {
        pthread_mutex_lock(&bot->mutex);
        rsp_release_entry_locked(rsp_of(bot), entry->producer);
        pthread_mutex_unlock(&bot->mutex);
    }
    entry->generation = 0;
    entry->producer = NULL;
}

/** Fills *error with why rsp_take_lane_locked found no lane (`code`, which it returned); returns `code`. */
static int rsp_fail_no_lane(rs_error *error, rs_bot *bot, int code) {
    if (code == RS_E_NO_LANE) {
        return rsp_fail(error, bot->name, RS_E_NO_LANE, "every one of its %u lanes is held, by threads or exclusive "
                        "producers (max_lanes is chosen when the file is made)", (unsigned)bot->max_lanes);
    }
    return rsp_fail(error, bot->name, code, "no lane could be added to %.700s: %s (errno %d)", bot->path,
                    strerror(-code), -code);
}

int rs_bot_claim_thread_lane(rs_bot *bot, rs_error *error) {
    rsp_clear_error(error);
    if (bot == NULL) return rsp_fail(error, "(null)", RS_E_INVALID, "rs_bot_claim_thread_lane needs a bot");
    rs_thread_lane *entry = &rs_thread_lanes[bot->slot];
    if (entry->generation == bot->generation && entry->producer != &bot->laneless) return 0; /* held already */
    int rc = __atomic_load_n(&rsp_of(bot)->forked, __ATOMIC_ACQUIRE) ? rsp_become_worker(rsp_of(bot), error) : 0;
    if (rc != 0) return rc;
    if (!bot->enabled) {
        (void)rs_bot_claim_lane(bot); /* the writes-nothing producer */
        return 0;
    }
    pthread_mutex_lock(&bot->mutex);
    int lane = rsp_take_lane_locked(rsp_of(bot), RSP_HELD_BY_THREAD);
    pthread_mutex_unlock(&bot->mutex);
    if (lane < 0) return rsp_fail_no_lane(error, bot, lane);
    rsp_watch_thread_exit();
    entry->generation = bot->generation;
    entry->producer = &bot->producers[lane].producer;
    return 0;
}

rs_producer *rs_bot_exclusive_producer(rs_bot *bot, rs_error *error) {
    rsp_clear_error(error);
    if (bot == NULL) {
        rsp_fail(error, "(null)", RS_E_INVALID, "rs_bot_exclusive_producer needs a bot");
        return NULL;
    }
    if (__atomic_load_n(&rsp_of(bot)->forked, __ATOMIC_ACQUIRE) && rsp_become_worker(rsp_of(bot), error) != 0) return NULL;
    if (!bot->enabled) return &bot->disabled;
    pthread_mutex_lock(&bot->mutex);
    int lane = rsp_take_lane_locked(rsp_of(bot), RSP_HELD_EXCLUSIVE);
    pthread_mutex_unlock(&bot->mutex);
    if (lane >= 0) return &bot->producers[lane].producer;
    rsp_fail_no_lane(error, bot, lane);
    return NULL;
}

uint32_t rs_bot_lanes_allocated(const rs_bot *bot) {
    if (bot == NULL || bot->header == NULL) return 0;
    /* Acquire: pairs with the release that counted the lane. The process's own count, not the
       file's, which another process could have written. */
    return rs_load_acquire_u32(&((const rsp_bot *)bot)->lanes_mapped);
}

const char *rs_bot_path(const rs_bot *bot) {
    if (bot == NULL || bot->header == NULL) return "";
    return bot->path;
}

int rs_bot_is_recording(const rs_bot *bot) {
    if (bot == NULL) return 0;
    rsp_bot *b = rsp_of((rs_bot *)bot);
    /* Acquire, as the hot path reads it: a child that became a worker has stored enabled first. */
    if (__atomic_load_n(&b->forked, __ATOMIC_ACQUIRE)) return !__atomic_load_n(&b->said_no_worker, __ATOMIC_RELAXED);
    return bot->enabled != 0;
}

/* MARK: - Thread exit */

/** The pthread key's destructor: retires every lane the exiting thread holds, of every live bot. */
static void rsp_thread_exit(void *unused) {
    (void)unused;
    pthread_mutex_lock(&rsp_mutex);
    for (int slot = 0; slot < RS_MAX_BOTS_PER_PROCESS; slot++) {
        rs_thread_lane *entry = &rs_thread_lanes[slot];
        if (entry->generation == 0) continue;
        rs_bot *bot = rsp_slots[slot].bot;
        if (bot != NULL && rsp_slots[slot].generation == entry->generation && bot->enabled) {
            pthread_mutex_lock(&bot->mutex);
            rsp_release_entry_locked(rsp_of(bot), entry->producer);
            pthread_mutex_unlock(&bot->mutex);
        }
        entry->generation = 0;
        entry->producer = NULL;
    }
    pthread_mutex_unlock(&rsp_mutex);
}

/* MARK: - Fork */

static void rsp_fork_prepare(void) {
    pthread_mutex_lock(&rsp_mutex);
    for (int slot = 0; slot < RS_MAX_BOTS_PER_PROCESS; slot++) {
        if (rsp_slots[slot].bot != NULL) pthread_mutex_lock(&rsp_slots[slot].bot->mutex);
    }
}

static void rsp_fork_parent(void) {
    for (int slot = RS_MAX_BOTS_PER_PROCESS - 1; slot >= 0; slot--) {
        if (rsp_slots[slot].bot != NULL) pthread_mutex_unlock(&rsp_slots[slot].bot->mutex);
    }
    pthread_mutex_unlock(&rsp_mutex);
}

/** Appends text to a buffer without stdio (the child of a threaded process may only use
    async-signal-safe calls). Returns the new length. */
static size_t rsp_append(char *buffer, size_t used, size_t size, const char *text) {
    while (*text && used + 1 < size) buffer[used++] = *text++;
    buffer[used] = 0;
    return used;
}

static size_t rsp_append_number(char *buffer, size_t used, size_t size, long long value) {
    char digits[24];
    int n = 0;
    unsigned long long magnitude = value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
    do digits[n++] = (char)('0' + magnitude % 10); while ((magnitude /= 10) != 0 && n < 22);
    if (value < 0) digits[n++] = '-';
    char text[24];
    for (int i = 0; i < n; i++) text[i] = digits[n - 1 - i];
    text[n] = 0;
    return rsp_append(buffer, used, size, text);
}

/** Points a producer at nothing: every call on it then writes nothing. Its sample arrays stay
    (the bot's views own them); every pointer into the file, which is let go of, is NULL. */
static void rsp_producer_write_nothing(rs_producer *p) {
    *p = (rs_producer){.sample_countdown = p->sample_countdown, .sample_every = p->sample_every, .sampling = p->sampling};
}

/**
 * In a forked child: the bot's file is the parent's. Write nothing to it and let go of it: the
 * descriptor AND the mappings, since a mapping holds the open file description, and with it the
 * parent's OFD lock, as long as it exists (the parent's death would go unseen while we live).
 */
static void rsp_disown(rsp_bot *b) {
    rs_bot *bot = &b->bot;
    b->forked = 1;
    bot->enabled = 0;
    for (uint32_t lane = 0; lane < bot->max_lanes; lane++) {
        rsp_producer_write_nothing(&bot->producers[lane].producer); /* an exclusive user may still call it */
    }
    rsp_producer_write_nothing(&bot->laneless);
    rsp_unmap_all(b); /* munmap and close are plain system calls: safe in a forked child */
    if (bot->fd >= 0) close(bot->fd);
    bot->fd = -1;
}

/** Says once on stderr why a forked child writes nothing: it could not make its worker file. */
static void rsp_say_no_worker(rsp_bot *b, const rs_error *why) {
    if (b->said_no_worker) return;
    b->said_no_worker = 1;
    char message[1400];
    size_t used = rsp_append(message, 0, sizeof message, "ringside: bot ");
    used = rsp_append(message, used, sizeof message, b->bot.name);
    used = rsp_append(message, used, sizeof message, ": this forked child (pid ");
    used = rsp_append_number(message, used, sizeof message, getpid());
    used = rsp_append(message, used, sizeof message, ") writes nothing: ");
    /* The reason begins "bot NAME: " (rsp_fail), which the line has said already. */
    const char *reason = why->message;
    size_t name_length = strlen(b->bot.name);
    if (strncmp(reason, "bot ", 4) == 0 && strncmp(reason + 4, b->bot.name, name_length) == 0 && strncmp(reason + 4 + name_length, ": ", 2) == 0) {
        reason += 6 + name_length;
    }
    used = rsp_append(message, used, sizeof message, reason);
    used = rsp_append(message, used, sizeof message, "\n");
    ssize_t ignored = write(STDERR_FILENO, message, used); /* no stdio: its lock may be a parent thread's */
    (void)ignored;
}

/** Fails with RS_E_NOT_READY: the file at the parent's path (`now`) is another one. */
static int rsp_fail_not_attached(rs_error *error, const char *name, const char *path, const struct stat *now) {
    return rsp_fail(error, name, RS_E_NOT_READY, "%.700s is no longer the file the parent attached: its registry is gone (it "
                    "is now %s owned by uid %u)", path, rsp_file_kind(now->st_mode), (unsigned)now->st_uid);
}

/** Reads the registry of the file the bot attached (its path, if still that file): `count`
    entries into a new array, which the caller frees. 0, or a negative code. */
static int rsp_read_attached_registry(rsp_bot *b, rs_registry_entry **entries, uint32_t *count, rs_error *error) {
    const char *path = b->bot.path, *name = b->bot.name;
    *entries = NULL;
    *count = 0;
    /* A descriptor of our own, read only: it takes no lock and writes nothing. */
    int fd = open(path, O_RDONLY | RSP_OPEN_FLAGS);
    struct stat st;
    if (fd < 0) {
        int code = -errno; /* a socket (ENXIO), say: what is there is not the parent's file */
        if (lstat(path, &st) == 0 && (st.st_dev != b->file_dev || st.st_ino != b->file_ino)) {
            return rsp_fail_not_attached(error, name, path, &st);
        }
        return rsp_fail_system(error, name, code, "open the parent's file", path);
    }
    rs_header h;
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        rc = rsp_fail_system(error, name, -errno, "fstat", path);
    } else if (st.st_dev != b->file_dev || st.st_ino != b->file_ino) {
        rc = rsp_fail_not_attached(error, name, path, &st);
    } else if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        rc = rsp_fail_system(error, name, errno ? -errno : -EIO, "read", path);
    } else if (h.metric_count > b->bot.registry_capacity || h.registry_offset != RS_HEADER_SIZE) {
        rc = rsp_fail(error, name, RS_E_CORRUPT, "%.700s is corrupt: metric_count %u, registry_offset %llu", path,
                      (unsigned)h.metric_count, (unsigned long long)h.registry_offset);
    } else if (h.metric_count > 0) {
        size_t bytes = (size_t)h.metric_count * sizeof(rs_registry_entry);
        *entries = (rs_registry_entry *)malloc(bytes);
        if (*entries == NULL) {
            rc = rsp_fail(error, name, -ENOMEM, "out of memory");
        } else if (pread(fd, *entries, bytes, (off_t)h.registry_offset) != (ssize_t)bytes) {
            rc = rsp_fail_system(error, name, errno ? -errno : -EIO, "read the registry of", path);
        } else {
            *count = h.metric_count;
        }
    }
    close(fd);
    if (rc != 0) {
        free(*entries);
        *entries = NULL;
    }
    return rc;
}

/** Gives the worker file the parent's entries, at the same indices (its handles hold them): an
    entry already there must be the same metric. Under bot->mutex. */
static int rsp_take_registry_locked(rsp_bot *b, const rs_registry_entry *entries, uint32_t count, rs_error *error) {
    rs_bot *bot = &b->bot;
    uint32_t had = rs_load_relaxed_u32(&bot->header->metric_count); /* relaxed: only we write it */
    for (uint32_t i = 0; i < count; i++) {
        char why[400];
        if (!rsp_entry_valid(&entries[i], i, why, sizeof why)) {
            return rsp_fail(error, bot->name, RS_E_CORRUPT, "the parent's registry entry %u: %s", (unsigned)i, why);
        }
        rs_registry_entry *e = rsp_entry(b, i);
        if (i < had) {
            if (e->kind != entries[i].kind || e->unit != entries[i].unit || e->sample_every != entries[i].sample_every
                || e->gauge_merge != entries[i].gauge_merge || e->form != entries[i].form || e->scale != entries[i].scale
                || e->name_length != entries[i].name_length || e->labels_length != entries[i].labels_length
                || memcmp(e->name, entries[i].name, e->name_length) != 0 || memcmp(e->labels, entries[i].labels, e->labels_length) != 0) {
                return rsp_fail(error, bot->name, RS_E_CONFLICT, "%.700s holds another metric at index %u than the parent's registry",
                                bot->path, (unsigned)i);
            }
            continue;
        }
        memcpy(e, &entries[i], sizeof *e);
        bot->sample_every[i] = e->sample_every;
        rsp_upgrade_for_entry(bot, e);
    }
    /* Release: the entries' bytes are visible before the count that publishes them. */
    if (count > had) rs_store_release_u32(&bot->header->metric_count, count);
    rsp_take_control(b, had, count);
    return 0;
}

/**
 * In a forked child, at its first record, registration or lane claim through a bot its parent
 * attached: the child becomes a worker of the bot. It writes a file of its own,
 * `<name>@<pid>`, of the parent's shape, and starting with the parent's registry, so the handles
 * it inherited keep their indices; the collector merges it with the bot's other files. A child
 * that never records makes nothing. Returns 0, or a negative code (the child then writes
 * nothing, and says why once on stderr).
 */
static int rsp_become_worker(rsp_bot *b, rs_error *error) {
    rs_error local;
    if (error == NULL) error = &local;
    rsp_clear_error(error);
    rs_bot *bot = &b->bot;
    pthread_mutex_lock(&rsp_mutex);
    int rc = 0;
    if (b->forked && b->said_no_worker) {
        rc = rsp_fail(error, bot->name, RS_E_FORKED, "this forked child could not make its worker file (said on stderr)");
    } else if (b->forked) {
        rs_registry_entry *entries = NULL;
        uint32_t count = 0;
        char worker_path[sizeof bot->path];
        rc = rsp_read_attached_registry(b, &entries, &count, error);
        if (rc == 0 && !rsp_file_path(worker_path, sizeof worker_path, b->directory, bot->name, (int32_t)getpid(), 0)) {
            rc = rsp_fail(error, bot->name, RS_E_INVALID, "the worker's path in %.300s is too long", b->directory);
        }
        if (rc == 0) {
            rs_bot_options o;
            memset(&o, 0, sizeof o);
            o.directory = b->directory;
            o.lane_capacity = (uint64_t)1 << bot->capacity_log2;
            o.max_metrics = bot->registry_capacity;
            o.max_lanes = bot->max_lanes;
            o.mode = b->file_mode;
            o.worker = 1;
            o.max_workers = b->max_workers;
            /* The parent's views stay allocated, unused: a pointer to one of its producers
               (an exclusive lane) may still be called in the child, and writes nothing. */
            rsp_keep_views(b);
            rs_store_release_u32(&b->lanes_mapped, 0); /* the worker file's lanes are mapped anew */
            b->said_why_laneless = 0;
            char parent_path[sizeof bot->path];
            int32_t parent_pid = bot->owner_pid;
            dev_t parent_dev = b->file_dev;
            ino_t parent_ino = b->file_ino;
            snprintf(parent_path, sizeof parent_path, "%s", bot->path);
            snprintf(bot->path, sizeof bot->path, "%s", worker_path);
            bot->owner_pid = (int32_t)getpid();
            rc = rsp_attach_worker_file(b, &o, error);
            if (rc == 0) {
                pthread_mutex_lock(&bot->mutex);
                rc = rsp_take_registry_locked(b, entries, count, error);
                pthread_mutex_unlock(&bot->mutex);
                if (rc != 0) {
                    rsp_unmap_all(b);
                    close(bot->fd);
                    bot->fd = -1;
                }
            }
            /* On failure the writes-nothing producer still has the parent's views to sample with,
               and the bot names the parent's file again: a fork of this child tries anew. */
            if (rc == 0) {
                bot->enabled = 1;
                /* Release: a thread that sees forked 0 (acquire) sees enabled 1 and the worker's lanes. */
                __atomic_store_n(&b->forked, 0, __ATOMIC_RELEASE);
            } else {
                snprintf(bot->path, sizeof bot->path, "%s", parent_path);
                bot->owner_pid = parent_pid;
                b->file_dev = parent_dev;
                b->file_ino = parent_ino;
            }
        }
        free(entries);
        if (rc != 0) rsp_say_no_worker(b, error);
    }
    pthread_mutex_unlock(&rsp_mutex);
    return rc;
}

static void rsp_fork_child(void) {
    for (int slot = 0; slot < RS_MAX_BOTS_PER_PROCESS; slot++) {
        rs_bot *bot = rsp_slots[slot].bot;
        if (bot == NULL) continue;
        /* A new generation: every thread-table entry (the forking thread's) is stale now. */
        bot->generation = rsp_next_generation++;
        rsp_slots[slot].generation = bot->generation;
        if (bot->enabled && !rsp_of(bot)->forked) rsp_disown(rsp_of(bot));
        rsp_of(bot)->said_no_worker = 0; /* a child of a child that could not make its file tries anew */
    }
    for (int slot = RS_MAX_BOTS_PER_PROCESS - 1; slot >= 0; slot--) {
        if (rsp_slots[slot].bot != NULL) pthread_mutex_unlock(&rsp_slots[slot].bot->mutex);
    }
    pthread_mutex_unlock(&rsp_mutex);
}
