// The C floor and thread pinning for ringside-bench (see CRingsideBench.h).
#define _GNU_SOURCE
#include "CRingsideBench.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

int rsb_floor_open(rsb_floor *floor, const char *path) {
    memset(floor, 0, sizeof *floor);
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno;
    struct stat st;
    if (fstat(fd, &st) != 0) { int e = errno; close(fd); return e; }
    size_t size = (size_t)st.st_size;
    if (size < RS_HEADER_SIZE) { close(fd); return EINVAL; }
    void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int saved = errno;
    close(fd);
    if (map == MAP_FAILED) return saved;
    rs_header *h = (rs_header *)map;
    // The benchmark made this ring a moment ago, but check it as any reader would.
    if (h->magic != RS_MAGIC || rs_load_acquire_u32(&h->version) != RS_FORMAT_VERSION
        || h->record_size != RS_RECORD_SIZE || h->capacity_log2 < RS_MIN_CAPACITY_LOG2
        || h->capacity_log2 > RS_MAX_CAPACITY_LOG2 || h->file_size != size
        || h->records_offset + ((uint64_t)1 << h->capacity_log2) * RS_RECORD_SIZE != size) {
        munmap(map, size);
        return EINVAL;
    }
    floor->map = map;
    floor->size = size;
    floor->sample_countdown[0] = 1;
    floor->sample_every[0] = 1;
    rs_producer *p = &floor->producer;
    p->records = (rs_record *)((char *)map + h->records_offset);
    p->write_cursor = &h->write_cursor;
    p->read_cursor = &h->read_cursor;
    p->dropped_total = &h->dropped_total;
    p->heartbeat_ns = &h->heartbeat_ns;
    p->mask = ((uint64_t)1 << h->capacity_log2) - 1;
    p->next = rs_load_acquire_u64(&h->write_cursor);
    p->cached_read = rs_load_acquire_u64(&h->read_cursor);
    p->sample_countdown = floor->sample_countdown;
    p->sample_every = floor->sample_every;
    return 0;
}

void rsb_floor_close(rsb_floor *floor) {
    if (floor->map != NULL) munmap(floor->map, floor->size);
    memset(floor, 0, sizeof *floor);
}

size_t rsb_floor_sample(rsb_floor *floor, uint32_t metric, uint32_t batch, const uint64_t *values,
                        uint64_t values_mask, uint32_t *out, size_t capacity, uint64_t deadline_ns) {
    rs_producer *p = &floor->producer;
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
    rs_producer *p = &floor->producer;
    uint64_t calls = 0;
    do {
        for (uint32_t i = 0; i < 4096; i++) {
            rs_producer_write(p, metric, RS_KIND_HISTOGRAM, 0, values[calls++ & values_mask]);
        }
    } while (rs_clock_precise_ns() < deadline_ns);
    return calls;
}

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
