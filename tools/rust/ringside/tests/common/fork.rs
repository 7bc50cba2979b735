//! What the tests that fork the test process share: the turns they take, the C calls they make,
//! a child that reports to its parent, a child that acts as another user, and a look at a
//! directory's files.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

extern "C" {
    pub fn fork() -> i32;
    pub fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    pub fn dup2(old: i32, new: i32) -> i32;
    pub fn _exit(code: i32) -> !;
    fn geteuid() -> u32;
    fn kill(pid: i32, signal: i32) -> i32;
    fn setgroups(size: usize, list: *const u32) -> i32;
    fn setgid(gid: u32) -> i32;
    fn setuid(uid: u32) -> i32;
}

/// User and group nobody: another user of the machine.
pub const NOBODY: u32 = 65534;

/// One test at a time: a fork copies whatever another test's thread holds at that moment.
static FORKS: Mutex<()> = Mutex::new(());

/// Waits for this test's turn to fork (a failed test's turn ends all the same).
pub fn take_turn() -> MutexGuard<'static, ()> {
    FORKS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The files in a directory, sorted.
pub fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

/// The test process's effective user.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { geteuid() }
}

/// Whether the test process is root, for a test that acts as another user. When it is not, the
/// test fails under CI=true, and otherwise says why it skips (false: return).
pub fn root_or_skip(what: &str) -> bool {
    if effective_uid() == 0 {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{what} needs root; CI=true, so this test fails: run cargo test as root");
    }
    super::say(&format!("SKIPPED: {what} needs root (run cargo test as root to run it)"));
    false
}

/// Whether process `pid` exists: kill(pid, 0) finds it (or is refused it, for another user's).
pub fn process_exists(pid: i32) -> bool {
    // SAFETY: signal 0 sends nothing: it only checks that the process exists.
    let found = unsafe { kill(pid, 0) } == 0;
    found || std::io::Error::last_os_error().raw_os_error() != Some(3) // ESRCH
}

/// Runs `work` in a forked child as user and group nobody (no supplementary groups), as another
/// user of the machine would: Err says why it failed (its panic's message, or the drop of
/// privileges refused). The caller holds its turn (`take_turn`), and is root.
pub fn as_nobody(work: impl FnOnce()) -> Result<(), String> {
    let (mut parent_end, mut child_end) = UnixStream::pair().unwrap();
    // SAFETY: the child only drops its privileges, runs `work` (this crate, std) and _exits; glibc's
    // fork leaves malloc usable, and the tests take turns, so no other test's thread holds a lock of std's.
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        drop(parent_end);
        // SAFETY: plain system calls; the groups' list is empty, so its pointer is never read.
        let dropped = unsafe { setgroups(0, std::ptr::null()) == 0 && setgid(NOBODY) == 0 && setuid(NOBODY) == 0 };
        let outcome = if dropped {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).map_err(|payload| {
                let message = payload.downcast_ref::<String>().cloned();
                message.or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
            })
        } else {
            Err(format!("becoming nobody: {}", std::io::Error::last_os_error()))
        };
        let _ = child_end.write_all(if outcome.is_ok() { b"k" } else { b"f" });
        let _ = child_end.write_all(outcome.err().unwrap_or_default().as_bytes());
        drop(child_end);
        // SAFETY: _exit ends the child at once, without running the parent's exit handlers again.
        unsafe { _exit(0) };
    }
    drop(child_end);
    let mut said = String::new();
    let read = parent_end.read_to_string(&mut said);
    assert_eq!(wait_for(pid), 0, "the child acting as nobody: its exit");
    read.map_err(|e| format!("reading the child's outcome: {e}"))?;
    match said.strip_prefix('k') {
        Some("") => Ok(()),
        _ => Err(format!("as nobody: {}", said.strip_prefix('f').unwrap_or(&said))),
    }
}

/// Waits for child `pid` (of this process, not reaped yet) to end; returns its wait status.
pub fn wait_for(pid: i32) -> i32 {
    let mut status = 0;
    // SAFETY: pid is a child of this process, and status an int for waitpid to fill.
    assert_eq!(unsafe { waitpid(pid, &mut status, 0) }, pid, "waitpid({pid})");
    status
}

/// Forks a child that reports to its parent on a socket. The child sends its stderr to the file
/// `stderr`, runs `work` (which must not panic: it catches its own), writes the report `work`
/// returned, waits for the parent's word (a byte, or its end closed) and `_exit`s with the status
/// `work` returned. The parent gets the child's pid and its end of the socket at once. The caller
/// holds its turn (`take_turn`).
pub fn fork_reporting(stderr: &Path, work: impl FnOnce() -> (Vec<u8>, i32)) -> (i32, UnixStream) {
    let (channel, mut child_end) = UnixStream::pair().unwrap();
    let log = File::create(stderr).unwrap();
    // SAFETY: the child only uses this crate, std (files, a socket, a thread) and _exit; glibc's
    // fork leaves malloc usable, and the tests take turns, so no other test's thread holds a lock of std's.
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        drop(channel); // else the parent's end stays open here, and its death goes unseen
                       // SAFETY: both descriptors are open; stderr now goes to the file.
        unsafe { dup2(log.as_raw_fd(), 2) };
        let (report, status) = work();
        let _ = child_end.write_all(&report);
        let _ = child_end.shutdown(std::net::Shutdown::Write);
        let mut word = [0u8; 1];
        let _ = child_end.read(&mut word); // the parent's word, or its end closed
                                           // SAFETY: _exit ends the child at once, without running the parent's exit handlers again.
        unsafe { _exit(status) };
    }
    drop(child_end);
    (pid, channel)
}
