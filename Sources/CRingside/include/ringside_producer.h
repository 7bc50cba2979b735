/*
 * ringside_producer.h: the producer API for C and C++ bots, and the one the Swift library wraps,
 * over the format that ringside.h specifies. A process attaches a bot by name once, registers
 * its metrics, then records from any thread: each thread writes a lane of its own, found by a
 * thread-local read, with no lock, allocation or system call after its first record.
 *
 *   #include "ringside_producer.h"
 *   // cc -std=gnu11 -pthread -I <ringside>/Sources/CRingside/include bot.c \
 *   //    <ringside>/Sources/CRingside/ringside_producer.c <ringside>/Sources/CRingside/ringside.c
 *
 *   rs_error error;
 *   rs_bot *bot;
 *   if (rs_bot_attach(&bot, "bot-a", NULL, &error) < 0) { fprintf(stderr, "%s\n", error.message); exit(1); }
 *   const char *labels[] = {"symbol", "AAPL", NULL};          // key, value, ..., NULL
 *   rs_metric fill, orders, exposure, in_flight;
 *   rs_bot_register(bot, &fill, "order_fill_latency", RS_KIND_HISTOGRAM, RS_UNIT_MICROSECONDS, labels, "", 1, &error);
 *   rs_bot_register(bot, &orders, "orders", RS_KIND_COUNTER, RS_UNIT_NONE, NULL, "", 1, &error);
 *   rs_bot_register(bot, &exposure, "gross_exposure", RS_KIND_GAUGE, RS_UNIT_NONE, NULL, "", 1, &error);
 *   rs_bot_register_gauge(bot, &in_flight, "orders_in_flight", RS_UNIT_NONE, NULL, "", RS_MERGE_SUM, &error); // workers add up
 *   // on any thread:
 *   rs_bot_record(bot, fill, elapsed_us);            // an observation in the metric's unit
 *   uint64_t start = rs_span_clock_start();          // the TSC where it serves (CLOCKS in ringside.h)
 *   ...
 *   rs_bot_record_span(bot, fill, start);            // the time since `start`, in microseconds
 *   rs_bot_count(bot, orders, 1);                    // exact, even when the lane is full
 *   rs_bot_set(bot, exposure, 1.25e6);
 *   rs_bot_detach(bot);                              // or just exit: the kernel drops the lock
 *
 * In C++, `ringside::Span span(bot, fill);` records the span when it goes out of scope.
 *
 * ERRORS: every function that can fail returns 0 or a negative code: -errno for a system call's
 * failure (-ENOSPC: the directory is full; -EACCES: the file belongs to another user; -ELOOP: a
 * symbolic link), or one of RS_E_* below, and fills the rs_error it is given (which may be NULL):
 * the code, and a sentence naming the bot, e.g.
 * "bot bot-a: another producer is attached (pid 4242); a bot has one process".
 * `rs_strerror(code)` names a code. A name another user took with what is not a regular file is
 * RS_E_CORRUPT, its owner in `uid`: "bot bot-a: /dev/shm/ringside.bot-a is a FIFO (named pipe)
 * owned by uid 65534, not a regular file of uid 1000; a bot opens only regular files of its own
 * user (have it removed, or attach another name)".
 *
 * RULES (the implementation is ringside_producer.c):
 * - the file is created O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600 unless asked, and every page it
 *   uses is reserved with posix_fallocate (the header part at attach, each lane when it is
 *   added), so a full /dev/shm fails as an error and never as SIGBUS later;
 * - a bot never waits on a file it did not make: every open of a path in the bot's directory (the
 *   bot's file, a worker's, the bot's file read by a worker for the operator's switches or to
 *   count a refused worker, the parent's file read by a forked child) is O_NOFOLLOW|O_NONBLOCK|
 *   O_NOCTTY, and what it opens must be a regular file of this process's user: a FIFO, a device,
 *   a directory or a socket at a bot's name (another user may put one in /dev/shm, which is
 *   everyone's) opens at once and is refused by its type (RS_E_CORRUPT, naming what it is and its
 *   owner), never read. At a worker's own name it makes the name unusable (WORKERS); where a
 *   worker reads the bot's file, its metrics start as registered, under no operator's switch
 *   (CONTROL in ringside.h);
 * - the process takes an open-file-description lock (F_OFD_SETLK) on byte 0; it dies with the
 *   process. After locking, the file must still be the one at the path (same inode), else attach
 *   opens it again;
 * - version 0 (creation never finished) is (re)initialised under the lock, the version stored
 *   last with release ordering; anything else is validated field by field and attached with its
 *   lanes (all retired), cells and metrics; a version-1 file is incompatible;
 * - registering a (name, labels) pair already in the registry returns it again; a new entry is
 *   written in full, then published by a release store of metric_count.
 *
 * THREADS: attach, register and detach may be called from any thread (a mutex serialises them);
 * the record calls from any thread, concurrently, until detach. A thread's first record on a bot
 * claims a lane under that mutex (reusing a retired one, else adding one to the file); its exit
 * retires the lane (a pthread key destructor). With every lane taken by live threads, a thread
 * records into no lane: its counter increments and gauge values are still kept exactly, and its
 * histogram records are counted as dropped (the metric cell's `unlaned`; for a sampled histogram
 * that count is approximate, as such threads share one sampling countdown). A process holds at most
 * RS_MAX_BOTS_PER_PROCESS bots at once.
 *
 * WORKERS AND FORK: a bot is one process's, or several processes' as its workers: attach with
 * `worker` set, and the process writes a file of its own, `<name>@<pid>`, which the collector
 * merges with the bot's other files. In a child made by fork(), every bot the parent had
 * attached is let go of at once (the child unmaps and closes its copy of the file: a mapping
 * alone keeps the parent's lock alive, and the parent's death must be seen); at the child's first
 * record, registration or lane claim through one of them, the child becomes its worker, with a
 * file that starts with the parent's registry, so the handles it inherited work unchanged. A
 * child that never records makes nothing. If the worker file cannot be made (a full directory),
 * the child writes nothing to that bot and says why once on stderr.
 *
 * BUILDING: Linux, GCC or Clang, C11 or later (-std=gnu11), or C++11 or later; the suite builds
 * it with gcc -std=gnu11 and g++ -std=c++17, with -pthread, and with gcc, clang, g++ and clang++
 * (as C++11, 17 and 20) under -Wall -Wextra -Werror. tools/c packages it for CMake
 * (add_subdirectory, or find_package(Ringside) and Ringside::producer) and pkg-config (ringside).
 */
#ifndef RINGSIDE_PRODUCER_H
#define RINGSIDE_PRODUCER_H

#include "ringside.h"

#include <pthread.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* MARK: - Error codes (besides -errno) */

#define RS_E_PRODUCER_ALIVE (-10001) /* another process holds the bot */
#define RS_E_CORRUPT        (-10002) /* the file is not a valid bot file */
#define RS_E_INCOMPATIBLE   (-10003) /* the file exists with another layout (or format version) */
#define RS_E_INVALID        (-10004) /* a bad bot name, option, metric name, label or help */
#define RS_E_CONFLICT       (-10005) /* the metric exists with another kind, unit or sampling */
#define RS_E_REGISTRY_FULL  (-10006) /* no room for another metric */
#define RS_E_NOT_READY      (-10007) /* the file kept being replaced while attaching */
#define RS_E_TOO_MANY_BOTS  (-10008) /* the process already holds RS_MAX_BOTS_PER_PROCESS bots */
#define RS_E_NO_LANE        (-10009) /* every lane is taken (rs_bot_claim_thread_lane, rs_bot_exclusive_producer) */
#define RS_E_FORKED         (-10010) /* this forked child could not make its worker file of the bot */
#define RS_E_NO_INODES      (-10011) /* the file could not be created: no free inodes (or a quota) */
#define RS_E_TOO_MANY_WORKERS (-10012) /* max_workers worker files of the bot, each held by a live worker */

/** Bots one process may hold attached at once (the size of each thread's lane table). */
#define RS_MAX_BOTS_PER_PROCESS 64

/** A short name for a code from this API: RS_E_* or -errno. */
const char *rs_strerror(int code);

/* MARK: - Types */

/** How to attach. Zero fields take the defaults; `rs_bot_attach(&bot, name, NULL, &error)` takes them all. */
typedef struct {
    const char *directory;  /* NULL: $RINGSIDE_DIR, else /dev/shm */
    uint64_t lane_capacity; /* records a lane holds, a power of two from 16 to 2^28. 0: 65,536 for a
                               new file, whatever an existing one has (nonzero: it must match) */
    uint32_t max_metrics;   /* 1 to 4096. 0: 256 for a new file, whatever an existing one has */
    uint32_t max_lanes;     /* 1 to 1024. 0: 64 for a new file, whatever an existing one has */
    mode_t mode;            /* permission bits of a new file. 0: 0600 */
    int recreate;           /* nonzero: replace an incompatible or corrupt file (its contents are
                               lost) instead of failing; never one whose process lives */
    int disabled;           /* nonzero: map nothing, as RINGSIDE_DISABLED=1 does */
    int worker;             /* nonzero: write the bot as one of its workers, beside other processes:
                               the file `<name>@<pid>` (see WORKERS in ringside.h) */
    uint32_t max_workers;   /* a worker: the bound on the bot's worker files, 1 to 65,536. 0: 256.
                               Past it, the file of a worker that is gone is attached instead */
    uint32_t sample_above_percent; /* how full a lane is, in percent (1 to 99), below which its
                               histograms are never sampled: past it, they are only when the lane
                               would fill before the collector drains it (SAMPLING in ringside.h).
                               0: 50. 100: never (a full lane drops) */
} rs_bot_options;

/** What went wrong, for a person. */
typedef struct {
    int code;               /* 0, -errno or RS_E_* */
    int32_t pid;            /* RS_E_PRODUCER_ALIVE: the process that holds the bot */
    uint32_t uid;           /* -EACCES, or RS_E_CORRUPT for what is not a regular file: the file's owner */
    char message[1024];     /* a sentence naming the bot ("" after success) */
} rs_error;

/** What a histogram's or counter's values are (see VALUES in ringside.h). Zero, what
    rs_bot_register gives: whole units, unsigned. */
typedef struct {
    uint8_t form;           /* rs_value_form: RS_FORM_SIGNED for a signed histogram */
    int8_t scale;           /* a value is a whole number of 10^scale of the unit, RS_SCALE_MIN to RS_SCALE_MAX */
} rs_values;

/** An rs_metric's `kind` for a signed histogram: rs_bot_record (unsigned values) refuses it, as
    it refuses a counter, at no cost; rs_bot_record_signed and rs_bot_record_value take it. The
    registry says RS_KIND_HISTOGRAM and RS_FORM_SIGNED. */
#define RS_METRIC_SIGNED_HISTOGRAM 0x83u

/** A registered metric: pass it by value to the record functions. */
typedef struct {
    uint32_t index;         /* its registry index */
    uint8_t kind;           /* rs_kind, or RS_METRIC_SIGNED_HISTOGRAM */
    uint8_t sampled;        /* 1 when sample_every > 1 */
    int8_t scale;           /* its values' step, 10^scale of its unit */
    uint8_t reserved;
    uint32_t ns_per_unit;   /* nanoseconds in the metric's unit (1 for units that are not times):
                               spans are divided by it */
    uint32_t reserved2;
    double steps_per_unit;  /* 10^-scale: what a value in the unit is multiplied by to count its steps */
} rs_metric;

/** A thread's lane for one bot, as the thread-local table holds it. */
typedef struct {
    uint64_t generation;    /* the bot's generation when claimed: another value means stale */
    rs_producer *producer;
} rs_thread_lane;

/** One lane's writer's view, padded to 128 bytes: two threads' views never share a cache line
    (an rs_producer is 120 bytes, and `next` is written on every record). */
typedef struct {
    rs_producer producer;
    uint8_t padding[128 - sizeof(rs_producer)];
} rs_lane_producer;

RS_STATIC_ASSERT(sizeof(rs_lane_producer) == 128, "a lane's producer fills two 64-byte cache lines exactly");

/**
 * An attached bot. The fields are the implementation's (ringside_producer.c); callers use the
 * functions. `slot` and `generation` are first: the hot path reads them.
 */
typedef struct rs_bot {
    uint32_t slot;                /* index in each thread's lane table */
    uint32_t enabled;             /* 0: RINGSIDE_DISABLED, or a forked child until its first record
                                     makes it a worker (or when it could not): nothing is written */
    uint64_t generation;          /* unique per attachment; changed in a forked child */
    /* private: */
    pthread_mutex_t mutex;        /* registration, lane claims and releases */
    rs_header *header;            /* the mapped header, registry and metric cells; NULL when disabled */
    size_t header_mapping_size;   /* == lanes_offset */
    int fd;                       /* -1 when disabled or forked */
    int32_t owner_pid;            /* the process that attached */
    uint32_t registry_capacity;
    uint32_t max_lanes;
    uint32_t capacity_log2;
    rs_lane_header **lanes;       /* max_lanes mapped lanes (NULL above lanes_allocated) */
    rs_lane_producer *producers;  /* max_lanes writers' views, one per lane (128-byte aligned) */
    uint32_t *lane_held;          /* max_lanes: 1 while a thread holds it, 2 for an exclusive user */
    uint32_t *sample_countdown;   /* max_lanes + 2 rows of registry_capacity, each row padded to
                                     128 bytes: one per lane, then laneless's, then disabled's */
    uint32_t *sample_every;       /* registry_capacity */
    rs_producer laneless;         /* for threads that found no lane: counts into the metric cells */
    rs_producer disabled;         /* writes nothing: records, cells and shared NULL (its sample
                                     arrays are real: rs_bot_record samples before it writes) */
    char name[RS_NAME_LENGTH_MAX + 1];
    char path[4096];
} rs_bot;

/* MARK: - Attaching */

/**
 * Attaches to the bot `name` as its process, creating the file if it does not exist.
 *
 * - name: 1 to 200 of [A-Za-z0-9._-]; the file is <directory>/ringside.<name>.
 * - options: NULL for the defaults (see rs_bot_options).
 * On success stores the bot in *bot and returns 0. Otherwise returns a negative code, fills
 * *error, and stores NULL: RS_E_PRODUCER_ALIVE, RS_E_CORRUPT, RS_E_INCOMPATIBLE, RS_E_INVALID,
 * RS_E_TOO_MANY_BOTS, -ENOSPC, -EACCES, -ELOOP...
 * With RINGSIDE_DISABLED=1 (or true, yes) in the environment it maps nothing and returns a bot
 * whose record calls return at once (registration still checks its arguments).
 * The process's first attach also chooses its span clock and calibrates it (rs_span_clock_init:
 * about a millisecond, once).
 */
int rs_bot_attach(rs_bot **bot, const char *name, const rs_bot_options *options, rs_error *error);

/**
 * Unmaps the bot and releases its lock; its records, and the calls its lanes gathered (SAMPLING
 * in ringside.h), stay for the collector. No thread may use the bot or its metrics afterwards (other threads' lanes are
 * simply retired with it), except
 * rs_bot_end_span: the bot's memory is kept for the next bot attached in its slot, and a span
 * begun before the detach records nothing.
 */
void rs_bot_detach(rs_bot *bot);

/* MARK: - Registration */

/**
 * Registers (or finds again) a metric.
 *
 * - name: [a-zA-Z_][a-zA-Z0-9_]*, at most 104 bytes.
 * - labels: NULL, or key, value, key, value, ..., NULL. Keys as names, not starting with "__";
 *   values without newlines or NUL; at most 256 bytes as stored ("key=value" lines sorted by key).
 * - help: NULL or at most 128 bytes.
 * - sample_every: histograms write 1 in N calls (the collector scales counts by N); counters
 *   (exact) and gauges take 1.
 * Returns 0 and fills `metric`, or RS_E_INVALID, RS_E_CONFLICT (same name and labels with
 * another kind, unit or sampling) or RS_E_REGISTRY_FULL.
 */
int rs_bot_register(rs_bot *bot, rs_metric *metric, const char *name, rs_kind kind, rs_unit unit,
                    const char *const *labels, const char *help, uint32_t sample_every, rs_error *error);

/**
 * `rs_bot_register` for a histogram of signed or fractional values, or a counter of fractional
 * ones (see VALUES in ringside.h): `values.form` RS_FORM_SIGNED (histograms only), `values.scale`
 * the step, 10^scale of the unit (RS_SCALE_MIN to RS_SCALE_MAX; gauges take 0). Slippage in basis
 * points to a hundredth: RS_KIND_HISTOGRAM, RS_UNIT_NONE, {RS_FORM_SIGNED, -2}; commissions in
 * dollars to a micro-dollar: RS_KIND_COUNTER, {0, -6}. The same metric registered again with
 * other values is RS_E_CONFLICT. A bot file of format 3 is made format 4 by its first such metric.
 */
int rs_bot_register_values(rs_bot *bot, rs_metric *metric, const char *name, rs_kind kind, rs_unit unit, rs_values values,
                           const char *const *labels, const char *help, uint32_t sample_every, rs_error *error);

/**
 * `rs_bot_register_values` with the labels already encoded as stored ("key=value" lines sorted by
 * key, joined by '\n'; checked again here) and every string given with its length.
 */
int rs_bot_register_encoded(rs_bot *bot, rs_metric *metric, const char *name, size_t name_length,
                            rs_kind kind, rs_unit unit, rs_values values, const char *labels, size_t labels_length,
                            const char *help, size_t help_length, uint32_t sample_every, rs_gauge_merge merge,
                            rs_error *error);

/**
 * Registers (or finds again) a gauge that declares how the collector merges it across the bot's
 * workers (see WORKERS in ringside.h): RS_MERGE_LAST (what rs_bot_register gives a gauge), SUM,
 * MAX, MIN, or PER_WORKER (a series per live worker, labelled pid; the gauge's own labels may not
 * name pid). The same gauge registered again with another policy is RS_E_CONFLICT.
 */
int rs_bot_register_gauge(rs_bot *bot, rs_metric *metric, const char *name, rs_unit unit, const char *const *labels,
                          const char *help, rs_gauge_merge merge, rs_error *error);

/**
 * Retires a series (RETIRING A SERIES in ringside.h), as prometheus_client's remove(): the
 * collector drops it from every page at its next look at the bot's cells, and lets go of what it
 * kept of it; a gauge's value is forgotten. Registering the same name and labels again revives it
 * (the same entry and handle), which the collector shows as a new series: a counter from zero.
 * Records made through the handle while it is retired are dropped by the collector (counted as
 * refused). Retiring a retired series does nothing. Takes the registration mutex: not for the hot
 * path. Returns 0, or RS_E_INVALID for a metric this bot did not register. A disabled bot returns 0.
 */
int rs_bot_retire(rs_bot *bot, rs_metric metric, rs_error *error);

/** 1 while `metric` is retired (its entry's `retired` word odd), else 0. */
int rs_bot_is_retired(const rs_bot *bot, rs_metric metric);

/** Registry entries published so far (0 for a disabled bot). */
uint32_t rs_bot_metric_count(const rs_bot *bot);

/** Registry entry `index` (below rs_bot_metric_count), as stored; NULL when out of range. */
const rs_registry_entry *rs_bot_registry_entry(const rs_bot *bot, uint32_t index);

/* MARK: - Lanes */

/**
 * The calling thread's lane, claimed now: the hot path's slow path (rs_bot_producer calls it on a
 * thread's first record). Never NULL: a thread that finds every lane taken gets a producer that
 * counts what it cannot write; a disabled bot or a forked child's, one that writes nothing.
 */
rs_producer *rs_bot_claim_lane(rs_bot *bot);

/**
 * Claims the calling thread's lane now, as its first record would, and says why when it cannot:
 * for a program that must know at once rather than count drops (a script waiting for room).
 * Returns 0 when the thread holds a lane (or the bot is disabled: it writes nothing); otherwise
 * fills *error (the thread still holds no lane) and returns RS_E_NO_LANE (every lane held) or
 * -errno (a lane could not be added: -ENOSPC when the directory is full).
 */
int rs_bot_claim_thread_lane(rs_bot *bot, rs_error *error);

/** Retires the calling thread's lane now, as its exit would (for a thread that stops recording),
    (what it gathered while sampling is counted already: SAMPLING in ringside.h). */
void rs_bot_release_thread_lane(rs_bot *bot);

/**
 * Claims a lane for the caller's own use, not tied to a thread: the caller guarantees one
 * thread at a time uses it (the Swift single-ring API, benchmarks). It stays held until detach.
 * Returns NULL and fills *error when no lane can be had: RS_E_NO_LANE when every lane is taken,
 * -errno when one could not be added (-ENOSPC: the directory is full); a disabled bot returns
 * its writes-nothing producer.
 */
rs_producer *rs_bot_exclusive_producer(rs_bot *bot, rs_error *error);

/** Lanes in the file now (a thread's first record may add one). */
uint32_t rs_bot_lanes_allocated(const rs_bot *bot);

/** The bot's file, or "" when disabled. */
const char *rs_bot_path(const rs_bot *bot);

/**
 * 1 when the bot's records are kept: it writes a file, or it is a forked child whose first
 * record will make its worker file (`enabled` is 0 there until then); 0 when disabled by
 * RINGSIDE_DISABLED, or in a forked child that could not make its worker file.
 */
int rs_bot_is_recording(const rs_bot *bot);

/* MARK: - The hot path: no lock, allocation or system call after a thread's first record */

/* C11 spells it _Thread_local, C++11 thread_local. */
#ifdef __cplusplus
#define RS_THREAD_LOCAL thread_local
#else
#define RS_THREAD_LOCAL _Thread_local
#endif

/** Each thread's lanes, by bot slot (defined in ringside_producer.c). */
extern RS_THREAD_LOCAL rs_thread_lane rs_thread_lanes[RS_MAX_BOTS_PER_PROCESS];

/** The calling thread's lane of `bot`: a thread-local read, or the slow path on first use. */
RS_INLINE rs_producer *rs_bot_producer(rs_bot *bot) {
    rs_thread_lane *lane = &rs_thread_lanes[bot->slot];
    if (__builtin_expect(lane->generation == bot->generation, 1)) return lane->producer;
    return rs_bot_claim_lane(bot);
}

/**
 * Records an observation of a histogram, in the unit it was registered with. Returns 1 if a
 * record was written, 0 if sampling skipped it, the lane was full (a counted drop), the bot is
 * disabled, or `metric` is not a histogram.
 */
/** The operator's control word of `metric` (see CONTROL in ringside.h): 0 to go the ordinary way.
    One relaxed load from the metric's cell, read-mostly for a histogram. */
RS_INLINE uint32_t rs_producer_control(const rs_producer *p, uint32_t metric) {
    return p->shared != NULL ? rs_load_relaxed_u32(&p->shared[metric].control) : 0;
}

/** The cold part of the record functions when the operator's `control` word is not 0 (see
    CONTROL): off, nothing; sampled, the call written 1 in 2^n, else gathered. `metric` is the
    histogram's index, `value` as stored; `flags` and `timestamp_ns` (RS_TIMESTAMP_NOW: read now) as
    rs_producer_write_at takes them. Returns 1 if written. The cold functions take scalars, never an
    rs_metric: a struct passed by value makes compilers copy it on every hot call, taken or not. */
int rs_bot_record_controlled(rs_bot *bot, uint32_t metric, uint64_t value, uint8_t flags, uint64_t timestamp_ns,
                             uint32_t control);

RS_INLINE int rs_bot_record(rs_bot *bot, rs_metric metric, uint64_t value) {
    if (metric.kind != RS_KIND_HISTOGRAM) return 0;
    rs_producer *p = rs_bot_producer(bot);
    uint32_t control = rs_producer_control(p, metric.index);
    if (__builtin_expect(control != 0, 0)) return rs_bot_record_controlled(bot, metric.index, value, 0, RS_TIMESTAMP_NOW, control);
    if (metric.sampled && !rs_producer_sample(p, metric.index)) return 0;
    return rs_producer_write(p, metric.index, RS_KIND_HISTOGRAM, 0, value);
}

/** The cold part of the value functions below: a value the metric cannot hold is counted in its
    metric cell's `clamped`, and recorded at the nearest end (a NaN is not). `kind` the rs_metric's.
    Returns as rs_bot_record. */
int rs_bot_record_unrepresentable(rs_bot *bot, uint32_t metric, uint8_t kind, double value);

/** The cold part of rs_bot_count_value: an increment below 0, past 2^64 - 1 steps or NaN, counted
    in `clamped`, adds its nearest end (0 for a NaN). */
void rs_bot_count_unrepresentable(rs_bot *bot, uint32_t metric, double increment);

/**
 * Records a signed histogram's value as a whole number of its steps, -(2^63 - 1) to 2^63 - 1
 * (INT64_MIN is clamped to -(2^63 - 1) and counted). Returns as rs_bot_record; 0 for a metric that
 * is not a signed histogram.
 */
RS_INLINE int rs_bot_record_signed(rs_bot *bot, rs_metric metric, int64_t steps) {
    if (metric.kind != RS_METRIC_SIGNED_HISTOGRAM) return 0;
    if (__builtin_expect(steps == INT64_MIN, 0)) return rs_bot_record_unrepresentable(bot, metric.index, metric.kind, -9.3e18);
    rs_producer *p = rs_bot_producer(bot);
    uint32_t control = rs_producer_control(p, metric.index);
    if (__builtin_expect(control != 0, 0)) {
        return rs_bot_record_controlled(bot, metric.index, (uint64_t)steps ^ RS_OFFSET_BINARY_BIAS, 0, RS_TIMESTAMP_NOW, control);
    }
    if (metric.sampled && !rs_producer_sample(p, metric.index)) return 0;
    return rs_producer_write(p, metric.index, RS_KIND_HISTOGRAM, 0, (uint64_t)steps ^ RS_OFFSET_BINARY_BIAS);
}

/**
 * Records a histogram's value in its unit (slippage -3.5 in basis points), signed or not: rounded
 * to the nearest step (ties to even). A value the metric cannot hold (below 0 for an unsigned one,
 * beyond its range, an infinity) is clamped to the nearest end and counted; a NaN is counted, not
 * recorded. Returns as rs_bot_record.
 */
RS_INLINE int rs_bot_record_value(rs_bot *bot, rs_metric metric, double value) {
    double steps = value * metric.steps_per_unit;
    if (metric.kind == RS_METRIC_SIGNED_HISTOGRAM) {
        /* Within +-2^63 (exact doubles): rint stays inside the int64 range, and never reaches INT64_MIN. */
        if (__builtin_expect(!(steps > -9223372036854775808.0 && steps < 9223372036854775808.0), 0)) {
            return rs_bot_record_unrepresentable(bot, metric.index, metric.kind, value);
        }
        return rs_bot_record_signed(bot, metric, (int64_t)__builtin_rint(steps));
    }
    if (__builtin_expect(!(steps >= 0 && steps < 18446744073709551616.0), 0)) return rs_bot_record_unrepresentable(bot, metric.index, metric.kind, value);
    return rs_bot_record(bot, metric, (uint64_t)__builtin_rint(steps));
}

/**
 * Checks an exemplar's bytes (see EXEMPLARS in ringside.h): 0 if `length` (1 to RS_EXEMPLAR_MAX)
 * bytes of "key=value" pairs joined by '\n', keys names and unique, values without '\n' or NUL;
 * else RS_E_INVALID, with the reason in *error if not NULL.
 */
int rs_exemplar_check(const char *exemplar, size_t length, rs_error *error);

/**
 * Records an observation of a histogram with an exemplar: `exemplar` is `length` bytes of
 * "key=value" pairs joined by '\n' ("order_id=A17"; see EXEMPLARS in ringside.h), written after
 * the value's record and published with it. An exemplar rs_exemplar_check refuses is never
 * written (nor cut): the value is recorded without it and the exemplar counted in the metric
 * cell's `exemplars_refused` (call rs_exemplar_check first to learn why); so is one given to a
 * signed histogram, whose values carry none (`value` is then its steps, at most 2^63 - 1).
 * Returns as rs_bot_record: 1 if written, 0 if sampling skipped it, the lane had no room for the
 * value and its exemplar (one counted drop), the bot is disabled, or `metric` is not a histogram.
 */
RS_INLINE int rs_bot_record_checked_exemplar(rs_bot *bot, rs_metric metric, uint64_t value, const char *exemplar,
                                             size_t length);

/** The cold part of the exemplar functions: counts an exemplar refused in metric `metric`'s cell
    (`exemplars_refused`) and records `value` (as rs_bot_record, or a signed histogram's steps as
    rs_bot_record_signed, clamped to 2^63 - 1) without it. Returns as rs_bot_record. */
int rs_bot_record_refusing_exemplar(rs_bot *bot, rs_metric metric, uint64_t value);

/** Counts an exemplar refused in histogram `index`'s cell (`exemplars_refused`), for a binding
    that records the value itself; nothing while the metric or the bot is off (see CONTROL). */
void rs_bot_count_refused_exemplar(rs_bot *bot, uint32_t index);

RS_INLINE int rs_bot_record_exemplar(rs_bot *bot, rs_metric metric, uint64_t value, const char *exemplar, size_t length) {
    if (__builtin_expect(rs_exemplar_check(exemplar, length, NULL) != 0, 0)) return rs_bot_record_refusing_exemplar(bot, metric, value);
    return rs_bot_record_checked_exemplar(bot, metric, value, exemplar, length);
}

/**
 * rs_bot_record_exemplar for an exemplar rs_exemplar_check has passed already (a binding's exemplar
 * type, checked once when it was made): the same, without checking it again on the hot path.
 */
RS_INLINE int rs_bot_record_checked_exemplar(rs_bot *bot, rs_metric metric, uint64_t value, const char *exemplar,
                                             size_t length) {
    if (metric.kind != RS_KIND_HISTOGRAM) return rs_bot_record_refusing_exemplar(bot, metric, value);
    rs_producer *p = rs_bot_producer(bot);
    uint32_t control = rs_producer_control(p, metric.index);
    /* Under the operator's control the value is recorded without its exemplar (see CONTROL). */
    if (__builtin_expect(control != 0, 0)) return rs_bot_record_controlled(bot, metric.index, value, 0, rs_clock_precise_ns(), control);
    if (metric.sampled && !rs_producer_sample(p, metric.index)) return 0;
    if (__builtin_expect(p->records == NULL, 0)) return rs_producer_lose(p, metric.index, RS_KIND_HISTOGRAM, value); /* no clock read */
    /* The precise clock: an exemplar's time must never precede its call (CLOCKS in ringside.h). */
    return rs_producer_write_exemplar(p, metric.index, 0, value, rs_clock_precise_ns(), exemplar, (uint32_t)length);
}

/**
 * Names the calling thread in its lane of `bot` (THREAD NAMES in ringside.h), claiming the lane
 * if it has none yet: for a thread whose language names it apart from the kernel (Python's
 * threading, Rust's std::thread::Builder::name). `length` bytes of UTF-8, cut to
 * RS_THREAD_NAME_MAX at a character's boundary. Returns 0, or RS_E_INVALID (a NUL in the name);
 * a thread without a lane, or a disabled bot, has nowhere to keep it and returns 0.
 */
int rs_bot_name_thread(rs_bot *bot, const char *name, size_t length);

/**
 * Records the span from `start` (read with rs_span_clock_start, or a rs_clock_precise_ns reading)
 * to now, in the histogram's unit (a span into a microsecond histogram is recorded in
 * microseconds), flagged as a span and stamped with its end, read on the clock the start was read
 * on (THE SPAN CLOCK in ringside.h: the TSC where it serves).
 */
/** `ns` nanoseconds in a histogram's steps, 10^scale of its unit, truncated (saturating at
    2^64 - 1): what a span or a duration records into a histogram with a resolution. */
uint64_t rs_metric_steps_of_ns(rs_metric metric, uint64_t ns);

/** The cold part of rs_bot_record_span: a span into a histogram with a resolution (in its steps),
    or under the operator's control (see CONTROL). The rs_metric's index, scale and ns_per_unit. */
int rs_bot_record_span_slow(rs_bot *bot, uint32_t metric, int8_t scale, uint32_t ns_per_unit, uint64_t start);

RS_INLINE int rs_bot_record_span(rs_bot *bot, rs_metric metric, uint64_t start) {
    if (metric.kind != RS_KIND_HISTOGRAM) return 0;
    rs_producer *p = rs_bot_producer(bot);
    if (__builtin_expect(metric.scale != 0 || rs_producer_control(p, metric.index) != 0, 0)) {
        return rs_bot_record_span_slow(bot, metric.index, metric.scale, metric.ns_per_unit, start);
    }
    return rs_producer_record_span(p, metric.index, metric.sampled, metric.ns_per_unit, start);
}

/** A span begun by rs_bot_begin_span: its start (a span clock reading), and the attachment it was begun in. */
typedef struct rs_span {
    uint64_t start;
    uint64_t generation;
} rs_span;

/** Begins a span: reads the span clock (rs_span_clock_start). rs_bot_end_span records it. */
RS_INLINE rs_span rs_bot_begin_span(const rs_bot *bot) {
    rs_span span = {rs_span_clock_start(), bot->generation};
    return span;
}

/**
 * Records a span begun by rs_bot_begin_span, as rs_bot_record_span does, if the bot is still the
 * attachment the span began in. After rs_bot_detach (the bot's memory is kept) or a fork, it
 * records nothing and returns 0: for a binding whose span handle does not keep the bot attached
 * (Swift's Timing, which would otherwise count a reference on every span).
 */
RS_INLINE int rs_bot_end_span(rs_bot *bot, rs_metric metric, rs_span span) {
    if (bot->generation != span.generation) return 0;
    return rs_bot_record_span(bot, metric, span.start);
}

/** Adds `increment` to a counter: exact, whatever the lanes hold. */
RS_INLINE void rs_bot_count(rs_bot *bot, rs_metric metric, uint64_t increment) {
    if (metric.kind != RS_KIND_COUNTER) return;
    rs_producer *p = rs_bot_producer(bot);
    /* Off (see CONTROL): nothing added. */
    if (__builtin_expect((rs_producer_control(p, metric.index) & (RS_CONTROL_OFF | RS_CONTROL_BOT_OFF)) != 0, 0)) return;
    rs_producer_count(p, metric.index, increment);
}

/** Adds `increment` in the counter's unit (0.37 dollars to a counter of micro-dollar steps): rounded
    to the nearest step, exact in steps. An increment below 0 (a counter never goes back), past
    2^64 - 1 steps or NaN is clamped to the nearest end (0 for a NaN) and counted in `clamped`. */
RS_INLINE void rs_bot_count_value(rs_bot *bot, rs_metric metric, double increment) {
    if (metric.kind != RS_KIND_COUNTER) return;
    double steps = increment * metric.steps_per_unit;
    if (__builtin_expect(!(steps >= 0 && steps < 18446744073709551616.0), 0)) {
        rs_bot_count_unrepresentable(bot, metric.index, increment);
        return;
    }
    rs_bot_count(bot, metric, (uint64_t)__builtin_rint(steps));
}

/** Sets a gauge: the last value is exact; the record (for windowed min and max) may drop. */
RS_INLINE int rs_bot_set(rs_bot *bot, rs_metric metric, double value) {
    if (metric.kind != RS_KIND_GAUGE) return 0;
    rs_producer *p = rs_bot_producer(bot);
    /* Off (see CONTROL): not set. */
    if (__builtin_expect((rs_producer_control(p, metric.index) & (RS_CONTROL_OFF | RS_CONTROL_BOT_OFF)) != 0, 0)) return 0;
    return rs_producer_set(p, metric.index, value);
}

#ifdef __cplusplus
} /* extern "C" */

namespace ringside {

/** Times a scope: records the span from construction to destruction into a histogram. */
class Span {
public:
    Span(rs_bot *bot, rs_metric metric) noexcept : bot_(bot), metric_(metric), start_(rs_span_clock_start()) {}
    ~Span() { rs_bot_record_span(bot_, metric_, start_); }
    Span(const Span &) = delete;
    Span &operator=(const Span &) = delete;

private:
    rs_bot *bot_;
    rs_metric metric_;
    uint64_t start_;
};

} /* namespace ringside */
#endif

#endif /* RINGSIDE_PRODUCER_H */
