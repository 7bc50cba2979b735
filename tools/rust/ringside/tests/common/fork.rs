//! What the tests that fork the test process share: the turns they take, the C calls they make,
//! and a look at a directory's files.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

extern "C" {
    pub fn fork() -> i32;
    pub fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    pub fn dup2(old: i32, new: i32) -> i32;
    pub fn _exit(code: i32) -> !;
}

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
