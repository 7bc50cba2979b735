// Interposes the allocator (an executable's definitions take precedence over libc's) to record
// the largest request, and reports the fuzz case a fatal signal arrived in.
#include "abuse_watch.h"
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

static uint64_t largest;

static inline void note(uint64_t size) {
    uint64_t seen = __atomic_load_n(&largest, __ATOMIC_RELAXED);
    while (size > seen && !__atomic_compare_exchange_n(&largest, &seen, size, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}

void *malloc(size_t size) { note(size); return __libc_malloc(size); }
void *calloc(size_t count, size_t size) {
    uint64_t total;
    if (__builtin_mul_overflow((uint64_t)count, (uint64_t)size, &total)) total = UINT64_MAX;
    note(total);
    return __libc_calloc(count, size);
}
void *realloc(void *pointer, size_t size) { note(size); return __libc_realloc(pointer, size); }
void *aligned_alloc(size_t alignment, size_t size) { note(size); return __libc_memalign(alignment, size); }
void *memalign(size_t alignment, size_t size) { note(size); return __libc_memalign(alignment, size); }
int posix_memalign(void **out, size_t alignment, size_t size) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    note(size);
    void *p = __libc_memalign(alignment, size);
    if (p == NULL && size != 0) return ENOMEM;
    *out = p;
    return 0;
}

uint64_t abuse_largest_allocation(void) { return __atomic_load_n(&largest, __ATOMIC_RELAXED); }
void abuse_reset_largest_allocation(void) { __atomic_store_n(&largest, 0, __ATOMIC_RELAXED); }

static char current_case[1024];

static void say(const char *text) {
    size_t left = strlen(text);
    while (left > 0) {
        ssize_t n = write(2, text, left);
        if (n <= 0) return;
        text += n;
        left -= (size_t)n;
    }
}

static void report(int signal_number) {
    say("ringside-abuse-fuzzer: ");
    say(signal_number == SIGALRM ? "hung (watchdog)" : strsignal(signal_number));
    say(" in case: ");
    say(current_case);
    say("\n");
    if (signal_number == SIGALRM) signal_number = SIGKILL;
    signal(signal_number, SIG_DFL);
    raise(signal_number);
}

void abuse_install_crash_reporter(void) {
    int signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE, SIGABRT, SIGALRM};
    for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++) {
        struct sigaction action;
        memset(&action, 0, sizeof(action));
        action.sa_handler = report;
        action.sa_flags = SA_RESETHAND | SA_NODEFER;
        sigaction(signals[i], &action, NULL);
    }
}

void abuse_begin_case(const char *description, unsigned seconds) {
    strncpy(current_case, description, sizeof(current_case) - 1);
    current_case[sizeof(current_case) - 1] = 0;
    alarm(seconds);
}
