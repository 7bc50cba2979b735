// Interposes malloc, calloc and realloc (an executable's definitions take precedence over
// libc's), counts each call, and forwards to glibc's own implementations.
#include "allocation_counter.h"
#include <malloc.h>
#include <stddef.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);

static uint64_t calls;

// A sanitizer's runtime owns malloc (ThreadSanitizer's and AddressSanitizer's intercept it, and
// call it before they are ready): under one there is no interposer, and nothing is counted. The
// tests that count allocations run in the normal build.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define RINGSIDE_SANITIZED 1
#endif
#endif

#ifndef RINGSIDE_SANITIZED
void *malloc(size_t size) {
    __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
    return __libc_realloc(pointer, size);
}
#endif

uint64_t allocation_count(void) { return __atomic_load_n(&calls, __ATOMIC_RELAXED); }

uint64_t heap_bytes_in_use(void) { return (uint64_t)mallinfo2().uordblks; }
