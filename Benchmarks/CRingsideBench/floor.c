// The C floor, the forked floor and thread pinning for ringside-bench (see CRingsideBench.h).
#define _GNU_SOURCE
#include "CRingsideBench.h"

#include <errno.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int rsb_floor_open_with(rsb_floor *floor, const char *directory, const char *name, uint64_t lane_capacity,
                               uint32_t sample_above_percent) {
    memset(floor, 0, sizeof *floor);
    rs_bot_options options;
    memset(&options, 0, sizeof options);
    options.directory = directory;
    options.lane_capacity = lane_capacity;
    options.sample_above_percent = sample_above_percent;
    int rc = rs_bot_attach(&floor->bot, name, &options, &floor->error);
    if (rc != 0) return rc;
    if (!floor->bot->enabled) {
        snprintf(floor->error.message, sizeof floor->error.message,
                 "bot %s: telemetry is disabled (RINGSIDE_DISABLED is set): unset it to benchmark", name);
        rsb_floor_close(floor);
        floor->error.code = RS_E_INVALID;
        return RS_E_INVALID;
    }
    rc = rs_bot_register(floor->bot, &floor->metric, "bench_floor_latency", RS_KIND_HISTOGRAM, RS_UNIT_NANOSECONDS,
                         NULL, "", 1, &floor->error);
    if (rc == 0) {
        floor->producer = rs_bot_exclusive_producer(floor->bot, &floor->error);
        if (floor->producer == NULL) rc = floor->error.code;
    }
    if (rc != 0) {
        rs_error error = floor->error;
        rsb_floor_close(floor);
        floor->error = error;
    }
    return rc;
}

int rsb_floor_open(rsb_floor *floor, const char *directory, const char *name, uint64_t lane_capacity) {
    return rsb_floor_open_with(floor, directory, name, lane_capacity, 0);
}

int rsb_floor_open_unsampled(rsb_floor *floor, const char *directory, const char *name, uint64_t lane_capacity) {
    return rsb_floor_open_with(floor, directory, name, lane_capacity, 100);
}

const char *rsb_floor_error(const rsb_floor *floor) { return floor->error.message; }

uint64_t rsb_floor_dropped(const rsb_floor *floor) {
    return floor->producer != NULL ? rs_producer_dropped(floor->producer) : 0;
}

void rsb_floor_close(rsb_floor *floor) {
    rs_bot_detach(floor->bot); /* NULL-safe */
    memset(floor, 0, sizeof *floor);
}

/* The floor's two loops, written once for either write (`WRITE(p, metric, value)`): each expansion
   compiles a loop of its own, the write inlined in it. */
#define RSB_FLOOR_LOOPS(sample_name, run_name, WRITE) \
    static size_t sample_name(rsb_floor *floor, uint32_t metric, uint32_t batch, const uint64_t *values, \
                              uint64_t values_mask, uint32_t *out, size_t capacity, uint64_t deadline_ns) { \
        rs_producer *p = floor->producer; \
        uint64_t v = 0; \
        size_t n = 0; \
        while (n < capacity) { \
            uint64_t t0 = rs_clock_precise_ns(); \
            for (uint32_t i = 0; i < batch; i++) WRITE(p, metric, values[v++ & values_mask]); \
            uint64_t t1 = rs_clock_precise_ns(); \
            uint64_t elapsed = t1 - t0; \
            out[n++] = elapsed > UINT32_MAX ? UINT32_MAX : (uint32_t)elapsed; \
            if ((n & 255) == 0 && t1 >= deadline_ns) break; \
        } \
        return n; \
    } \
    static uint64_t run_name(rsb_floor *floor, uint32_t metric, const uint64_t *values, uint64_t values_mask, \
                             uint64_t deadline_ns) { \
        rs_producer *p = floor->producer; \
        uint64_t calls = 0; \
        do { \
            for (uint32_t i = 0; i < 4096; i++) WRITE(p, metric, values[calls++ & values_mask]); \
        } while (rs_clock_precise_ns() < deadline_ns); \
        return calls; \
    }

#define RSB_WRITE_NOW(p, metric, value) rs_producer_write(p, metric, RS_KIND_HISTOGRAM, 0, value)
#define RSB_WRITE_BEFORE(p, metric, value) rsb_write_before(p, metric, RS_KIND_HISTOGRAM, 0, value, rs_clock_coarse_ns())
RSB_FLOOR_LOOPS(rsb_floor_sample_now, rsb_floor_run_now, RSB_WRITE_NOW)
RSB_FLOOR_LOOPS(rsb_floor_sample_before, rsb_floor_run_before, RSB_WRITE_BEFORE)
/* `c.record`: the bot's record call itself, as a C bot makes it (its thread's lane, the operator's
   control word, the registered sampling), into the floor's bot. */
#define RSB_WRITE_RECORD(p, metric, value) ((void)(p), (void)(metric), rs_bot_record(floor->bot, floor->metric, value))
RSB_FLOOR_LOOPS(rsb_record_sample, rsb_record_run, RSB_WRITE_RECORD)

/* rs_bot_record as it was before CONTROL (issue 41), frozen for `c.record.before`. */
static inline int rsb_record_before(rs_bot *bot, rs_metric metric, uint64_t value) {
    if (metric.kind != RS_KIND_HISTOGRAM) return 0;
    rs_producer *p = rs_bot_producer(bot);
    if (metric.sampled && !rs_producer_sample(p, metric.index)) return 0;
    return rs_producer_write(p, metric.index, RS_KIND_HISTOGRAM, 0, value);
}
#define RSB_WRITE_RECORD_BEFORE(p, metric, value) \
    ((void)(p), (void)(metric), rsb_record_before(floor->bot, floor->metric, value))
RSB_FLOOR_LOOPS(rsb_record_sample_before, rsb_record_run_before, RSB_WRITE_RECORD_BEFORE)

size_t rsb_floor_sample(rsb_floor *floor, uint32_t metric, uint32_t batch, const uint64_t *values,
                        uint64_t values_mask, uint32_t *out, size_t capacity, uint64_t deadline_ns) {
    return rsb_floor_sample_now(floor, metric, batch, values, values_mask, out, capacity, deadline_ns);
}

uint64_t rsb_floor_run(rsb_floor *floor, uint32_t metric, const uint64_t *values, uint64_t values_mask,
                       uint64_t deadline_ns) {
    return rsb_floor_run_now(floor, metric, values, values_mask, deadline_ns);
}

/* One round through either pair of loops: warm, timed batches, then the untimed loop. */
#define RSB_FLOOR_ROUND(sample, run) RSB_ROUND_DROPPING(sample, run, rsb_floor_dropped(floor))
#define RSB_ROUND_DROPPING(sample, run, DROPPED) \
    do { \
        uint32_t metric = floor->metric.index; \
        (void)run(floor, metric, values, values_mask, rs_clock_precise_ns() + timing->warm_ns); \
        uint64_t dropped_before = DROPPED; \
        result->batches = sample(floor, metric, timing->batch, values, values_mask, out, capacity, \
                                 rs_clock_precise_ns() + timing->sample_ns); \
        uint64_t start = rs_clock_precise_ns(); \
        result->calls = run(floor, metric, values, values_mask, start + timing->run_ns); \
        result->elapsed_ns = rs_clock_precise_ns() - start; \
        result->dropped = DROPPED - dropped_before; \
    } while (0)

void rsb_floor_round(rsb_floor *floor, const uint64_t *values, uint64_t values_mask, const rsb_round_timing *timing,
                     uint32_t *out, size_t capacity, rsb_round *result) {
    RSB_FLOOR_ROUND(rsb_floor_sample_now, rsb_floor_run_now);
}

void rsb_record_round(rsb_floor *floor, const uint64_t *values, uint64_t values_mask, const rsb_round_timing *timing,
                      uint32_t *out, size_t capacity, rsb_round *result) {
    /* The drops of the calling thread's lane of the floor's bot (not the exclusive one). */
    RSB_ROUND_DROPPING(rsb_record_sample, rsb_record_run, rs_producer_dropped(rs_bot_producer(floor->bot)));
}

void rsb_record_round_before(rsb_floor *floor, const uint64_t *values, uint64_t values_mask,
                             const rsb_round_timing *timing, uint32_t *out, size_t capacity, rsb_round *result) {
    RSB_ROUND_DROPPING(rsb_record_sample_before, rsb_record_run_before, rs_producer_dropped(rs_bot_producer(floor->bot)));
}

void rsb_floor_round_before(rsb_floor *floor, const uint64_t *values, uint64_t values_mask,
                            const rsb_round_timing *timing, uint32_t *out, size_t capacity, rsb_round *result) {
    RSB_FLOOR_ROUND(rsb_floor_sample_before, rsb_floor_run_before);
}

/* MARK: - The forked floor (`c.floor.forked`)
 *
 * The parent and the child talk over a stream socket pair (send with MSG_NOSIGNAL: a child that
 * died is an error, not a SIGPIPE). The child says once that it is ready (rsb_ready); then each
 * request (rsb_request) gets a reply: an rsb_round, then its batch times. */

typedef struct {
    int32_t code;           /* 0: ready; else why not, in `message` */
    int32_t pid;
    char message[1024];
} rsb_ready;

typedef struct {
    rsb_round_timing timing;
    uint64_t capacity;      /* batch times the parent takes */
} rsb_request;

/** Seconds a child has to answer beyond the work asked of it. */
#define RSB_CHILD_SLACK_NS (30ull * 1000000000ull)
/** How long rsb_forked_stop waits for the child to leave before SIGKILL. */
#define RSB_CHILD_EXIT_NS (2ull * 1000000000ull)

static int rsb_send_all(int fd, const void *data, size_t size) {
    const char *p = (const char *)data;
    while (size > 0) {
        ssize_t n = send(fd, p, size, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? -errno : -EPIPE;
        p += n;
        size -= (size_t)n;
    }
    return 0;
}

/** Receives exactly `size` bytes; 0, 1 for the end of the stream before any byte, or -errno
    (-ETIMEDOUT once the precise clock passes `deadline_ns`; 0 waits for ever). */
static int rsb_receive_all(int fd, void *data, size_t size, uint64_t deadline_ns) {
    char *p = (char *)data;
    size_t wanted = size;
    while (size > 0) {
        if (deadline_ns != 0) {
            uint64_t now = rs_clock_precise_ns();
            if (now >= deadline_ns) return -ETIMEDOUT;
            uint64_t left_ms = (deadline_ns - now) / 1000000 + 1;
            struct pollfd pfd = {fd, POLLIN, 0};
            int ready = poll(&pfd, 1, left_ms > 60000 ? 60000 : (int)left_ms);
            if (ready < 0 && errno != EINTR) return -errno;
            if (ready <= 0) continue;
        }
        ssize_t n = recv(fd, p, size, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n < 0) return -errno;
        if (n == 0) return size == wanted ? 1 : -EPIPE;
        p += n;
        size -= (size_t)n;
    }
    return 0;
}

/** The child's life: it never returns. Only C, and only what a forked child of a threaded
    process may do (the Ringside library's own fork handlers keep its locks sound). */
static void rsb_child_main(int fd, pid_t parent, rsb_floor *floor, const uint64_t *values, uint64_t values_mask,
                           size_t capacity, const char *parent_path) {
    /* Die with the parent, even if it is killed; take signals as a process of its own would. */
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    struct sigaction default_action;
    memset(&default_action, 0, sizeof default_action);
    default_action.sa_handler = SIG_DFL;
    int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) (void)sigaction(signals[i], &default_action, NULL);
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);

    rsb_ready ready;
    memset(&ready, 0, sizeof ready);
    ready.pid = (int32_t)getpid();
    char expected[sizeof ((rsb_forked *)0)->worker_path];
    snprintf(expected, sizeof expected, "%s" RS_WORKER_SEPARATOR "%d", parent_path, (int)getpid());
    /* The batch times, faulted in now: nothing the child times writes a page the parent has. */
    uint32_t *out = (uint32_t *)malloc(capacity * sizeof *out);
    if (out == NULL) {
        ready.code = -ENOMEM;
        snprintf(ready.message, sizeof ready.message, "out of memory for %zu batch times", capacity);
    } else {
        memset(out, 0, capacity * sizeof *out);
        /* The first record, through the bot and metric inherited from the parent: it makes the
           worker file, and claims this thread's lane of it. */
        if (rs_bot_record(floor->bot, floor->metric, values[0]) != 1) {
            rs_error error;
            memset(&error, 0, sizeof error);
            ready.code = rs_bot_claim_thread_lane(floor->bot, &error);
            if (ready.code == 0) ready.code = RS_E_FORKED;
            snprintf(ready.message, sizeof ready.message, "its first record wrote nothing: %.900s",
                     error.message[0] ? error.message : "no reason given");
        } else if (strcmp(rs_bot_path(floor->bot), expected) != 0) {
            ready.code = RS_E_INVALID;
            snprintf(ready.message, sizeof ready.message, "its first record went to %.400s, not %.400s",
                     rs_bot_path(floor->bot), expected);
        } else {
            /* The rounds write the lane that record took: what the inherited handles write. */
            floor->producer = rs_bot_producer(floor->bot);
        }
    }
    if (rsb_send_all(fd, &ready, sizeof ready) != 0 || ready.code != 0) _exit(1);
    for (;;) {
        rsb_request request;
        if (rsb_receive_all(fd, &request, sizeof request, 0) != 0) break; /* the parent closed: done */
        size_t batches = request.capacity < capacity ? (size_t)request.capacity : capacity;
        rsb_round result;
        rsb_floor_round(floor, values, values_mask, &request.timing, out, batches, &result);
        if (rsb_send_all(fd, &result, sizeof result) != 0) break;
        if (rsb_send_all(fd, out, (size_t)result.batches * sizeof *out) != 0) break;
    }
    _exit(0); /* no atexit handlers, no stdio flush: they are the parent's */
}

int rsb_forked_start(rsb_forked *forked, rsb_floor *floor, const uint64_t *values, uint64_t values_mask,
                     size_t capacity) {
    memset(forked, 0, sizeof *forked);
    forked->socket = -1;
    forked->capacity = capacity;
    char parent_path[sizeof forked->worker_path - 16];
    int length = snprintf(parent_path, sizeof parent_path, "%s", rs_bot_path(floor->bot));
    if (floor->bot == NULL || length <= 0 || (size_t)length >= sizeof parent_path || capacity == 0) {
        snprintf(forked->error, sizeof forked->error, "the forked floor needs an open floor and room for batch times");
        return -1;
    }
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        snprintf(forked->error, sizeof forked->error, "socketpair: %s", strerror(errno));
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int saved = errno;
        close(pair[0]);
        close(pair[1]);
        snprintf(forked->error, sizeof forked->error, "fork: %s", strerror(saved));
        return -1;
    }
    if (pid == 0) {
        close(pair[0]);
        rsb_child_main(pair[1], parent, floor, values, values_mask, capacity, parent_path);
    }
    close(pair[1]);
    forked->pid = (int32_t)pid;
    forked->socket = pair[0];
    snprintf(forked->worker_path, sizeof forked->worker_path, "%s" RS_WORKER_SEPARATOR "%d", parent_path, (int)pid);
    rsb_ready ready;
    int rc = rsb_receive_all(forked->socket, &ready, sizeof ready, rs_clock_precise_ns() + RSB_CHILD_SLACK_NS);
    if (rc != 0 || ready.code != 0 || ready.pid != pid) {
        char why[1100];
        if (rc == 0) {
            ready.message[sizeof ready.message - 1] = 0;
            snprintf(why, sizeof why, "%s (%s)", ready.message, rs_strerror(ready.code));
        } else {
            snprintf(why, sizeof why, "it did not say it was ready: %s", rc == 1 ? "it left" : strerror(-rc));
        }
        rsb_forked_stop(forked);
        snprintf(forked->error, sizeof forked->error, "the forked child (pid %d) of bot %.200s: %.900s", (int)pid,
                 floor->bot->name, why);
        return -1;
    }
    return 0;
}

int rsb_forked_round(rsb_forked *forked, const rsb_round_timing *timing, uint32_t *out, size_t capacity,
                     rsb_round *result) {
    memset(result, 0, sizeof *result);
    forked->error[0] = 0;
    if (forked->pid <= 0) {
        snprintf(forked->error, sizeof forked->error, "the forked floor has no child");
        return -1;
    }
    rsb_request request;
    memset(&request, 0, sizeof request);
    request.timing = *timing;
    request.capacity = capacity;
    uint64_t deadline = rs_clock_precise_ns() + timing->warm_ns + timing->sample_ns + timing->run_ns + RSB_CHILD_SLACK_NS;
    int rc = rsb_send_all(forked->socket, &request, sizeof request);
    if (rc == 0) rc = rsb_receive_all(forked->socket, result, sizeof *result, deadline);
    if (rc == 0 && result->batches > capacity) rc = -EPROTO;
    if (rc == 0) rc = rsb_receive_all(forked->socket, out, (size_t)result->batches * sizeof *out, deadline);
    if (rc != 0) {
        int32_t pid = forked->pid;
        rsb_forked_stop(forked);
        snprintf(forked->error, sizeof forked->error, "the forked child (pid %d) did not answer a round: %s", (int)pid,
                 rc == 1 ? "it left" : strerror(-rc));
        memset(result, 0, sizeof *result);
        return -1;
    }
    return 0;
}

void rsb_forked_stop(rsb_forked *forked) {
    if (forked->pid <= 0) return;
    pid_t pid = (pid_t)forked->pid;
    close(forked->socket); /* the child reads the end of its requests, and leaves */
    forked->socket = -1;
    uint64_t give_up = rs_clock_precise_ns() + RSB_CHILD_EXIT_NS;
    for (;;) {
        pid_t reaped = waitpid(pid, NULL, WNOHANG);
        if (reaped == pid || (reaped < 0 && errno == ECHILD)) break; /* ECHILD: reaped already */
        if (reaped < 0 && errno == EINTR) continue;
        if (rs_clock_precise_ns() >= give_up) {
            (void)kill(pid, SIGKILL);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
            break;
        }
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    /* Its worker file: the collector would fold and remove it; the benchmark has none. */
    if (forked->worker_path[0] != 0) (void)unlink(forked->worker_path);
    forked->pid = 0;
}

const char *rsb_forked_error(const rsb_forked *forked) { return forked->error; }

const char *rsb_forked_worker_path(const rsb_forked *forked) { return forked->worker_path; }

/* The C span (`c.span`): what rs_bot_begin_span and rs_bot_end_span cost through the floor bot's
   lane for the calling thread, timed as the floor is. */
size_t rsb_span_sample(rsb_floor *floor, uint32_t batch, uint32_t *out, size_t capacity, uint64_t deadline_ns) {
    size_t n = 0;
    while (n < capacity) {
        uint64_t t0 = rs_clock_precise_ns();
        for (uint32_t i = 0; i < batch; i++) rs_bot_end_span(floor->bot, floor->metric, rs_bot_begin_span(floor->bot));
        uint64_t t1 = rs_clock_precise_ns();
        uint64_t elapsed = t1 - t0;
        out[n++] = elapsed > UINT32_MAX ? UINT32_MAX : (uint32_t)elapsed;
        if ((n & 255) == 0 && t1 >= deadline_ns) break;
    }
    return n;
}

uint64_t rsb_span_run(rsb_floor *floor, uint64_t deadline_ns) {
    uint64_t calls = 0;
    do {
        for (uint32_t i = 0; i < 4096; i++) rs_bot_end_span(floor->bot, floor->metric, rs_bot_begin_span(floor->bot));
        calls += 4096;
    } while (rs_clock_precise_ns() < deadline_ns);
    return calls;
}

uint64_t rsb_span_dropped(rsb_floor *floor) { return rs_producer_dropped(rs_bot_producer(floor->bot)); }

/* The CPUs the process had before the first pin (pins happen on the main thread first). */
static cpu_set_t rsb_original_cpus;
static int rsb_original_saved;

static int rsb_allowed(cpu_set_t *set) {
    if (__atomic_load_n(&rsb_original_saved, __ATOMIC_ACQUIRE)) { *set = rsb_original_cpus; return 0; }
    CPU_ZERO(set);
    return sched_getaffinity(0, sizeof *set, set);
}

int rsb_pin_current_thread(int cpu) {
    if (!__atomic_load_n(&rsb_original_saved, __ATOMIC_ACQUIRE)) {
        cpu_set_t original;
        CPU_ZERO(&original);
        if (sched_getaffinity(0, sizeof original, &original) != 0) return errno;
        rsb_original_cpus = original;
        __atomic_store_n(&rsb_original_saved, 1, __ATOMIC_RELEASE);
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0 ? 0 : errno;
}

void rsb_unpin_current_thread(void) {
    if (__atomic_load_n(&rsb_original_saved, __ATOMIC_ACQUIRE)) {
        sched_setaffinity(0, sizeof rsb_original_cpus, &rsb_original_cpus);
    }
}

int rsb_allowed_cpu_count(void) {
    cpu_set_t set;
    if (rsb_allowed(&set) != 0) return 0;
    return CPU_COUNT(&set);
}

int rsb_allowed_cpu(int n) {
    cpu_set_t set;
    if (rsb_allowed(&set) != 0) return -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, &set) && n-- == 0) return cpu;
    }
    return -1;
}

int rsb_receive_datagrams(int fd, void *buffer, int max) {
    struct mmsghdr messages[64];
    struct iovec vectors[64];
    if (max > 64) max = 64;
    memset(messages, 0, sizeof messages);
    for (int i = 0; i < max; i++) {
        vectors[i].iov_base = (char *)buffer + 64 * i;
        vectors[i].iov_len = 64;
        messages[i].msg_hdr.msg_iov = &vectors[i];
        messages[i].msg_hdr.msg_iovlen = 1;
    }
    int received = recvmmsg(fd, messages, (unsigned)max, MSG_DONTWAIT, NULL);
    if (received < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    return received;
}

size_t rsb_heap_bytes_in_use(void) {
#if defined(__GLIBC__)
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
#else
    return 0;
#endif
}
