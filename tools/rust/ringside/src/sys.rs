//! The few C library calls the producer needs, declared by hand (the crate has no dependencies),
//! for Linux on x86_64 and aarch64, with glibc or musl. Every function here is a thin, safe
//! wrapper: it returns `Err(errno)` instead of setting `errno`. Files are opened with `std::fs`;
//! what std does not offer (mmap, OFD locks, posix_fallocate, the coarse clock, the TSC and CPUID,
//! fork handlers, a pthread key for thread exits, a mutex that fork handlers can lock and unlock,
//! getrandom) is here.

#[cfg(not(target_os = "linux"))]
compile_error!("ringside writes /dev/shm files with OFD locks: it supports Linux only");
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("ringside declares its libc structures for x86_64 and aarch64 Linux only");

use std::cell::UnsafeCell;
use std::os::raw::{c_int, c_long, c_uint, c_void};
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::atomic::{AtomicI32, AtomicU32};

pub type Errno = i32;

pub const EPERM: Errno = 1;
pub const EINTR: Errno = 4;
pub const EIO: Errno = 5;
pub const ENXIO: Errno = 6;
pub const EAGAIN: Errno = 11;
pub const EACCES: Errno = 13;
pub const ENODEV: Errno = 19;
pub const EISDIR: Errno = 21;
pub const ENOSPC: Errno = 28;
pub const ELOOP: Errno = 40;
pub const EDQUOT: Errno = 122;

/// `O_NOFOLLOW` differs between the two architectures (asm-generic vs x86).
#[cfg(target_arch = "x86_64")]
const O_NOFOLLOW: c_int = 0o400000;
#[cfg(target_arch = "aarch64")]
const O_NOFOLLOW: c_int = 0o100000;
/// The same on both architectures.
const O_NONBLOCK: c_int = 0o4000;
const O_NOCTTY: c_int = 0o400;

/// The flags of every open of a path in the bot's directory, besides the access mode (std adds
/// `O_CLOEXEC`): never follow a link, never wait (a FIFO or a device planted at a bot's name opens
/// at once, to be refused by its type), never make a terminal the process's controlling one.
/// `O_NONBLOCK` changes nothing on a regular file.
pub const OPEN_FLAGS: c_int = O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;

const PROT_READ: c_int = 1;
const PROT_WRITE: c_int = 2;
const MAP_SHARED: c_int = 0x01;
const MAP_POPULATE: c_int = 0x8000;

const F_OFD_SETLK: c_int = 37;
const F_WRLCK: i16 = 1;
const SEEK_SET: i16 = 0;

const CLOCK_REALTIME: c_int = 0;
const CLOCK_MONOTONIC: c_int = 1;
const CLOCK_MONOTONIC_COARSE: c_int = 6;

/// prctl's option to read the calling thread's name (at most 16 bytes, NUL included).
const PR_GET_NAME: c_int = 16;
/// The kernel's TASK_COMM_LEN: a thread's name and its NUL.
const TASK_COMM_LEN: usize = 16;

#[cfg(target_arch = "x86_64")]
const SYS_GETTID: c_long = 186;
#[cfg(target_arch = "aarch64")]
const SYS_GETTID: c_long = 178;
#[cfg(target_arch = "x86_64")]
const SYS_GETRANDOM: c_long = 318;
#[cfg(target_arch = "aarch64")]
const SYS_GETRANDOM: c_long = 278;
#[cfg(target_arch = "x86_64")]
const SYS_MEMBARRIER: c_long = 324;
#[cfg(target_arch = "aarch64")]
const SYS_MEMBARRIER: c_long = 283;
#[cfg(target_arch = "x86_64")]
const SYS_FUTEX: c_long = 202;
#[cfg(target_arch = "aarch64")]
const SYS_FUTEX: c_long = 98;
const MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED: c_int = 4;
/// Not `FUTEX_PRIVATE_FLAG` (128): the consumer waits on the file's page, from its own process.
const FUTEX_WAKE: c_int = 1;

/// `struct timespec` on 64-bit Linux.
#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

/// `struct flock` on 64-bit Linux (the same on x86_64 and aarch64): 32 bytes.
#[repr(C)]
struct Flock {
    l_type: i16,
    l_whence: i16,
    l_start: i64,
    l_len: i64,
    l_pid: i32,
}

/// Room for a `pthread_mutex_t` (40 bytes on x86_64, 48 on aarch64, with glibc or musl), 8-aligned.
/// All zeros is `PTHREAD_MUTEX_INITIALIZER` (a default mutex) in both libraries.
#[repr(C, align(8))]
struct PthreadMutex([u8; 64]);

extern "C" {
    fn mmap(addr: *mut c_void, len: usize, prot: c_int, flags: c_int, fd: c_int, offset: i64) -> *mut c_void;
    fn munmap(addr: *mut c_void, len: usize) -> c_int;
    fn fcntl(fd: c_int, cmd: c_int, ...) -> c_int;
    fn posix_fallocate(fd: c_int, offset: i64, len: i64) -> c_int;
    fn clock_gettime(clock: c_int, ts: *mut Timespec) -> c_int;
    fn geteuid() -> u32;
    fn kill(pid: c_int, signal: c_int) -> c_int;
    fn syscall(number: c_long, ...) -> c_long;
    fn prctl(option: c_int, ...) -> c_int;
    fn write(fd: c_int, buf: *const c_void, count: usize) -> isize;
    fn pthread_atfork(
        prepare: Option<unsafe extern "C" fn()>,
        parent: Option<unsafe extern "C" fn()>,
        child: Option<unsafe extern "C" fn()>,
    ) -> c_int;
    fn atexit(function: extern "C" fn()) -> c_int;
    fn pthread_key_create(key: *mut c_uint, destructor: Option<unsafe extern "C" fn(*mut c_void)>) -> c_int;
    fn pthread_getspecific(key: c_uint) -> *mut c_void;
    fn pthread_setspecific(key: c_uint, value: *const c_void) -> c_int;
    fn pthread_mutex_lock(mutex: *mut PthreadMutex) -> c_int;
    fn pthread_mutex_unlock(mutex: *mut PthreadMutex) -> c_int;
    fn __errno_location() -> *mut c_int;
}

fn errno() -> Errno {
    // SAFETY: __errno_location returns the calling thread's errno, always valid.
    unsafe { *__errno_location() }
}

#[inline(always)]
fn clock(id: c_int) -> u64 {
    let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec; these clocks always exist on Linux.
    unsafe { clock_gettime(id, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC_COARSE in nanoseconds: the records' timestamps (`rs_clock_coarse_ns`).
#[inline]
pub fn clock_coarse_ns() -> u64 {
    clock(CLOCK_MONOTONIC_COARSE)
}

/// CLOCK_MONOTONIC in nanoseconds: the precise clock (`rs_clock_precise_ns`): a value's with an
/// exemplar, and spans' where the TSC is not usable.
#[inline]
pub fn clock_precise_ns() -> u64 {
    clock(CLOCK_MONOTONIC)
}

/// The TSC (`rs_clock_tsc`: rdtsc, not serialising); 0 on a CPU that is not x86-64.
#[inline(always)]
pub fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc exists on every x86-64 CPU and reads a counter, nothing else. (Safe to call
    // in some Rust versions: hence the allowance.)
    #[allow(unused_unsafe)]
    return unsafe { core::arch::x86_64::_rdtsc() };
    #[cfg(not(target_arch = "x86_64"))]
    return 0;
}

/// The TSC read in order: after what precedes it, before what follows (a calibration's anchor).
pub fn tsc_ordered() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_lfence, _rdtsc};
        // SAFETY: lfence (SSE2, which every x86-64 CPU has) and rdtsc only order and read.
        #[allow(unused_unsafe)]
        return unsafe {
            _mm_lfence();
            let tsc = _rdtsc();
            _mm_lfence();
            tsc
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    return 0;
}

/// Whether the CPU's TSC is invariant: CPUID 0x80000007 EDX bit 8 (Linux's constant_tsc and
/// nonstop_tsc); false on a CPU that is not x86-64.
pub fn has_invariant_tsc() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::__cpuid;
        // SAFETY: CPUID exists on every x86-64 CPU; leaf 0x80000000 gives the highest extended
        // leaf, so 0x80000007 is asked only where it exists. (Safe in recent Rust: the allowance.)
        #[allow(unused_unsafe)]
        let invariant = unsafe { __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0 };
        invariant
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// CLOCK_REALTIME in nanoseconds: wall time, for humans.
pub fn clock_realtime_ns() -> u64 {
    clock(CLOCK_REALTIME)
}

/// The kernel's id of the calling thread.
pub fn gettid() -> i32 {
    // SAFETY: gettid takes no argument and cannot fail.
    unsafe { syscall(SYS_GETTID) as i32 }
}

/// The calling thread's name as the kernel has it (what `pthread_getname_np` reads): the one
/// `pthread_setname_np` or std's `thread::Builder::name` gave it (cut to 15 bytes by the
/// kernel), else the program's. Safe in any context, a thread's exit included; empty if the call fails.
pub fn thread_name() -> ([u8; TASK_COMM_LEN], usize) {
    let mut name = [0u8; TASK_COMM_LEN];
    // SAFETY: PR_GET_NAME writes at most TASK_COMM_LEN bytes, NUL included, into the buffer.
    if unsafe { prctl(PR_GET_NAME, name.as_mut_ptr()) } != 0 {
        return ([0; TASK_COMM_LEN], 0);
    }
    let length = name.iter().position(|&b| b == 0).unwrap_or(TASK_COMM_LEN);
    (name, length)
}

/// Four random bytes from the kernel (getrandom(2), flags 0: from its pool, which waits only
/// until the pool is first seeded at boot); None if the call fails (a kernel before 3.17, or a
/// seccomp filter that refuses it).
pub fn random_u32() -> Option<u32> {
    let mut value: u32 = 0;
    let length = std::mem::size_of::<u32>();
    // SAFETY: getrandom writes at most `length` bytes into the buffer, which is `value`'s own.
    let got = unsafe { syscall(SYS_GETRANDOM, &mut value as *mut u32 as *mut c_void, length, 0 as c_uint) };
    (got == length as c_long).then_some(value)
}

/// The process that registered for the consumer's barrier (0: none; a forked child registers anew).
static REGISTERED_PID: AtomicI32 = AtomicI32::new(0);

/// Whether this process rings the doorbell (DOORBELL in ringside.h, `rsp_register_for_doorbell`):
/// registers it for membarrier's global expedited barrier, once per process (threads that attach
/// at once may both register: harmless). False if the kernel, or a seccomp filter, refuses: the
/// process then never rings, and its files are drained at the consumer's poll.
pub fn register_for_doorbell() -> bool {
    let pid = std::process::id() as i32;
    // Acquire: pairs with the release below (the registration happened before it).
    if REGISTERED_PID.load(Acquire) == pid {
        return true;
    }
    // SAFETY: membarrier takes three integers and touches no memory of ours.
    if unsafe { syscall(SYS_MEMBARRIER, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0 as c_uint, 0 as c_int) } != 0 {
        return false;
    }
    REGISTERED_PID.store(pid, Release);
    true
}

/// Wakes every waiter on `word` (FUTEX_WAKE, not private, INT_MAX waiters): never waits; an error
/// (no waiter any longer) changes nothing.
pub fn wake_all(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE reads no memory: it uses the word's address as a key only.
    unsafe { syscall(SYS_FUTEX, word.as_ptr(), FUTEX_WAKE, c_int::MAX, 0usize, 0usize, 0 as c_int) };
}

pub fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { geteuid() }
}

/// Whether process `pid` (> 0) exists: `kill(pid, 0)` succeeds, or fails for want of permission
/// (another user's process exists too).
pub fn process_exists(pid: i32) -> bool {
    debug_assert!(pid > 0);
    // SAFETY: signal 0 sends nothing: it only checks that the process exists.
    unsafe { kill(pid, 0) == 0 || errno() == EPERM }
}

/// Takes the open-file-description write lock on one byte without waiting (`rs_lock_byte`).
pub fn lock_byte(fd: c_int, byte: i64) -> Result<(), Errno> {
    let lock = Flock { l_type: F_WRLCK, l_whence: SEEK_SET, l_start: byte, l_len: 1, l_pid: 0 };
    // SAFETY: F_OFD_SETLK reads a struct flock, which `lock` is.
    if unsafe { fcntl(fd, F_OFD_SETLK, &lock as *const Flock) } == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// Reserves [offset, offset + len) of the file; a signal does not count as a failure.
pub fn reserve(fd: c_int, offset: u64, len: u64) -> Result<(), Errno> {
    loop {
        // SAFETY: plain system call on a descriptor we own.
        match unsafe { posix_fallocate(fd, offset as i64, len as i64) } {
            0 => return Ok(()),
            EINTR => continue,
            error => return Err(error),
        }
    }
}

/// Maps [offset, offset + len) of the file shared, read-write, its pages populated now.
pub fn map_shared(fd: c_int, offset: u64, len: usize) -> Result<*mut u8, Errno> {
    // SAFETY: a new mapping chosen by the kernel touches no existing memory.
    let base = unsafe {
        mmap(std::ptr::null_mut(), len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, offset as i64)
    };
    if base as isize == -1 {
        Err(errno())
    } else {
        Ok(base as *mut u8)
    }
}

/// Maps [offset, offset + len) of the file shared, read only (another file's words, read as
/// atomics: CONTROL in ringside.h).
pub fn map_shared_read_only(fd: c_int, offset: u64, len: usize) -> Result<*mut u8, Errno> {
    // SAFETY: a new mapping chosen by the kernel touches no existing memory.
    let base = unsafe { mmap(std::ptr::null_mut(), len, PROT_READ, MAP_SHARED, fd, offset as i64) };
    if base as isize == -1 {
        Err(errno())
    } else {
        Ok(base as *mut u8)
    }
}

/// Unmaps a range returned by `map_shared` or `map_shared_read_only`.
///
/// # Safety
/// Nothing may use the range afterwards.
pub unsafe fn unmap(base: *mut u8, len: usize) {
    // SAFETY: the range is one a map function returned, and nothing uses it afterwards (the caller's
    // contract); munmap touches no other memory.
    unsafe { munmap(base as *mut c_void, len) };
}

/// Writes to stderr with one system call, without std's lock (safe in a forked child).
pub fn write_stderr_raw(message: &[u8]) {
    // SAFETY: the buffer is valid for its length.
    unsafe { write(2, message.as_ptr() as *const c_void, message.len()) };
}

/// Registers fork handlers, as `pthread_atfork` does. Returns false if it could not.
pub fn at_fork(prepare: extern "C" fn(), parent: extern "C" fn(), child: extern "C" fn()) -> bool {
    // SAFETY: the handlers are `extern "C" fn()` that live as long as the program.
    unsafe { pthread_atfork(Some(prepare), Some(parent), Some(child)) == 0 }
}

/// Registers `function` to run when the process exits (`atexit`): on the thread that calls exit()
/// (main's return does), after that thread's thread-locals are destroyed. False if it could not.
pub fn at_exit(function: extern "C" fn()) -> bool {
    // SAFETY: the function lives as long as the program.
    unsafe { atexit(function) == 0 }
}

/// A pthread key (`pthread_key_t`, an unsigned int with glibc and musl) whose destructor runs at
/// the exit of each thread that set it, after the thread's Rust and C++ thread-locals are
/// destroyed (with glibc; with musl those run from a pthread key too). A thread that sets it again
/// while its exit runs the destructors gets the destructor again: POSIX runs them in rounds while
/// a key is set, up to PTHREAD_DESTRUCTOR_ITERATIONS (4) rounds.
pub struct ThreadExitKey(c_uint);

impl ThreadExitKey {
    /// A new key whose destructor is `on_exit`; Err(errno) when the process has no key left.
    pub fn new(on_exit: extern "C" fn(*mut c_void)) -> Result<ThreadExitKey, Errno> {
        let mut key: c_uint = 0;
        // SAFETY: key is a valid out-parameter; the destructor lives as long as the program.
        match unsafe { pthread_key_create(&mut key, Some(on_exit)) } {
            0 => Ok(ThreadExitKey(key)),
            error => Err(error),
        }
    }

    /// Makes the calling thread's exit run the destructor (the key's value is a marker, never
    /// read). Err(errno) if it could not.
    pub fn watch(&self) -> Result<(), Errno> {
        // SAFETY: a key this process created, and never deleted.
        if !unsafe { pthread_getspecific(self.0) }.is_null() {
            return Ok(());
        }
        // SAFETY: as above; the value is never dereferenced.
        match unsafe { pthread_setspecific(self.0, std::ptr::NonNull::<c_void>::dangling().as_ptr()) } {
            0 => Ok(()),
            error => Err(error),
        }
    }
}

/// A pthread mutex around `T`: what fork handlers need, since they lock in one call and unlock in
/// another (`lock_for_fork`, then `adopt_lock`; std's Mutex cannot be unlocked without its guard).
/// It never moves once used: it lives in a static or inside an `Arc`.
pub struct PMutex<T> {
    raw: UnsafeCell<PthreadMutex>,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard, which holds the pthread mutex, so sharing the
// PMutex between threads is sound for Send data.
unsafe impl<T: Send> Sync for PMutex<T> {}
// SAFETY: moving it moves its data (T: Send) and a mutex nobody holds: a PMutex is only moved by
// value, never while borrowed, so never while locked.
unsafe impl<T: Send> Send for PMutex<T> {}

/// The mutex held; unlocked when dropped, on the thread that locked it (the guard is not Send).
pub struct PMutexGuard<'a, T> {
    mutex: &'a PMutex<T>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl<T> PMutex<T> {
    pub const fn new(data: T) -> Self {
        PMutex { raw: UnsafeCell::new(PthreadMutex([0; 64])), data: UnsafeCell::new(data) }
    }

    pub fn lock(&self) -> PMutexGuard<'_, T> {
        // SAFETY: a valid, initialised (all-zero) pthread mutex that does not move.
        unsafe { pthread_mutex_lock(self.raw.get()) };
        PMutexGuard { mutex: self, _not_send: std::marker::PhantomData }
    }

    /// Locks it and leaves it locked, for a `pthread_atfork` prepare handler: the parent and
    /// child handlers take it back with `adopt_lock`.
    pub fn lock_for_fork(&self) {
        std::mem::forget(self.lock());
    }

    /// The guard of a lock taken by `lock_for_fork`: its drop unlocks.
    ///
    /// # Safety
    /// The calling thread holds the mutex through `lock_for_fork` (after fork(), the child's only
    /// thread is the copy of the thread that took it), and adopts it once.
    pub unsafe fn adopt_lock(&self) -> PMutexGuard<'_, T> {
        PMutexGuard { mutex: self, _not_send: std::marker::PhantomData }
    }
}

impl<T> std::ops::Deref for PMutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the mutex.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T> std::ops::DerefMut for PMutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the mutex, and is borrowed mutably.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T> Drop for PMutexGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the guard holds the mutex, locked on this thread (the guard is not Send).
        unsafe { pthread_mutex_unlock(self.mutex.raw.get()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structures_have_the_kernel_sizes() {
        assert_eq!(std::mem::size_of::<Flock>(), 32);
        assert_eq!(std::mem::size_of::<Timespec>(), 16);
    }

    #[test]
    fn clocks_share_an_origin() {
        let coarse = clock_coarse_ns();
        let precise = clock_precise_ns();
        // The coarse clock lags by at most a few ticks (milliseconds).
        assert!(precise >= coarse && precise - coarse < 100_000_000, "{coarse} {precise}");
        assert!(clock_realtime_ns() > 1_600_000_000_000_000_000);
        assert!(gettid() > 0);
    }

    #[test]
    fn getrandom_gives_random_words() {
        let words: Vec<u32> = (0..4).map(|_| random_u32().expect("getrandom(2) on this kernel")).collect();
        // Four equal draws of 32 random bits: one chance in 2^96.
        assert!(words.iter().any(|&word| word != words[0]), "{words:?}");
    }

    #[test]
    fn a_thread_name_is_the_kernels() {
        let named = |name: &str| {
            let builder = std::thread::Builder::new().name(name.to_string());
            builder
                .spawn(|| {
                    let (bytes, length) = thread_name();
                    bytes[..length].to_vec()
                })
                .unwrap()
                .join()
                .unwrap()
        };
        assert_eq!(named("sys-name"), b"sys-name");
        assert_eq!(named("a-name-of-twenty-bytes"), b"a-name-of-twent", "the kernel keeps 15 bytes");
    }

    #[test]
    fn a_mutex_guards_its_data() {
        let m = std::sync::Arc::new(PMutex::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *m.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*m.lock(), 40_000);
    }
}
