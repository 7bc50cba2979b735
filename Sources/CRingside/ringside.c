// Locking helpers: fcntl is variadic, which Swift cannot call, so the OFD locks live here.
#define _GNU_SOURCE
#include "ringside.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

static void rs_byte_range(struct flock *lock, short type, int byte) {
    memset(lock, 0, sizeof *lock);
    lock->l_type = type;
    lock->l_whence = SEEK_SET;
    lock->l_start = byte;
    lock->l_len = 1;
    lock->l_pid = 0; /* required by F_OFD_* */
}

int rs_lock_byte(int fd, int byte) {
    struct flock lock;
    rs_byte_range(&lock, F_WRLCK, byte);
    return fcntl(fd, F_OFD_SETLK, &lock) == 0 ? 0 : errno;
}

int rs_lock_byte_is_held(int fd, int byte) {
    struct flock lock;
    rs_byte_range(&lock, F_WRLCK, byte);
    if (fcntl(fd, F_OFD_GETLK, &lock) != 0) return -errno;
    return lock.l_type == F_UNLCK ? 0 : 1;
}
