/*
 * CRingsideBench: what ringside-bench needs from C, for two reasons only.
 *
 * 1. The floor (`c.floor`, and `c.span` for C's span): a C producer writing a bot of its own with `rs_producer_write` and the
 *    same clocks, timed by a loop written in C, so the Swift rows can be compared with what the
 *    design costs without Swift around it. It attaches the bot itself (rs_bot_attach), registers
 *    one histogram and writes through an exclusive lane (rs_bot_exclusive_producer).
 * 2. Thread pinning, a spin-wait hint and recvmmsg: `CPU_SET` and friends are macros, `pause` an
 *    intrinsic and `struct mmsghdr` arrays awkward, in Swift.
 * 3. The forked floor (`c.floor.forked`): the floor's round, run in a child made by fork(), which
 *    becomes a worker of the floor's bot at its first record. The Swift runtime and fork() do not
 *    mix: the child runs this file's C only, and leaves by _exit.
 * 4. The write as it was before SAMPLING (issue 27), frozen here for the A/B row `c.floor.before`:
 *    the same process, consumer and rounds as `c.floor`; only the write differs. And the bot's
 *    record as it was before CONTROL (issue 41), for the A/B row `c.record.before` beside `c.record`.
 * 5. The heap's bytes in use (glibc's mallinfo2, which Swift's Glibc module does not declare),
 *    for the history's memory rows.
 */
#ifndef CRINGSIDE_BENCH_H
#define CRINGSIDE_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "ringside_producer.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The C floor's bot, the histogram it writes, and its lane. */
typedef struct {
    rs_bot *bot;            /* NULL until rsb_floor_open succeeds */
    rs_producer *producer;  /* an exclusive lane of `bot` */
    rs_metric metric;       /* bench_floor_latency: a histogram in ns, index 0 in a new file */
    rs_error error;         /* why rsb_floor_open failed */
} rsb_floor;

/* MARK: - The write before SAMPLING (the A/B rows) */

/**
 * `rs_producer_write_at` as it was before SAMPLING in ringside.h: the room test against the
 * capacity, the consumer's cursor read again inline when the lane looks full, a full lane a drop.
 * For a lane that never samples (attached with sample_above_percent 100), whose kept cursor is
 * the consumer's as read, as it always was.
 */
RS_INLINE int rsb_write_before(rs_producer *p, uint32_t metric, uint8_t kind, uint8_t flags, uint64_t value,
                               uint64_t timestamp_ns) {
    if (__builtin_expect(p->records == NULL, 0)) return rs_producer_lose(p, metric, kind, value);
    uint64_t cursor = p->next;
    if (__builtin_expect(cursor - p->cached_read > p->mask, 0)) {
        /* Acquire: the consumer finished reading the slots below its cursor before storing it. */
        p->cached_read = rs_load_acquire_u64(p->read_cursor);
        if (cursor - p->cached_read > p->mask) {
            /* A full lane's drop, as it was counted then (only this lane's owner writes these). */
            rs_store_relaxed_u64(p->dropped_total, rs_load_relaxed_u64(p->dropped_total) + 1);
            rs_store_relaxed_u64(&p->cells[metric], rs_load_relaxed_u64(&p->cells[metric]) + 1);
            return 0;
        }
    }
    rs_producer_fill(&p->records[cursor & p->mask], cursor, metric, kind, flags, value, timestamp_ns, 0);
    p->next = cursor + 1;
    /* Release: the record's bytes are visible before the cursor that publishes them. */
    rs_store_release_u64(p->write_cursor, cursor + 1);
    rs_store_relaxed_u64(p->heartbeat_ns, timestamp_ns);
    return 1;
}

/**
 * Attaches the bot `name` in `directory` (lanes of `lane_capacity` records, a power of two; 0 for
 * the default), registers the histogram bench_floor_latency (ns) and takes an exclusive lane.
 * Returns 0, or a negative code from ringside_producer.h (rsb_floor_error says what happened).
 * A disabled bot (RINGSIDE_DISABLED) is refused with RS_E_INVALID: there would be nothing to time.
 */
int rsb_floor_open(rsb_floor *floor, const char *directory, const char *name, uint64_t lane_capacity);

/** rsb_floor_open for `c.floor.before`: its bot never samples (sample_above_percent 100), so its
    lane's kept cursor is the consumer's as read, what rsb_write_before expects. */
int rsb_floor_open_unsampled(rsb_floor *floor, const char *directory, const char *name, uint64_t lane_capacity);

/** Why rsb_floor_open failed: a sentence naming the bot ("" after success). */
const char *rsb_floor_error(const rsb_floor *floor);

/** Records the floor's lane dropped because it was full, since its file was created. */
uint64_t rsb_floor_dropped(const rsb_floor *floor);

/** Detaches the bot. */
void rsb_floor_close(rsb_floor *floor);

/**
 * The timed loop, in C: batches of `batch` calls of rs_producer_write (metric `metric`, a
 * histogram, the value taken from `values[i & values_mask]`), each batch timed with
 * rs_clock_precise_ns; the raw batch time in ns goes to `out[k]`. Stops after `capacity`
 * batches or, checked every 256 batches, once the precise clock passes `deadline_ns`.
 * Returns the number of batches.
 */
size_t rsb_floor_sample(rsb_floor *floor, uint32_t metric, uint32_t batch, const uint64_t *values,
                        uint64_t values_mask, uint32_t *out, size_t capacity, uint64_t deadline_ns);

/** Writes until the precise clock passes `deadline_ns` (checked every 4096 calls): the untimed
 *  loop behind calls/s. Returns the number of calls. */
uint64_t rsb_floor_run(rsb_floor *floor, uint32_t metric, const uint64_t *values, uint64_t values_mask,
                       uint64_t deadline_ns);

/** How one round of a row spends its time (from when it starts), and its batch size. */
typedef struct {
    uint64_t warm_ns;       /* untimed calls first, so the round starts warm */
    uint64_t sample_ns;     /* timed batches */
    uint64_t run_ns;        /* the untimed loop behind calls/s */
    uint32_t batch;         /* calls per timed batch */
    uint32_t reserved;
} rsb_round_timing;

/** What one round of the floor measured. */
typedef struct {
    uint64_t batches;       /* batch times written to `out` */
    uint64_t calls;         /* calls in the untimed loop */
    uint64_t elapsed_ns;    /* how long the untimed loop ran */
    uint64_t dropped;       /* records the lane dropped in the timed batches and the untimed loop */
} rsb_round;

/**
 * One round of `c.floor`: rsb_floor_run for `timing->warm_ns`, then rsb_floor_sample for
 * `timing->sample_ns` (batch times into `out`, at most `capacity`), then rsb_floor_run for
 * `timing->run_ns`, counting the calls and the lane's drops. `c.floor.forked`'s child runs this
 * same function.
 */
void rsb_floor_round(rsb_floor *floor, const uint64_t *values, uint64_t values_mask, const rsb_round_timing *timing,
                     uint32_t *out, size_t capacity, rsb_round *result);

/** rsb_floor_round through the bot's record call (`c.record`): rs_bot_record into the floor's bot
    from the calling thread's lane, with everything a C bot's call does (the lane's lookup, the
    operator's control word, the registered sampling). */
void rsb_record_round(rsb_floor *floor, const uint64_t *values, uint64_t values_mask, const rsb_round_timing *timing,
                      uint32_t *out, size_t capacity, rsb_round *result);

/** rsb_record_round with rs_bot_record as it was before CONTROL in ringside.h (no control word):
    `c.record.before`, the A/B row that prices the operator's control beside `c.record`. */
void rsb_record_round_before(rsb_floor *floor, const uint64_t *values, uint64_t values_mask,
                             const rsb_round_timing *timing, uint32_t *out, size_t capacity, rsb_round *result);

/** rsb_floor_round with the write before SAMPLING (rsb_write_before): `c.floor.before`, for a floor
    opened with rsb_floor_open_unsampled. */
void rsb_floor_round_before(rsb_floor *floor, const uint64_t *values, uint64_t values_mask,
                            const rsb_round_timing *timing, uint32_t *out, size_t capacity, rsb_round *result);

/** `c.span`: rsb_floor_sample and rsb_floor_run for C's span (rs_bot_begin_span, then
 *  rs_bot_end_span into the floor's histogram, on the calling thread's lane of the floor bot). */
size_t rsb_span_sample(rsb_floor *floor, uint32_t batch, uint32_t *out, size_t capacity, uint64_t deadline_ns);
uint64_t rsb_span_run(rsb_floor *floor, uint64_t deadline_ns);

/** Records the calling thread's lane of the floor bot dropped (claiming it if it has none). */
uint64_t rsb_span_dropped(rsb_floor *floor);

/** The forked floor: a child made by fork() that runs the floor's rounds when asked. */
typedef struct {
    int32_t pid;            /* the child; 0 when there is none */
    int socket;             /* the parent's end of a socket pair to the child (valid while pid > 0) */
    size_t capacity;        /* batch times the child keeps a round */
    char worker_path[4200]; /* the child's worker file of the floor's bot, `<floor's file>@<pid>` */
    char error[1200];       /* why the last call failed ("" after success) */
} rsb_forked;

/**
 * Forks a child of the calling process that becomes a worker of `floor`'s bot, then waits for it
 * to say it is ready. The child resets its signals, dies with its parent (PR_SET_PDEATHSIG), makes
 * its first record through the bot and metric it inherited (rs_bot_record: the forked child's
 * path, which writes its worker file `<floor's file>@<pid>`), takes that record's lane (the
 * calling thread's) as its floor's producer, and then answers rsb_forked_round until its end of
 * the socket closes, when it leaves with _exit(0). It calls nothing but C. Call it before starting
 * other threads that matter (a child has only the forking thread) and before faulting in buffers
 * the parent times into (a page the parent writes after the fork is copied on that write).
 * Returns 0, or -1 with `forked->error` saying why (no child is left then, nor its file).
 */
int rsb_forked_start(rsb_forked *forked, rsb_floor *floor, const uint64_t *values, uint64_t values_mask,
                     size_t capacity);

/**
 * Asks the child for one round of rsb_floor_round with `timing`, and waits for it (at most the
 * round's time and 30 s more): its batch times go to `out` (at most `capacity`), the rest to
 * `result`. Returns 0, or -1 with `forked->error` saying why (the child is stopped then: see
 * rsb_forked_stop).
 */
int rsb_forked_round(rsb_forked *forked, const rsb_round_timing *timing, uint32_t *out, size_t capacity,
                     rsb_round *result);

/**
 * Stops the child (closes its socket; SIGKILL if it has not left within 2 s), reaps it and removes
 * its worker file. Safe to call again, and on a zeroed or failed `forked`.
 */
void rsb_forked_stop(rsb_forked *forked);

/** Why the last rsb_forked_start or rsb_forked_round failed ("" after success). */
const char *rsb_forked_error(const rsb_forked *forked);

/** The child's worker file (removed by rsb_forked_stop); "" before rsb_forked_start. */
const char *rsb_forked_worker_path(const rsb_forked *forked);

/**
 * Receives up to `max` (at most 64) datagrams of up to 64 bytes each into `buffer` (64 * max
 * bytes) without waiting, in one recvmmsg call. Returns how many, 0 if none, or -errno.
 */
int rsb_receive_datagrams(int fd, void *buffer, int max);

/** Pins the calling thread to one CPU. Returns 0, or an errno value. The first call remembers
 *  the CPUs the thread had, for rsb_unpin_current_thread and the two functions after it. */
int rsb_pin_current_thread(int cpu);

/** Gives the calling thread back the CPUs remembered by the first pin. */
void rsb_unpin_current_thread(void);

/** The CPUs this process may run on (as before any pin), or 0 if unknown. */
int rsb_allowed_cpu_count(void);

/** The id of the `n`th CPU (from 0) this process may run on (as before any pin), or -1. */
int rsb_allowed_cpu(int n);

/** The heap's bytes in use: glibc's mallinfo2, its small blocks and its mapped ones (uordblks
 *  plus hblkhd); 0 elsewhere. */
size_t rsb_heap_bytes_in_use(void);

/** A spin-wait hint to the CPU (x86 `pause`, arm64 `yield`). */
RS_INLINE void rsb_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#ifdef __cplusplus
}
#endif

#endif /* CRINGSIDE_BENCH_H */
