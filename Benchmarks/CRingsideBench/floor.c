// The C floor and thread pinning for ringside-bench (see CRingsideBench.h).
#define _GNU_SOURCE
#include "CRingsideBench.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int rsb_floor_open(rsb_floor *floor, const char *directory, const char *name, uint64_t lane_capacity) {
    memset(floor, 0, sizeof *floor);
    rs_bot_options options;
    memset(&options, 0, sizeof options);
    options.directory = directory;
    options.lane_capacity = lane_capacity;
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

const char *rsb_floor_error(const rsb_floor *floor) { return floor->error.message; }

uint64_t rsb_floor_dropped(const rsb_floor *floor) {
    return floor->producer != NULL ? rs_producer_dropped(floor->producer) : 0;
}

void rsb_floor_close(rsb_floor *floor) {
    rs_bot_detach(floor->bot); /* NULL-safe */
    memset(floor, 0, sizeof *floor);
}

size_t rsb_floor_sample(rsb_floor *floor, uint32_t metric, uint32_t batch, const uint64_t *values,
                        uint64_t values_mask, uint32_t *out, size_t capacity, uint64_t deadline_ns) {
    rs_producer *p = floor->producer;
    uint64_t v = 0;
    size_t n = 0;
    while (n < capacity) {
        uint64_t t0 = rs_clock_precise_ns();
        for (uint32_t i = 0; i < batch; i++) {
            rs_producer_write(p, metric, RS_KIND_HISTOGRAM, 0, values[v++ & values_mask]);
        }
        uint64_t t1 = rs_clock_precise_ns();
        uint64_t elapsed = t1 - t0;
        out[n++] = elapsed > UINT32_MAX ? UINT32_MAX : (uint32_t)elapsed;
        if ((n & 255) == 0 && t1 >= deadline_ns) break;
    }
    return n;
}

uint64_t rsb_floor_run(rsb_floor *floor, uint32_t metric, const uint64_t *values, uint64_t values_mask,
                       uint64_t deadline_ns) {
    rs_producer *p = floor->producer;
    uint64_t calls = 0;
    do {
        for (uint32_t i = 0; i < 4096; i++) {
            rs_producer_write(p, metric, RS_KIND_HISTOGRAM, 0, values[calls++ & values_mask]);
        }
    } while (rs_clock_precise_ns() < deadline_ns);
    return calls;
}

void rsb_floor_round(rsb_floor *floor, const uint64_t *values, uint64_t values_mask, const rsb_round_timing *timing,
                     uint32_t *out, size_t capacity, rsb_round *result) {
    uint32_t metric = floor->metric.index;
    (void)rsb_floor_run(floor, metric, values, values_mask, rs_clock_precise_ns() + timing->warm_ns);
    uint64_t dropped_before = rsb_floor_dropped(floor);
    result->batches = rsb_floor_sample(floor, metric, timing->batch, values, values_mask, out, capacity,
                                       rs_clock_precise_ns() + timing->sample_ns);
    uint64_t start = rs_clock_precise_ns();
    result->calls = rsb_floor_run(floor, metric, values, values_mask, start + timing->run_ns);
    result->elapsed_ns = rs_clock_precise_ns() - start;
    result->dropped = rsb_floor_dropped(floor) - dropped_before;
}

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
