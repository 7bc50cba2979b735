/*
 * abuse_watch.h: what the reader fuzzer (ringside-abuse-fuzzer) needs from C, for one reason:
 * to see the failures a Swift process cannot report about itself. It interposes the allocator to
 * record the largest single request (an allocation sized by a value read from a file shows up
 * as one huge request), and installs handlers that name the fuzz case a crash or a hang
 * happened in before the process dies.
 */
#ifndef ABUSE_WATCH_H
#define ABUSE_WATCH_H

#include <stddef.h>
#include <stdint.h>

/** The largest single allocation requested since the last reset, in bytes. */
uint64_t abuse_largest_allocation(void);
/** Starts a new measurement of the largest allocation. */
void abuse_reset_largest_allocation(void);

/** Installs handlers for SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE, SIGABRT and SIGALRM that
 *  write "ringside-abuse-fuzzer: <signal> in case: <the current case>" to stderr, then die of
 *  the same signal. */
void abuse_install_crash_reporter(void);
/** Names the case now running (copied; truncated to 1 KiB) and arms a watchdog: if the case is
 *  still running after `seconds`, SIGALRM reports it as hung. 0 disarms. */
void abuse_begin_case(const char *description, unsigned seconds);

#endif
