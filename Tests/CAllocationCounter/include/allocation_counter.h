// Counts the process's malloc, calloc and realloc calls, so a test can prove that a stretch of
// code allocates nothing. Linked only into the test producer: it replaces the process's malloc.
#ifndef ALLOCATION_COUNTER_H
#define ALLOCATION_COUNTER_H
#include <stdint.h>

/** Calls to malloc, calloc and realloc since the process started. */
uint64_t allocation_count(void);

/** Bytes of heap in use now (glibc's mallinfo2().uordblks). */
uint64_t heap_bytes_in_use(void);

#endif
